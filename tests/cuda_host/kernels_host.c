/*
 * kernels_host.c - cuda/kernels.cu, kernels_conv.cu, kernels_conv_patch.cu, kernels_gemm.cu,
 * kernels_epilogue.cu, kernels_head.cu and kernels_dense.cu compiled by the host C compiler.
 *
 * cuda/kernels.h finds the stand-in tests/cuda_host/cuda_runtime.h for the CUDA
 * built-ins; the kernels and their launchers are otherwise the very code nvcc
 * builds into the CUDA backend. Linked into tests/test_kernels_host only.
 */
#include "../../cuda/kernels.cu"
#include "../../cuda/kernels_conv.cu"
#include "../../cuda/kernels_conv_patch.cu"
#include "../../cuda/kernels_gemm.cu"
#include "../../cuda/kernels_epilogue.cu"
#include "../../cuda/kernels_head.cu"
#include "../../cuda/kernels_dense.cu"
