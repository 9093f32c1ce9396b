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
 */
#include <criterion/criterion.h>

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
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
 * One row-major GEMM through `run` (the backend, or cblas on the mapped
 * struct) against ref_gemm. C's padding holds a sentinel that must survive;
 * with beta == 0 C's old contents are NaN and must be ignored.
 */
typedef void (*gemm_runner)(const struct backend *be, const struct gemm_req *r, float *c_dev);

static void check_gemm(const struct backend *be, gemm_runner run, const char *who, uint64_t seed)
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

					float *ad = dev_copy(be, a, (size_t)a_rows * lda * sizeof(float));
					float *bd = dev_copy(be, b, (size_t)b_rows * ldb * sizeof(float));
					float *cd = dev_copy(be, c, (size_t)m * ldc * sizeof(float));
					struct gemm_req req = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
							       .alpha = alpha, .a = ad, .lda = lda, .b = bd, .ldb = ldb,
							       .beta = beta, .c = cd, .ldc = ldc};
					run(be, &req, cd);
					dev_read(be, c, cd, (size_t)m * ldc * sizeof(float));

					char what[160];
					snprintf(what, sizeof(what),
						 "%s gemm trans_a=%d trans_b=%d m=%d n=%d k=%d alpha=%g beta=%g lda=%d ldb=%d ldc=%d",
						 who, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
					struct ref_cmp cmp = ref_compare_f(what, c, want, (size_t)m * ldc,
									   1e-6 * (k + 1) * (fabsf(alpha) + 1.0f), 1e-5, seed);
					cr_assert_eq(cmp.bad, 0, "%s: %zu mismatches, largest error %g (seed %llu)", what,
						     cmp.bad, cmp.max_err, (unsigned long long)seed);
					backend_free(be, ad);
					backend_free(be, bd);
					backend_free(be, cd);
					free(a);
					free(b);
					free(c);
					free(want);
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
static void check_gemm_on_host(gemm_runner run, const char *who, uint64_t seed)
{
	struct backend be = make_backend();
	check_gemm(&be, run, who, seed);
	backend_destroy(&be);
}

Test(ops, gemm_all_transposes_strided)
{
	check_gemm_on_host(run_backend_gemm, "backend", ref_seed(101));
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
	check_gemm_on_host(run_mapped_cblas, "cblas(gemm_map)", ref_seed(102));
}

/* ---- the host backend's own small GEMM ------------------------------------ */

/* gemm_small itself, on every case and transpose, whether or not the backend would route it there. */
static void run_gemm_small(const struct backend *be, const struct gemm_req *r, float *c_dev)
{
	gemm_small(r);
}

Test(gemm_small, every_shape_and_transpose)
{
	check_gemm_on_host(run_gemm_small, "gemm_small", ref_seed(103));
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

static void check_gather(const struct backend *be, int pixels, int n_img, int len, int start,
			 int count, uint64_t seed)
{
	struct rng r = rng_make(seed, 2);
	uint8_t *images = xcalloc_t((size_t)n_img * pixels, 1);
	uint8_t *labels = xcalloc_t((size_t)n_img, 1);
	int32_t *index = xcalloc_t((size_t)len, sizeof(int32_t));
	ref_fill_bytes(&r, images, (size_t)n_img * pixels);
	for (int p = 0; p < pixels; p++) /* every byte value appears in image 0 */
		images[p] = (uint8_t)(p % 256);
	for (int i = 0; i < n_img; i++)
		labels[i] = (uint8_t)rng_below(&r, 10);
	for (int i = 0; i < len; i++)
		index[i] = (int32_t)rng_below(&r, (uint64_t)n_img);
	index[start] = 0;

	uint8_t *images_d = dev_copy(be, images, (size_t)n_img * pixels);
	uint8_t *labels_d = dev_copy(be, labels, (size_t)n_img);
	int32_t *index_d = dev_copy(be, index, (size_t)len * sizeof(int32_t));
	int32_t cursor = start;
	int32_t *cursor_d = dev_copy(be, &cursor, sizeof(cursor));

	/* One row more than count, filled with sentinels that must survive. */
	size_t xn = (size_t)(count + 1) * pixels;
	float *x = xcalloc_t(xn, sizeof(float));
	int32_t *y = xcalloc_t((size_t)count + 1, sizeof(int32_t));
	for (size_t i = 0; i < xn; i++)
		x[i] = C_SENTINEL;
	for (int i = 0; i <= count; i++)
		y[i] = -7;
	float *x_d = dev_copy(be, x, xn * sizeof(float));
	int32_t *y_d = dev_copy(be, y, ((size_t)count + 1) * sizeof(int32_t));
	double *want_x = xcalloc_t(xn, sizeof(double));
	int32_t *want_y = xcalloc_t((size_t)count + 1, sizeof(int32_t));

	/* Two batches: at the start cursor, then after advance(count). */
	for (int round = 0; round < 2; round++) {
		int at = start + round * count;
		backend_gather(be, images_d, labels_d, pixels, index_d, cursor_d, count, x_d, y_d);
		dev_read(be, x, x_d, xn * sizeof(float));
		dev_read(be, y, y_d, ((size_t)count + 1) * sizeof(int32_t));
		for (int i = 0; i < count; i++) {
			int e = index[at + i];
			for (int p = 0; p < pixels; p++)
				want_x[(size_t)i * pixels + p] = ref_normalize_pixel(images[(size_t)e * pixels + p]);
			want_y[i] = labels[e];
		}
		for (int p = 0; p < pixels; p++)
			want_x[(size_t)count * pixels + p] = C_SENTINEL;
		want_y[count] = -7;
		char what[128];
		snprintf(what, sizeof(what), "gather pixels=%d count=%d cursor=%d", pixels, count, at);
		struct ref_cmp cx = ref_compare_f(what, x, want_x, xn, 1e-6, 1e-6, seed);
		struct ref_cmp cy = ref_compare_i32(what, y, want_y, (size_t)count + 1, seed);
		cr_assert(cx.bad == 0 && cy.bad == 0, "%s: %zu pixel and %zu label mismatches (seed %llu)",
			  what, cx.bad, cy.bad, (unsigned long long)seed);

		backend_advance(be, cursor_d, count);
		dev_read(be, &cursor, cursor_d, sizeof(cursor));
		cr_assert_eq(cursor, at + count, "advance(%d) from %d gave %d", count, at, cursor);
	}
	backend_advance(be, cursor_d, -(start + 2 * count));
	dev_read(be, &cursor, cursor_d, sizeof(cursor));
	cr_assert_eq(cursor, 0, "advance by a negative delta back to 0 gave %d", cursor);

	backend_free(be, images_d);
	backend_free(be, labels_d);
	backend_free(be, index_d);
	backend_free(be, cursor_d);
	backend_free(be, x_d);
	backend_free(be, y_d);
	free(images);
	free(labels);
	free(index);
	free(x);
	free(y);
	free(want_x);
	free(want_y);
}

Test(ops, gather_normalise_through_cursor_and_advance)
{
	uint64_t seed = ref_seed(103);
	struct backend be = make_backend();
	check_gather(&be, 784, 50, 40, 7, 5, seed);
	check_gather(&be, 784, 3, 4, 1, 1, seed);
	check_gather(&be, 13, 9, 30, 11, 8, seed);
	check_gather(&be, 1, 20, 10, 3, 3, seed);
	backend_destroy(&be);
}

/* ---- element ops --------------------------------------------------------- */

Test(ops, bias_act_with_and_without_relu)
{
	uint64_t seed = ref_seed(104);
	struct rng r = rng_make(seed, 3);
	struct backend be = make_backend();
	const int shapes[][2] = {{1, 10}, {7, 13}, {32, 10}, {3, 1}, {5, 784}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int relu = 0; relu <= 1; relu++) {
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			float *y = xcalloc_t(n, sizeof(float));
			float *bias = xcalloc_t((size_t)cols, sizeof(float));
			ref_fill_normal(&r, y, n, 0.0, 2.0);
			ref_fill_normal(&r, bias, (size_t)cols, 0.0, 1.0);
			y[0] = -bias[0]; /* exactly zero after the add */
			double *want = xcalloc_t(n, sizeof(double));
			ref_widen(y, want, n);
			ref_bias_act(want, bias, rows, cols, relu);
			float *y_d = dev_copy(&be, y, n * sizeof(float));
			float *b_d = dev_copy(&be, bias, (size_t)cols * sizeof(float));
			backend_bias_act(&be, y_d, b_d, rows, cols, relu);
			dev_read(&be, y, y_d, n * sizeof(float));
			char what[96];
			snprintf(what, sizeof(what), "bias_act rows=%d cols=%d relu=%d", rows, cols, relu);
			struct ref_cmp c = ref_compare_f(what, y, want, n, 1e-6, 1e-6, seed);
			cr_assert_eq(c.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, c.bad,
				     c.max_err, (unsigned long long)seed);
			if (relu)
				for (size_t i = 0; i < n; i++)
					cr_assert(y[i] >= 0.0f, "%s: [%zu] = %g after ReLU", what, i, y[i]);
			backend_free(&be, y_d);
			backend_free(&be, b_d);
			free(y);
			free(bias);
			free(want);
		}
	backend_destroy(&be);
}

Test(ops, relu_backward)
{
	uint64_t seed = ref_seed(105);
	struct rng r = rng_make(seed, 4);
	struct backend be = make_backend();
	const size_t sizes[] = {1, 17, 1000};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		float *dy = xcalloc_t(n, sizeof(float));
		float *y = xcalloc_t(n, sizeof(float));
		ref_fill_normal(&r, dy, n, 0.0, 1.0);
		for (size_t i = 0; i < n; i++) {
			double u = rng_uniform(&r);
			y[i] = u < 0.4 ? 0.0f : u < 0.5 ? -0.0f : (float)(u - 0.5); /* many exact zeros */
		}
		if (n == 1)
			y[0] = 0.0f;
		double *want = xcalloc_t(n, sizeof(double));
		ref_widen(dy, want, n);
		ref_relu_backward(want, y, n);
		float *dy_d = dev_copy(&be, dy, n * sizeof(float));
		float *y_d = dev_copy(&be, y, n * sizeof(float));
		backend_relu_backward(&be, dy_d, y_d, n);
		dev_read(&be, dy, dy_d, n * sizeof(float));
		char what[64];
		snprintf(what, sizeof(what), "relu_backward n=%zu", n);
		struct ref_cmp c = ref_compare_f(what, dy, want, n, 0.0, 0.0, seed);
		cr_assert_eq(c.bad, 0, "%s: %zu mismatches (seed %llu)", what, c.bad, (unsigned long long)seed);
		backend_free(&be, dy_d);
		backend_free(&be, y_d);
		free(dy);
		free(y);
		free(want);
	}
	backend_destroy(&be);
}

/* softmax_xent on given logits: row losses and gradients against the reference. */
static void check_softmax(const struct backend *be, const float *logits, const int32_t *labels,
			  int rows, int cols, float scale, const char *tag, uint64_t seed)
{
	size_t n = (size_t)rows * cols;
	float *l_d = dev_copy(be, logits, n * sizeof(float));
	int32_t *y_d = dev_copy(be, labels, (size_t)rows * sizeof(int32_t));
	float *loss_d = backend_alloc(be, (size_t)rows * sizeof(float));
	float *loss2_d = backend_alloc(be, (size_t)rows * sizeof(float));
	float *g_d = backend_alloc(be, n * sizeof(float));
	cr_assert(loss_d && loss2_d && g_d);
	backend_softmax_xent(be, l_d, y_d, rows, cols, scale, loss_d, g_d);
	backend_softmax_xent(be, l_d, y_d, rows, cols, scale, loss2_d, NULL);

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
	char what[128];
	snprintf(what, sizeof(what), "softmax_xent %s rows=%d cols=%d scale=%g loss", tag, rows, cols, scale);
	struct ref_cmp cl = ref_compare_f(what, loss, want_loss, (size_t)rows, 1e-5, 1e-5, seed);
	cr_assert_eq(cl.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, cl.bad, cl.max_err,
		     (unsigned long long)seed);
	snprintf(what, sizeof(what), "softmax_xent %s rows=%d cols=%d scale=%g dlogits", tag, rows, cols, scale);
	struct ref_cmp cg = ref_compare_f(what, g, want_g, n, 1e-6, 1e-5, seed);
	cr_assert_eq(cg.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, cg.bad, cg.max_err,
		     (unsigned long long)seed);
	for (int i = 0; i < rows; i++) {
		cr_assert(isfinite(loss[i]) && loss[i] >= 0.0f, "%s: row %d loss %g", tag, i, loss[i]);
		cr_assert(loss2[i] == loss[i], "%s: row %d loss %g without dlogits, %g with", tag, i,
			  loss2[i], loss[i]);
	}
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
		check_softmax(&be, logits, labels, rows, cols, cases[c].scale, "random", seed);
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
	check_softmax(&be, &logits[0][0], labels, ROWS, COLS, 1.0f / ROWS, "large", seed);
	const int32_t labels2[ROWS] = {0, 2, 0, 1, 0, 1};
	check_softmax(&be, &logits[0][0], labels2, ROWS, COLS, 1.0f, "large/other labels", seed);
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

/*
 * AdamW against PyTorch's formula in double: 6 updates, so bias correction is
 * checked at update 1 (where it is largest) and after; with and without
 * weight decay, betas of PyTorch's defaults and others; the update count in
 * backend memory moves on by one per update, and the rate comes from the table.
 */
Test(ops, adamw_update_matches_pytorch_formula)
{
	uint64_t seed = ref_seed(113);
	struct rng r = rng_make(seed, 9);
	struct backend be = make_backend();
	const size_t sizes[] = {1, 37, 1001};
	/* lr, beta1, beta2, eps, weight decay */
	const float settings[][5] = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f},
				     {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f},
				     {0.05f, 0.5f, 0.9f, 1e-3f, 0.1f}};
	enum { STEPS = 6 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t k = 0; k < sizeof(settings) / sizeof(settings[0]); k++) {
			size_t n = sizes[s];
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
			cr_assert_not_null(g_d);
			float rates[STEPS];
			for (int step = 0; step < STEPS; step++)
				rates[step] = settings[k][0] * (1.0f - 0.1f * (float)step);
			float *lr_d = dev_copy(&be, rates, sizeof(rates));
			const int32_t zero = 0;
			int32_t *step_d = dev_copy(&be, &zero, sizeof(zero));
			int32_t *t_d = dev_copy(&be, &zero, sizeof(zero));
			char what[160];
			for (int step = 0; step < STEPS; step++) {
				ref_fill_normal(&r, g, n, 0.0, 1.0);
				backend_upload(&be, g_d, g, n * sizeof(float));
				backend_adamw_update(&be, p_d, g_d, mv_d, mv_d + n, n, lr_d, step_d, t_d, h);
				backend_advance(&be, step_d, 1);
				ref_adamw_update(want_p, g, want_m, want_v, n, rates[step], step + 1, h.beta1,
						 h.beta2, h.eps, h.weight_decay);
				/* Every update checked: the first one has the largest bias correction. */
				dev_read(&be, p, p_d, n * sizeof(float));
				snprintf(what, sizeof(what), "adamw n=%zu setting %zu, after update %d: p", n, k,
					 step + 1);
				struct ref_cmp cp = ref_compare_f(what, p, want_p, n, 1e-6, 1e-5, seed);
				cr_assert_eq(cp.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what,
					     cp.bad, cp.max_err, (unsigned long long)seed);
			}
			int32_t t = -1;
			dev_read(&be, &t, t_d, sizeof(t));
			cr_assert_eq(t, STEPS, "the update count is %d after %d updates", t, STEPS);
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
			backend_free(&be, step_d);
			backend_free(&be, t_d);
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
			cr_assert_not_null(g_d);
			/* A rate per step, read at the step counter, which advance moves on. */
			float rates[5];
			for (int step = 0; step < 5; step++)
				rates[step] = lr * (1.0f - 0.15f * (float)step);
			float *lr_d = dev_copy(&be, rates, sizeof(rates));
			const int32_t zero = 0;
			int32_t *step_d = dev_copy(&be, &zero, sizeof(zero));
			for (int step = 0; step < 5; step++) {
				ref_fill_normal(&r, g, n, 0.0, 1.0);
				backend_upload(&be, g_d, g, n * sizeof(float));
				backend_sgd_update(&be, p_d, g_d, v_d, n, lr_d, step_d, mom, wd);
				backend_advance(&be, step_d, 1);
				ref_sgd_update(want_p, g, want_v, n, rates[step], mom, wd);
			}
			backend_free(&be, lr_d);
			backend_free(&be, step_d);
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
