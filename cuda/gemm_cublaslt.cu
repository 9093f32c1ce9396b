/*
 * gemm_cublaslt.cu - cuBLASLt's side of a GEMM way (cuda/gemm_lt.cu): a
 * request's descriptors with one epilogue (the row-major request mapped to
 * the column-major call by gemm_map(), as cublasSgemm takes it), the
 * epilogue's pointers, and the algorithms the library's heuristic lists for
 * it; and the library's version, which a plan's names belong to.
 */
#include "gemm_lt.cuh"
#include "gemm_way.cuh"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_check.cuh"

static void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *v,
		     size_t size)
{
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, v, size));
}

/* The pointers an epilogue reads or writes, set on its descriptor. */
void gemm_lt_pointers(cublasLtMatmulDesc_t desc, cublasLtEpilogue_t epi,
				  const struct gemm_req *r)
{
	const void *bias = NULL, *aux = NULL;
	switch (epi) {
	case CUBLASLT_EPILOGUE_BIAS:
	case CUBLASLT_EPILOGUE_RELU_BIAS:
		bias = r->bias;
		break;
	case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
		bias = r->bias;
		aux = r->relu_mask;
		break;
	case CUBLASLT_EPILOGUE_DRELU:
		aux = r->relu_mask;
		break;
	case CUBLASLT_EPILOGUE_BGRADB:
		bias = r->bias_grad;
		break;
	default:
		return;
	}
	if (bias)
		set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
	if (aux)
		set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
}

void gemm_way_desc_destroy(struct lt_desc *d)
{
	if (d->desc)
		cublasLtMatmulDescDestroy(d->desc);
	if (d->la)
		cublasLtMatrixLayoutDestroy(d->la);
	if (d->lb)
		cublasLtMatrixLayoutDestroy(d->lb);
	if (d->lc)
		cublasLtMatrixLayoutDestroy(d->lc);
	memset(d, 0, sizeof(*d));
}

/* Descriptors of r with cuBLASLt doing `epi`: 1, or 0 when cuBLASLt refuses them (d empty). */
static int make_desc(const struct cuda_gemm *g, const struct gemm_req *r, cublasLtEpilogue_t epi,
		     struct lt_desc *d)
{
	struct gemm_colmajor c = gemm_map(r);
	cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasComputeType_t compute = g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

	memset(d, 0, sizeof(*d));
	if (cublasLtMatmulDescCreate(&d->desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&d->la, CUDA_R_32F, c.trans_a ? c.k : c.m,
				       c.trans_a ? c.m : c.k, c.lda) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&d->lb, CUDA_R_32F, c.trans_b ? c.n : c.k,
				       c.trans_b ? c.k : c.n, c.ldb) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&d->lc, CUDA_R_32F, c.m, c.n, c.ldc) != CUBLAS_STATUS_SUCCESS) {
		gemm_way_desc_destroy(d);
		return 0;
	}
	set_attr(d->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
	set_attr(d->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
	set_attr(d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
	if (epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DRELU) {
		int64_t ld = ((int64_t)c.m + 127) / 128 * 128;
		set_attr(d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
	}
	/* The heuristic reads the epilogue's pointers for their alignment. */
	gemm_lt_pointers(d->desc, epi, r);
	return 1;
}

/*
 * The algorithms cuBLASLt's heuristic lists for r with `epi` that fit the
 * workspace, in its order, at most `max`: their count.
 */
int gemm_lt_algos(const struct cuda_gemm *g, const struct gemm_req *r,
		      const struct gemm_key *k, cublasLtEpilogue_t epi, cublasLtMatmulAlgo_t *out,
		      int max)
{
	struct lt_desc d;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t found[GEMM_LT_CANDIDATES];
	int n_found = 0, n = 0;

	if (!make_desc(g, r, epi, &d))
		return 0;
	memset(found, 0, sizeof(found));
	if (cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS) {
		uint64_t ws = g->workspace_bytes;
		/* The mapped call's A is the request's B and the other way round. */
		uint32_t align_a = k->align_b, align_b = k->align_a, align_c = k->align_c;
		if (cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							 &ws, sizeof(ws)) == CUBLAS_STATUS_SUCCESS &&
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
							 &align_a, sizeof(align_a)) ==
			    CUBLAS_STATUS_SUCCESS &&
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
							 &align_b, sizeof(align_b)) ==
			    CUBLAS_STATUS_SUCCESS &&
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
							 &align_c, sizeof(align_c)) ==
			    CUBLAS_STATUS_SUCCESS &&
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
							 &align_c, sizeof(align_c)) ==
			    CUBLAS_STATUS_SUCCESS &&
		    /* No algorithm is a status of NOT_SUPPORTED or a count of 0, depending on the case. */
		    cublasLtMatmulAlgoGetHeuristic(g->lt, d.desc, d.la, d.lb, d.lc, d.lc, pref,
						   GEMM_LT_CANDIDATES, found, &n_found) !=
			    CUBLAS_STATUS_SUCCESS)
			n_found = 0;
		cublasLtMatmulPreferenceDestroy(pref);
	}
	for (int i = 0; i < n_found && n < max; i++)
		if (found[i].state == CUBLAS_STATUS_SUCCESS &&
		    found[i].workspaceSize <= g->workspace_bytes)
			out[n++] = found[i].algo;
	gemm_way_desc_destroy(&d);
	return n;
}

int gemm_way_desc(const struct cuda_gemm *g, const struct gemm_req *r, const struct gemm_way *w,
		  struct lt_desc *d)
{
	memset(d, 0, sizeof(*d));
	return !w->lt || make_desc(g, r, w->lt_epilogue, d);
}

void cuda_gemm_library(char *buf, size_t len)
{
	snprintf(buf, len, "cublasLt %zu", (size_t)cublasLtGetVersion());
}
