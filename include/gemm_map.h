/*
 * gemm_map.h - row-major GEMM requests mapped onto column-major BLAS calls.
 *
 * The training code asks for C = alpha * op(A) * op(B) + beta * C with all
 * matrices row-major. A row-major matrix is its transpose in column-major
 * storage, so the same memory satisfies C^T = op(B)^T * op(A)^T: swap the
 * operands and the m/n sizes, keep the transpose flags. gemm_map() computes
 * that once; cblas_sgemm(CblasColMajor, ...) and cublasSgemm are both called
 * from the mapped struct, so a host test of the mapping tests what cuBLAS is
 * given.
 *
 * A request may carry an epilogue on its result (what cuBLASLt fuses into the
 * GEMM's own kernel, and what the host backend applies right after), in
 * row-major terms:
 *   GEMM_EPILOGUE_BIAS       C[i, j] = bias_act_elem(acc, bias[j], 0)
 *   GEMM_EPILOGUE_BIAS_RELU  C[i, j] = bias_act_elem(acc, bias[j], 1); relu_mask,
 *                            unless NULL, records which outputs passed
 *   GEMM_EPILOGUE_DRELU      C[i, j] = relu_backward_elem(acc, act[i, j]), act (m, n)
 *                            at ldc the ReLU's output, relu_mask its record (or NULL)
 * and, with no epilogue, a bias gradient: bias_grad (m), unless NULL, gets
 * the sums over l of op(A)[i, l] (a dense layer's db from dy^T; a
 * convolution's from dz). acc is the product alpha * op(A) op(B) + beta C.
 * In column-major terms (the swap above) the bias runs along D's rows and
 * the bias gradient sums op(B) over k, one per column of D: cuBLASLt's
 * BIAS and BGRADB.
 */
#ifndef MNIST_DDP_GEMM_MAP_H
#define MNIST_DDP_GEMM_MAP_H

#include "conv_shape.h"

#ifdef __cplusplus
extern "C" {
#endif

enum gemm_epilogue {
	GEMM_EPILOGUE_NONE = 0,
	GEMM_EPILOGUE_BIAS,
	GEMM_EPILOGUE_BIAS_RELU,
	GEMM_EPILOGUE_DRELU,
};

/*
 * What a convolution's weight gradient's B is: the im2col matrix of x, a
 * convolution's input (c, h, w, rows) (include/conv_shape.h), B stored
 * (c*k*k, oh*ow*rows) and read transposed. A backend may read x in its
 * place; B must hold the same matrix either way, unless the backend says
 * it always reads x (backend_ops.conv_wgrad_reads_x): then B may be NULL.
 */
struct gemm_im2col {
	const float *x;
	struct conv_shape conv;
	int rows;
};

/* A row-major request: C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C. */
struct gemm_req {
	int trans_a, trans_b; /* 0: as stored, 1: transposed */
	int m, n, k;
	float alpha;
	const float *a;
	int lda; /* row stride of A as stored */
	const float *b;
	int ldb;
	float beta;
	float *c;
	int ldc;
	/* The epilogue (above); zero-initialized: none. */
	enum gemm_epilogue epilogue;
	const float *bias;   /* (n): BIAS, BIAS_RELU */
	const float *act;    /* (m, n) at ldc: DRELU */
	void *relu_mask;     /* BIAS_RELU: written; DRELU: read; NULL: none kept */
	float *bias_grad;    /* (m), with no epilogue: sums over l of op(A)[i, l] */
	const struct gemm_im2col *b_im2col; /* B as the im2col matrix of an x (above); NULL: none */
	/*
	 * 1: nothing reads C or bias_grad, and nothing writes A, B or x, until
	 * the backend's next join (struct backend_ops), so the backend may run
	 * this product beside the ops that follow it (a weight gradient beside
	 * the input gradients below it). The result is the same either way.
	 */
	int beside;
};

/* The equivalent column-major call, argument for argument. */
struct gemm_colmajor {
	int trans_a, trans_b; /* flags of the first and second operand */
	int m, n, k;
	float alpha;
	const float *a;
	int lda;
	const float *b;
	int ldb;
	float beta;
	float *c;
	int ldc;
};

static inline struct gemm_colmajor gemm_map(const struct gemm_req *r)
{
	struct gemm_colmajor c = {
		r->trans_b, r->trans_a, /* C^T = op(B)^T op(A)^T: the operands swap */
		r->n, r->m, r->k,
		r->alpha,
		r->b, r->ldb,
		r->a, r->lda,
		r->beta,
		r->c, r->ldc,
	};
	return c;
}

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_GEMM_MAP_H */
