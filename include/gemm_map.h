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
 */
#ifndef MNIST_DDP_GEMM_MAP_H
#define MNIST_DDP_GEMM_MAP_H

#ifdef __cplusplus
extern "C" {
#endif

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
