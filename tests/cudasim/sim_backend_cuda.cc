/*
 * sim_backend_cuda.cc - cuda/backend_cuda.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/backend_cuda.cu with nvcc.
 */
#include "../../cuda/backend_cuda.cu"
