/*
 * gpu_ops.c - every backend op, CUDA against host, on random inputs of
 * several shapes (ctest label gpu; one rank).
 *
 *   ctest --test-dir build -L gpu --output-on-failure
 *   build/tests/gpu_ops [--self-test]
 *
 * Element ops (gather, softmax_xent with its ReLU gate and step counters,
 * sgd_update and adamw_update with the next batch's gather) must agree with
 * the host backend to a normalised error of 1e-6 (max |cuda - host| / max
 * |host|); labels, counters and hit counts exactly; clip_grad_norm's norm and
 * gradients bit for bit. GEMM epilogues (bias,
 * bias + ReLU with the backend's mask, the ReLU's gradient through that mask,
 * the bias gradient) agree to a normalised 1e-5. The convolution stages
 * (conv + bias + ReLU + pool forward with its im2col matrix, the pool's
 * backward, the input gradient through the stage below), on inputs and
 * weights whose sums are exact in float (small integers and eighths), agree
 * exactly, argmaxes included, although the GPU sums directly and the host
 * through a GEMM.
 * GEMM, all four transpose combinations, with and without beta and with
 * padded leading dimensions, is held by both backends to the float32 error
 * bound against a double-precision reference:
 *   |C - C_ref| <= (k + 4) * FLT_EPSILON * (|alpha| |op(A)| |op(B)| + |beta| |C0|)
 * elementwise, and the padding of C must be left untouched. Memory (zero-
 * filled alloc, upload/download round trip) and the one-rank collectives are
 * checked too. Prints one line per check; exits 77 with the reason where no
 * device is usable.
 *
 * --gemm-only: memory, the GEMMs and their epilogues alone, for the runs that
 * change only what cuBLASLt offers (the element ops, the clip and the
 * convolution stages run kernels of ours whatever it offers, and run in the
 * full run) or only which device a rank sees; half the simulator's time.
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

/* The gather at a cursor inside the index and at one the index clips, in both layouts. */
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

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
		for (int batch_last = 0; batch_last <= 1; batch_last++)
			for (int clipped = 0; clipped <= 1; clipped++) {
				int count = counts[ci];
				/* clipped: fewer than count rows left, so the batch is cut short */
				int32_t start = clipped ? len - count / 2 - 1 : 17 + (int32_t)ci, cur_after[2];
				size_t nx = (size_t)count * pixels;
				float *x_out[2] = {fbuf(nx), fbuf(nx)};
				int32_t *y_out[2] = {ibuf((size_t)count), ibuf((size_t)count)};
				const struct backend *bes[2] = {&t->dev, &t->host};
				for (int w = 0; w < 2; w++) {
					const struct backend *be = bes[w];
					struct gather_req g = {
						.images = gpu_upload_new(be, images, (size_t)n_img * pixels),
						.labels = gpu_upload_new(be, labels, (size_t)n_img),
						.pixels = pixels,
						.index = gpu_upload_new(be, index, (size_t)len * sizeof(int32_t)),
						.len = len, .count = count, .batch_last = batch_last,
						.x = gpu_upload_new(be, NULL, nx * sizeof(float)),
						.y = gpu_upload_new(be, NULL, (size_t)count * sizeof(int32_t))};
					int32_t *dc = gpu_upload_new(be, &start, sizeof(start));
					g.cursor = dc;
					backend_gather(be, &g);
					backend_advance(be, dc, count);
					gpu_download(be, x_out[w], g.x, nx * sizeof(float));
					gpu_download(be, y_out[w], g.y, (size_t)count * sizeof(int32_t));
					gpu_download(be, &cur_after[w], dc, sizeof(int32_t));
					void *bufs[] = {(void *)g.images, (void *)g.labels, (void *)g.index, g.x, g.y, dc};
					for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
						backend_free(be, bufs[i]);
				}
				char what[128];
				snprintf(what, sizeof(what), "gather %d x %d from cursor %d of %d%s", count,
					 pixels, start, len, batch_last ? ", batch last" : "");
				check_close(t, what, x_out[0], x_out[1], nx, ELEM_TOL);
				snprintf(what, sizeof(what), "gather labels %d from cursor %d of %d", count,
					 start, len);
				check_exact_i(t, what, y_out[0], y_out[1], (size_t)count);
				gpu_test_check(t, cur_after[0] == start + count && cur_after[1] == start + count,
					       "advance %d + %d: %s %d host %d", start, count,
					       backend_name(&t->dev), cur_after[0], cur_after[1]);
				for (int w = 0; w < 2; w++) {
					free(x_out[w]);
					free(y_out[w]);
				}
			}
	free(images);
	free(labels);
	free(index);
}

/*
 * One dense layer's GEMMs as the model runs them, with their epilogues, on
 * both backends: y = relu(x W^T + b) keeping the backend's ReLU mask, the
 * gradient of the layer below through that ReLU (dx = (dz W2) gated by y),
 * dW = dz^T x with db, and a plain y = x W^T + b.
 */
static void test_gemm_epilogues(struct gpu_test *t)
{
	/* rows, in, out, out2: the mlp's and LeNet-5's layers at batch 32 and 64, odd shapes */
	const int shapes[][4] = {{32, 784, 512, 256}, {64, 400, 120, 84}, {32, 84, 10, 10},
				 {7, 5, 3, 9},         {1, 17, 33, 2},    {65, 128, 200, 129}};
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int rows = shapes[si][0], in = shapes[si][1], out = shapes[si][2], out2 = shapes[si][3];
		struct rng r = rng_make(t->seed, 20 + si);
		size_t nx = (size_t)rows * in, nw = (size_t)out * in, ny = (size_t)rows * out;
		size_t nw2 = (size_t)out2 * out, nz2 = (size_t)rows * out2;
		float *x = fbuf(nx), *wt = fbuf(nw), *b = fbuf((size_t)out), *w2 = fbuf(nw2);
		float *dz2 = fbuf(nz2), *dz = fbuf(ny);
		struct pair y, plain, dx, dw, db, dbt;
		pair_alloc(&y, ny);
		pair_alloc(&plain, ny);
		pair_alloc(&dx, ny);
		pair_alloc(&dw, nw);
		pair_alloc(&db, (size_t)out);
		pair_alloc(&dbt, (size_t)in);
		ref_fill_uniform(&r, x, nx, -1.0, 1.0);
		ref_fill_uniform(&r, wt, nw, -0.1, 0.1);
		ref_fill_uniform(&r, b, (size_t)out, -0.1, 0.1);
		ref_fill_uniform(&r, w2, nw2, -0.1, 0.1);
		ref_fill_uniform(&r, dz2, nz2, -1.0, 1.0);
		ref_fill_uniform(&r, dz, ny, -1.0, 1.0);
		const struct backend *bes[2] = {&t->dev, &t->host};
		for (int w = 0; w < 2; w++) {
			const struct backend *be = bes[w];
			float *dxin = gpu_upload_new(be, x, nx * sizeof(float));
			float *dw_ = gpu_upload_new(be, wt, nw * sizeof(float));
			float *dbias = gpu_upload_new(be, b, (size_t)out * sizeof(float));
			float *dw2 = gpu_upload_new(be, w2, nw2 * sizeof(float));
			float *ddz2 = gpu_upload_new(be, dz2, nz2 * sizeof(float));
			float *ddz = gpu_upload_new(be, dz, ny * sizeof(float));
			float *dy = gpu_upload_new(be, NULL, ny * sizeof(float));
			float *dplain = gpu_upload_new(be, NULL, ny * sizeof(float));
			float *ddx = gpu_upload_new(be, NULL, ny * sizeof(float));
			float *ddw = gpu_upload_new(be, NULL, nw * sizeof(float));
			float *ddb = gpu_upload_new(be, NULL, (size_t)out * sizeof(float));
			float *ddbt = gpu_upload_new(be, NULL, (size_t)in * sizeof(float));
			size_t mask_bytes = backend_relu_mask_bytes(be, rows, out);
			void *mask = mask_bytes ? gpu_upload_new(be, NULL, mask_bytes) : NULL;
			struct gemm_req f = {.trans_b = 1, .m = rows, .n = out, .k = in, .alpha = 1.0f,
					     .a = dxin, .lda = in, .b = dw_, .ldb = in, .c = dy, .ldc = out,
					     .epilogue = GEMM_EPILOGUE_BIAS_RELU, .bias = dbias,
					     .relu_mask = mask};
			backend_gemm(be, &f);
			f.epilogue = GEMM_EPILOGUE_BIAS;
			f.relu_mask = NULL;
			f.c = dplain;
			backend_gemm(be, &f);
			struct gemm_req g = {.m = rows, .n = out, .k = out2, .alpha = 1.0f, .a = ddz2,
					     .lda = out2, .b = dw2, .ldb = out, .c = ddx, .ldc = out,
					     .epilogue = GEMM_EPILOGUE_DRELU, .act = dy, .relu_mask = mask};
			backend_gemm(be, &g);
			struct gemm_req h = {.trans_a = 1, .m = out, .n = in, .k = rows, .alpha = 1.0f,
					     .a = ddz, .lda = out, .b = dxin, .ldb = in, .c = ddw, .ldc = in,
					     .bias_grad = ddb};
			backend_gemm(be, &h);
			/* The other transpose of A: dW^T (in, out) = x^T dz, db^T its row sums over x. */
			float *ddwt = gpu_upload_new(be, NULL, nw * sizeof(float));
			struct gemm_req k = {.trans_a = 1, .m = in, .n = out, .k = rows, .alpha = 1.0f,
					     .a = dxin, .lda = in, .b = ddz, .ldb = out, .c = ddwt, .ldc = out,
					     .bias_grad = ddbt};
			backend_gemm(be, &k);
			gpu_download(be, y.out[w], dy, ny * sizeof(float));
			gpu_download(be, plain.out[w], dplain, ny * sizeof(float));
			gpu_download(be, dx.out[w], ddx, ny * sizeof(float));
			gpu_download(be, dw.out[w], ddw, nw * sizeof(float));
			gpu_download(be, db.out[w], ddb, (size_t)out * sizeof(float));
			gpu_download(be, dbt.out[w], ddbt, (size_t)in * sizeof(float));
			void *bufs[] = {dxin, dw_, dbias, dw2, ddz2, ddz, dy, dplain, ddx, ddw, ddb, ddbt, ddwt, mask};
			for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
				backend_free(be, bufs[i]);
		}
		char what[128];
		snprintf(what, sizeof(what), "gemm %dx%dx%d bias+ReLU epilogue", rows, out, in);
		check_close(t, what, y.out[0], y.out[1], ny, 1e-5);
		snprintf(what, sizeof(what), "gemm %dx%dx%d bias epilogue", rows, out, in);
		check_close(t, what, plain.out[0], plain.out[1], ny, 1e-5);
		snprintf(what, sizeof(what), "gemm %dx%dx%d ReLU-gradient epilogue", rows, out, out2);
		check_close(t, what, dx.out[0], dx.out[1], ny, 1e-5);
		snprintf(what, sizeof(what), "gemm %dx%dx%d (dW)", out, in, rows);
		check_close(t, what, dw.out[0], dw.out[1], nw, 1e-5);
		snprintf(what, sizeof(what), "gemm %dx%dx%d bias gradient (db over rows)", out, in, rows);
		check_close(t, what, db.out[0], db.out[1], (size_t)out, 1e-5);
		snprintf(what, sizeof(what), "gemm %dx%dx%d bias gradient of the other operand", in, out,
			 rows);
		check_close(t, what, dbt.out[0], dbt.out[1], (size_t)in, 1e-5);
		/* The gate: where the forward's ReLU gave 0, the gradient is exactly 0. */
		size_t leaked = 0;
		for (size_t i = 0; i < ny; i++)
			leaked += !(y.out[0][i] > 0.0f) && dx.out[0][i] != 0.0f;
		gpu_test_check(t, leaked == 0, "%s: %zu gradients pass where the ReLU gave 0", what,
			       leaked);
		free(x);
		free(wt);
		free(b);
		free(w2);
		free(dz2);
		free(dz);
		pair_free(&y);
		pair_free(&plain);
		pair_free(&dx);
		pair_free(&dw);
		pair_free(&db);
		pair_free(&dbt);
	}
}

static void test_softmax_xent(struct gpu_test *t)
{
	const int shapes[][2] = {{1, 10}, {32, 10}, {1000, 10}, {64, 33}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int mode = 0; mode < 3; mode++) { /* loss only; gradient; gradient through a ReLU */
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			float scale = 1.0f / (float)rows;
			struct rng r = rng_make(t->seed, 40 + 3 * s + (uint64_t)mode);
			float *logits = fbuf(n), *loss[2] = {fbuf((size_t)rows), fbuf((size_t)rows)};
			float *grad[2] = {fbuf(n), fbuf(n)};
			int32_t *labels = ibuf((size_t)rows);
			struct step_counters after[2], before = {5, 2, 9, 0};
			const struct backend *bes[2] = {&t->dev, &t->host};
			ref_fill_uniform(&r, logits, n, -8.0, 8.0);
			if (mode == 2) /* a ReLU's output: zeros and positives */
				for (size_t i = 0; i < n; i++)
					logits[i] = logits[i] > 0.0f ? logits[i] : 0.0f;
			ref_fill_labels(&r, labels, (size_t)rows, cols);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				struct xent_req x = {
					.logits = gpu_upload_new(be, logits, n * sizeof(float)),
					.labels = gpu_upload_new(be, labels, (size_t)rows * sizeof(int32_t)),
					.rows = rows, .cols = cols, .scale = scale,
					.row_loss = gpu_upload_new(be, NULL, (size_t)rows * sizeof(float)),
					.relu = mode == 2,
					.counters = gpu_upload_new(be, &before, sizeof(before))};
				float *dgrad = gpu_upload_new(be, NULL, n * sizeof(float));
				x.dlogits = mode ? dgrad : NULL;
				backend_softmax_xent(be, &x);
				gpu_download(be, loss[w], x.row_loss, (size_t)rows * sizeof(float));
				gpu_download(be, grad[w], dgrad, n * sizeof(float));
				gpu_download(be, &after[w], x.counters, sizeof(after[w]));
				void *bufs[] = {(void *)x.logits, (void *)x.labels, x.row_loss, x.counters, dgrad};
				for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
					backend_free(be, bufs[i]);
			}
			static const char *const modes[] = {"", " (with gradient)", " (through a ReLU)"};
			char what[96];
			snprintf(what, sizeof(what), "softmax_xent %dx%d loss%s", rows, cols, modes[mode]);
			check_close(t, what, loss[0], loss[1], (size_t)rows, ELEM_TOL);
			snprintf(what, sizeof(what), "softmax_xent %dx%d %s", rows, cols,
				 mode ? "gradient" : "gradient buffer untouched");
			check_close(t, what, grad[0], grad[1], n, ELEM_TOL);
			for (int w = 0; w < 2; w++)
				gpu_test_check(t, after[w].cursor == before.cursor + rows &&
						       after[w].step == before.step + 1 &&
						       after[w].updates == before.updates + 1,
					       "softmax_xent %dx%d on %s: counters %d %d %d, expected %d %d %d",
					       rows, cols, backend_name(bes[w]), after[w].cursor, after[w].step,
					       after[w].updates, before.cursor + rows, before.step + 1,
					       before.updates + 1);
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

/* A small data set for the gathers that follow an update: one per backend. */
struct batch_src {
	uint8_t *images, *labels;
	int32_t *index, *cursor;
	float *x;
	int32_t *y;
};

enum { SRC_IMAGES = 50, SRC_LEN = 40, SRC_COUNT = 16 };

static void batch_src_make(struct gpu_test *t, struct batch_src src[2])
{
	struct rng r = rng_make(t->seed, 77);
	uint8_t images[SRC_IMAGES * 784], labels[SRC_IMAGES];
	int32_t index[SRC_LEN], cursor = SRC_LEN - SRC_COUNT + 3; /* 13 rows left of 16 */
	ref_fill_bytes(&r, images, sizeof(images));
	ref_fill_bytes(&r, labels, sizeof(labels));
	for (int i = 0; i < SRC_LEN; i++)
		index[i] = (int32_t)rng_below(&r, SRC_IMAGES);
	const struct backend *bes[2] = {&t->dev, &t->host};
	for (int w = 0; w < 2; w++) {
		src[w].images = gpu_upload_new(bes[w], images, sizeof(images));
		src[w].labels = gpu_upload_new(bes[w], labels, sizeof(labels));
		src[w].index = gpu_upload_new(bes[w], index, sizeof(index));
		src[w].cursor = gpu_upload_new(bes[w], &cursor, sizeof(cursor));
		src[w].x = gpu_upload_new(bes[w], NULL, SRC_COUNT * 784 * sizeof(float));
		src[w].y = gpu_upload_new(bes[w], NULL, SRC_COUNT * sizeof(int32_t));
	}
}

static struct gather_req batch_src_req(const struct batch_src *s, const int32_t *cursor)
{
	struct gather_req g = {.images = s->images, .labels = s->labels, .pixels = 784,
			       .index = s->index, .len = SRC_LEN, .cursor = cursor,
			       .count = SRC_COUNT, .batch_last = 1, .x = s->x, .y = s->y};
	return g;
}

/* The gathers that followed the updates: the same batch on both backends, and the same as a plain gather. */
static void batch_src_check(struct gpu_test *t, struct batch_src src[2], const char *what)
{
	const struct backend *bes[2] = {&t->dev, &t->host};
	float *x[2] = {fbuf(SRC_COUNT * 784), fbuf(SRC_COUNT * 784)};
	float *plain = fbuf(SRC_COUNT * 784);
	int32_t *y[2] = {ibuf(SRC_COUNT), ibuf(SRC_COUNT)};
	for (int w = 0; w < 2; w++) {
		gpu_download(bes[w], x[w], src[w].x, SRC_COUNT * 784 * sizeof(float));
		gpu_download(bes[w], y[w], src[w].y, SRC_COUNT * sizeof(int32_t));
	}
	struct gather_req g = batch_src_req(&src[1], src[1].cursor);
	float *host_x = gpu_upload_new(&t->host, NULL, SRC_COUNT * 784 * sizeof(float));
	g.x = host_x;
	backend_gather(&t->host, &g);
	gpu_download(&t->host, plain, host_x, SRC_COUNT * 784 * sizeof(float));
	char msg[160];
	snprintf(msg, sizeof(msg), "%s: the next batch gathered in the same op", what);
	check_close(t, msg, x[0], x[1], SRC_COUNT * 784, 0.0);
	check_exact_i(t, msg, y[0], y[1], SRC_COUNT);
	snprintf(msg, sizeof(msg), "%s: the next batch as a plain gather gives it", what);
	check_close(t, msg, x[1], plain, SRC_COUNT * 784, 0.0);
	backend_free(&t->host, host_x);
	for (int w = 0; w < 2; w++) {
		void *bufs[] = {src[w].images, src[w].labels, src[w].index, src[w].cursor, src[w].x, src[w].y};
		for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
			backend_free(bes[w], bufs[i]);
		free(x[w]);
		free(y[w]);
	}
	free(plain);
}

/*
 * The counters as the loss op of step s leaves them (step s + 1 begun, its
 * update the (base + s + 1)-th); each update reads its rate and count there.
 */
static void counters_for_step(const struct backend *be, struct step_counters *d, int s, int base)
{
	struct step_counters c = {0, s + 1, base + s + 1, 0};
	backend_upload(be, d, &c, sizeof(c));
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
			struct batch_src src[2];
			batch_src_make(t, src);
			ref_fill_normal(&r, p0, n, 0.0, 0.1);
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			ref_fill_normal(&r, v0, n, 0.0, 0.5);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *dp = gpu_upload_new(be, p0, n * sizeof(float));
				float *dg = gpu_upload_new(be, g, n * sizeof(float));
				float *dv = gpu_upload_new(be, v0, n * sizeof(float));
				/* Three steps at three rates, picked by the step counter in backend memory. */
				const float rates[3] = {0.05f, 0.03f, 0.01f};
				float *dr = gpu_upload_new(be, rates, sizeof(rates));
				struct step_counters *dcnt = gpu_upload_new(be, NULL, sizeof(*dcnt));
				for (int step = 0; step < 3; step++) {
					counters_for_step(be, dcnt, step, 0);
					struct gather_req next = batch_src_req(&src[w], src[w].cursor);
					backend_sgd_update(be, dp, dg, dv, n, dr, dcnt, moms[mi],
							   mi ? 0.01f : 0.0f, step == 2 ? &next : NULL);
				}
				backend_free(be, dr);
				backend_free(be, dcnt);
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
			batch_src_check(t, src, what);
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

/*
 * Gradient clipping: the norm and the gradients, CUDA against host, bit for
 * bit (both sum the squares in elem.h's order, CLIP_PARTS, and neither
 * contracts into FMA), clipped (the bound a tenth of the norm) and not (ten
 * times it: untouched).
 */
static void test_clip_grad_norm(struct gpu_test *t)
{
	const size_t sizes[] = {1, 7850, ((size_t)1 << 20) + 3};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int clip = 0; clip < 2; clip++) {
			size_t n = sizes[s];
			struct rng r = rng_make(t->seed, 70 + 2 * s + clip);
			float *g = fbuf(n), *g_out[2] = {fbuf(n), fbuf(n)}, norm[2] = {0.0f, 0.0f};
			const struct backend *bes[2] = {&t->dev, &t->host};
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			double *ref = dbuf(n);
			double want = ref_clip_grad_norm(g, ref, n, 0.0);
			float max_norm = (float)(want * (clip ? 0.1 : 10.0));
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *dg = gpu_upload_new(be, g, n * sizeof(float));
				float *dn = gpu_upload_new(be, NULL, sizeof(float));
				backend_clip_grad_norm(be, dg, n, max_norm, dn);
				gpu_download(be, g_out[w], dg, n * sizeof(float));
				gpu_download(be, &norm[w], dn, sizeof(float));
				backend_free(be, dg);
				backend_free(be, dn);
			}
			char what[96];
			snprintf(what, sizeof(what), "clip_grad_norm n=%zu %s", n,
				 clip ? "clipped" : "not clipped");
			gpu_test_check(t, memcmp(&norm[0], &norm[1], sizeof(float)) == 0 &&
						  fabs((double)norm[1] - want) <= 1e-6 * want,
				       "%s: norm %.9g, host %.9g, double %.9g", what, (double)norm[0],
				       (double)norm[1], want);
			gpu_test_check(t, gpu_count_diff(g_out[0], g_out[1], n) == 0,
				       "%s: %zu of %zu gradients differ from the host's in any bit", what,
				       gpu_count_diff(g_out[0], g_out[1], n), n);
			gpu_test_check(t, clip == (memcmp(g_out[1], g, n * sizeof(float)) != 0),
				       "%s: the gradients %s", what, clip ? "scaled" : "untouched");
			free(g);
			free(ref);
			free(g_out[0]);
			free(g_out[1]);
		}
	}
}

/* AdamW: 4 updates (bias correction at 1 and after, and from update 1000), with and without weight decay. */
static void test_adamw_update(struct gpu_test *t)
{
	const size_t sizes[] = {1, 7850, ((size_t)1 << 20) + 3};
	const float wds[] = {0.0f, 0.01f};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int wi = 0; wi < 2; wi++) {
			size_t n = sizes[s];
			int base = s == 1 ? 1000 : 0; /* a resumed run's update count */
			struct rng r = rng_make(t->seed, 80 + 2 * s + wi);
			float *p0 = fbuf(n), *g = fbuf(n);
			float *p_out[2] = {fbuf(n), fbuf(n)}, *mv_out[2] = {fbuf(2 * n), fbuf(2 * n)};
			const struct backend *bes[2] = {&t->dev, &t->host};
			struct adamw_hyper h = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
						.weight_decay = wds[wi]};
			struct batch_src src[2];
			batch_src_make(t, src);
			ref_fill_normal(&r, p0, n, 0.0, 0.1);
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			for (int w = 0; w < 2; w++) {
				const struct backend *be = bes[w];
				float *dp = gpu_upload_new(be, p0, n * sizeof(float));
				float *dg = gpu_upload_new(be, g, n * sizeof(float));
				float *dmv = gpu_upload_new(be, NULL, 2 * n * sizeof(float));
				const float rates[4] = {1e-3f, 8e-4f, 6e-4f, 4e-4f};
				float *dr = gpu_upload_new(be, rates, sizeof(rates));
				struct step_counters *dcnt = gpu_upload_new(be, NULL, sizeof(*dcnt));
				for (int step = 0; step < 4; step++) {
					counters_for_step(be, dcnt, step, base);
					struct gather_req next = batch_src_req(&src[w], src[w].cursor);
					backend_adamw_update(be, dp, dg, dmv, dmv + n, n, dr, dcnt, h,
							     step == 3 ? &next : NULL);
				}
				gpu_download(be, p_out[w], dp, n * sizeof(float));
				gpu_download(be, mv_out[w], dmv, 2 * n * sizeof(float));
				backend_free(be, dr);
				backend_free(be, dcnt);
				backend_free(be, dp);
				backend_free(be, dg);
				backend_free(be, dmv);
			}
			char what[96];
			snprintf(what, sizeof(what), "adamw_update x4 n=%zu wd=%g from update %d params", n,
				 (double)wds[wi], base);
			check_close(t, what, p_out[0], p_out[1], n, ELEM_TOL);
			snprintf(what, sizeof(what), "adamw_update x4 n=%zu wd=%g from update %d moments", n,
				 (double)wds[wi], base);
			check_close(t, what, mv_out[0], mv_out[1], 2 * n, ELEM_TOL);
			batch_src_check(t, src, what);
			free(p0);
			free(g);
			for (int w = 0; w < 2; w++) {
				free(p_out[w]);
				free(mv_out[w]);
			}
		}
	}
}

/* Values whose products and sums stay exact in float: k/8 for integers k in [lo, hi]. */
static void fill_eighths(struct rng *r, float *p, size_t n, int lo, int hi)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((int)rng_below(r, (uint64_t)(hi - lo + 1)) + lo) / 8.0f;
}

/*
 * Two convolution stages as LeNet-5 runs them (the upper one batch-first
 * when `flat`, as under a dense layer), forward and backward, on both
 * backends: the GPU sums each output directly, the host through im2col and a
 * GEMM, and on these exact values they agree to the bit.
 */
static void conv_stage_pair(struct gpu_test *t, int c0, int hw, int k0, int pad0, int oc0, int k1,
			    int oc1, int pool, int rows, int flat)
{
	struct conv_shape s0 = conv_shape_make(c0, hw, hw, k0, pad0);
	struct pool_shape p0 = pool_shape_make(oc0, s0.oh, s0.ow, pool);
	struct conv_shape s1 = conv_shape_make(oc0, p0.oh, p0.ow, k1, 0);
	struct pool_shape p1 = pool_shape_make(oc1, s1.oh, s1.ow, pool);
	struct conv_stage st0 = {&s0, &p0, oc0, rows, 0}, st1 = {&s1, &p1, oc1, rows, flat};
	size_t nx = (size_t)c0 * hw * hw * rows, nw0 = (size_t)oc0 * c0 * k0 * k0;
	size_t nw1 = (size_t)oc1 * oc0 * k1 * k1;
	size_t ny0 = (size_t)oc0 * p0.oh * p0.ow * rows, ny1 = (size_t)oc1 * p1.oh * p1.ow * rows;
	size_t nz0 = (size_t)oc0 * s0.oh * s0.ow * rows, nz1 = (size_t)oc1 * s1.oh * s1.ow * rows;
	size_t nc0 = (size_t)c0 * k0 * k0 * s0.oh * s0.ow * rows;
	size_t nc1 = (size_t)oc0 * k1 * k1 * s1.oh * s1.ow * rows;
	struct rng r = rng_make(t->seed, 100 + (uint64_t)hw * 7 + (uint64_t)flat);
	float *x = fbuf(nx), *w0 = fbuf(nw0), *w1 = fbuf(nw1), *b0 = fbuf((size_t)oc0);
	float *b1 = fbuf((size_t)oc1), *dy1 = fbuf(ny1);
	fill_eighths(&r, x, nx, -4, 8);
	fill_eighths(&r, w0, nw0, -2, 2);
	fill_eighths(&r, w1, nw1, -2, 2);
	fill_eighths(&r, b0, (size_t)oc0, -2, 1);
	fill_eighths(&r, b1, (size_t)oc1, -2, 1);
	fill_eighths(&r, dy1, ny1, -8, 8);
	struct pair y0, y1, cols0, cols1, dz1, dz0;
	int32_t *arg0[2] = {ibuf(ny0), ibuf(ny0)}, *arg1[2] = {ibuf(ny1), ibuf(ny1)};
	pair_alloc(&y0, ny0);
	pair_alloc(&y1, ny1);
	pair_alloc(&cols0, nc0);
	pair_alloc(&cols1, nc1);
	pair_alloc(&dz1, nz1);
	pair_alloc(&dz0, nz0);
	const struct backend *bes[2] = {&t->dev, &t->host};
	for (int w = 0; w < 2; w++) {
		const struct backend *be = bes[w];
		float *dx = gpu_upload_new(be, x, nx * sizeof(float));
		float *dw0 = gpu_upload_new(be, w0, nw0 * sizeof(float));
		float *dw1 = gpu_upload_new(be, w1, nw1 * sizeof(float));
		float *db0 = gpu_upload_new(be, b0, (size_t)oc0 * sizeof(float));
		float *db1 = gpu_upload_new(be, b1, (size_t)oc1 * sizeof(float));
		float *ddy1 = gpu_upload_new(be, dy1, ny1 * sizeof(float));
		float *dy0 = gpu_upload_new(be, NULL, ny0 * sizeof(float));
		float *dy1o = gpu_upload_new(be, NULL, ny1 * sizeof(float));
		int32_t *da0 = gpu_upload_new(be, NULL, ny0 * sizeof(int32_t));
		int32_t *da1 = gpu_upload_new(be, NULL, ny1 * sizeof(int32_t));
		float *dc0 = gpu_upload_new(be, NULL, nc0 * sizeof(float));
		float *dc1 = gpu_upload_new(be, NULL, nc1 * sizeof(float));
		float *ddz1 = gpu_upload_new(be, NULL, nz1 * sizeof(float));
		float *ddz0 = gpu_upload_new(be, NULL, nz0 * sizeof(float));
		backend_conv_forward(be, &st0, dx, dw0, db0, dy0, da0, dc0);
		backend_conv_forward(be, &st1, dy0, dw1, db1, dy1o, da1, dc1);
		backend_pool_backward(be, &st1, ddy1, dy1o, da1, ddz1);
		backend_conv_backward_data(be, &st1, dw1, ddz1, &st0, dy0, da0, ddz0);
		gpu_download(be, y0.out[w], dy0, ny0 * sizeof(float));
		gpu_download(be, y1.out[w], dy1o, ny1 * sizeof(float));
		gpu_download(be, arg0[w], da0, ny0 * sizeof(int32_t));
		gpu_download(be, arg1[w], da1, ny1 * sizeof(int32_t));
		gpu_download(be, cols0.out[w], dc0, nc0 * sizeof(float));
		gpu_download(be, cols1.out[w], dc1, nc1 * sizeof(float));
		gpu_download(be, dz1.out[w], ddz1, nz1 * sizeof(float));
		gpu_download(be, dz0.out[w], ddz0, nz0 * sizeof(float));
		void *bufs[] = {dx, dw0, dw1, db0, db1, ddy1, dy0, dy1o, da0, da1, dc0, dc1, ddz1, ddz0};
		for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
			backend_free(be, bufs[i]);
	}
	char what[160];
	snprintf(what, sizeof(what), "conv stages %dx%dx%d k%d pad%d -> %d, k%d -> %d, pool %d, %d rows%s",
		 c0, hw, hw, k0, pad0, oc0, k1, oc1, pool, rows, flat ? ", batch first" : "");
	size_t live = 0;
	for (size_t i = 0; i < ny1; i++)
		live += y1.out[1][i] > 0.0f;
	/* Large enough cases must exercise both sides of the ReLUs. */
	gpu_test_check(t, live > ny1 / 8 && (ny1 < 200 || live < ny1),
		       "%s: %zu of %zu upper outputs positive (the ReLUs pass some and stop some)",
		       what, live, ny1);
	char msg[200];
	const struct {
		const char *name;
		struct pair *p;
	} outs[] = {{"lower stage output", &y0}, {"upper stage output", &y1},
		    {"lower im2col matrix", &cols0}, {"upper im2col matrix", &cols1},
		    {"upper pool backward (dz)", &dz1}, {"input gradient through the lower pool (dz)", &dz0}};
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
		snprintf(msg, sizeof(msg), "%s: %s", what, outs[i].name);
		check_close(t, msg, outs[i].p->out[0], outs[i].p->out[1], outs[i].p->n, 0.0);
	}
	snprintf(msg, sizeof(msg), "%s: argmaxes", what);
	check_exact_i(t, msg, arg0[0], arg0[1], ny0);
	check_exact_i(t, msg, arg1[0], arg1[1], ny1);
	free(x);
	free(w0);
	free(w1);
	free(b0);
	free(b1);
	free(dy1);
	for (int w = 0; w < 2; w++) {
		free(arg0[w]);
		free(arg1[w]);
	}
	pair_free(&y0);
	pair_free(&y1);
	pair_free(&cols0);
	pair_free(&cols1);
	pair_free(&dz1);
	pair_free(&dz0);
}

static void test_conv_stages(struct gpu_test *t)
{
	/* LeNet-5 at batch 64 (under a dense layer) and 3 rows, and an odd pair with k=3 pools. */
	conv_stage_pair(t, 1, 28, 5, 2, 6, 5, 16, 2, t->quick ? 8 : 64, 1);
	conv_stage_pair(t, 1, 28, 5, 2, 6, 5, 16, 2, 3, 0);
	conv_stage_pair(t, 2, 16, 3, 2, 3, 4, 4, 3, 5, 1);
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
	gpu_test_init(&t, "gpu_ops", 4242, "--gemm-only", &argc, &argv);
	gpu_test_start(&t);
	test_memory(&t);
	test_gemm(&t);
	if (gpu_test_option(&t, "--gemm-only")) {
		test_gemm_epilogues(&t);
		if (t.d.rank == 0)
			printf("# --gemm-only: the element ops, the clip and the convolution stages "
			       "left to the full run\n");
		return gpu_test_finish(&t);
	}
	test_gather_advance(&t);
	test_gemm_epilogues(&t);
	test_softmax_xent(&t);
	test_argmax_hits(&t);
	test_sgd_update(&t);
	test_adamw_update(&t);
	test_clip_grad_norm(&t);
	test_conv_stages(&t);
	test_collectives_one_rank(&t);
	return gpu_test_finish(&t);
}
