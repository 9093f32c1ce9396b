/* gemm_map.c - see include/gemm_map.h. */
#include "gemm_map.h"

struct gemm_colmajor gemm_map(const struct gemm_req *r)
{
	struct gemm_colmajor c = {
		.trans_a = r->trans_b,
		.trans_b = r->trans_a,
		.m = r->n,
		.n = r->m,
		.k = r->k,
		.alpha = r->alpha,
		.a = r->b,
		.lda = r->ldb,
		.b = r->a,
		.ldb = r->lda,
		.beta = r->beta,
		.c = r->c,
		.ldc = r->ldc,
	};
	return c;
}
