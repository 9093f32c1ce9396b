/*
 * sim_kernels.cc - cuda/kernels.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/kernels.cu with nvcc.
 */
#include "../../cuda/kernels.cu"
