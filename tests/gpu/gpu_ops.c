/*
 * gpu_ops.c - every backend op, CUDA against host, on random inputs of
 * several shapes (ctest label gpu; one rank).
 *
 *   ctest --test-dir build -L gpu --output-on-failure
 *   build/tests/gpu_ops [--self-test]
 *
 * Element ops (gather, bias_act, relu_backward, softmax_xent, sgd_update,
 * im2col, col2im, channel_bias_act, maxpool and its backward, transpose) must agree with
 * the host backend to a normalised error of 1e-6 (max |cuda - host| / max
 * |host|); labels, cursor, hit counts and pool argmaxes exactly. The conv
 * layers of LeNet-5 (im2col + GEMM + bias + ReLU, and the backward pass
 * through cuBLAS and col2im) agree to a normalised 1e-5.
 * GEMM, all four transpose combinations, with and without beta and with
 * padded leading dimensions, is held by both backends to the float32 error
 * bound against a double-precision reference:
 *   |C - C_ref| <= (k + 4) * FLT_EPSILON * (|alpha| |op(A)| |op(B)| + |beta| |C0|)
 * elementwise, and the padding of C must be left untouched. Memory (zero-
 * filled alloc, upload/download round trip) and the one-rank collectives are
 * checked too. Prints one line per check; exits 77 with the reason where no
 * device is usable.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "ref.h"
#include "train/model.h"

#define ELEM_TOL 1e-6

static float *fbuf(size_t n)
{
	float *p = calloc(n ? n : 1, sizeof(*p));
	if (!p)
		abort();
	return p;
}

static double *dbuf(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof(*p));
	if (!p)
		abort();
	return p;
}

static int32_t *ibuf(size_t n)
{
	int32_t *p = calloc(n ? n : 1, sizeof(*p));
	if (!p)
		abort();
	return p;
}

/* dev and host results of one float output: normalised error within tol. */
static void check_close(struct gpu_test *t, const char *what, const float *dev,
			const float *host, size_t n, double tol)
{
	size_t at = 0;
	double err = gpu_norm_err(dev, host, n, &at);
	size_t diff = gpu_count_diff(dev, host, n);
	gpu_test_check(t, err <= tol,
		       "%s: normalised error %.3g (limit %.0e), %zu of %zu differ in any bit%s", what,
		       err, tol, diff, n, err > tol ? "; largest at the index below" : "");
	if (err > tol)
		printf("     [%zu]: %s %.9g host %.9g (seed %llu)\n", at, backend_name(&t->dev),
		       (double)dev[at], (double)host[at], (unsigned long long)t->seed);
}

static void check_exact_i(struct gpu_test *t, const char *what, const int32_t *dev,
			  const int32_t *host, size_t n)
{
	size_t diff = 0, first = 0;
	for (size_t i = 0; i < n; i++)
		if (dev[i] != host[i] && diff++ == 0)
			first = i;
	gpu_test_check(t, diff == 0, "%s: %zu of %zu differ", what, diff, n);
	if (diff)
		printf("     first at [%zu]: %s %ld host %ld (seed %llu)\n", first, backend_name(&t->dev),
		       (long)dev[first], (long)host[first], (unsigned long long)t->seed);
}

static void test_memory(struct gpu_test *t)
{
	const size_t n = 100003;
	struct rng r = rng_make(t->seed, 1);
	float *h = fbuf(n), *back = fbuf(n);
	float *d = gpu_upload_new(&t->dev, NULL, n * sizeof(float));
	gpu_download(&t->dev, back, d, n * sizeof(float));
	size_t nonzero = 0;
	for (size_t i = 0; i < n; i++)
		nonzero += back[i] != 0.0f;
	gpu_test_check(t, nonzero == 0, "alloc of %zu floats is zero-filled (%zu non-zero)", n,
		       nonzero);
	ref_fill_normal(&r, h, n, 0.0, 1.0);
	backend_upload(&t->dev, d, h, n * sizeof(float));
	memset(back, 0, n * sizeof(float));
	gpu_download(&t->dev, back, d, n * sizeof(float));
	gpu_test_check(t, memcmp(h, back, n * sizeof(float)) == 0, "upload/download round trip of %zu floats",
		       n);
	void *empty = backend_alloc(&t->dev, 0);
	gpu_test_check(t, empty != NULL, "alloc of 0 bytes gives a pointer");
	backend_free(&t->dev, empty);
	backend_free(&t->dev, d);
	free(h);
	free(back);
}

/* One GEMM case on both backends against the double reference and its error bound. */
static void gemm_case(struct gpu_test *t, int ta, int tb, int m, int n, int k, float alpha,
		      float beta, int pad)
{
	struct rng r = rng_make(t->seed, 1000 + (uint64_t)m * 7919 + (uint64_t)n * 31 + (uint64_t)k +
						 (uint64_t)ta * 2 + (uint64_t)tb + (uint64_t)pad * 5);
	int a_rows = ta ? k : m, a_cols = ta ? m : k;
	int b_rows = tb ? n : k, b_cols = tb ? k : n;
	int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
	size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
	float *a = fbuf(na), *b = fbuf(nb), *c0 = fbuf(nc), *abs_a = fbuf(na), *abs_b = fbuf(nb);
	float *abs_c = fbuf(nc), *got_dev = fbuf(nc), *got_host = fbuf(nc);
	double *ref = dbuf(nc), *mag = dbuf(nc);
	ref_fill_uniform(&r, a, na, -1.0, 1.0);
	ref_fill_uniform(&r, b, nb, -1.0, 1.0);
	ref_fill_uniform(&r, c0, nc, -1.0, 1.0);
	for (size_t i = 0; i < na; i++)
		abs_a[i] = fabsf(a[i]);
	for (size_t i = 0; i < nb; i++)
		abs_b[i] = fabsf(b[i]);
	for (size_t i = 0; i < nc; i++)
		abs_c[i] = fabsf(c0[i]);
	ref_widen(c0, ref, nc);
	ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, ref, ldc);
	ref_widen(abs_c, mag, nc);
	ref_gemm(ta, tb, m, n, k, fabs(alpha), abs_a, lda, abs_b, ldb, fabs(beta), mag, ldc);

	const struct backend *bes[2] = {&t->dev, &t->host};
	float *outs[2] = {got_dev, got_host};
	for (int w = 0; w < 2; w++) {
		const struct backend *be = bes[w];
		float *da = gpu_upload_new(be, a, na * sizeof(float));
		float *db = gpu_upload_new(be, b, nb * sizeof(float));
		float *dc = gpu_upload_new(be, c0, nc * sizeof(float));
		struct gemm_req req = {
			.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha,
			.a = da, .lda = lda, .b = db, .ldb = ldb, .beta = beta, .c = dc, .ldc = ldc,
		};
		backend_gemm(be, &req);
		gpu_download(be, outs[w], dc, nc * sizeof(float));
		backend_free(be, da);
		backend_free(be, db);
		backend_free(be, dc);
	}

	/* Worst error relative to the bound, for each backend; padding exact. */
	double ratio[2] = {0.0, 0.0};
	size_t outside[2] = {0, 0}, pad_hit[2] = {0, 0};
	for (int w = 0; w < 2; w++) {
		for (int i = 0; i < m; i++) {
			for (int j = 0; j < ldc; j++) {
				size_t e = (size_t)i * ldc + j;
				if (j >= n) {
					pad_hit[w] += !(outs[w][e] == c0[e]);
					continue;
				}
				double bound = (k + 4) * (double)FLT_EPSILON * mag[e] + 1e-30;
				double err = fabs((double)outs[w][e] - ref[e]);
				if (!(err <= bound))
					outside[w]++;
				if (!(err / bound <= ratio[w]))
					ratio[w] = err / bound;
			}
		}
	}
	size_t at = 0;
	double vs_host = gpu_norm_err(got_dev, got_host, nc, &at);
	gpu_test_check(t, outside[0] == 0 && outside[1] == 0 && pad_hit[0] == 0 && pad_hit[1] == 0,
		       "gemm %c%c m=%d n=%d k=%d alpha=%g beta=%g pad=%d: worst error/bound %s %.3g, "
		       "host %.3g (%zu, %zu outside), padding changed %zu, %zu; normalised difference %.3g",
		       ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, (double)alpha, (double)beta, pad,
		       backend_name(&t->dev), ratio[0], ratio[1], outside[0], outside[1], pad_hit[0],
		       pad_hit[1], vs_host);
	free(a);
	free(b);
	free(c0);
	free(abs_a);
	free(abs_b);
	free(abs_c);
	free(got_dev);
	free(got_host);
	free(ref);
	free(mag);
}

static void test_gemm(struct gpu_test *t)
{
	/* m, n, k: the model's shapes (batch 32, 784 inputs, 512/256 hidden, 10 classes) and odd ones. */
	const int shapes[][3] = {{1, 1, 1},     {7, 5, 3},      {32, 10, 784},  {32, 512, 784},
				 {512, 784, 32}, {10, 512, 32}, {33, 17, 65},   {1, 10, 32},
				 {256, 256, 256}};
	for (int ta = 0; ta <= 1; ta++)
		for (int tb = 0; tb <= 1; tb++)
			for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
				gemm_case(t, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f,
					  0.0f, 0);
				if (s % 3 == 1)
					gemm_case(t, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2],
						  0.5f, -1.5f, 3);
			}
}

static void test_gather_advance(struct gpu_test *t)
{
	const int n_img = 300, pixels = 784, len = 200;
	const int counts[] = {1, 32, 64};
	struct rng r = rng_make(t->seed, 2);
	uint8_t *images = malloc((size_t)n_img * pixels), *labels = malloc((size_t)n_img);
	int32_t *index = ibuf((size_t)len);
	if (!images || !labels)
		abort();
	ref_fill_bytes(&r, images, (size_t)n_img * pixels);
	ref_fill_bytes(&r, labels, (size_t)n_img);
	for (int i = 0; i < len; i++)
		index[i] = (int32_t)rng_below(&r, (uint64_t)n_img);

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		int count = counts[ci];
		int32_t start = 17 + (int32_t)ci, cur_after[2];
		size_t nx = (size_t)count * pixels;
		float *x_out[2] = {fbuf(nx), fbuf(nx)};
		int32_t *y_out[2] = {ibuf((size_t)count), ibuf((size_t)count)};
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			uint8_t *di = gpu_upload_new(be, images, (size_t)n_img * pixels);
			uint8_t *dl = gpu_upload_new(be, labels, (size_t)n_img);
			int32_t *dx = gpu_upload_new(be, index, (size_t)len * sizeof(int32_t));
			int32_t *dc = gpu_upload_new(be, &start, sizeof(start));
			float *x = gpu_upload_new(be, NULL, nx * sizeof(float));
			int32_t *y = gpu_upload_new(be, NULL, (size_t)count * sizeof(int32_t));
			backend_gather(be, di, dl, pixels, dx, dc, count, x, y);
			backend_advance(be, dc, count);
			gpu_download(be, x_out[w], x, nx * sizeof(float));
			gpu_download(be, y_out[w], y, (size_t)count * sizeof(int32_t));
			gpu_download(be, &cur_after[w], dc, sizeof(int32_t));
			backend_free(be, di);
			backend_free(be, dl);
			backend_free(be, dx);
			backend_free(be, dc);
			backend_free(be, x);
			backend_free(be, y);
		}
		char what[96];
		snprintf(what, sizeof(what), "gather %d x %d from cursor %d", count, pixels, start);
		check_close(t, what, x_out[0], x_out[1], nx, ELEM_TOL);
		snprintf(what, sizeof(what), "gather labels %d from cursor %d", count, start);
		check_exact_i(t, what, y_out[0], y_out[1], (size_t)count);
		gpu_test_check(t, cur_after[0] == start + count && cur_after[1] == start + count,
			       "advance %d + %d: %s %d host %d", start, count, backend_name(&t->dev),
			       cur_after[0], cur_after[1]);
		for (int w = 0; w < 2; w++) {
			free(x_out[w]);
			free(y_out[w]);
		}
	}
	free(images);
	free(labels);
	free(index);
}

static void test_bias_act(struct gpu_test *t)
{
	const int shapes[][2] = {{1, 1}, {32, 10}, {64, 512}, {1000, 784}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int relu = 0; relu <= 1; relu++) {
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			struct rng r = rng_make(t->seed, 10 + 2 * s + relu);
			float *y0 = fbuf(n), *bias = fbuf((size_t)cols), *out[2] = {fbuf(n), fbuf(n)};
			const struct backend *bes[2] = {&t->dev, &t->host};
			ref_fill_uniform(&r, y0, n, -2.0, 2.0);
			ref_fill_uniform(&r, bias, (size_t)cols, -1.0, 1.0);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *y = gpu_upload_new(be, y0, n * sizeof(float));
				float *b = gpu_upload_new(be, bias, (size_t)cols * sizeof(float));
				backend_bias_act(be, y, b, rows, cols, relu);
				gpu_download(be, out[w], y, n * sizeof(float));
				backend_free(be, y);
				backend_free(be, b);
			}
			char what[96];
			snprintf(what, sizeof(what), "bias_act %dx%d relu=%d", rows, cols, relu);
			check_close(t, what, out[0], out[1], n, ELEM_TOL);
			free(y0);
			free(bias);
			free(out[0]);
			free(out[1]);
		}
	}
}

static void test_relu_backward(struct gpu_test *t)
{
	const size_t sizes[] = {1, 1000, ((size_t)1 << 20) + 3};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		struct rng r = rng_make(t->seed, 30 + s);
		float *dy0 = fbuf(n), *act = fbuf(n), *out[2] = {fbuf(n), fbuf(n)};
		const struct backend *bes[2] = {&t->dev, &t->host};
		ref_fill_uniform(&r, dy0, n, -1.0, 1.0);
		ref_fill_uniform(&r, act, n, -1.0, 1.0);
		for (size_t i = 0; i < n; i += 5)
			act[i] = 0.0f;
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			float *dy = gpu_upload_new(be, dy0, n * sizeof(float));
			float *y = gpu_upload_new(be, act, n * sizeof(float));
			backend_relu_backward(be, dy, y, n);
			gpu_download(be, out[w], dy, n * sizeof(float));
			backend_free(be, dy);
			backend_free(be, y);
		}
		char what[96];
		snprintf(what, sizeof(what), "relu_backward n=%zu", n);
		check_close(t, what, out[0], out[1], n, ELEM_TOL);
		free(dy0);
		free(act);
		free(out[0]);
		free(out[1]);
	}
}

static void test_softmax_xent(struct gpu_test *t)
{
	const int shapes[][2] = {{1, 10}, {32, 10}, {1000, 10}, {64, 33}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int with_grad = 0; with_grad <= 1; with_grad++) {
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			float scale = 1.0f / (float)rows;
			struct rng r = rng_make(t->seed, 40 + 2 * s + with_grad);
			float *logits = fbuf(n), *loss[2] = {fbuf((size_t)rows), fbuf((size_t)rows)};
			float *grad[2] = {fbuf(n), fbuf(n)};
			int32_t *labels = ibuf((size_t)rows);
			const struct backend *bes[2] = {&t->dev, &t->host};
			ref_fill_uniform(&r, logits, n, -8.0, 8.0);
			ref_fill_labels(&r, labels, (size_t)rows, cols);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *dl = gpu_upload_new(be, logits, n * sizeof(float));
				int32_t *dlab = gpu_upload_new(be, labels, (size_t)rows * sizeof(int32_t));
				float *dloss = gpu_upload_new(be, NULL, (size_t)rows * sizeof(float));
				float *dgrad = gpu_upload_new(be, NULL, n * sizeof(float));
				backend_softmax_xent(be, dl, dlab, rows, cols, scale, dloss,
						      with_grad ? dgrad : NULL);
				gpu_download(be, loss[w], dloss, (size_t)rows * sizeof(float));
				gpu_download(be, grad[w], dgrad, n * sizeof(float));
				backend_free(be, dl);
				backend_free(be, dlab);
				backend_free(be, dloss);
				backend_free(be, dgrad);
			}
			char what[96];
			snprintf(what, sizeof(what), "softmax_xent %dx%d loss%s", rows, cols,
				 with_grad ? " (with gradient)" : "");
			check_close(t, what, loss[0], loss[1], (size_t)rows, ELEM_TOL);
			snprintf(what, sizeof(what), "softmax_xent %dx%d %s", rows, cols,
				 with_grad ? "gradient" : "gradient buffer untouched");
			check_close(t, what, grad[0], grad[1], n, ELEM_TOL);
			free(logits);
			free(labels);
			for (int w = 0; w < 2; w++) {
				free(loss[w]);
				free(grad[w]);
			}
		}
	}
}

static void test_argmax_hits(struct gpu_test *t)
{
	const int shapes[][2] = {{1, 10}, {32, 10}, {10000, 10}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		size_t n = (size_t)rows * cols;
		struct rng r = rng_make(t->seed, 50 + s);
		float *logits = fbuf(n);
		int32_t *labels = ibuf((size_t)rows), *hits0 = ibuf((size_t)rows);
		int32_t *out[2] = {ibuf((size_t)rows), ibuf((size_t)rows)};
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (size_t i = 0; i < n; i++)
			logits[i] = (float)rng_below(&r, 4); /* ties: the first maximum counts */
		ref_fill_labels(&r, labels, (size_t)rows, cols);
		for (int i = 0; i < rows; i++)
			hits0[i] = (int32_t)rng_below(&r, 3);
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			float *dl = gpu_upload_new(be, logits, n * sizeof(float));
			int32_t *dlab = gpu_upload_new(be, labels, (size_t)rows * sizeof(int32_t));
			int32_t *dh = gpu_upload_new(be, hits0, (size_t)rows * sizeof(int32_t));
			backend_argmax_hits(be, dl, dlab, rows, cols, dh);
			backend_argmax_hits(be, dl, dlab, rows, cols, dh);
			gpu_download(be, out[w], dh, (size_t)rows * sizeof(int32_t));
			backend_free(be, dl);
			backend_free(be, dlab);
			backend_free(be, dh);
		}
		char what[96];
		snprintf(what, sizeof(what), "argmax_hits %dx%d, twice", rows, cols);
		check_exact_i(t, what, out[0], out[1], (size_t)rows);
		free(logits);
		free(labels);
		free(hits0);
		free(out[0]);
		free(out[1]);
	}
}

static void test_sgd_update(struct gpu_test *t)
{
	const size_t sizes[] = {1, 7850, ((size_t)1 << 20) + 3};
	const float moms[] = {0.0f, 0.9f};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int mi = 0; mi < 2; mi++) {
			size_t n = sizes[s];
			struct rng r = rng_make(t->seed, 60 + 2 * s + mi);
			float *p0 = fbuf(n), *g = fbuf(n), *v0 = fbuf(n);
			float *p_out[2] = {fbuf(n), fbuf(n)}, *v_out[2] = {fbuf(n), fbuf(n)};
			const struct backend *bes[2] = {&t->dev, &t->host};
			ref_fill_normal(&r, p0, n, 0.0, 0.1);
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			ref_fill_normal(&r, v0, n, 0.0, 0.5);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *dp = gpu_upload_new(be, p0, n * sizeof(float));
				float *dg = gpu_upload_new(be, g, n * sizeof(float));
				float *dv = gpu_upload_new(be, v0, n * sizeof(float));
				/* Three steps at three rates, picked by a step counter in backend memory. */
				const float rates[3] = {0.05f, 0.03f, 0.01f};
				const int32_t zero = 0;
				float *dr = gpu_upload_new(be, rates, sizeof(rates));
				int32_t *ds = gpu_upload_new(be, &zero, sizeof(zero));
				for (int step = 0; step < 3; step++) {
					backend_sgd_update(be, dp, dg, dv, n, dr, ds, moms[mi],
							   mi ? 0.01f : 0.0f);
					backend_advance(be, ds, 1);
				}
				backend_free(be, dr);
				backend_free(be, ds);
				gpu_download(be, p_out[w], dp, n * sizeof(float));
				gpu_download(be, v_out[w], dv, n * sizeof(float));
				backend_free(be, dp);
				backend_free(be, dg);
				backend_free(be, dv);
			}
			char what[96];
			snprintf(what, sizeof(what), "sgd_update x3 n=%zu momentum=%g params", n,
				 (double)moms[mi]);
			check_close(t, what, p_out[0], p_out[1], n, ELEM_TOL);
			snprintf(what, sizeof(what), "sgd_update x3 n=%zu momentum=%g velocity", n,
				 (double)moms[mi]);
			check_close(t, what, v_out[0], v_out[1], n, ELEM_TOL);
			free(p0);
			free(g);
			free(v0);
			for (int w = 0; w < 2; w++) {
				free(p_out[w]);
				free(v_out[w]);
			}
		}
	}
}

/* AdamW: 4 updates (bias correction at 1 and after), with and without weight decay. */
static void test_adamw_update(struct gpu_test *t)
{
	const size_t sizes[] = {1, 7850, ((size_t)1 << 20) + 3};
	const float wds[] = {0.0f, 0.01f};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int wi = 0; wi < 2; wi++) {
			size_t n = sizes[s];
			struct rng r = rng_make(t->seed, 80 + 2 * s + wi);
			float *p0 = fbuf(n), *g = fbuf(n);
			float *p_out[2] = {fbuf(n), fbuf(n)}, *mv_out[2] = {fbuf(2 * n), fbuf(2 * n)};
			int32_t t_out[2] = {-1, -1};
			const struct backend *bes[2] = {&t->dev, &t->host};
			struct adamw_hyper h = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
						.weight_decay = wds[wi]};
			ref_fill_normal(&r, p0, n, 0.0, 0.1);
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *dp = gpu_upload_new(be, p0, n * sizeof(float));
				float *dg = gpu_upload_new(be, g, n * sizeof(float));
				float *dmv = gpu_upload_new(be, NULL, 2 * n * sizeof(float));
				const float rates[4] = {1e-3f, 8e-4f, 6e-4f, 4e-4f};
				const int32_t zero = 0;
				float *dr = gpu_upload_new(be, rates, sizeof(rates));
				int32_t *ds = gpu_upload_new(be, &zero, sizeof(zero));
				int32_t *dt = gpu_upload_new(be, &zero, sizeof(zero));
				for (int step = 0; step < 4; step++) {
					backend_adamw_update(be, dp, dg, dmv, dmv + n, n, dr, ds, dt, h);
					backend_advance(be, ds, 1);
				}
				gpu_download(be, p_out[w], dp, n * sizeof(float));
				gpu_download(be, mv_out[w], dmv, 2 * n * sizeof(float));
				gpu_download(be, &t_out[w], dt, sizeof(int32_t));
				backend_free(be, dr);
				backend_free(be, ds);
				backend_free(be, dt);
				backend_free(be, dp);
				backend_free(be, dg);
				backend_free(be, dmv);
			}
			char what[96];
			snprintf(what, sizeof(what), "adamw_update x4 n=%zu wd=%g params", n, (double)wds[wi]);
			check_close(t, what, p_out[0], p_out[1], n, ELEM_TOL);
			snprintf(what, sizeof(what), "adamw_update x4 n=%zu wd=%g moments", n, (double)wds[wi]);
			check_close(t, what, mv_out[0], mv_out[1], 2 * n, ELEM_TOL);
			snprintf(what, sizeof(what), "adamw_update x4 n=%zu update count", n);
			float tf[2] = {(float)t_out[0], (float)t_out[1]};
			const float four = 4.0f;
			check_close(t, what, tf, &four, 1, ELEM_TOL);
			check_close(t, what, tf + 1, &four, 1, ELEM_TOL);
			free(p0);
			free(g);
			for (int w = 0; w < 2; w++) {
				free(p_out[w]);
				free(mv_out[w]);
			}
		}
	}
}

/* One float output of both backends: out[0] the device's, out[1] the host's. */
struct pair {
	float *out[2];
	size_t n;
};

static void pair_alloc(struct pair *p, size_t n)
{
	p->n = n;
	p->out[0] = fbuf(n);
	p->out[1] = fbuf(n);
}

static void pair_free(struct pair *p)
{
	free(p->out[0]);
	free(p->out[1]);
}

static void test_conv_elements(struct gpu_test *t)
{
	/* c, h, w, k, pad, batch: LeNet's layers at batch 64, odd shapes */
	const int cases[][6] = {{1, 28, 28, 5, 2, 64}, {6, 14, 14, 5, 0, 64}, {2, 7, 5, 3, 1, 3},
				{2, 3, 3, 5, 2, 2}};
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
		const int *q = cases[ci];
		struct conv_shape s = conv_shape_make(q[0], q[1], q[2], q[3], q[4]);
		int batch = q[5];
		size_t nx = (size_t)batch * s.c * s.h * s.w;
		size_t nc = (size_t)s.c * s.k * s.k * batch * s.oh * s.ow;
		struct rng r = rng_make(t->seed, 80 + ci);
		float *x = fbuf(nx), *dcols = fbuf(nc);
		struct pair cols, dx;
		pair_alloc(&cols, nc);
		pair_alloc(&dx, nx);
		ref_fill_uniform(&r, x, nx, -2.0, 2.0);
		ref_fill_uniform(&r, dcols, nc, -1.0, 1.0);
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			float *dxin = gpu_upload_new(be, x, nx * sizeof(float));
			float *dc = gpu_upload_new(be, NULL, nc * sizeof(float));
			float *dd = gpu_upload_new(be, dcols, nc * sizeof(float));
			float *dg = gpu_upload_new(be, NULL, nx * sizeof(float));
			backend_im2col(be, dxin, &s, batch, dc);
			backend_col2im(be, dd, &s, batch, dg);
			gpu_download(be, cols.out[w], dc, nc * sizeof(float));
			gpu_download(be, dx.out[w], dg, nx * sizeof(float));
			backend_free(be, dxin);
			backend_free(be, dc);
			backend_free(be, dd);
			backend_free(be, dg);
		}
		char what[96];
		snprintf(what, sizeof(what), "im2col c%d %dx%d k%d pad%d batch %d", s.c, s.h, s.w, s.k,
			 s.pad, batch);
		check_close(t, what, cols.out[0], cols.out[1], nc, 0.0);
		snprintf(what, sizeof(what), "col2im c%d %dx%d k%d pad%d batch %d", s.c, s.h, s.w, s.k,
			 s.pad, batch);
		check_close(t, what, dx.out[0], dx.out[1], nx, ELEM_TOL);
		free(x);
		free(dcols);
		pair_free(&cols);
		pair_free(&dx);
	}
}

static void test_pool_and_channel_bias(struct gpu_test *t)
{
	/* c, h, w, k, batch: LeNet's pools at batch 64, a ragged one */
	const int cases[][5] = {{6, 28, 28, 2, 64}, {16, 10, 10, 2, 64}, {3, 5, 7, 2, 3}};
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
		const int *q = cases[ci];
		struct pool_shape s = pool_shape_make(q[0], q[1], q[2], q[3]);
		int batch = q[4];
		size_t nx = (size_t)s.c * batch * s.h * s.w, ny = (size_t)batch * s.c * s.oh * s.ow;
		struct rng r = rng_make(t->seed, 90 + ci);
		float *x = fbuf(nx), *dy = fbuf(ny), *bias = fbuf((size_t)s.c);
		struct pair y, dx, biased;
		int32_t *arg[2] = {ibuf(ny), ibuf(ny)};
		pair_alloc(&y, ny);
		pair_alloc(&dx, nx);
		pair_alloc(&biased, nx);
		for (size_t i = 0; i < nx; i++) /* few levels: windows with ties */
			x[i] = (float)rng_below(&r, 5) - 2.0f;
		/* Layouts (c, h, w, batch): the pool's input is (channels, n) to the channel bias too. */
		ref_fill_uniform(&r, dy, ny, -1.0, 1.0);
		ref_fill_uniform(&r, bias, (size_t)s.c, -1.0, 1.0);
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			float *dxin = gpu_upload_new(be, x, nx * sizeof(float));
			float *dyout = gpu_upload_new(be, NULL, ny * sizeof(float));
			int32_t *darg = gpu_upload_new(be, NULL, ny * sizeof(int32_t));
			float *ddy = gpu_upload_new(be, dy, ny * sizeof(float));
			float *ddx = gpu_upload_new(be, NULL, nx * sizeof(float));
			float *db = gpu_upload_new(be, bias, (size_t)s.c * sizeof(float));
			backend_maxpool(be, dxin, &s, batch, dyout, darg);
			backend_maxpool_backward(be, ddy, darg, &s, batch, ddx);
			backend_channel_bias_act(be, dxin, db, s.c, nx / (size_t)s.c, 1);
			gpu_download(be, y.out[w], dyout, ny * sizeof(float));
			gpu_download(be, arg[w], darg, ny * sizeof(int32_t));
			gpu_download(be, dx.out[w], ddx, nx * sizeof(float));
			gpu_download(be, biased.out[w], dxin, nx * sizeof(float));
			void *bufs[] = {dxin, dyout, darg, ddy, ddx, db};
			for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
				backend_free(be, bufs[i]);
		}
		char what[96];
		snprintf(what, sizeof(what), "maxpool c%d %dx%d k%d batch %d", s.c, s.h, s.w, s.k, batch);
		check_close(t, what, y.out[0], y.out[1], ny, 0.0);
		check_exact_i(t, what, arg[0], arg[1], ny);
		snprintf(what, sizeof(what), "maxpool_backward c%d %dx%d k%d batch %d", s.c, s.h, s.w, s.k,
			 batch);
		check_close(t, what, dx.out[0], dx.out[1], nx, 0.0);
		snprintf(what, sizeof(what), "channel_bias_act %d x %zu relu", s.c, nx / (size_t)s.c);
		check_close(t, what, biased.out[0], biased.out[1], nx, ELEM_TOL);
		free(x);
		free(dy);
		free(bias);
		free(arg[0]);
		free(arg[1]);
		pair_free(&y);
		pair_free(&dx);
		pair_free(&biased);
	}
}

/* The transposes at the ends of LeNet-5's convolutional stack: exact. */
static void test_transpose(struct gpu_test *t)
{
	const int shapes[][2] = {{1, 1}, {64, 784}, {400, 64}, {17, 33}};
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int rows = shapes[si][0], cols = shapes[si][1];
		size_t n = (size_t)rows * cols;
		struct rng r = rng_make(t->seed, 110 + si);
		float *x = fbuf(n);
		struct pair y;
		pair_alloc(&y, n);
		ref_fill_uniform(&r, x, n, -1.0, 1.0);
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (int w = 0; w < 2; w++) {
			float *dx = gpu_upload_new(bes[w], x, n * sizeof(float));
			float *dy = gpu_upload_new(bes[w], NULL, n * sizeof(float));
			backend_transpose(bes[w], dx, rows, cols, dy);
			gpu_download(bes[w], y.out[w], dy, n * sizeof(float));
			backend_free(bes[w], dx);
			backend_free(bes[w], dy);
		}
		size_t wrong = 0;
		for (int i = 0; i < rows; i++)
			for (int j = 0; j < cols; j++)
				wrong += y.out[1][(size_t)j * rows + i] != x[(size_t)i * cols + j];
		char what[96];
		snprintf(what, sizeof(what), "transpose %dx%d", rows, cols);
		gpu_test_check(t, wrong == 0, "%s: host backend %zu entries misplaced", what, wrong);
		check_close(t, what, y.out[0], y.out[1], n, 0.0);
		free(x);
		pair_free(&y);
	}
}

/* LeNet-5's conv layers as the model runs them: forward and backward, cuBLAS vs the host's GEMM. */
static void test_conv_layers(struct gpu_test *t)
{
	struct model m;
	model_init(&m, MODEL_LENET, NULL, 0);
	const int batch = 64;
	float *params = fbuf(m.n_params);
	model_init_params(&m, t->seed, params);
	for (int li = 0; li < m.n_layers; li++) {
		const struct layer *l = &m.layer[li];
		if (l->kind != LAYER_CONV)
			continue;
		size_t nx = (size_t)batch * l->in, ny = (size_t)batch * l->out;
		size_t pixels = (size_t)batch * l->conv.oh * l->conv.ow;
		size_t nc = pixels * (size_t)l->fan_in;
		struct rng r = rng_make(t->seed, 100 + li);
		float *x = fbuf(nx), *dy = fbuf(ny), *ones = fbuf(pixels);
		struct pair y, grads, dx;
		pair_alloc(&y, ny);
		pair_alloc(&grads, m.n_params);
		pair_alloc(&dx, nx);
		ref_fill_uniform(&r, x, nx, -1.0, 2.0);
		ref_fill_uniform(&r, dy, ny, -1e-3, 1e-3);
		for (size_t i = 0; i < pixels; i++)
			ones[i] = 1.0f;
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			float *dp = gpu_upload_new(be, params, m.n_params * sizeof(float));
			float *dxin = gpu_upload_new(be, x, nx * sizeof(float));
			float *dyout = gpu_upload_new(be, NULL, ny * sizeof(float));
			float *ddy = gpu_upload_new(be, dy, ny * sizeof(float));
			float *dg = gpu_upload_new(be, NULL, m.n_params * sizeof(float));
			float *ddx = gpu_upload_new(be, NULL, nx * sizeof(float));
			float *dc = gpu_upload_new(be, NULL, nc * sizeof(float));
			float *d1 = gpu_upload_new(be, ones, pixels * sizeof(float));
			layer_forward(be, l, dp, dxin, dyout, dc, NULL, batch);
			layer_backward(be, l, dp, dxin, dyout, ddy, dg, ddx, dc, NULL, d1, batch);
			gpu_download(be, y.out[w], dyout, ny * sizeof(float));
			gpu_download(be, grads.out[w], dg, m.n_params * sizeof(float));
			gpu_download(be, dx.out[w], ddx, nx * sizeof(float));
			void *bufs[] = {dp, dxin, dyout, ddy, dg, ddx, dc, d1};
			for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
				backend_free(be, bufs[i]);
		}
		char what[96];
		snprintf(what, sizeof(what), "%s layer forward, batch %d", l->name, batch);
		check_close(t, what, y.out[0], y.out[1], ny, 1e-5);
		snprintf(what, sizeof(what), "%s layer dW, db, batch %d", l->name, batch);
		check_close(t, what, grads.out[0] + l->w_off, grads.out[1] + l->w_off,
			    l->b_off + (size_t)l->units - l->w_off, 1e-5);
		snprintf(what, sizeof(what), "%s layer dx (col2im), batch %d", l->name, batch);
		check_close(t, what, dx.out[0], dx.out[1], nx, 1e-5);
		free(x);
		free(dy);
		free(ones);
		pair_free(&y);
		pair_free(&grads);
		pair_free(&dx);
	}
	free(params);
}

/* One rank: the mean and the sum are the buffer itself, and so is a broadcast. */
static void test_collectives_one_rank(struct gpu_test *t)
{
	if (t->d.size != 1)
		return;
	const size_t n = 4099;
	struct rng r = rng_make(t->seed, 70);
	float *h = fbuf(n), *back = fbuf(n);
	ref_fill_normal(&r, h, n, 0.0, 1.0);
	float *d = gpu_upload_new(&t->dev, h, n * sizeof(float));
	backend_allreduce(&t->dev, d, n, REDUCE_MEAN);
	backend_allreduce(&t->dev, d, n, REDUCE_SUM);
	backend_broadcast(&t->dev, d, n, 0);
	backend_synchronize(&t->dev);
	gpu_download(&t->dev, back, d, n * sizeof(float));
	gpu_test_check(t, gpu_count_diff(back, h, n) == 0,
		       "allreduce mean, sum and broadcast on one rank leave %zu floats as they were", n);
	backend_free(&t->dev, d);
	free(h);
	free(back);
}

int main(int argc, char **argv)
{
	struct gpu_test t;
	gpu_test_init(&t, "gpu_ops", 4242, NULL, &argc, &argv);
	gpu_test_start(&t);
	test_memory(&t);
	test_gemm(&t);
	test_gather_advance(&t);
	test_bias_act(&t);
	test_relu_backward(&t);
	test_softmax_xent(&t);
	test_argmax_hits(&t);
	test_sgd_update(&t);
	test_adamw_update(&t);
	test_conv_elements(&t);
	test_pool_and_channel_bias(&t);
	test_conv_layers(&t);
	test_transpose(&t);
	test_collectives_one_rank(&t);
	return gpu_test_finish(&t);
}
