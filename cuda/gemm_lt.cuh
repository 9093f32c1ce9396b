/*
 * gemm_lt.cuh - the CUDA backend's GEMM (cuda/gemm_lt.cu): cuBLASLt with the
 * request's epilogue fused into the GEMM's own kernel, planned once per
 * problem, with kernels of ours (cuda/kernels.cu) for what cuBLASLt does not
 * offer, and cuBLAS's cublasSgemm where cuBLASLt has no algorithm at all.
 */
#ifndef MNIST_DDP_GEMM_LT_CUH
#define MNIST_DDP_GEMM_LT_CUH

#include <stddef.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gemm_map.h"

struct gemm_plan;

/* What the GEMMs of one backend share. */
struct cuda_gemm {
	cudaStream_t stream;
	cublasHandle_t blas;   /* bound to stream, with the workspace */
	cublasLtHandle_t lt;
	void *workspace;       /* device memory both libraries use, in stream order */
	size_t workspace_bytes;
	int tf32;              /* GEMMs on TF32 tensor cores */
	struct gemm_plan *plans; /* one per problem met, in the order met */
	int n_plans, cap_plans;
	const void **masks;    /* ReLU records written by a fused forward epilogue */
	int n_masks, cap_masks;
};

/* r on g's stream: the plan for r's problem (made the first time), then its calls. */
void cuda_gemm_run(struct cuda_gemm *g, const struct gemm_req *r);

/*
 * Bytes of the ReLU record of a (rows, cols) GEMM output: cuBLASLt's bit
 * mask of the column-major (cols, rows) result, its leading dimension cols
 * rounded up to 128 bits.
 */
size_t cuda_gemm_relu_mask_bytes(int rows, int cols);

/* Forget every plan (its descriptors destroyed); the handles stay the caller's. */
void cuda_gemm_forget(struct cuda_gemm *g);

#endif /* MNIST_DDP_GEMM_LT_CUH */
