/*
 * sim_gemm_lt.cc - cuda/gemm_lt.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/gemm_lt.cu with nvcc.
 */
#include "../../cuda/gemm_lt.cu"
/* An older commit's backend (calibrate.sh) may hold its names in gemm_lt.cu. */
#if __has_include("../../cuda/gemm_names.cu")
#include "../../cuda/gemm_names.cu"
#endif
/* And cuBLASLt's side of it in gemm_cublaslt.cu since 2026-11-29. */
#if __has_include("../../cuda/gemm_cublaslt.cu")
#include "../../cuda/gemm_cublaslt.cu"
#endif
