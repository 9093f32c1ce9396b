/*
 * sim_gemm_lt.cc - cuda/gemm_lt.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/gemm_lt.cu with nvcc.
 */
#include "../../cuda/gemm_lt.cu"
#include "../../cuda/gemm_names.cu"
