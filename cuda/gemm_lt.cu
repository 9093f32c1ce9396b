/*
 * gemm_lt.cu - the CUDA backend's GEMM: see cuda/gemm_lt.cuh.
 *
 * A request (include/gemm_map.h) is row-major; the libraries are
 * column-major, so it is mapped by gemm_map() as cublasSgemm always was, and
 * its epilogue follows the swap: the bias runs along the rows of cuBLASLt's
 * D (CUBLASLT_EPILOGUE_BIAS, RELU_BIAS, RELU_AUX_BIAS), the bias gradient
 * sums op(B) over k into one value per column of D (BGRADB), and the ReLU
 * gradient reads the bit mask a RELU_AUX_BIAS forward kept (DRELU).
 *
 * Each problem (shapes, transposes, leading dimensions, epilogue, pointer
 * alignments, TF32) is planned the first time it is met, which is the first
 * training step, before or while it is captured: descriptors made, and one
 * algorithm chosen from cuBLASLt's heuristic, the fastest it lists that
 * needs no reduction kernel of its own (no split-K, or split-K reduced in
 * place) and fits the workspace. Where cuBLASLt offers no algorithm for the
 * fused epilogue, the plan falls back a step at a time: RELU_BIAS without a
 * mask (the backward pass then takes the ReLU's gradient from its output),
 * then the plain product with kernels of ours for the epilogue
 * (bias_act, relu_backward, bias_grad), then cublasSgemm with those kernels.
 * The outcome is the same to rounding either way; what changes is how many
 * kernels a step launches.
 */
#include "gemm_lt.cuh"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_check.cuh"
#include "kernels.h"

/* Algorithms asked of the heuristic per attempt. */
#define GEMM_LT_CANDIDATES 8

/* A problem, as far as a plan depends on it. */
struct gemm_key {
	int trans_a, trans_b, m, n, k, lda, ldb, ldc; /* the row-major request's */
	int epilogue, mask, bias_grad, tf32;
	unsigned align_a, align_b, align_c, align_bias;
};

struct gemm_plan {
	struct gemm_key key;
	int lt;                        /* 1: cublasLtMatmul; 0: cublasSgemm */
	cublasLtEpilogue_t lt_epilogue; /* what cuBLASLt does of the epilogue */
	int mask_written;              /* the ReLU record is written (RELU_AUX_BIAS) */
	int then_bias_act, then_drelu, then_bias_grad; /* what our kernels do after */
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
};

/* The largest power of two dividing p's address, at most 256 (cuBLASLt's alignment preferences). */
static unsigned alignment_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	unsigned align = 256;
	while (align > 1 && (a & (align - 1)))
		align >>= 1;
	return p ? align : 256;
}

static struct gemm_key key_of(const struct cuda_gemm *g, const struct gemm_req *r)
{
	struct gemm_key k;
	memset(&k, 0, sizeof(k)); /* padding too: keys are compared bytewise */
	k.trans_a = r->trans_a;
	k.trans_b = r->trans_b;
	k.m = r->m;
	k.n = r->n;
	k.k = r->k;
	k.lda = r->lda;
	k.ldb = r->ldb;
	k.ldc = r->ldc;
	k.epilogue = (int)r->epilogue;
	k.mask = r->relu_mask != NULL;
	k.bias_grad = r->bias_grad != NULL;
	k.tf32 = g->tf32;
	k.align_a = alignment_of(r->a);
	k.align_b = alignment_of(r->b);
	k.align_c = alignment_of(r->c);
	k.align_bias = alignment_of(r->bias_grad ? (const void *)r->bias_grad
						 : (const void *)r->bias);
	return k;
}

size_t cuda_gemm_relu_mask_bytes(int rows, int cols)
{
	size_t ld = ((size_t)cols + 127) / 128 * 128; /* bits per column of the (cols, rows) result */
	return rows > 0 && cols > 0 ? ld / 8 * (size_t)rows : 0;
}

static int mask_written(const struct cuda_gemm *g, const void *mask)
{
	for (int i = 0; mask && i < g->n_masks; i++)
		if (g->masks[i] == mask)
			return 1;
	return 0;
}

static void note_mask_written(struct cuda_gemm *g, const void *mask)
{
	if (mask_written(g, mask))
		return;
	if (g->n_masks == g->cap_masks) {
		g->cap_masks = g->cap_masks ? 2 * g->cap_masks : 8;
		g->masks = (const void **)xrealloc(g->masks, (size_t)g->cap_masks * sizeof(*g->masks));
	}
	g->masks[g->n_masks++] = mask;
}

static void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *v,
		     size_t size)
{
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, v, size));
}

/* The pointers a call's epilogue reads or writes, set on the plan's descriptor. */
static void set_epilogue_pointers(const struct gemm_plan *p, const struct gemm_req *r)
{
	const void *bias = NULL, *aux = NULL;
	switch (p->lt_epilogue) {
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
		set_attr(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
	if (aux)
		set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
}

static void destroy_descriptors(struct gemm_plan *p)
{
	if (p->desc)
		cublasLtMatmulDescDestroy(p->desc);
	if (p->la)
		cublasLtMatrixLayoutDestroy(p->la);
	if (p->lb)
		cublasLtMatrixLayoutDestroy(p->lb);
	if (p->lc)
		cublasLtMatrixLayoutDestroy(p->lc);
	p->desc = NULL;
	p->la = p->lb = p->lc = NULL;
}

/* Whether an algorithm the heuristic listed runs without a reduction kernel of its own. */
static int single_kernel(const cublasLtMatmulAlgo_t *algo)
{
	int32_t splitk = 1;
	uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
	size_t written = 0;
	if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
						 sizeof(splitk), &written) != CUBLAS_STATUS_SUCCESS)
		return 0;
	if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
						 &scheme, sizeof(scheme),
						 &written) != CUBLAS_STATUS_SUCCESS)
		return 0;
	return splitk <= 1 || scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE;
}

/*
 * Descriptors and an algorithm for r with cuBLASLt doing `epi`: 1 on
 * success (p filled), 0 when cuBLASLt offers nothing (p left without
 * descriptors).
 */
static int try_lt(const struct cuda_gemm *g, const struct gemm_req *r, cublasLtEpilogue_t epi,
		  struct gemm_plan *p)
{
	struct gemm_colmajor c = gemm_map(r);
	cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasComputeType_t compute = g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t found[GEMM_LT_CANDIDATES];
	int n_found = 0, chosen = -1;

	memset(found, 0, sizeof(found));
	p->lt_epilogue = epi;
	if (cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, c.trans_a ? c.k : c.m,
				       c.trans_a ? c.m : c.k, c.lda) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_32F, c.trans_b ? c.n : c.k,
				       c.trans_b ? c.k : c.n, c.ldb) != CUBLAS_STATUS_SUCCESS ||
	    cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, c.m, c.n, c.ldc) != CUBLAS_STATUS_SUCCESS)
		goto fail;
	set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
	set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
	set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
	if (epi == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DRELU) {
		int64_t ld = ((int64_t)c.m + 127) / 128 * 128;
		set_attr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
	}
	/* The heuristic reads the epilogue's pointers for their alignment. */
	set_epilogue_pointers(p, r);

	if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
		goto fail;
	{
		uint64_t ws = g->workspace_bytes;
		uint32_t align_a = p->key.align_b, align_b = p->key.align_a, align_c = p->key.align_c;
		/* The mapped call's A is the request's B and the other way round. */
		if (cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							 &ws, sizeof(ws)) != CUBLAS_STATUS_SUCCESS ||
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
							 &align_a, sizeof(align_a)) !=
			    CUBLAS_STATUS_SUCCESS ||
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
							 &align_b, sizeof(align_b)) !=
			    CUBLAS_STATUS_SUCCESS ||
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
							 &align_c, sizeof(align_c)) !=
			    CUBLAS_STATUS_SUCCESS ||
		    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
							 &align_c, sizeof(align_c)) !=
			    CUBLAS_STATUS_SUCCESS)
			goto fail;
	}
	/* No algorithm is a status of NOT_SUPPORTED or a count of 0, depending on the case. */
	if (cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref,
					   GEMM_LT_CANDIDATES, found, &n_found) !=
	    CUBLAS_STATUS_SUCCESS)
		n_found = 0;
	cublasLtMatmulPreferenceDestroy(pref);
	pref = NULL;
	for (int i = 0; i < n_found && chosen < 0; i++)
		if (found[i].state == CUBLAS_STATUS_SUCCESS &&
		    found[i].workspaceSize <= g->workspace_bytes && single_kernel(&found[i].algo))
			chosen = i;
	for (int i = 0; i < n_found && chosen < 0; i++)
		if (found[i].state == CUBLAS_STATUS_SUCCESS &&
		    found[i].workspaceSize <= g->workspace_bytes)
			chosen = i;
	if (chosen < 0)
		goto fail;
	p->algo = found[chosen].algo;
	p->lt = 1;
	return 1;

fail:
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	destroy_descriptors(p);
	return 0;
}

/* The epilogue cuBLASLt would fuse for r, all of it. */
static cublasLtEpilogue_t fused_epilogue(const struct cuda_gemm *g, const struct gemm_req *r)
{
	switch (r->epilogue) {
	case GEMM_EPILOGUE_BIAS:
		return CUBLASLT_EPILOGUE_BIAS;
	case GEMM_EPILOGUE_BIAS_RELU:
		return r->relu_mask ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS;
	case GEMM_EPILOGUE_DRELU:
		/* Only a record a fused forward wrote; else the ReLU's output decides, below. */
		return mask_written(g, r->relu_mask) ? CUBLASLT_EPILOGUE_DRELU
						     : CUBLASLT_EPILOGUE_DEFAULT;
	case GEMM_EPILOGUE_NONE:
		break;
	}
	/*
	 * A bias gradient over k == 1 is the operand itself; cuBLASLt's BGRADB has
	 * been reported wrong there (a one-row batch), so a kernel copies it.
	 */
	return r->bias_grad && r->k > 1 ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
}

/* What our kernels still do after a product whose cuBLASLt epilogue is p->lt_epilogue. */
static void plan_remainder(struct gemm_plan *p, const struct gemm_req *r)
{
	cublasLtEpilogue_t e = p->lt ? p->lt_epilogue : CUBLASLT_EPILOGUE_DEFAULT;
	p->then_bias_act = (r->epilogue == GEMM_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_BIAS) ||
			   (r->epilogue == GEMM_EPILOGUE_BIAS_RELU && e != CUBLASLT_EPILOGUE_RELU_BIAS &&
			    e != CUBLASLT_EPILOGUE_RELU_AUX_BIAS);
	p->then_drelu = r->epilogue == GEMM_EPILOGUE_DRELU && e != CUBLASLT_EPILOGUE_DRELU;
	p->then_bias_grad = r->bias_grad && e != CUBLASLT_EPILOGUE_BGRADB;
	p->mask_written = e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
	if ((p->then_bias_act || p->then_drelu) && r->ldc != r->n)
		die(1, "CUDA GEMM: an epilogue kernel needs a packed output (ldc %d, n %d)", r->ldc,
		    r->n);
}

static struct gemm_plan *plan_for(struct cuda_gemm *g, const struct gemm_req *r)
{
	struct gemm_key k = key_of(g, r);
	for (int i = 0; i < g->n_plans; i++)
		if (!memcmp(&g->plans[i].key, &k, sizeof(k)))
			return &g->plans[i];
	if (g->n_plans == g->cap_plans) {
		g->cap_plans = g->cap_plans ? 2 * g->cap_plans : 16;
		g->plans = (struct gemm_plan *)xrealloc(g->plans,
							 (size_t)g->cap_plans * sizeof(*g->plans));
	}
	struct gemm_plan *p = &g->plans[g->n_plans++];
	memset(p, 0, sizeof(*p));
	p->key = k;
	cublasLtEpilogue_t want = fused_epilogue(g, r);
	if (!try_lt(g, r, want, p) &&
	    !(want == CUBLASLT_EPILOGUE_RELU_AUX_BIAS && try_lt(g, r, CUBLASLT_EPILOGUE_RELU_BIAS, p)) &&
	    !(want != CUBLASLT_EPILOGUE_DEFAULT && try_lt(g, r, CUBLASLT_EPILOGUE_DEFAULT, p)))
		p->lt = 0; /* cublasSgemm */
	plan_remainder(p, r);
	if (p->mask_written)
		note_mask_written(g, r->relu_mask);
	return p;
}

void cuda_gemm_run(struct cuda_gemm *g, const struct gemm_req *r)
{
	if (r->m <= 0 || r->n <= 0)
		return;
	struct gemm_plan *p = plan_for(g, r);
	struct gemm_colmajor c = gemm_map(r);
	if (p->lt) {
		set_epilogue_pointers(p, r);
		CUBLAS_CHECK(cublasLtMatmul(g->lt, p->desc, &c.alpha, c.a, p->la, c.b, p->lb, &c.beta,
					    c.c, p->lc, c.c, p->lc, &p->algo, g->workspace,
					    g->workspace_bytes, g->stream));
	} else {
		CUBLAS_CHECK(cublasSgemm(g->blas, c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
					 c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, c.m, c.n, c.k, &c.alpha,
					 c.a, c.lda, c.b, c.ldb, &c.beta, c.c, c.ldc));
	}
	if (p->then_bias_act)
		kernels_bias_act(g->stream, NULL, r->c, r->bias, r->m, r->n,
				 r->epilogue == GEMM_EPILOGUE_BIAS_RELU);
	if (p->then_drelu)
		kernels_relu_backward(g->stream, NULL, r->c, r->act, (size_t)r->m * (size_t)r->n);
	if (p->then_bias_grad)
		kernels_bias_grad(g->stream, NULL, r->a, r->lda, r->trans_a, r->m, r->k, r->bias_grad);
}

void cuda_gemm_forget(struct cuda_gemm *g)
{
	for (int i = 0; i < g->n_plans; i++)
		destroy_descriptors(&g->plans[i]);
	free(g->plans);
	free(g->masks);
	g->plans = NULL;
	g->masks = NULL;
	g->n_plans = g->cap_plans = g->n_masks = g->cap_masks = 0;
}
