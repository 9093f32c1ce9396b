/*
 * gemm_names.cu - the names cuda/gemm_lt.cu gives its problems and their
 * candidate ways: the key a plan is filed under, the shape for people, and
 * each way's name (what it runs and its algorithm's every configuration
 * attribute: stable for one GPU model and cuBLAS version).
 */
#include "gemm_way.cuh"

#include <stdint.h>
#include <stdio.h>

void gemm_key_text(const struct gemm_key *k, char *buf, size_t len)
{
	char im2col[64] = "";
	if (k->im2col)
		snprintf(im2col, sizeof(im2col), " im2col=%dx%dx%d/k%d/p%d/r%d", k->conv.c, k->conv.h,
			 k->conv.w, k->conv.k, k->conv.pad, k->rows);
	snprintf(buf, len,
		 "%c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d epi=%d mask=%d bgrad=%d tf32=%d "
		 "align=%u/%u/%u/%u%s",
		 k->trans_a ? 't' : 'n', k->trans_b ? 't' : 'n', k->m, k->n, k->k, k->lda, k->ldb,
		 k->ldc, k->epilogue, k->mask, k->bias_grad, k->tf32, k->align_a, k->align_b,
		 k->align_c, k->align_bias, im2col);
}

static const char *epilogue_word(int e)
{
	switch (e) {
	case GEMM_EPILOGUE_BIAS:
		return " bias";
	case GEMM_EPILOGUE_BIAS_RELU:
		return " bias+relu";
	case GEMM_EPILOGUE_DRELU:
		return " drelu";
	default:
		return "";
	}
}

void gemm_shape_text(const struct gemm_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "%c%c %dx%dx%d%s%s", k->trans_a ? 't' : 'n', k->trans_b ? 't' : 'n',
		 k->m, k->n, k->k, epilogue_word(k->epilogue), k->bias_grad ? " bias_grad" : "");
}

static const char *lt_epilogue_word(cublasLtEpilogue_t e)
{
	switch (e) {
	case CUBLASLT_EPILOGUE_BIAS:
		return "bias";
	case CUBLASLT_EPILOGUE_RELU_BIAS:
		return "relu_bias";
	case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
		return "relu_aux_bias";
	case CUBLASLT_EPILOGUE_DRELU:
		return "drelu";
	case CUBLASLT_EPILOGUE_BGRADB:
		return "bgradb";
	default:
		return "plain";
	}
}

/* One of an algorithm's configuration attributes, -1 where the library does not say. */
static long long algo_attr(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr,
			   size_t size)
{
	uint64_t v = 0;
	size_t written = 0;
	if (cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, size, &written) != CUBLAS_STATUS_SUCCESS)
		return -1;
	if (size == sizeof(int32_t))
		return (long long)(int32_t)(uint32_t)v;
	if (size == sizeof(uint16_t))
		return (long long)(uint16_t)v;
	return (long long)v;
}

/*
 * A way's name: what it runs, every configuration attribute of its
 * algorithm (together they determine the algorithm), and how its bias
 * gradient is summed:
 *   lt.bgradb.a21.t15.s3.k8.r1.w0.c0.i0.l0   sgemm+bg.gemv   ksplit.c264.micro
 *   ksplit.c50.micro.im2col   tile.k128
 */
void gemm_way_name(struct gemm_way *w)
{
	char head[80];
	if (w->lt)
		snprintf(head, sizeof(head), "lt.%s.a%lld.t%lld.s%lld.k%lld.r%lld.w%lld.c%lld.i%lld.l%lld",
			 lt_epilogue_word(w->lt_epilogue),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_ID, sizeof(int32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, sizeof(uint32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, sizeof(uint32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, sizeof(int32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, sizeof(uint32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, sizeof(uint32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, sizeof(uint32_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, sizeof(uint16_t)),
			 algo_attr(&w->algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, sizeof(uint16_t)));
	else if (w->ksplit)
		snprintf(head, sizeof(head), "ksplit.c%d.micro%s", w->ksplit, w->im2col ? ".im2col" : "");
	else if (w->tile)
		snprintf(head, sizeof(head), "tile.k%d", w->tile);
	else
		snprintf(head, sizeof(head), "sgemm");
	snprintf(w->name, sizeof(w->name), "%s%s", head,
		 w->bias_grad == BIAS_GRAD_KERNEL ? "+bg.kernel"
		 : w->bias_grad == BIAS_GRAD_GEMV ? "+bg.gemv"
		 : w->bias_grad == BIAS_GRAD_BLOCK ? "+bg.block"
						   : "");
}
