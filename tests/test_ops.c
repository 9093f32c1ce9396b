/*
 * test_ops.c - every host backend op against a naive double-precision
 * reference (tests/ref.c), and the row-major to column-major GEMM mapping.
 *
 *   ctest --test-dir build -R test_ops --output-on-failure
 *   MNIST_TEST_SEED=123 build/tests/test_ops     (other random inputs)
 *
 * The backend is created without MPI (backend_host_create(NULL, ...): one
 * rank, collectives are the identity) and driven only through its interface:
 * alloc, upload, the op, download. Shapes include batch 1, odd sizes, odd
 * class counts and strided (padded) matrices; padding is filled with NaN or a
 * sentinel so reading or writing past a row's width shows up.
 *
 * The element ops the backend once offered on their own (bias and ReLU,
 * their gradient, im2col, col2im, pooling, transposes) now run inside the
 * fused ops: the GEMM's epilogues (bias, bias + ReLU, ReLU gradient, bias
 * gradient), the loss op's ReLU gate, and the convolution stages
 * (conv_forward, pool_backward, conv_backward_data), each tested here
 * against its definition.
 */
#include <criterion/criterion.h>

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_module.h"
#include "gemm_map.h"
#include "gemm_small.h"
#include "ref.h"

#define C_SENTINEL 12345.0f

static struct backend make_backend(void)
{
	struct backend be;
	memset(&be, 0, sizeof(be));
	cr_assert_eq(backend_host_create(NULL, 1, &be), 0, "backend_host_create(NULL) failed");
	cr_assert_not_null(be.ops);
	return be;
}

/* Backend copy of a host buffer. */
static void *dev_copy(const struct backend *be, const void *src, size_t bytes)
{
	void *p = backend_alloc(be, bytes);
	cr_assert_not_null(p, "backend alloc of %zu bytes failed", bytes);
	backend_upload(be, p, src, bytes);
	return p;
}

static void dev_read(const struct backend *be, void *dst, const void *src, size_t bytes)
{
	backend_download(be, dst, src, bytes);
	backend_synchronize(be);
}

static void *xcalloc_t(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	cr_assert_not_null(p);
	return p;
}

Test(ops, alloc_is_zero_filled)
{
	struct backend be = make_backend();
	size_t sizes[] = {1, 4, 63, 1000, 4096 + 3};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		unsigned char *d = backend_alloc(&be, sizes[s]);
		cr_assert_not_null(d);
		unsigned char *h = malloc(sizes[s]);
		memset(h, 0xa5, sizes[s]);
		dev_read(&be, h, d, sizes[s]);
		for (size_t i = 0; i < sizes[s]; i++)
			cr_assert_eq(h[i], 0, "alloc(%zu): byte %zu is %u, not 0", sizes[s], i, h[i]);
		free(h);
		backend_free(&be, d);
	}
	backend_destroy(&be);
}

/* ---- GEMM ---------------------------------------------------------------- */

struct gemm_case {
	int m, n, k;
};

static const struct gemm_case gemm_cases[] = {
	{1, 1, 1}, {1, 10, 7}, {5, 3, 1}, {7, 13, 9}, {32, 10, 784}, {17, 1, 33}, {3, 64, 5}, {10, 784, 32},
	/* gemm_small's block edges: uneven row blocks, wide + single + tail column pieces, k tails */
	{23, 53, 19}, {9, 29, 37}, {33, 40, 300}, {32, 256, 10},
	/* large enough for OpenBLAS (gemm_small_wanted says no) */
	{80, 96, 100},
};

static const float gemm_scalars[][2] = {{1.0f, 0.0f}, {0.75f, 0.5f}, {-1.25f, -2.0f}, {2.0f, 1.0f}};

/* A stored matrix of rows x cols with row stride ld: valid entries random, padding NaN. */
static float *strided_random(struct rng *r, int rows, int cols, int ld)
{
	float *x = xcalloc_t((size_t)rows * ld, sizeof(float));
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < ld; j++)
			x[(size_t)i * ld + j] = j < cols ? (float)(2.0 * rng_uniform(r) - 1.0) : NAN;
	return x;
}

/*
 * What a request carries besides the product (gemm_map.h): an epilogue, or
 * with none, the bias gradient.
 */
struct gemm_extra {
	enum gemm_epilogue epilogue;
	int bias_grad;
};

static const struct gemm_extra gemm_plain = {GEMM_EPILOGUE_NONE, 0};

static const char *epilogue_name(struct gemm_extra ex)
{
	switch (ex.epilogue) {
	case GEMM_EPILOGUE_BIAS:
		return "BIAS";
	case GEMM_EPILOGUE_BIAS_RELU:
		return "BIAS_RELU";
	case GEMM_EPILOGUE_DRELU:
		return "DRELU";
	default:
		return ex.bias_grad ? "bias_grad" : "none";
	}
}

/*
 * A ReLU's output as DRELU reads it, (rows, cols) at row stride ld: a third
 * exact zeros (and some -0.0), negatives that must gate too, the rest
 * positive; NaN in the padding (never read).
 */
static float *relu_output(struct rng *r, int rows, int cols, int ld)
{
	float *x = xcalloc_t((size_t)rows * ld, sizeof(float));
	for (int i = 0; i < rows; i++)
		for (int j = 0; j < ld; j++) {
			double u = rng_uniform(r);
			x[(size_t)i * ld + j] = j >= cols ? NAN :
						u < 0.3 ? 0.0f :
						u < 0.4 ? -0.0f :
						u < 0.5 ? (float)(-u) : (float)(u - 0.5);
		}
	return x;
}

/*
 * One row-major GEMM through `run` (the backend, or cblas on the mapped
 * struct) against ref_gemm, then the epilogue or the bias gradient of ex
 * against its definition in double (gemm_map.h): BIAS adds bias[j], BIAS_RELU
 * then takes max(., 0), DRELU keeps the product where act[i, j] > 0 and
 * writes 0 elsewhere, bias_grad (m) gets the sums over l of op(A)[i, l]. C's
 * padding and the entry after bias_grad hold a sentinel that must survive;
 * with beta == 0 C's old contents are NaN and must be ignored, and so is
 * bias_grad's (it is written, not added to).
 */
typedef void (*gemm_runner)(const struct backend *be, const struct gemm_req *r, float *c_dev);

static void check_gemm(const struct backend *be, gemm_runner run, const char *who,
		       struct gemm_extra ex, uint64_t seed)
{
	struct rng r = rng_make(seed, 1);
	int n_cases = (int)(sizeof(gemm_cases) / sizeof(gemm_cases[0]));
	int n_scalars = (int)(sizeof(gemm_scalars) / sizeof(gemm_scalars[0]));
	for (int ci = 0; ci < n_cases; ci++)
		for (int t = 0; t < 4; t++)
			for (int si = 0; si < n_scalars; si++)
				for (int pad = 0; pad <= 3; pad += 3) {
					int ta = t & 1, tb = t >> 1;
					int m = gemm_cases[ci].m, n = gemm_cases[ci].n, k = gemm_cases[ci].k;
					float alpha = gemm_scalars[si][0], beta = gemm_scalars[si][1];
					int a_rows = ta ? k : m, a_cols = ta ? m : k;
					int b_rows = tb ? n : k, b_cols = tb ? k : n;
					int lda = a_cols + pad, ldb = b_cols + pad + (pad ? 2 : 0), ldc = n + pad + (pad ? 1 : 0);
					float *a = strided_random(&r, a_rows, a_cols, lda);
					float *b = strided_random(&r, b_rows, b_cols, ldb);
					float *c = xcalloc_t((size_t)m * ldc, sizeof(float));
					for (int i = 0; i < m; i++)
						for (int j = 0; j < ldc; j++)
							c[(size_t)i * ldc + j] = j >= n ? C_SENTINEL :
								beta == 0.0f ? NAN : (float)(2.0 * rng_uniform(&r) - 1.0);
					double *want = xcalloc_t((size_t)m * ldc, sizeof(double));
					ref_widen(c, want, (size_t)m * ldc);
					ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc);

					float *bias = NULL, *act = NULL, *bg = NULL;
					double *want_bg = NULL;
					if (ex.epilogue == GEMM_EPILOGUE_BIAS || ex.epilogue == GEMM_EPILOGUE_BIAS_RELU) {
						bias = xcalloc_t((size_t)n, sizeof(float));
						ref_fill_normal(&r, bias, (size_t)n, 0.0, 1.0);
					}
					if (ex.epilogue == GEMM_EPILOGUE_DRELU)
						act = relu_output(&r, m, n, ldc);
					for (int i = 0; i < m; i++)
						for (int j = 0; j < n; j++) {
							double *w = &want[(size_t)i * ldc + j];
							if (ex.epilogue == GEMM_EPILOGUE_BIAS) {
								*w += bias[j];
							} else if (ex.epilogue == GEMM_EPILOGUE_BIAS_RELU) {
								double v = *w + bias[j];
								*w = v > 0.0 ? v : 0.0;
							} else if (ex.epilogue == GEMM_EPILOGUE_DRELU) {
								if (!(act[(size_t)i * ldc + j] > 0.0f))
									*w = 0.0;
							}
						}
					if (ex.bias_grad) {
						bg = xcalloc_t((size_t)m + 1, sizeof(float));
						want_bg = xcalloc_t((size_t)m + 1, sizeof(double));
						for (int i = 0; i < m; i++)
							bg[i] = NAN;
						ref_bias_grad(ta, m, k, a, lda, want_bg);
						bg[m] = C_SENTINEL;
						want_bg[m] = C_SENTINEL;
					}

					float *ad = dev_copy(be, a, (size_t)a_rows * lda * sizeof(float));
					float *bd = dev_copy(be, b, (size_t)b_rows * ldb * sizeof(float));
					float *cd = dev_copy(be, c, (size_t)m * ldc * sizeof(float));
					float *bias_d = bias ? dev_copy(be, bias, (size_t)n * sizeof(float)) : NULL;
					float *act_d = act ? dev_copy(be, act, (size_t)m * ldc * sizeof(float)) : NULL;
					float *bg_d = bg ? dev_copy(be, bg, ((size_t)m + 1) * sizeof(float)) : NULL;
					struct gemm_req req = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
							       .alpha = alpha, .a = ad, .lda = lda, .b = bd, .ldb = ldb,
							       .beta = beta, .c = cd, .ldc = ldc, .epilogue = ex.epilogue,
							       .bias = bias_d, .act = act_d, .bias_grad = bg_d};
					run(be, &req, cd);
					dev_read(be, c, cd, (size_t)m * ldc * sizeof(float));

					char what[192];
					snprintf(what, sizeof(what),
						 "%s gemm %s trans_a=%d trans_b=%d m=%d n=%d k=%d alpha=%g beta=%g lda=%d ldb=%d ldc=%d",
						 who, epilogue_name(ex), ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
					struct ref_cmp cmp = ref_compare_f(what, c, want, (size_t)m * ldc,
									   1e-6 * (k + 1) * (fabsf(alpha) + 1.0f), 1e-5, seed);
					cr_assert_eq(cmp.bad, 0, "%s: %zu mismatches, largest error %g (seed %llu)", what,
						     cmp.bad, cmp.max_err, (unsigned long long)seed);
					if (bg) {
						dev_read(be, bg, bg_d, ((size_t)m + 1) * sizeof(float));
						strncat(what, ": bias_grad", sizeof(what) - strlen(what) - 1);
						cmp = ref_compare_f(what, bg, want_bg, (size_t)m + 1, 1e-6 * (k + 1), 1e-5,
								    seed);
						cr_assert_eq(cmp.bad, 0, "%s: %zu mismatches, largest error %g (seed %llu)",
							     what, cmp.bad, cmp.max_err, (unsigned long long)seed);
					}
					backend_free(be, ad);
					backend_free(be, bd);
					backend_free(be, cd);
					backend_free(be, bias_d);
					backend_free(be, act_d);
					backend_free(be, bg_d);
					free(a);
					free(b);
					free(c);
					free(want);
					free(bias);
					free(act);
					free(bg);
					free(want_bg);
				}
}

static void run_backend_gemm(const struct backend *be, const struct gemm_req *r, float *c_dev)
{
	backend_gemm(be, r);
}

/* The mapped struct handed to column-major BLAS, as the CUDA backend hands it to cuBLAS. */
static void run_mapped_cblas(const struct backend *be, const struct gemm_req *r, float *c_dev)
{
	struct gemm_colmajor c = gemm_map(r);
	cblas_sgemm(CblasColMajor, c.trans_a ? CblasTrans : CblasNoTrans,
		    c.trans_b ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, c.alpha, c.a, c.lda, c.b,
		    c.ldb, c.beta, c.c, c.ldc);
}

/* check_gemm on a fresh host backend (its memory is where the operands live). */
static void check_gemm_on_host(gemm_runner run, const char *who, struct gemm_extra ex,
			       uint64_t seed)
{
	struct backend be = make_backend();
	check_gemm(&be, run, who, ex, seed);
	backend_destroy(&be);
}

Test(ops, gemm_all_transposes_strided)
{
	check_gemm_on_host(run_backend_gemm, "backend", gemm_plain, ref_seed(101));
}

/* A dense layer's forward pass: the bias, and the ReLU, on the product (and on beta C). */
Test(ops, gemm_epilogue_bias_with_and_without_relu)
{
	uint64_t seed = ref_seed(104);
	check_gemm_on_host(run_backend_gemm, "backend", (struct gemm_extra){GEMM_EPILOGUE_BIAS, 0},
			   seed);
	check_gemm_on_host(run_backend_gemm, "backend",
			   (struct gemm_extra){GEMM_EPILOGUE_BIAS_RELU, 0}, seed);
}

/*
 * An input gradient through the ReLU below: the product where that ReLU's
 * output act (at ldc) is positive, 0 elsewhere. The host backend keeps no
 * record of the ReLU (relu_mask_bytes 0): act alone decides, relu_mask NULL.
 */
Test(ops, gemm_epilogue_drelu)
{
	uint64_t seed = ref_seed(105);
	struct backend be = make_backend();
	cr_assert_eq(backend_relu_mask_bytes(&be, 64, 120), 0,
		     "the host backend asks for a ReLU record of %zu bytes",
		     backend_relu_mask_bytes(&be, 64, 120));
	backend_destroy(&be);
	check_gemm_on_host(run_backend_gemm, "backend", (struct gemm_extra){GEMM_EPILOGUE_DRELU, 0},
			   seed);
}

/* A weight gradient's GEMM with the bias gradient: sums of op(A)'s rows, A stored either way. */
Test(ops, gemm_bias_grad_both_transposes)
{
	check_gemm_on_host(run_backend_gemm, "backend", (struct gemm_extra){GEMM_EPILOGUE_NONE, 1},
			   ref_seed(111));
}

Test(gemm_map, fields_for_each_transpose)
{
	float a[1], b[1], c[1];
	for (int t = 0; t < 4; t++) {
		struct gemm_req r = {.trans_a = t & 1, .trans_b = t >> 1, .m = 3, .n = 5, .k = 7,
				     .alpha = 0.5f, .a = a, .lda = 11, .b = b, .ldb = 13,
				     .beta = 0.25f, .c = c, .ldc = 17};
		struct gemm_colmajor g = gemm_map(&r);
		/* C^T (n, m) = op(B)^T (n, k) * op(A)^T (k, m): operands and m/n swap, flags travel with them. */
		cr_assert(g.a == (const float *)b && g.b == (const float *)a, "t=%d: operands not swapped", t);
		cr_assert_eq(g.lda, 13, "t=%d: first operand's ld %d, want B's 13", t, g.lda);
		cr_assert_eq(g.ldb, 11, "t=%d: second operand's ld %d, want A's 11", t, g.ldb);
		cr_assert_eq(g.trans_a, r.trans_b, "t=%d: first operand's flag %d, want B's %d", t, g.trans_a, r.trans_b);
		cr_assert_eq(g.trans_b, r.trans_a, "t=%d: second operand's flag %d, want A's %d", t, g.trans_b, r.trans_a);
		cr_assert_eq(g.m, 5, "t=%d: m %d, want n=5", t, g.m);
		cr_assert_eq(g.n, 3, "t=%d: n %d, want m=3", t, g.n);
		cr_assert_eq(g.k, 7, "t=%d: k %d", t, g.k);
		cr_assert(g.alpha == 0.5f && g.beta == 0.25f, "t=%d: alpha/beta changed", t);
		cr_assert(g.c == c && g.ldc == 17, "t=%d: C or ldc changed", t);
	}
}

Test(gemm_map, mapped_call_through_cblas_equals_row_major_product)
{
	check_gemm_on_host(run_mapped_cblas, "cblas(gemm_map)", gemm_plain, ref_seed(102));
}

/* ---- the host backend's own small GEMM ------------------------------------ */

/* gemm_small itself, on every case and transpose, whether or not the backend would route it there. */
static void run_gemm_small(const struct backend *be, const struct gemm_req *r, float *c_dev)
{
	gemm_small(r);
}

Test(gemm_small, every_shape_and_transpose)
{
	check_gemm_on_host(run_gemm_small, "gemm_small", gemm_plain, ref_seed(103));
}

Test(gemm_small, takes_the_skinny_model_shapes_and_leaves_the_large_ones)
{
	const struct {
		int ta, tb, m, n, k, want;
	} cases[] = {
		{0, 1, 32, 10, 784, 1},  /* seed forward, batch 32 */
		{1, 0, 10, 784, 32, 1},  /* seed weight gradient */
		{0, 0, 1, 10, 32, 1},    /* bias gradient */
		{0, 1, 500, 10, 784, 1}, /* scoring 500 rows */
		{0, 0, 32, 256, 10, 1},  /* mlp input gradient of the output layer */
		{0, 1, 32, 512, 784, 0}, /* mlp first layer forward */
		{1, 0, 512, 784, 32, 0}, /* its weight gradient */
		{0, 0, 128, 512, 256, 0},
		{1, 1, 2, 2, 2, 0},      /* both transposed: never asked for, left to BLAS */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gemm_req r = {.trans_a = cases[i].ta, .trans_b = cases[i].tb, .m = cases[i].m,
				     .n = cases[i].n, .k = cases[i].k};
		cr_expect_eq(gemm_small_wanted(&r), cases[i].want,
			     "gemm_small_wanted(trans %d%d, %d x %d x %d) = %d, want %d", r.trans_a,
			     r.trans_b, r.m, r.n, r.k, gemm_small_wanted(&r), cases[i].want);
	}
}

/* ---- gather and advance ---------------------------------------------------- */

/* A data set on the backend: n_img images of `pixels` bytes, labels, an index of len entries. */
struct gather_set {
	int pixels, n_img, len;
	uint8_t *images, *labels;
	int32_t *index;
	uint8_t *images_d, *labels_d;
	int32_t *index_d;
};

static void gather_set_make(const struct backend *be, struct gather_set *d, int pixels, int n_img,
			    int len, int start, struct rng *r)
{
	d->pixels = pixels;
	d->n_img = n_img;
	d->len = len;
	d->images = xcalloc_t((size_t)n_img * pixels, 1);
	d->labels = xcalloc_t((size_t)n_img, 1);
	d->index = xcalloc_t((size_t)len, sizeof(int32_t));
	ref_fill_bytes(r, d->images, (size_t)n_img * pixels);
	for (int p = 0; p < pixels; p++) /* every byte value appears in image 0 */
		d->images[p] = (uint8_t)(p % 256);
	for (int i = 0; i < n_img; i++)
		d->labels[i] = (uint8_t)rng_below(r, 10);
	for (int i = 0; i < len; i++)
		d->index[i] = (int32_t)rng_below(r, (uint64_t)n_img);
	if (start < len)
		d->index[start] = 0;
	d->images_d = dev_copy(be, d->images, (size_t)n_img * pixels);
	d->labels_d = dev_copy(be, d->labels, (size_t)n_img);
	d->index_d = dev_copy(be, d->index, (size_t)len * sizeof(int32_t));
}

static void gather_set_free(const struct backend *be, struct gather_set *d)
{
	backend_free(be, d->images_d);
	backend_free(be, d->labels_d);
	backend_free(be, d->index_d);
	free(d->images);
	free(d->labels);
	free(d->index);
}

static struct gather_req gather_of(const struct gather_set *d, const int32_t *cursor_d, int count,
				   int batch_last, float *x_d, int32_t *y_d)
{
	struct gather_req g = {.images = d->images_d, .labels = d->labels_d, .pixels = d->pixels,
			       .index = d->index_d, .len = d->len, .cursor = cursor_d,
			       .count = count, .batch_last = batch_last, .x = x_d, .y = y_d};
	return g;
}

/*
 * What a gather at cursor `at` writes, from the definition (backend.h): rows
 * = min(count, len - at), none when negative; x (rows, pixels), or
 * (pixels, rows) when batch_last; the rest of x (count + 1 rows) and y
 * (count + 1) keep their sentinels. Returns rows.
 */
static int gather_want(const struct gather_set *d, int at, int count, int batch_last,
		       double *want_x, int32_t *want_y)
{
	int rows = d->len - at < 0 ? 0 : d->len - at < count ? d->len - at : count;
	size_t xn = (size_t)(count + 1) * d->pixels;
	for (size_t i = 0; i < xn; i++)
		want_x[i] = C_SENTINEL;
	for (int i = 0; i <= count; i++)
		want_y[i] = -7;
	for (int i = 0; i < rows; i++) {
		int e = d->index[at + i];
		for (int p = 0; p < d->pixels; p++)
			want_x[batch_last ? (size_t)p * rows + i : (size_t)i * d->pixels + p] =
				ref_normalize_pixel(d->images[(size_t)e * d->pixels + p]);
		want_y[i] = d->labels[e];
	}
	return rows;
}

/*
 * Batches of count from `start` until one past the end of the index: the
 * last full ones, one clipped to what is left, then one that gathers nothing
 * (cursor at or beyond len). x and y hold sentinels before each gather: the
 * op must write exactly the rows it gathers. The cursor is read, not moved;
 * advance moves it.
 */
static void check_gather(const struct backend *be, int pixels, int n_img, int len, int start,
			 int count, int batch_last, uint64_t seed)
{
	struct rng r = rng_make(seed, 2);
	struct gather_set d;
	gather_set_make(be, &d, pixels, n_img, len, start, &r);
	int32_t cursor = start;
	int32_t *cursor_d = dev_copy(be, &cursor, sizeof(cursor));
	size_t xn = (size_t)(count + 1) * pixels;
	float *x = xcalloc_t(xn, sizeof(float)), *sent_x = xcalloc_t(xn, sizeof(float));
	int32_t *y = xcalloc_t((size_t)count + 1, sizeof(int32_t));
	int32_t *sent_y = xcalloc_t((size_t)count + 1, sizeof(int32_t));
	for (size_t i = 0; i < xn; i++)
		sent_x[i] = C_SENTINEL;
	for (int i = 0; i <= count; i++)
		sent_y[i] = -7;
	float *x_d = dev_copy(be, sent_x, xn * sizeof(float));
	int32_t *y_d = dev_copy(be, sent_y, ((size_t)count + 1) * sizeof(int32_t));
	double *want_x = xcalloc_t(xn, sizeof(double));
	int32_t *want_y = xcalloc_t((size_t)count + 1, sizeof(int32_t));

	int at = start, rows, clipped = 0;
	do {
		backend_upload(be, x_d, sent_x, xn * sizeof(float));
		backend_upload(be, y_d, sent_y, ((size_t)count + 1) * sizeof(int32_t));
		struct gather_req g = gather_of(&d, cursor_d, count, batch_last, x_d, y_d);
		backend_gather(be, &g);
		dev_read(be, x, x_d, xn * sizeof(float));
		dev_read(be, y, y_d, ((size_t)count + 1) * sizeof(int32_t));
		rows = gather_want(&d, at, count, batch_last, want_x, want_y);
		clipped += rows > 0 && rows < count;
		char what[160];
		snprintf(what, sizeof(what), "gather pixels=%d count=%d cursor=%d len=%d batch_last=%d (%d rows)",
			 pixels, count, at, len, batch_last, rows);
		struct ref_cmp cx = ref_compare_f(what, x, want_x, xn, 1e-6, 1e-6, seed);
		struct ref_cmp cy = ref_compare_i32(what, y, want_y, (size_t)count + 1, seed);
		cr_assert(cx.bad == 0 && cy.bad == 0, "%s: %zu pixel and %zu label mismatches (seed %llu)",
			  what, cx.bad, cy.bad, (unsigned long long)seed);
		dev_read(be, &cursor, cursor_d, sizeof(cursor));
		cr_assert_eq(cursor, at, "%s: the gather moved the cursor to %d", what, cursor);

		backend_advance(be, cursor_d, count);
		dev_read(be, &cursor, cursor_d, sizeof(cursor));
		cr_assert_eq(cursor, at + count, "advance(%d) from %d gave %d", count, at, cursor);
		at += count;
	} while (rows > 0);
	cr_assert(start >= len || (len - start) % count == 0 || clipped == 1,
		  "gather len=%d start=%d count=%d: no batch was clipped", len, start, count);
	backend_advance(be, cursor_d, -at);
	dev_read(be, &cursor, cursor_d, sizeof(cursor));
	cr_assert_eq(cursor, 0, "advance by a negative delta back to 0 gave %d", cursor);

	gather_set_free(be, &d);
	backend_free(be, cursor_d);
	backend_free(be, x_d);
	backend_free(be, y_d);
	free(x);
	free(y);
	free(sent_x);
	free(sent_y);
	free(want_x);
	free(want_y);
}

Test(ops, gather_normalise_through_cursor_and_advance)
{
	uint64_t seed = ref_seed(103);
	struct backend be = make_backend();
	for (int batch_last = 0; batch_last <= 1; batch_last++) {
		check_gather(&be, 784, 50, 40, 7, 5, batch_last, seed);  /* clipped to 3, then past the end */
		check_gather(&be, 784, 3, 4, 1, 1, batch_last, seed);    /* ends exactly at len */
		check_gather(&be, 13, 9, 30, 11, 8, batch_last, seed);
		check_gather(&be, 1, 20, 10, 3, 3, batch_last, seed);
		check_gather(&be, 784, 60, 70, 0, 33, batch_last, seed); /* batches across vector blocks */
		check_gather(&be, 784, 5, 6, 9, 4, batch_last, seed);    /* a cursor past the end: nothing */
	}
	backend_destroy(&be);
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

/*
 * softmax_xent on given logits: row losses and gradients against the
 * reference; with relu, the logits are a ReLU's output and the gradient is
 * taken through it (0 where a logit is not positive). Without dlogits the
 * losses are the same; without counters nothing else is written.
 */
static void check_softmax(const struct backend *be, const float *logits, const int32_t *labels,
			  int rows, int cols, float scale, int relu, const char *tag, uint64_t seed)
{
	size_t n = (size_t)rows * cols;
	float *l_d = dev_copy(be, logits, n * sizeof(float));
	int32_t *y_d = dev_copy(be, labels, (size_t)rows * sizeof(int32_t));
	float *loss_d = backend_alloc(be, (size_t)rows * sizeof(float));
	float *loss2_d = backend_alloc(be, (size_t)rows * sizeof(float));
	float *g_d = backend_alloc(be, n * sizeof(float));
	cr_assert(loss_d && loss2_d && g_d);
	struct xent_req x = {.logits = l_d, .labels = y_d, .rows = rows, .cols = cols,
			     .scale = scale, .row_loss = loss_d, .dlogits = g_d, .relu = relu};
	backend_softmax_xent(be, &x);
	x.row_loss = loss2_d;
	x.dlogits = NULL;
	backend_softmax_xent(be, &x);

	float *loss = xcalloc_t((size_t)rows, sizeof(float));
	float *loss2 = xcalloc_t((size_t)rows, sizeof(float));
	float *g = xcalloc_t(n, sizeof(float));
	dev_read(be, loss, loss_d, (size_t)rows * sizeof(float));
	dev_read(be, loss2, loss2_d, (size_t)rows * sizeof(float));
	dev_read(be, g, g_d, n * sizeof(float));

	double *want_loss = xcalloc_t((size_t)rows, sizeof(double));
	double *want_g = xcalloc_t(n, sizeof(double));
	for (int i = 0; i < rows; i++)
		want_loss[i] = ref_softmax_xent_row(logits + (size_t)i * cols, labels[i], cols, scale,
						    want_g + (size_t)i * cols);
	if (relu)
		ref_relu_backward(want_g, logits, n);
	char what[128];
	snprintf(what, sizeof(what), "softmax_xent %s rows=%d cols=%d scale=%g relu=%d loss", tag, rows,
		 cols, scale, relu);
	struct ref_cmp cl = ref_compare_f(what, loss, want_loss, (size_t)rows, 1e-5, 1e-5, seed);
	cr_assert_eq(cl.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, cl.bad, cl.max_err,
		     (unsigned long long)seed);
	snprintf(what, sizeof(what), "softmax_xent %s rows=%d cols=%d scale=%g relu=%d dlogits", tag,
		 rows, cols, scale, relu);
	struct ref_cmp cg = ref_compare_f(what, g, want_g, n, 1e-6, 1e-5, seed);
	cr_assert_eq(cg.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, cg.bad, cg.max_err,
		     (unsigned long long)seed);
	for (int i = 0; i < rows; i++) {
		cr_assert(isfinite(loss[i]) && loss[i] >= 0.0f, "%s: row %d loss %g", tag, i, loss[i]);
		cr_assert(loss2[i] == loss[i], "%s: row %d loss %g without dlogits, %g with", tag, i,
			  loss2[i], loss[i]);
	}
	if (relu) /* the gate is exact: a logit that is not positive passes nothing */
		for (size_t i = 0; i < n; i++)
			cr_assert(logits[i] > 0.0f || g[i] == 0.0f, "%s: dlogits[%zu] = %g at logit %g",
				  tag, i, g[i], logits[i]);
	backend_free(be, l_d);
	backend_free(be, y_d);
	backend_free(be, loss_d);
	backend_free(be, loss2_d);
	backend_free(be, g_d);
	free(loss);
	free(loss2);
	free(g);
	free(want_loss);
	free(want_g);
}

Test(ops, softmax_xent_random)
{
	uint64_t seed = ref_seed(106);
	struct rng r = rng_make(seed, 5);
	struct backend be = make_backend();
	const struct {
		int rows, cols;
		float scale;
	} cases[] = {{1, 10, 1.0f}, {5, 10, 0.2f}, {32, 10, 1.0f / 32}, {7, 3, 0.37f}, {4, 1, 1.0f},
		     {3, 17, -0.5f}, {2, 2, 3.0f}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int rows = cases[c].rows, cols = cases[c].cols;
		float *logits = xcalloc_t((size_t)rows * cols, sizeof(float));
		int32_t *labels = xcalloc_t((size_t)rows, sizeof(int32_t));
		ref_fill_normal(&r, logits, (size_t)rows * cols, 0.5, 3.0);
		ref_fill_labels(&r, labels, (size_t)rows, cols);
		check_softmax(&be, logits, labels, rows, cols, cases[c].scale, 0, "random", seed);
		free(logits);
		free(labels);
	}
	backend_destroy(&be);
}

/* The seed model's logits are a ReLU's output: the loss gradient goes back through it. */
Test(ops, softmax_xent_through_relu_gate)
{
	uint64_t seed = ref_seed(112);
	struct rng r = rng_make(seed, 10);
	struct backend be = make_backend();
	const int shapes[][2] = {{1, 10}, {5, 10}, {32, 10}, {7, 3}, {3, 17}};
	for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
		int rows = shapes[c][0], cols = shapes[c][1];
		size_t n = (size_t)rows * cols;
		float *logits = xcalloc_t(n, sizeof(float));
		int32_t *labels = xcalloc_t((size_t)rows, sizeof(int32_t));
		ref_fill_normal(&r, logits, n, 0.3, 2.0);
		for (size_t i = 0; i < n; i++) /* ReLU outputs: exact zeros, a few -0.0 */
			logits[i] = logits[i] > 0.0f ? logits[i] : i % 5 == 0 ? -0.0f : 0.0f;
		logits[0] = 0.0f; /* row 0 has a zero logit */
		ref_fill_labels(&r, labels, (size_t)rows, cols);
		check_softmax(&be, logits, labels, rows, cols, 1.0f / (float)rows, 1, "relu", seed);
		free(logits);
		free(labels);
	}
	backend_destroy(&be);
}

Test(ops, softmax_xent_large_logits_stable)
{
	uint64_t seed = ref_seed(107);
	struct backend be = make_backend();
	enum { ROWS = 6, COLS = 10 };
	/* Without subtracting the row max, expf overflows (> 88.7) or everything underflows. */
	const float logits[ROWS][COLS] = {
		{1000.0f, 999.0f, -1000.0f, 88.8f, 0.0f, 500.0f, 1000.0f, -3.0f, 7.0f, 998.5f},
		{-1000.0f, -1001.0f, -999.5f, -1002.0f, -1000.0f, -1005.0f, -1010.0f, -999.9f, -1003.0f, -1000.1f},
		{89.0f, 89.0f, 89.0f, 89.0f, 89.0f, 89.0f, 89.0f, 89.0f, 89.0f, 89.0f},
		{30000.0f, -30000.0f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 29999.0f},
		{100.0f, 90.0f, 80.0f, 70.0f, 60.0f, 50.0f, 40.0f, 30.0f, 20.0f, 10.0f},
		{-88.0f, 88.0f, -88.0f, 88.0f, -88.0f, 88.0f, -88.0f, 88.0f, -88.0f, 88.1f},
	};
	const int32_t labels[ROWS] = {2, 7, 4, 0, 9, 9};
	check_softmax(&be, &logits[0][0], labels, ROWS, COLS, 1.0f / ROWS, 0, "large", seed);
	const int32_t labels2[ROWS] = {0, 2, 0, 1, 0, 1};
	check_softmax(&be, &logits[0][0], labels2, ROWS, COLS, 1.0f, 0, "large/other labels", seed);
	backend_destroy(&be);
}

/*
 * The loss op of a step moves the step counters on once, by its rows
 * (backend.h): cursor += rows, step += 1, updates += 1, spare untouched;
 * with or without dlogits. Without counters it moves nothing.
 */
Test(ops, softmax_xent_moves_the_counters_on_once)
{
	uint64_t seed = ref_seed(114);
	struct rng r = rng_make(seed, 11);
	struct backend be = make_backend();
	enum { ROWS = 7, COLS = 10 };
	float logits[ROWS * COLS];
	int32_t labels[ROWS];
	ref_fill_normal(&r, logits, ROWS * COLS, 0.0, 2.0);
	ref_fill_labels(&r, labels, ROWS, COLS);
	float *l_d = dev_copy(&be, logits, sizeof(logits));
	int32_t *y_d = dev_copy(&be, labels, sizeof(labels));
	float *loss_d = backend_alloc(&be, ROWS * sizeof(float));
	float *g_d = backend_alloc(&be, sizeof(logits));
	const struct step_counters start = {.cursor = 96, .step = 4, .updates = 1877, .spare = 31};
	struct step_counters *c_d = dev_copy(&be, &start, sizeof(start)), c;
	cr_assert(loss_d && g_d);
	for (int rows = ROWS; rows >= 3; rows -= 4) { /* a full batch, then a short one */
		backend_upload(&be, c_d, &start, sizeof(start));
		struct xent_req x = {.logits = l_d, .labels = y_d, .rows = rows, .cols = COLS,
				     .scale = 1.0f / (float)rows, .row_loss = loss_d, .dlogits = g_d,
				     .counters = c_d};
		backend_softmax_xent(&be, &x);
		dev_read(&be, &c, c_d, sizeof(c));
		cr_assert(c.cursor == start.cursor + rows && c.step == start.step + 1 &&
				  c.updates == start.updates + 1 && c.spare == start.spare,
			  "%d rows: counters {96, 4, 1877, 31} became {%d, %d, %d, %d}, want {%d, 5, 1878, 31}",
			  rows, c.cursor, c.step, c.updates, c.spare, 96 + rows);
		x.dlogits = NULL; /* scoring-like call, still a step's loss op */
		backend_softmax_xent(&be, &x);
		dev_read(&be, &c, c_d, sizeof(c));
		cr_assert(c.cursor == start.cursor + 2 * rows && c.step == start.step + 2 &&
				  c.updates == start.updates + 2 && c.spare == start.spare,
			  "%d rows, a second call without dlogits: {%d, %d, %d, %d}", rows, c.cursor, c.step,
			  c.updates, c.spare);
		x.counters = NULL;
		backend_softmax_xent(&be, &x);
		dev_read(&be, &c, c_d, sizeof(c));
		cr_assert(c.cursor == start.cursor + 2 * rows && c.step == start.step + 2 &&
				  c.updates == start.updates + 2,
			  "%d rows: a call without counters moved them to {%d, %d, %d}", rows, c.cursor,
			  c.step, c.updates);
	}
	backend_free(&be, l_d);
	backend_free(&be, y_d);
	backend_free(&be, loss_d);
	backend_free(&be, g_d);
	backend_free(&be, c_d);
	backend_destroy(&be);
}

Test(ops, argmax_hits_accumulate_first_max_wins)
{
	uint64_t seed = ref_seed(108);
	struct rng r = rng_make(seed, 6);
	struct backend be = make_backend();
	const int col_cases[] = {10, 3, 1, 7};
	for (size_t cc = 0; cc < sizeof(col_cases) / sizeof(col_cases[0]); cc++) {
		int rows = 41, cols = col_cases[cc];
		size_t n = (size_t)rows * cols;
		float *logits = xcalloc_t(n, sizeof(float));
		int32_t *labels = xcalloc_t((size_t)rows, sizeof(int32_t));
		int32_t *hits = xcalloc_t((size_t)rows, sizeof(int32_t));
		int32_t *want = xcalloc_t((size_t)rows, sizeof(int32_t));
		/* Few distinct values: many rows have several maxima. */
		for (size_t i = 0; i < n; i++)
			logits[i] = (float)rng_below(&r, 3) - 1.0f;
		for (int i = 0; i < rows; i++) {
			const float *row = logits + (size_t)i * cols;
			int first = ref_argmax_row(row, cols);
			int other_max = -1;
			for (int j = first + 1; j < cols; j++)
				if (row[j] == row[first])
					other_max = j;
			/* Thirds: the first max, a later tied max (not a hit), anything. */
			labels[i] = i % 3 == 0 ? first :
				    i % 3 == 1 && other_max >= 0 ? other_max :
				    (int32_t)rng_below(&r, (uint64_t)cols);
			hits[i] = (int32_t)rng_below(&r, 5);
		}
		float *l_d = dev_copy(&be, logits, n * sizeof(float));
		int32_t *y_d = dev_copy(&be, labels, (size_t)rows * sizeof(int32_t));
		int32_t *h_d = dev_copy(&be, hits, (size_t)rows * sizeof(int32_t));
		memcpy(want, hits, (size_t)rows * sizeof(int32_t));
		for (int round = 0; round < 2; round++) {
			backend_argmax_hits(&be, l_d, y_d, rows, cols, h_d);
			for (int i = 0; i < rows; i++)
				want[i] += ref_argmax_row(logits + (size_t)i * cols, cols) == labels[i];
			dev_read(&be, hits, h_d, (size_t)rows * sizeof(int32_t));
			char what[64];
			snprintf(what, sizeof(what), "argmax_hits cols=%d call %d", cols, round + 1);
			struct ref_cmp c = ref_compare_i32(what, hits, want, (size_t)rows, seed);
			cr_assert_eq(c.bad, 0, "%s: %zu rows differ (seed %llu)", what, c.bad,
				     (unsigned long long)seed);
		}
		backend_free(&be, l_d);
		backend_free(&be, y_d);
		backend_free(&be, h_d);
		free(logits);
		free(labels);
		free(hits);
		free(want);
	}

	/* A hand-made tie: the first of two maxima is the prediction. */
	const float tie[2][4] = {{1.0f, 5.0f, 5.0f, 0.0f}, {1.0f, 5.0f, 5.0f, 0.0f}};
	const int32_t tie_labels[2] = {1, 2};
	int32_t tie_hits[2] = {0, 0};
	float *l_d = dev_copy(&be, tie, sizeof(tie));
	int32_t *y_d = dev_copy(&be, tie_labels, sizeof(tie_labels));
	int32_t *h_d = dev_copy(&be, tie_hits, sizeof(tie_hits));
	backend_argmax_hits(&be, l_d, y_d, 2, 4, h_d);
	dev_read(&be, tie_hits, h_d, sizeof(tie_hits));
	cr_assert(tie_hits[0] == 1 && tie_hits[1] == 0,
		  "tie [1,5,5,0]: label 1 scored %d (want 1), label 2 scored %d (want 0)", tie_hits[0],
		  tie_hits[1]);
	backend_free(&be, l_d);
	backend_free(&be, y_d);
	backend_free(&be, h_d);
	backend_destroy(&be);
}

/* The counters a step's update runs with: the loss op has counted the step (backend.h). */
static struct step_counters *counters_at(const struct backend *be, struct step_counters *c_d,
					 int32_t step, int32_t updates)
{
	const struct step_counters c = {.cursor = 3 * step + 1, .step = step, .updates = updates,
					.spare = -5};
	backend_upload(be, c_d, &c, sizeof(c));
	return c_d;
}

/* The optimizer ops read the counters; they never move them. */
static void expect_counters(const struct backend *be, const struct step_counters *c_d,
			    int32_t step, int32_t updates, const char *what)
{
	struct step_counters c;
	dev_read(be, &c, c_d, sizeof(c));
	cr_assert(c.cursor == 3 * step + 1 && c.step == step && c.updates == updates && c.spare == -5,
		  "%s: the counters {%d, %d, %d, -5} became {%d, %d, %d, %d}", what, 3 * step + 1, step,
		  updates, c.cursor, c.step, c.updates, c.spare);
}

/*
 * AdamW against PyTorch's formula in double: 6 updates, so bias correction is
 * checked at update 1 (where it is largest) and after; with and without
 * weight decay, betas of PyTorch's defaults and others. The rate is the
 * table's entry for the counters' step (lr[step - 1]) and t is the counters'
 * update count, which runs on across epochs while the step starts again: the
 * settings start it at 0, 3 and 40 updates before the epoch's first step.
 */
Test(ops, adamw_update_matches_pytorch_formula)
{
	uint64_t seed = ref_seed(113);
	struct rng r = rng_make(seed, 9);
	struct backend be = make_backend();
	const size_t sizes[] = {1, 37, 1001};
	/* lr, beta1, beta2, eps, weight decay, updates before the first step */
	const float settings[][6] = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.0f},
				     {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3.0f},
				     {0.05f, 0.5f, 0.9f, 1e-3f, 0.1f, 40.0f}};
	enum { STEPS = 6 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t k = 0; k < sizeof(settings) / sizeof(settings[0]); k++) {
			size_t n = sizes[s];
			int32_t before = (int32_t)settings[k][5];
			struct adamw_hyper h = {.beta1 = settings[k][1], .beta2 = settings[k][2],
						.eps = settings[k][3], .weight_decay = settings[k][4]};
			float *p = xcalloc_t(n, sizeof(float)), *g = xcalloc_t(n, sizeof(float));
			float *mv = xcalloc_t(2 * n, sizeof(float));
			double *want_p = xcalloc_t(n, sizeof(double));
			double *want_m = xcalloc_t(n, sizeof(double)), *want_v = xcalloc_t(n, sizeof(double));
			ref_fill_normal(&r, p, n, 0.0, 1.0);
			ref_widen(p, want_p, n);
			float *p_d = dev_copy(&be, p, n * sizeof(float));
			float *mv_d = dev_copy(&be, mv, 2 * n * sizeof(float));
			float *g_d = backend_alloc(&be, n * sizeof(float));
			struct step_counters *c_d = backend_alloc(&be, sizeof(struct step_counters));
			cr_assert(g_d && c_d);
			float rates[STEPS];
			for (int step = 0; step < STEPS; step++)
				rates[step] = settings[k][0] * (1.0f - 0.1f * (float)step);
			float *lr_d = dev_copy(&be, rates, sizeof(rates));
			char what[160];
			for (int step = 1; step <= STEPS; step++) {
				ref_fill_normal(&r, g, n, 0.0, 1.0);
				backend_upload(&be, g_d, g, n * sizeof(float));
				counters_at(&be, c_d, step, before + step);
				backend_adamw_update(&be, p_d, g_d, mv_d, mv_d + n, n, lr_d, c_d, h, NULL);
				ref_adamw_update(want_p, g, want_m, want_v, n, rates[step - 1], before + step,
						 h.beta1, h.beta2, h.eps, h.weight_decay);
				snprintf(what, sizeof(what), "adamw n=%zu setting %zu, step %d (update %d): p", n,
					 k, step, before + step);
				expect_counters(&be, c_d, step, before + step, what);
				/* Every update checked: the first one has the largest bias correction. */
				dev_read(&be, p, p_d, n * sizeof(float));
				struct ref_cmp cp = ref_compare_f(what, p, want_p, n, 1e-6, 1e-5, seed);
				cr_assert_eq(cp.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what,
					     cp.bad, cp.max_err, (unsigned long long)seed);
			}
			dev_read(&be, mv, mv_d, 2 * n * sizeof(float));
			snprintf(what, sizeof(what), "adamw n=%zu setting %zu: exp_avg", n, k);
			struct ref_cmp cm = ref_compare_f(what, mv, want_m, n, 1e-6, 1e-5, seed);
			cr_assert_eq(cm.bad, 0, "%s: largest %g (seed %llu)", what, cm.max_err,
				     (unsigned long long)seed);
			snprintf(what, sizeof(what), "adamw n=%zu setting %zu: exp_avg_sq", n, k);
			struct ref_cmp cv = ref_compare_f(what, mv + n, want_v, n, 1e-6, 1e-5, seed);
			cr_assert_eq(cv.bad, 0, "%s: largest %g (seed %llu)", what, cv.max_err,
				     (unsigned long long)seed);
			backend_free(&be, lr_d);
			backend_free(&be, c_d);
			backend_free(&be, p_d);
			backend_free(&be, mv_d);
			backend_free(&be, g_d);
			free(p);
			free(g);
			free(mv);
			free(want_p);
			free(want_m);
			free(want_v);
		}
	backend_destroy(&be);
}

/*
 * Gradient clipping by the global norm against torch.nn.utils.clip_grad_norm_
 * in double: the norm written to backend memory, and the gradients scaled
 * where the bound is below the norm, untouched (bitwise) where it is not;
 * sizes across the partial sums' row (CLIP_PARTS) and several rows of it.
 */
Test(ops, clip_grad_norm_against_double)
{
	uint64_t seed = ref_seed(113);
	struct rng r = rng_make(seed, 11);
	struct backend be = make_backend();
	const size_t sizes[] = {1, 37, CLIP_PARTS - 1, CLIP_PARTS, CLIP_PARTS + 1, 7850, 101770};
	/* The bound as a fraction of the norm: clipped hard, just, and not at all. */
	const double fractions[] = {0.01, 0.9, 1.5, 1e6};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t f = 0; f < sizeof(fractions) / sizeof(fractions[0]); f++) {
			size_t n = sizes[s];
			float *g = xcalloc_t(n, sizeof(float)), *got = xcalloc_t(n, sizeof(float));
			double *want = xcalloc_t(n, sizeof(double));
			ref_fill_normal(&r, g, n, 0.0, f % 2 ? 3.0 : 1e-3);
			double norm = ref_clip_grad_norm(g, want, n, 0.0);
			float max_norm = (float)(fractions[f] * norm);
			double want_norm = ref_clip_grad_norm(g, want, n, max_norm);
			float *g_d = dev_copy(&be, g, n * sizeof(float));
			float *norm_d = backend_alloc(&be, sizeof(float));
			cr_assert_not_null(norm_d);
			backend_clip_grad_norm(&be, g_d, n, max_norm, norm_d);
			float got_norm = 0.0f;
			dev_read(&be, &got_norm, norm_d, sizeof(float));
			dev_read(&be, got, g_d, n * sizeof(float));
			char what[128];
			snprintf(what, sizeof(what), "clip_grad_norm n=%zu max_norm=%g (norm x %g)", n,
				 (double)max_norm, fractions[f]);
			cr_expect(fabs((double)got_norm - want_norm) <= 1e-6 * want_norm,
				  "%s: norm %.9g, double %.9g (seed %llu)", what, (double)got_norm, want_norm,
				  (unsigned long long)seed);
			struct ref_cmp c = ref_compare_f(what, got, want, n, 1e-12, 2e-6, seed);
			cr_expect_eq(c.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, c.bad,
				     c.max_err, (unsigned long long)seed);
			if (fractions[f] > 1.0)
				cr_expect(!memcmp(got, g, n * sizeof(float)), "%s: not clipped, yet changed", what);
			else
				cr_expect(memcmp(got, g, n * sizeof(float)), "%s: clipped, yet unchanged", what);
			backend_free(&be, g_d);
			backend_free(&be, norm_d);
			free(g);
			free(got);
			free(want);
		}
	backend_destroy(&be);
}

Test(ops, sgd_update_with_and_without_momentum_and_weight_decay)
{
	uint64_t seed = ref_seed(109);
	struct rng r = rng_make(seed, 7);
	struct backend be = make_backend();
	const size_t sizes[] = {1, 37, 1001};
	/* lr, momentum, weight decay */
	const float settings[][3] = {{0.1f, 0.0f, 0.0f}, {0.01f, 0.9f, 0.0f}, {0.5f, 0.5f, 0.0f},
				     {0.05f, 0.0f, 0.01f}, {0.05f, 0.9f, 0.1f}};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t t = 0; t < sizeof(settings) / sizeof(settings[0]); t++) {
			size_t n = sizes[s];
			float lr = settings[t][0], mom = settings[t][1], wd = settings[t][2];
			float *p = xcalloc_t(n, sizeof(float));
			float *v = xcalloc_t(n, sizeof(float));
			float *g = xcalloc_t(n, sizeof(float));
			ref_fill_normal(&r, p, n, 0.0, 1.0);
			if (mom != 0.0f)
				ref_fill_normal(&r, v, n, 0.0, 0.1);
			else
				for (size_t i = 0; i < n; i++)
					v[i] = 7.5f; /* untouched without momentum */
			double *want_p = xcalloc_t(n, sizeof(double));
			double *want_v = xcalloc_t(n, sizeof(double));
			ref_widen(p, want_p, n);
			ref_widen(v, want_v, n);
			float *p_d = dev_copy(&be, p, n * sizeof(float));
			float *v_d = dev_copy(&be, v, n * sizeof(float));
			float *g_d = backend_alloc(&be, n * sizeof(float));
			struct step_counters *c_d = backend_alloc(&be, sizeof(struct step_counters));
			cr_assert(g_d && c_d);
			/* A rate per step, read at the counters' step (its updates are AdamW's alone). */
			float rates[5];
			for (int step = 0; step < 5; step++)
				rates[step] = lr * (1.0f - 0.15f * (float)step);
			float *lr_d = dev_copy(&be, rates, sizeof(rates));
			for (int step = 1; step <= 5; step++) {
				ref_fill_normal(&r, g, n, 0.0, 1.0);
				backend_upload(&be, g_d, g, n * sizeof(float));
				counters_at(&be, c_d, step, 100 - step);
				backend_sgd_update(&be, p_d, g_d, v_d, n, lr_d, c_d, mom, wd, NULL);
				ref_sgd_update(want_p, g, want_v, n, rates[step - 1], mom, wd);
				expect_counters(&be, c_d, step, 100 - step, "sgd_update");
			}
			backend_free(&be, lr_d);
			backend_free(&be, c_d);
			dev_read(&be, p, p_d, n * sizeof(float));
			dev_read(&be, v, v_d, n * sizeof(float));
			char what[128];
			snprintf(what, sizeof(what), "sgd_update n=%zu lr=%g momentum=%g wd=%g, 5 steps: p", n,
				 lr, mom, wd);
			struct ref_cmp cp = ref_compare_f(what, p, want_p, n, 1e-6, 1e-5, seed);
			cr_assert_eq(cp.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, cp.bad,
				     cp.max_err, (unsigned long long)seed);
			snprintf(what, sizeof(what), "sgd_update n=%zu lr=%g momentum=%g wd=%g, 5 steps: v", n,
				 lr, mom, wd);
			struct ref_cmp cv = ref_compare_f(what, v, want_v, n, mom != 0.0f ? 1e-6 : 0.0,
							  mom != 0.0f ? 1e-5 : 0.0, seed);
			cr_assert_eq(cv.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, cv.bad,
				     cv.max_err, (unsigned long long)seed);
			backend_free(&be, p_d);
			backend_free(&be, v_d);
			backend_free(&be, g_d);
			free(p);
			free(v);
			free(g);
			free(want_p);
			free(want_v);
		}
	backend_destroy(&be);
}

/*
 * An update with `then` (the next batch's gather) leaves the parameters, the
 * optimizer state and the batch exactly as the update and a separate gather
 * do, the gather reading the cursor as the counters hold it (row-major and
 * batch-last, a full batch and one clipped at the index's end, and one past
 * it). The gather comes after the update: with its x over the gradient, the
 * update still reads the gradient it was given.
 */
static void check_update_then(int adamw, int batch_last, int cursor, int alias,
			      uint64_t seed)
{
	struct backend be = make_backend();
	struct rng r = rng_make(seed, 12);
	enum { N = 1001, PIXELS = 13, COUNT = 6, IMAGES = 11, LEN = 20 };
	struct gather_set d;
	gather_set_make(&be, &d, PIXELS, IMAGES, LEN, cursor, &r);
	float p[N], g[N], st[2 * N], rates[3] = {0.1f, 0.05f, 0.02f};
	ref_fill_normal(&r, p, N, 0.0, 1.0);
	ref_fill_normal(&r, g, N, 0.0, 1.0);
	ref_fill_normal(&r, st, 2 * N, 0.0, 0.1);
	for (int i = N; i < 2 * N; i++)
		st[i] = fabsf(st[i]); /* AdamW's second moment */
	struct adamw_hyper h = {0.9f, 0.999f, 1e-8f, 0.01f};
	float *lr_d = dev_copy(&be, rates, sizeof(rates));
	struct step_counters *c_d = backend_alloc(&be, sizeof(struct step_counters));
	cr_assert_not_null(c_d);
	const struct step_counters c = {.cursor = cursor, .step = 2, .updates = 9};
	backend_upload(&be, c_d, &c, sizeof(c));
	size_t xn = (size_t)(COUNT + 1) * PIXELS;
	float out_p[2][N], out_st[2][2 * N], out_x[2][(COUNT + 1) * PIXELS];
	int32_t out_y[2][COUNT + 1];
	for (int fused = 0; fused <= 1; fused++) {
		float *p_d = dev_copy(&be, p, sizeof(p)), *g_d = dev_copy(&be, g, sizeof(g));
		float *st_d = dev_copy(&be, st, sizeof(st));
		float *x_d = backend_alloc(&be, xn * sizeof(float));
		int32_t *y_d = backend_alloc(&be, (COUNT + 1) * sizeof(int32_t));
		cr_assert(x_d && y_d);
		float *into = fused && alias ? g_d : x_d;
		struct gather_req next = gather_of(&d, &c_d->cursor, COUNT, batch_last, into, y_d);
		if (adamw)
			backend_adamw_update(&be, p_d, g_d, st_d, st_d + N, N, lr_d, c_d, h,
					     fused ? &next : NULL);
		else
			backend_sgd_update(&be, p_d, g_d, st_d, N, lr_d, c_d, 0.9f, 0.001f,
					   fused ? &next : NULL);
		if (!fused)
			backend_gather(&be, &next);
		dev_read(&be, out_p[fused], p_d, sizeof(p));
		dev_read(&be, out_st[fused], st_d, sizeof(st));
		dev_read(&be, out_x[fused], into, xn * sizeof(float));
		dev_read(&be, out_y[fused], y_d, sizeof(out_y[0]));
		backend_free(&be, p_d);
		backend_free(&be, g_d);
		backend_free(&be, st_d);
		backend_free(&be, x_d);
		backend_free(&be, y_d);
	}
	int rows = LEN - cursor < 0 ? 0 : LEN - cursor < COUNT ? LEN - cursor : COUNT;
	char what[160];
	snprintf(what, sizeof(what), "%s then gather: batch_last %d, cursor %d (%d rows)%s",
		 adamw ? "adamw_update" : "sgd_update", batch_last, cursor, rows,
		 alias ? ", into the gradient" : "");
	cr_assert(!memcmp(out_p[0], out_p[1], sizeof(out_p[0])),
		  "%s: the parameters differ from an update without it", what);
	cr_assert(!memcmp(out_st[0], out_st[1], sizeof(out_st[0])),
		  "%s: the optimizer state differs from an update without it", what);
	/* The gathered rows (what a separate gather wrote; its own test holds it to the definition). */
	size_t written = (size_t)rows * PIXELS;
	cr_assert(!memcmp(out_x[0], out_x[1], written * sizeof(float)),
		  "%s: the batch differs from a separate gather's", what);
	cr_assert(!memcmp(out_y[0], out_y[1], (size_t)rows * sizeof(int32_t)),
		  "%s: the labels differ from a separate gather's", what);
	double *want_x = xcalloc_t(xn, sizeof(double));
	int32_t want_y[COUNT + 1];
	gather_want(&d, cursor, COUNT, batch_last, want_x, want_y);
	struct ref_cmp cx = ref_compare_f(what, out_x[1], want_x, written, 1e-6, 1e-6, seed);
	cr_assert_eq(cx.bad, 0, "%s: the batch is not the one at the cursor", what);
	struct step_counters after;
	dev_read(&be, &after, c_d, sizeof(after));
	cr_assert(after.cursor == cursor && after.step == 2 && after.updates == 9,
		  "%s: the counters moved", what);
	free(want_x);
	gather_set_free(&be, &d);
	backend_free(&be, lr_d);
	backend_free(&be, c_d);
	backend_destroy(&be);
}

Test(ops, update_then_gathers_the_next_batch)
{
	uint64_t seed = ref_seed(115);
	for (int adamw = 0; adamw <= 1; adamw++)
		for (int batch_last = 0; batch_last <= 1; batch_last++) {
			check_update_then(adamw, batch_last, 4, 0, seed);  /* a full batch */
			check_update_then(adamw, batch_last, 17, 0, seed); /* clipped to 3 rows */
			check_update_then(adamw, batch_last, 20, 0, seed); /* at the end: nothing */
			check_update_then(adamw, batch_last, 4, 1, seed);  /* x over g: the update first */
		}
}

/* ---- convolution stages ------------------------------------------------------------ */

/* Multiples of unit in [-range * unit, range * unit]. */
static void fill_grid(struct rng *r, float *x, size_t n, int range, float unit)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((int)rng_below(r, (uint64_t)(2 * range + 1)) - range) * unit;
}

/* A ReLU's outputs: 40% exact zeros, the rest positive. */
static void fill_relu_output(struct rng *r, float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double u = rng_uniform(r);
		x[i] = u < 0.4 ? 0.0f : (float)(u - 0.4);
	}
}

/* n floats: a copy of src (or NaN) and a sentinel after them that must survive. */
static float *dev_guarded(const struct backend *be, const float *src, size_t n)
{
	float *h = xcalloc_t(n + 1, sizeof(float));
	for (size_t i = 0; i < n; i++)
		h[i] = src ? src[i] : NAN;
	h[n] = C_SENTINEL;
	float *d = dev_copy(be, h, (n + 1) * sizeof(float));
	free(h);
	return d;
}

static void expect_guard(const float *got, size_t n, const char *what)
{
	cr_assert(got[n] == C_SENTINEL, "%s: the float after the output was overwritten (%g)", what,
		  got[n]);
}

struct conv_op_case {
	int c, h, w, oc, k, pad, pool, rows;
};

/* LeNet-5's two stages at batch 1, 17 (a vector block and one) and 64, and odd ones. */
static const struct conv_op_case conv_op_cases[] = {
	{1, 28, 28, 6, 5, 2, 2, 1}, {1, 28, 28, 6, 5, 2, 2, 17}, {1, 28, 28, 6, 5, 2, 2, 64},
	{6, 14, 14, 16, 5, 0, 2, 64}, {6, 14, 14, 16, 5, 0, 2, 3},
	{2, 6, 9, 3, 3, 1, 3, 5},   /* pool 3 of 6x9 */
	{3, 5, 5, 5, 4, 0, 2, 2},   /* 2x2 output, one window */
	{2, 3, 3, 2, 5, 2, 3, 2},   /* taps wider than the image */
	{4, 6, 6, 1, 1, 0, 1, 17},  /* 1x1 convolution and pool */
	{1, 8, 4, 2, 3, 1, 4, 16},  /* pool 4 of 8x4 */
};

/*
 * conv_forward against ref_conv_stage: y and arg batch-innermost with the
 * im2col matrix kept (ref_im2col's, exactly), then batch_first without cols:
 * the transpose of the same y, bit for bit, and the same arg. On the grid
 * (inputs multiples of 1/4, weights and biases of 1/8, every sum exact in
 * float) y and arg must equal the reference's exactly, ties and exact zeros
 * included; with real values, y to 1e-5 and arg wherever the window's two
 * largest values are 1e-4 apart or more.
 */
static void check_conv_forward(const struct backend *be, const struct conv_op_case *q, int grid,
			       uint64_t seed)
{
	struct conv_shape s = conv_shape_make(q->c, q->h, q->w, q->k, q->pad);
	struct pool_shape ps = pool_shape_make(q->oc, s.oh, s.ow, q->pool);
	cr_assert(s.oh % q->pool == 0 && s.ow % q->pool == 0, "a case whose pool does not tile");
	int fan = q->c * q->k * q->k, features = q->oc * ps.oh * ps.ow;
	size_t nx = (size_t)q->c * q->h * q->w * q->rows, nw = (size_t)q->oc * fan;
	size_t ny = (size_t)features * q->rows, ncols = (size_t)fan * s.oh * s.ow * q->rows;
	struct rng r = rng_make(seed, (uint64_t)(20 + q->c * 7 + q->h * 31 + q->rows + grid));
	float *x = xcalloc_t(nx, sizeof(float)), *w = xcalloc_t(nw + (size_t)q->oc, sizeof(float));
	if (grid) {
		fill_grid(&r, x, nx, 4, 0.25f);
		fill_grid(&r, w, nw + (size_t)q->oc, 4, 0.125f);
	} else {
		ref_fill_uniform(&r, x, nx, -1.0, 1.0);
		ref_fill_uniform(&r, w, nw + (size_t)q->oc, -0.5, 0.5);
	}
	double *xd = xcalloc_t(nx, sizeof(double)), *wd = xcalloc_t(nw + (size_t)q->oc, sizeof(double));
	double *want_y = xcalloc_t(ny, sizeof(double)), *gap = xcalloc_t(ny, sizeof(double));
	double *want_cols = xcalloc_t(ncols, sizeof(double));
	int32_t *want_arg = xcalloc_t(ny, sizeof(int32_t));
	ref_widen(x, xd, nx);
	ref_widen(w, wd, nw + (size_t)q->oc);
	ref_conv_stage(xd, wd, wd + nw, &s, &ps, q->oc, q->rows, want_y, want_arg, gap, NULL);
	ref_im2col(x, &s, q->rows, want_cols);

	float *x_d = dev_copy(be, x, nx * sizeof(float));
	float *w_d = dev_copy(be, w, (nw + (size_t)q->oc) * sizeof(float));
	float *y_d = dev_guarded(be, NULL, ny), *cols_d = dev_guarded(be, NULL, ncols);
	float *ybf_d = dev_guarded(be, NULL, ny);
	int32_t *arg = xcalloc_t(ny, sizeof(int32_t)), *argbf = xcalloc_t(ny, sizeof(int32_t));
	memset(arg, 0xff, ny * sizeof(int32_t)); /* -1: not an offset */
	int32_t *arg_d = dev_copy(be, arg, ny * sizeof(int32_t));
	int32_t *argbf_d = dev_copy(be, arg, ny * sizeof(int32_t));
	struct conv_stage st = {&s, &ps, q->oc, q->rows, 0};
	backend_conv_forward(be, &st, x_d, w_d, w_d + nw, y_d, arg_d, cols_d);
	st.batch_first = 1;
	backend_conv_forward(be, &st, x_d, w_d, w_d + nw, ybf_d, argbf_d, NULL);

	float *y = xcalloc_t(ny + 1, sizeof(float)), *ybf = xcalloc_t(ny + 1, sizeof(float));
	float *cols = xcalloc_t(ncols + 1, sizeof(float));
	dev_read(be, y, y_d, (ny + 1) * sizeof(float));
	dev_read(be, ybf, ybf_d, (ny + 1) * sizeof(float));
	dev_read(be, cols, cols_d, (ncols + 1) * sizeof(float));
	dev_read(be, arg, arg_d, ny * sizeof(int32_t));
	dev_read(be, argbf, argbf_d, ny * sizeof(int32_t));

	char what[192];
	snprintf(what, sizeof(what), "conv_forward c%d %dx%d -> %d k%d pad%d pool%d, %d rows, %s", q->c,
		 q->h, q->w, q->oc, q->k, q->pad, q->pool, q->rows, grid ? "grid" : "real");
	expect_guard(y, ny, what);
	expect_guard(ybf, ny, what);
	expect_guard(cols, ncols, what);
	struct ref_cmp c = ref_compare_f(what, cols, want_cols, ncols, 0.0, 0.0, seed);
	cr_assert_eq(c.bad, 0, "%s: cols: %zu of %zu differ from ref_im2col", what, c.bad, ncols);
	c = ref_compare_f(what, y, want_y, ny, grid ? 0.0 : 1e-5, grid ? 0.0 : 1e-5, seed);
	cr_assert_eq(c.bad, 0, "%s: y: %zu of %zu off, largest %g (seed %llu)", what, c.bad, ny,
		     c.max_err, (unsigned long long)seed);
	size_t arg_checked = 0;
	for (size_t i = 0; i < ny; i++) {
		if (!grid && gap[i] < 1e-4)
			continue;
		cr_assert_eq(arg[i], want_arg[i], "%s: arg[%zu] = %d, want %d (gap %g; seed %llu)", what,
			     i, arg[i], want_arg[i], gap[i], (unsigned long long)seed);
		arg_checked++;
	}
	cr_assert(arg_checked * 2 >= ny, "%s: only %zu of %zu argmaxes decided", what, arg_checked,
		  ny);
	for (int b = 0; b < q->rows; b++)
		for (int f = 0; f < features; f++) {
			float bf = ybf[(size_t)b * features + f], bl = y[(size_t)f * q->rows + b];
			cr_assert(!memcmp(&bf, &bl, sizeof(bf)),
				  "%s: batch_first y[%d, %d] = %g, batch-innermost %g", what, b, f, bf, bl);
		}
	cr_assert(!memcmp(arg, argbf, ny * sizeof(int32_t)), "%s: batch_first changed arg", what);
	/* And against the other reference, which writes batch_first itself. */
	int32_t *arg2 = xcalloc_t(ny, sizeof(int32_t));
	ref_conv_stage_forward(x, w, w + nw, &s, &ps, q->oc, q->rows, 1, want_y, arg2, NULL, NULL);
	c = ref_compare_f(what, ybf, want_y, ny, grid ? 0.0 : 1e-5, grid ? 0.0 : 1e-5, seed);
	cr_assert_eq(c.bad, 0, "%s: batch_first y: %zu of %zu off ref_conv_stage_forward's (seed %llu)",
		     what, c.bad, ny, (unsigned long long)seed);
	free(arg2);

	backend_free(be, x_d);
	backend_free(be, w_d);
	backend_free(be, y_d);
	backend_free(be, cols_d);
	backend_free(be, ybf_d);
	backend_free(be, arg_d);
	backend_free(be, argbf_d);
	void *h[] = {x, w, xd, wd, want_y, gap, want_cols, want_arg, y, ybf, cols, arg, argbf};
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
		free(h[i]);
}

Test(ops, conv_forward_against_reference)
{
	uint64_t seed = ref_seed(116);
	struct backend be = make_backend();
	for (size_t i = 0; i < sizeof(conv_op_cases) / sizeof(conv_op_cases[0]); i++)
		for (int grid = 1; grid >= 0; grid--)
			check_conv_forward(&be, &conv_op_cases[i], grid, seed);
	backend_destroy(&be);
}

/*
 * pool_backward: each pixel of dz gets its window's dy where it is the
 * window's argmax and the window's y (the ReLU's output there) is positive,
 * exactly 0 elsewhere, every pixel written. dy and y in the stage's output
 * layout: batch-innermost, or (rows, features) when batch_first; arg always
 * batch-innermost.
 */
Test(ops, pool_backward_through_relu)
{
	uint64_t seed = ref_seed(117);
	struct rng r = rng_make(seed, 13);
	struct backend be = make_backend();
	/* c, h, w, k, rows */
	const int cases[][5] = {{6, 28, 28, 2, 64}, {6, 28, 28, 2, 1}, {16, 10, 10, 2, 17},
				{3, 6, 9, 3, 5},    {2, 4, 4, 4, 3},   {2, 3, 3, 1, 2}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		for (int batch_first = 0; batch_first <= 1; batch_first++) {
			const int *q = cases[k];
			int rows = q[4];
			struct conv_shape s = conv_shape_make(1, q[1], q[2], 1, 0); /* oh, ow = h, w */
			struct pool_shape ps = pool_shape_make(q[0], q[1], q[2], q[3]);
			struct conv_stage st = {&s, &ps, q[0], rows, batch_first};
			int features = q[0] * ps.oh * ps.ow;
			size_t ny = (size_t)features * rows, nz = (size_t)q[0] * q[1] * q[2] * rows;
			float *dy = xcalloc_t(ny, sizeof(float)), *y = xcalloc_t(ny, sizeof(float));
			int32_t *arg = xcalloc_t(ny, sizeof(int32_t));
			ref_fill_uniform(&r, dy, ny, -1.0, 1.0);
			fill_relu_output(&r, y, ny);
			for (size_t i = 0; i < ny; i++)
				arg[i] = (int32_t)rng_below(&r, (uint64_t)(q[3] * q[3]));
			double *want = xcalloc_t(nz, sizeof(double));
			ref_pool_relu_backward(dy, y, arg, &ps, rows, batch_first, want);

			float *dy_d = dev_copy(&be, dy, ny * sizeof(float));
			float *y_d = dev_copy(&be, y, ny * sizeof(float));
			int32_t *arg_d = dev_copy(&be, arg, ny * sizeof(int32_t));
			float *dz_d = dev_guarded(&be, NULL, nz);
			backend_pool_backward(&be, &st, dy_d, y_d, arg_d, dz_d);
			float *dz = xcalloc_t(nz + 1, sizeof(float));
			dev_read(&be, dz, dz_d, (nz + 1) * sizeof(float));
			char what[128];
			snprintf(what, sizeof(what), "pool_backward c%d %dx%d k%d, %d rows, batch_first %d",
				 q[0], q[1], q[2], q[3], rows, batch_first);
			expect_guard(dz, nz, what);
			struct ref_cmp c = ref_compare_f(what, dz, want, nz, 0.0, 0.0, seed);
			cr_assert_eq(c.bad, 0, "%s: %zu of %zu differ (seed %llu)", what, c.bad, nz,
				     (unsigned long long)seed);
			/* y was read: a dy of 0 where y is 0 would pass without the gate */
			size_t gated = 0;
			for (size_t i = 0; i < ny; i++)
				gated += y[i] == 0.0f && dy[i] != 0.0f;
			cr_assert(gated > 0, "%s: no window exercised the ReLU gate", what);
			backend_free(&be, dy_d);
			backend_free(&be, y_d);
			backend_free(&be, arg_d);
			backend_free(&be, dz_d);
			void *h[] = {dy, y, arg, want, dz};
			for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
				free(h[i]);
		}
	backend_destroy(&be);
}

/*
 * conv_backward_data: dx = conv^T(dz, W), then back through the stage
 * below's pool and ReLU with its y and arg into the stage below's dz
 * (ref_conv_backward_data); every pixel written, and exactly 0 where that
 * pool and ReLU pass nothing.
 */
Test(ops, conv_backward_data_through_the_pool_below)
{
	uint64_t seed = ref_seed(118);
	struct rng r = rng_make(seed, 14);
	struct backend be = make_backend();
	/* this stage: c, h, w, oc, k, pad; the pool below: k; rows */
	const int cases[][8] = {{6, 14, 14, 16, 5, 0, 2, 64}, {6, 14, 14, 16, 5, 0, 2, 1},
				{3, 2, 3, 4, 2, 1, 3, 5},    {2, 3, 3, 2, 5, 2, 1, 17},
				{1, 4, 4, 3, 3, 1, 2, 3}};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *q = cases[k];
		int rows = q[7], kb = q[6];
		struct conv_shape s = conv_shape_make(q[0], q[1], q[2], q[4], q[5]);
		/* The stage below: anything whose pool writes (c, h, w); its convolution is 1x1. */
		struct conv_shape bs = conv_shape_make(1, q[1] * kb, q[2] * kb, 1, 0);
		struct pool_shape bp = pool_shape_make(q[0], q[1] * kb, q[2] * kb, kb);
		struct conv_stage st = {&s, NULL, q[3], rows, 0}, below = {&bs, &bp, q[0], rows, 0};
		struct pool_shape own = pool_shape_make(q[3], s.oh, s.ow, 1);
		st.pool = &own;
		size_t nw = (size_t)q[3] * q[0] * q[4] * q[4], ndz = (size_t)q[3] * s.oh * s.ow * rows;
		size_t nx = (size_t)q[0] * q[1] * q[2] * rows, nb = nx * (size_t)kb * kb;
		float *w = xcalloc_t(nw, sizeof(float)), *dz = xcalloc_t(ndz, sizeof(float));
		float *by = xcalloc_t(nx, sizeof(float));
		int32_t *barg = xcalloc_t(nx, sizeof(int32_t));
		ref_fill_uniform(&r, w, nw, -0.5, 0.5);
		ref_fill_uniform(&r, dz, ndz, -1.0, 1.0);
		fill_relu_output(&r, by, nx);
		for (size_t i = 0; i < nx; i++)
			barg[i] = (int32_t)rng_below(&r, (uint64_t)(kb * kb));
		double *want = xcalloc_t(nb, sizeof(double)), *open = xcalloc_t(nb, sizeof(double));
		float *ones = xcalloc_t(nx, sizeof(float));
		ref_conv_backward_data(w, dz, &s, q[3], rows, &bp, by, barg, want);
		for (size_t i = 0; i < nx; i++)
			ones[i] = 1.0f;
		ref_pool_relu_backward(ones, by, barg, &bp, rows, 0, open);

		float *w_d = dev_copy(&be, w, nw * sizeof(float));
		float *dz_d = dev_copy(&be, dz, ndz * sizeof(float));
		float *by_dev = dev_copy(&be, by, nx * sizeof(float));
		int32_t *barg_d = dev_copy(&be, barg, nx * sizeof(int32_t));
		float *out_d = dev_guarded(&be, NULL, nb);
		backend_conv_backward_data(&be, &st, w_d, dz_d, &below, by_dev, barg_d, out_d);
		float *out = xcalloc_t(nb + 1, sizeof(float));
		dev_read(&be, out, out_d, (nb + 1) * sizeof(float));
		char what[160];
		snprintf(what, sizeof(what),
			 "conv_backward_data c%d %dx%d <- %d k%d pad%d, through pool %d below, %d rows", q[0],
			 q[1], q[2], q[3], q[4], q[5], kb, rows);
		expect_guard(out, nb, what);
		struct ref_cmp c = ref_compare_f(what, out, want, nb, 1e-5, 1e-5, seed);
		cr_assert_eq(c.bad, 0, "%s: %zu of %zu off, largest %g (seed %llu)", what, c.bad, nb,
			     c.max_err, (unsigned long long)seed);
		size_t passed = 0;
		for (size_t i = 0; i < nb; i++) {
			cr_assert(open[i] != 0.0 || out[i] == 0.0f,
				  "%s: [%zu] = %g where the pool and ReLU below pass nothing", what, i,
				  out[i]);
			passed += open[i] != 0.0;
		}
		cr_assert(passed > 0 && passed < nb, "%s: %zu of %zu pixels open", what, passed, nb);
		backend_free(&be, w_d);
		backend_free(&be, dz_d);
		backend_free(&be, by_dev);
		backend_free(&be, barg_d);
		backend_free(&be, out_d);
		void *h[] = {w, dz, by, barg, want, open, ones, out};
		for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
			free(h[i]);
	}
	backend_destroy(&be);
}

Test(ops, collectives_without_mpi_are_identity)
{
	uint64_t seed = ref_seed(110);
	struct rng r = rng_make(seed, 8);
	struct backend be = make_backend();
	enum { N = 37 };
	float x[N], y[N];
	ref_fill_normal(&r, x, N, 0.0, 10.0);
	float *d = dev_copy(&be, x, sizeof(x));
	backend_allreduce(&be, d, N, REDUCE_MEAN);
	dev_read(&be, y, d, sizeof(y));
	cr_assert(memcmp(x, y, sizeof(x)) == 0, "allreduce(mean) on one rank changed the buffer");
	backend_allreduce(&be, d, N, REDUCE_SUM);
	dev_read(&be, y, d, sizeof(y));
	cr_assert(memcmp(x, y, sizeof(x)) == 0, "allreduce(sum) on one rank changed the buffer");
	backend_broadcast(&be, d, N, 0);
	dev_read(&be, y, d, sizeof(y));
	cr_assert(memcmp(x, y, sizeof(x)) == 0, "broadcast on one rank changed the buffer");
	backend_allreduce(&be, d, 0, REDUCE_MEAN); /* n == 0 is allowed */
	backend_synchronize(&be);
	backend_free(&be, d);
	backend_destroy(&be);
}

/*
 * Micro-batch mode's ops (docs/exact.md): grad_accumulate adds; fixed_accumulate
 * encodes q = llrint(g * 2^40) and sums in int64, counting elements out of
 * range (beyond fixed_limit_elem, or not finite) in acc[n], which
 * fixed_decode moves into acc[n + 1]; the sum of the
 * micro-batches' integers is the same in any order (here: forwards and
 * backwards), and fixed_decode gives (float)(q * 2^-40).
 */
Test(ops, micro_batch_accumulation_and_fixed_point)
{
	struct backend be = make_backend();
	enum { N = 37, K = 5 };
	float g[K][N], acc_ref[N];
	srand(44);
	for (int k = 0; k < K; k++)
		for (int i = 0; i < N; i++)
			g[k][i] = ((float)rand() / (float)RAND_MAX - 0.5f) * ldexpf(1.0f, (i % 20) - 12);
	/* float accumulation: acc = g0 + g1 + ... in order */
	float *acc = dev_copy(&be, g[0], sizeof(g[0]));
	float *gk = backend_alloc(&be, sizeof(g[0]));
	for (int i = 0; i < N; i++)
		acc_ref[i] = g[0][i];
	for (int k = 1; k < K; k++) {
		backend_upload(&be, gk, g[k], sizeof(g[k]));
		backend_grad_accumulate(&be, acc, gk, N);
		for (int i = 0; i < N; i++)
			acc_ref[i] += g[k][i];
	}
	float got[N];
	dev_read(&be, got, acc, sizeof(got));
	cr_assert_eq(memcmp(got, acc_ref, sizeof(got)), 0, "grad_accumulate is not acc + g in order");

	/* fixed point: the same integers forwards and backwards */
	double limit = fixed_limit_elem(K);
	cr_assert_eq(limit, ldexp(1.0, 62 - 3), "K = 5 needs 3 bits of headroom");
	int64_t *q = backend_alloc(&be, (N + 2) * sizeof(int64_t)); /* zeroed */
	int64_t fwd[N + 2], bwd[N + 2];
	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < K; k++) {
			int kk = pass ? K - 1 - k : k;
			backend_upload(&be, gk, g[kk], sizeof(g[kk]));
			backend_fixed_accumulate(&be, q, gk, N, limit, k == 0);
		}
		dev_read(&be, pass ? bwd : fwd, q, sizeof(fwd));
	}
	cr_assert_eq(memcmp(fwd, bwd, sizeof(fwd)), 0, "the integer sum depends on the order");
	cr_assert_eq(fwd[N], 0, "no element is out of range");
	for (int i = 0; i < N; i++) {
		int64_t want = 0;
		for (int k = 0; k < K; k++)
			want += llrint(ldexp((double)g[k][i], FIXED_SHIFT));
		cr_assert_eq(fwd[i], want, "element %d: %lld, want %lld", i, (long long)fwd[i],
			     (long long)want);
	}
	backend_fixed_decode(&be, acc, q, N);
	dev_read(&be, got, acc, sizeof(got));
	dev_read(&be, fwd, q, sizeof(fwd));
	cr_assert(fwd[N] == 0 && fwd[N + 1] == 0, "no element out of range: the counts stay 0");
	for (int i = 0; i < N; i++) {
		cr_assert_eq(got[i], (float)ldexp((double)fwd[i], -FIXED_SHIFT), "decode of %d", i);
		cr_assert(fabsf(got[i] - acc_ref[i]) <= 1e-5f * fabsf(acc_ref[i]) + 1e-11f,
			  "element %d: fixed %g, float %g", i, (double)got[i], (double)acc_ref[i]);
	}

	/*
	 * out of range: one element at the bound, one NaN; counted into slot N
	 * (added over micro-batches, first or not), which the decode moves into
	 * slot N + 1, the count of every step so far
	 */
	float big[N];
	memcpy(big, g[0], sizeof(big));
	big[3] = (float)ldexp(limit, -FIXED_SHIFT);
	big[7] = NAN;
	backend_upload(&be, gk, big, sizeof(big));
	backend_fixed_accumulate(&be, q, gk, N, limit, 1);
	backend_fixed_accumulate(&be, q, gk, N, limit, 0);
	dev_read(&be, fwd, q, sizeof(fwd));
	cr_assert_eq(fwd[N], 4, "2 bad elements in each of 2 micro-batches: counted %lld",
		     (long long)fwd[N]);
	cr_assert_eq(fwd[3], 0);
	for (int step = 1; step <= 2; step++) {
		if (step == 2) {
			backend_fixed_accumulate(&be, q, gk, N, limit, 1);
			backend_fixed_accumulate(&be, q, gk, N, limit, 0);
		}
		backend_fixed_decode(&be, acc, q, N);
		dev_read(&be, fwd, q, sizeof(fwd));
		cr_assert(fwd[N] == 0 && fwd[N + 1] == 4 * step,
			  "after step %d's decode: slots N, N + 1 hold %lld, %lld", step,
			  (long long)fwd[N], (long long)fwd[N + 1]);
	}
	backend_free(&be, acc);
	backend_free(&be, gk);
	backend_free(&be, q);
	backend_destroy(&be);
}
