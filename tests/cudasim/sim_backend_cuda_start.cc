/*
 * sim_backend_cuda_start.cc - cuda/backend_cuda_start.cu, unchanged, compiled by the host C++
 * compiler against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/backend_cuda_start.cu with nvcc.
 */
#include "../../cuda/backend_cuda_start.cu"
