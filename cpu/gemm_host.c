/*
 * gemm_host.c - the host backend's GEMM (cpu/host_internal.h): small and
 * skinny shapes in cpu/gemm_small.c, the rest in OpenBLAS through the shared
 * row-major to column-major mapping (gemm_map.h), then the epilogue. Used by
 * the ops table (cpu/backend_host.c) and the convolution stages (cpu/conv_host.c).
 *
 * The epilogue's loops run in blocks of HOST_BLOCK elements, built for the
 * vector units as host_vector.h describes; per element the arithmetic is
 * elem.h's, unchanged, so results are bitwise the same as a scalar loop's.
 */
#include <cblas.h>
#include <stddef.h>

#include "check.h"
#include "conv_direct.h"
#include "elem.h"
#include "gemm_small.h"
#include "host_internal.h"
#include "host_vector.h"

/* At least n ones. */
static const float *host_ones(struct host_ctx *h, size_t n)
{
	float *ones = host_scratch(h, HOST_SCRATCH_ONES, n * sizeof(float));
	for (; h->ones < n; h->ones++)
		ones[h->ones] = 1.0f;
	return ones;
}

/* row (n) = bias_act_elem(row, bias, relu); relu is a constant where this is inlined. */
static inline void bias_act_row(float *restrict row, const float *restrict bias, int n, int relu)
{
	int j = 0;
	for (; j + HOST_BLOCK <= n; j += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			row[j + k] = bias_act_elem(row[j + k], bias[j + k], relu);
	for (; j < n; j++)
		row[j] = bias_act_elem(row[j], bias[j], relu);
}

/* y (rows, cols) at row stride ld: the GEMM epilogue's bias and ReLU. */
HOST_VECTOR_CLONES
static void bias_act_rows(float *y, int ld, const float *bias, int rows, int cols, int relu)
{
	for (int i = 0; i < rows; i++) {
		float *row = y + (size_t)i * (size_t)ld;
		if (relu)
			bias_act_row(row, bias, cols, 1);
		else
			bias_act_row(row, bias, cols, 0);
	}
}

/* dy and y (rows, cols) at row stride ld: the GEMM epilogue's ReLU gradient. */
HOST_VECTOR_CLONES
static void relu_backward_rows(float *dy, const float *y, int ld, int rows, int cols)
{
	if (ld == cols) {
		relu_backward_run(dy, y, (size_t)rows * (size_t)cols);
		return;
	}
	for (int i = 0; i < rows; i++)
		relu_backward_run(dy + (size_t)i * ld, y + (size_t)i * ld, (size_t)cols);
}
/*
 * A convolution's weight gradient, dz (m, P) times its im2col matrix
 * transposed, C = op(A) op(B) with nothing added: read from x by
 * cpu/conv_direct.c, without the matrix.
 */
static int conv_weight_grad_direct(const struct gemm_req *r)
{
	const struct gemm_im2col *ic = r->b_im2col;
	if (!ic || r->trans_a || !r->trans_b || r->alpha != 1.0f || r->beta != 0.0f)
		return 0;
	const struct conv_shape *s = &ic->conv;
	int fan_in = s->c * s->k * s->k, p = ic->rows * s->oh * s->ow;
	if (r->n != fan_in || r->k != p || r->lda != p || r->ldc != fan_in)
		return 0;
	conv_direct_weight_grad(r->a, ic->x, s, r->m, ic->rows, r->c);
	return 1;
}

/* Small and skinny shapes in gemm_small.c, the rest in OpenBLAS through the shared mapping. */
static void gemm_core(const struct gemm_req *r)
{
	if (conv_weight_grad_direct(r))
		return;
	if (!r->b) /* B NULL is allowed only where the direct kernel reads x (host_conv_wgrad_reads_x) */
		die(1, "host gemm: a %dx%dx%d product without B that the direct weight gradient "
		       "does not take", r->m, r->n, r->k);
	if (gemm_small_wanted(r)) {
		gemm_small(r);
		return;
	}
	struct gemm_colmajor c = gemm_map(r);
	cblas_sgemm(CblasColMajor, c.trans_a ? CblasTrans : CblasNoTrans,
		    c.trans_b ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, c.alpha, c.a, c.lda, c.b,
		    c.ldb, c.beta, c.c, c.ldc);
}
/*
 * The product, then its epilogue (gemm_map.h) as separate passes: the bias
 * and ReLU over C, or the ReLU's gradient, or the bias gradient as a GEMM
 * against ones (1 x k times op(A)^T, or op(A) times k x 1).
 */
void host_gemm(void *ctx, const struct gemm_req *r)
{
	struct host_ctx *h = ctx;
	gemm_core(r);
	if (r->m <= 0 || r->n <= 0)
		return;
	switch (r->epilogue) {
	case GEMM_EPILOGUE_NONE:
		break;
	case GEMM_EPILOGUE_BIAS:
	case GEMM_EPILOGUE_BIAS_RELU:
		bias_act_rows(r->c, r->ldc, r->bias, r->m, r->n,
			      r->epilogue == GEMM_EPILOGUE_BIAS_RELU);
		break;
	case GEMM_EPILOGUE_DRELU:
		relu_backward_rows(r->c, r->act, r->ldc, r->m, r->n);
		break;
	}
	if (r->bias_grad) {
		const float *ones = host_ones(h, r->k > 0 ? (size_t)r->k : 1);
		struct gemm_req g = {.m = 1, .n = r->m, .k = r->k, .alpha = 1.0f, .a = ones,
				     .lda = r->k, .b = r->a, .ldb = r->lda, .c = r->bias_grad,
				     .ldc = r->m};
		if (!r->trans_a) { /* op(A) (m, k) times ones (k, 1) */
			g = (struct gemm_req){.trans_b = 1, .m = r->m, .n = 1, .k = r->k,
					      .alpha = 1.0f, .a = r->a, .lda = r->lda, .b = ones,
					      .ldb = r->k, .c = r->bias_grad, .ldc = 1};
		}
		gemm_core(&g);
	}
}
