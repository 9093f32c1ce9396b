/*
 * gemm_lt.cuh - the CUDA backend's GEMM (cuda/gemm_lt.cu): each problem
 * planned once, the first time it is met, by choosing among the ways to run
 * it (cuBLASLt's algorithms with the request's epilogue fused into the GEMM
 * or done by kernels of ours, cublasSgemm; for a bias gradient not fused, a
 * kernel of ours or cublasSgemv against a vector of ones): timed on the
 * device with CUDA events and the fastest kept, or the heuristic's first
 * choice untimed, or the way a given plan names (the plan: cuda/plan.cu; the
 * ways: cuda/ways.cu).
 */
#ifndef MNIST_DDP_GEMM_LT_CUH
#define MNIST_DDP_GEMM_LT_CUH

#include <stddef.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend.h"
#include "gemm_map.h"
#include "plan.cuh"

/*
 * Where a GEMM's calls go: a stream, a cuBLAS handle bound to it, and the
 * workspace both libraries and our split GEMM use there (workspace_bytes of
 * struct cuda_gemm). Two lanes may run at once; each needs its own workspace.
 */
struct gemm_lane {
	cudaStream_t stream;
	cublasHandle_t blas;
	void *workspace;
};

/* What the GEMMs of one backend share. */
struct cuda_gemm {
	cudaStream_t stream;
	cublasHandle_t blas;   /* bound to stream, with the workspace */
	cublasLtHandle_t lt;
	void *workspace;       /* device memory both libraries use, in stream order */
	size_t workspace_bytes;
	int tf32;              /* GEMMs on TF32 tensor cores */
	struct cuda_plan *plan; /* the backend's, where each problem's way is filed */
	float *ones;           /* (n_ones) 1.0f, for a bias gradient by cublasSgemv */
	size_t n_ones;
};

/* r on g's stream: the plan for r's problem (made the first time), then its calls. */
void cuda_gemm_run(struct cuda_gemm *g, const struct gemm_req *r);

/* The plan for r's problem, made on g's stream the first time it is met; nothing else runs. */
void cuda_gemm_plan(struct cuda_gemm *g, const struct gemm_req *r);

/* r, planned (cuda_gemm_plan), queued on lane instead of g's stream. */
void cuda_gemm_run_on(struct cuda_gemm *g, const struct gemm_lane *lane, const struct gemm_req *r);

/*
 * Bytes of the ReLU record of a (rows, cols) GEMM output: cuBLASLt's bit
 * mask of the column-major (cols, rows) result, its leading dimension cols
 * rounded up to 128 bits.
 */
size_t cuda_gemm_relu_mask_bytes(int rows, int cols);

/*
 * Whether every GEMM planned so far that reads cols as the im2col matrix of a
 * convolution's input (conv, rows: struct gemm_im2col) reads the input
 * instead (an implicit way), and one does: then nothing reads cols, and a
 * forward pass need not write it. 0 until such a plan is made.
 */
int cuda_gemm_im2col_unread(const struct cuda_gemm *g, const float *cols,
			    const struct conv_shape *conv, int rows);

/* "cublasLt N": the library a plan's names belong to. */
void cuda_gemm_library(char *buf, size_t len);

/* Free what the GEMMs hold besides their plans (the vector of ones); the handles stay the caller's. */
void cuda_gemm_release(struct cuda_gemm *g);

#endif /* MNIST_DDP_GEMM_LT_CUH */
