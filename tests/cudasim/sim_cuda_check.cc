/*
 * sim_cuda_check.cc - cuda/cuda_check.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/cuda_check.cu with nvcc.
 */
#include "../../cuda/cuda_check.cu"
