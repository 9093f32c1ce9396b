/*
 * test_kernels_host.c - the CUDA kernel file itself, run on the CPU.
 *
 *   ctest --test-dir build -R test_kernels_host --output-on-failure
 *
 * cuda/kernels.cu is compiled by the host C compiler with the stand-in tests/cuda_host/cuda_runtime.h
 * (tests/cuda_host/kernels_host.c), so every launcher here runs the very
 * kernels, index arithmetic, bounds checks and launch geometry that nvcc
 * builds into the CUDA backend, as nested loops over blocks and threads. This
 * test needs no CUDA toolkit and runs in every build.
 *
 * Each kernel is launched with the geometry the backend uses (geom NULL) and
 * with deliberately small or oversized grids, so the grid-stride loops wrap
 * several times or leave threads idle. Results are compared with
 *   - the naive double-precision references of tests/ref.c (atol + rtol*|ref|),
 *   - the host backend's op (cpu/backend_host.c), which loops over the same
 *     elem.h bodies: the result must be identical, bit for bit.
 * Outputs sit between guard words that must survive every launch, and the
 * kernels that accumulate (argmax hits, SGD, scale) show any item processed
 * twice as a wrong value. Inputs come from MNIST_TEST_SEED (tests/ref.h); the
 * seed is printed with every mismatch.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "elem.h"
#include "cuda_runtime.h" /* the stand-in: tests/cuda_host/ */
#include "kernel_check.h"
#include "kernels.h"
#include "ref.h"

TestSuite(kernels_host, .init = kc_setup, .fini = kc_teardown);

/* ---- launch geometry ------------------------------------------------------------ */

Test(kernels_host, geometry_for_work_size)
{
	struct {
		size_t n;
		unsigned int grid;
	} cases[] = {
		{0, 0},
		{1, 1},
		{KERNEL_BLOCK - 1, 1},
		{KERNEL_BLOCK, 1},
		{KERNEL_BLOCK + 1, 2},
		{(size_t)KERNEL_BLOCK * KERNEL_MAX_GRID, KERNEL_MAX_GRID},
		{(size_t)KERNEL_BLOCK * KERNEL_MAX_GRID + 1, KERNEL_MAX_GRID},
		{(size_t)60000 * 784, KERNEL_MAX_GRID},
		{(size_t)1 << 40, KERNEL_MAX_GRID},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kernel_geom g = kernel_geom_for(cases[i].n);
		cr_assert_eq(g.block, KERNEL_BLOCK, "n=%zu: block %u", cases[i].n, g.block);
		cr_assert_eq(g.grid, cases[i].grid, "n=%zu: grid %u, expected %u", cases[i].n, g.grid,
			     cases[i].grid);
		/* Enough threads for every item, or the most blocks allowed. */
		cr_assert(g.grid == KERNEL_MAX_GRID || (size_t)g.grid * g.block >= cases[i].n);
	}
	cr_assert(KERNEL_BLOCK <= 1024 && KERNEL_BLOCK % 32 == 0, "block must be whole warps");
}

/* Each launcher's default geometry is kernel_geom_for(its documented work size). */
Test(kernels_host, launchers_use_backend_geometry)
{
	enum { ROWS = 33, COLS = 17, N = ROWS * COLS };
	float *a = calloc(N, sizeof(float)), *b = calloc(N, sizeof(float));
	float *loss = calloc(ROWS, sizeof(float));
	int32_t *lab = calloc(ROWS, sizeof(int32_t)), *hits = calloc(ROWS, sizeof(int32_t));
	int32_t *index = calloc(ROWS, sizeof(int32_t)), cursor = 0;
	uint8_t *img = calloc(N, 1);
	cr_assert(a && b && loss && lab && hits && index && img);

	kernels_gather(NULL, NULL, img, img, COLS, index, &cursor, ROWS, a, lab);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(N).grid, "gather");
	kernels_bias_act(NULL, NULL, a, b, ROWS, COLS, 1);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(N).grid, "bias_act");
	kernels_relu_backward(NULL, NULL, a, b, N);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(N).grid, "relu_backward");
	kernels_softmax_xent(NULL, NULL, a, lab, ROWS, COLS, 1.0f, loss, b);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(ROWS).grid, "softmax_xent");
	kernels_argmax_hits(NULL, NULL, a, lab, ROWS, COLS, hits);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(ROWS).grid, "argmax_hits");
	const float rate = 0.1f;
	const int32_t at = 0;
	kernels_sgd_update(NULL, NULL, a, b, NULL, N, &rate, &at, 0.0f, 0.0f);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(N).grid, "sgd_update");
	kernels_scale(NULL, NULL, a, N, 2.0f);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(N).grid, "scale");
	kernels_advance(NULL, NULL, &cursor, 1);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(1).grid, "advance");
	struct conv_shape cs = conv_shape_make(2, 5, 4, 3, 1);
	struct pool_shape ps = pool_shape_make(2, 5, 4, 2);
	float *ca = calloc(2048, sizeof(float)), *cb = calloc(2048, sizeof(float));
	cr_assert(ca && cb);
	kernels_im2col(NULL, NULL, ca, &cs, 3, cb);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for((size_t)2 * 9 * 3 * 5 * 4).grid, "im2col");
	kernels_col2im(NULL, NULL, cb, &cs, 3, ca);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for((size_t)3 * 2 * 5 * 4).grid, "col2im");
	kernels_channel_bias_act(NULL, NULL, ca, cb, 3, 150, 1);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(450).grid, "channel_bias_act");
	kernels_maxpool(NULL, NULL, ca, &ps, 3, cb, hits);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for((size_t)3 * 2 * 2 * 2).grid, "maxpool");
	kernels_maxpool_backward(NULL, NULL, cb, hits, &ps, 3, ca);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for((size_t)2 * 3 * 5 * 4).grid,
		     "maxpool_backward");
	kernels_transpose(NULL, NULL, ca, 40, 33, cb);
	cr_assert_eq(fake_cuda_stats.grid, kernel_geom_for(40 * 33).grid, "transpose");
	cr_assert_eq(fake_cuda_stats.launches, 14);
	cr_assert_eq(fake_cuda_stats.block, KERNEL_BLOCK);
	free(ca);
	free(cb);

	free(a);
	free(b);
	free(loss);
	free(lab);
	free(hits);
	free(index);
	free(img);
}

/* Nothing to do launches nothing (a zero-block launch is an error on a GPU). */
Test(kernels_host, empty_work_launches_nothing)
{
	float x = 1.0f, loss = 0.0f;
	int32_t lab = 0, hits = 0, cursor = 0;
	uint8_t img = 0;
	kernels_gather(NULL, NULL, &img, &img, 784, &cursor, &cursor, 0, &x, &lab);
	kernels_gather(NULL, NULL, &img, &img, 0, &cursor, &cursor, 32, &x, &lab);
	kernels_bias_act(NULL, NULL, &x, &x, 0, 10, 1);
	kernels_bias_act(NULL, NULL, &x, &x, 32, 0, 1);
	kernels_relu_backward(NULL, NULL, &x, &x, 0);
	kernels_softmax_xent(NULL, NULL, &x, &lab, 0, 10, 1.0f, &loss, NULL);
	kernels_argmax_hits(NULL, NULL, &x, &lab, 0, 10, &hits);
	const float rate = 0.1f;
	kernels_sgd_update(NULL, NULL, &x, &x, NULL, 0, &rate, &cursor, 0.0f, 0.0f);
	kernels_scale(NULL, NULL, &x, 0, 2.0f);
	struct conv_shape cs = conv_shape_make(1, 4, 4, 3, 1);
	struct pool_shape ps = pool_shape_make(1, 4, 4, 2);
	kernels_im2col(NULL, NULL, &x, &cs, 0, &x);
	kernels_col2im(NULL, NULL, &x, &cs, 0, &x);
	kernels_channel_bias_act(NULL, NULL, &x, &x, 0, 10, 1);
	kernels_channel_bias_act(NULL, NULL, &x, &x, 3, 0, 1);
	kernels_maxpool(NULL, NULL, &x, &ps, 0, &x, &hits);
	kernels_maxpool_backward(NULL, NULL, &x, &hits, &ps, 0, &x);
	kernels_transpose(NULL, NULL, &x, 0, 5, &x);
	kernels_transpose(NULL, NULL, &x, 5, 0, &x);
	cr_assert_eq(fake_cuda_stats.launches, 0);
	cr_assert(x == 1.0f && lab == 0 && hits == 0 && loss == 0.0f);
}

/*
 * A geometry CUDA refuses runs nothing; the check in KERNEL_LAUNCH stops the
 * program (on a GPU: CUDA_CHECK_LAUNCH's cudaGetLastError, then MPI_Abort).
 */
Test(kernels_host, a_refused_launch_is_stopped_by_the_launch_check, .signal = SIGABRT)
{
	float x = 1.0f;
	const struct kernel_geom zero_grid = {0, KERNEL_BLOCK};
	kernels_scale(NULL, &zero_grid, &x, 1, 2.0f);
	cr_log_error("kernels_scale returned after a launch with grid 0 (x = %g)", (double)x);
}

/* ---- the kernels ------------------------------------------------------------------ */

Test(kernels_host, gather)
{
	const int shapes[][3] = {/* images, pixels, count */
				 {1, 1, 1}, {40, 7, 5}, {300, 784, 32}, {50, 13, 64}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int n_img = shapes[s][0], pixels = shapes[s][1], count = shapes[s][2];
		int len = 3 * count + 5;
		struct rng r = rng_make(kc_seed, 100 + s);
		uint8_t *images = malloc((size_t)n_img * pixels), *labels = malloc((size_t)n_img);
		int32_t *index = malloc((size_t)len * sizeof(int32_t));
		size_t nx = (size_t)count * pixels;
		float *host_x = malloc(nx * sizeof(float));
		int32_t *host_y = malloc((size_t)count * sizeof(int32_t));
		int32_t *ref_y = malloc((size_t)count * sizeof(int32_t));
		double *ref_x = kc_dbuf(nx);
		cr_assert(images && labels && index && host_x && host_y && ref_y);
		ref_fill_bytes(&r, images, (size_t)n_img * pixels);
		ref_fill_bytes(&r, labels, (size_t)n_img);
		for (int i = 0; i < len; i++)
			index[i] = (int32_t)rng_below(&r, (uint64_t)n_img);
		/* The cursor is read from (device) memory, so a captured step can replay. */
		int32_t cursor = (int32_t)rng_below(&r, (uint64_t)(len - count + 1));
		for (int i = 0; i < count; i++) {
			int32_t e = index[cursor + i];
			ref_y[i] = labels[e];
			for (int p = 0; p < pixels; p++)
				ref_x[(size_t)i * pixels + p] =
					ref_normalize_pixel(images[(size_t)e * pixels + p]);
		}
		backend_gather(&kc_host, images, labels, pixels, index, &cursor, count, host_x,
				 host_y);

		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], g[64];
			kc_geom_name(gi, g, sizeof(g));
			float *x = kc_guarded_f(nx);
			int32_t *y = kc_guarded_i((size_t)count);
			kernels_gather(NULL, kc_geom_at(gi), images, labels, pixels, index, &cursor, count,
				       x, y);
			snprintf(what, sizeof(what), "gather %dx%d of %d, %s", count, pixels, n_img, g);
			kc_check_guards_f(x, nx, what);
			kc_check_guards_i(y, (size_t)count, what);
			kc_expect_close(what, x, ref_x, nx, 1e-6, 1e-6, kc_seed);
			kc_expect_same_f(what, x, host_x, nx, kc_seed);
			kc_expect_same_i(what, y, ref_y, (size_t)count, kc_seed);
			kc_free_guarded_f(x);
			kc_free_guarded_i(y);
		}
		free(images);
		free(labels);
		free(index);
		free(host_x);
		free(host_y);
		free(ref_y);
		free(ref_x);
	}
}

Test(kernels_host, advance)
{
	for (int gi = -1; gi < KC_N_GEOMS; gi++) {
		int32_t cur[3] = {KC_GUARD_I, 5, KC_GUARD_I};
		kernels_advance(NULL, kc_geom_at(gi), &cur[1], 32);
		kernels_advance(NULL, kc_geom_at(gi), &cur[1], -2);
		char g[64];
		kc_geom_name(gi, g, sizeof(g));
		cr_assert_eq(cur[1], 35, "advance with %s: cursor %d, expected 35 (one thread only)", g,
			     cur[1]);
		cr_assert(cur[0] == KC_GUARD_I && cur[2] == KC_GUARD_I, "advance with %s: wrote beside the cursor", g);
	}
}

Test(kernels_host, bias_act)
{
	const int shapes[][2] = {{1, 1}, {3, 10}, {17, 33}, {64, 100}, {32, 512}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int relu = 0; relu <= 1; relu++) {
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			struct rng r = rng_make(kc_seed, 200 + 2 * s + relu);
			float *in = malloc(n * sizeof(float)), *bias = malloc((size_t)cols * sizeof(float));
			float *host_y = malloc(n * sizeof(float));
			double *ref = kc_dbuf(n);
			cr_assert(in && bias && host_y);
			ref_fill_uniform(&r, in, n, -2.0, 2.0);
			ref_fill_uniform(&r, bias, (size_t)cols, -1.0, 1.0);
			ref_widen(in, ref, n);
			ref_bias_act(ref, bias, rows, cols, relu);
			memcpy(host_y, in, n * sizeof(float));
			backend_bias_act(&kc_host, host_y, bias, rows, cols, relu);

			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[160], g[64];
				kc_geom_name(gi, g, sizeof(g));
				snprintf(what, sizeof(what), "bias_act %dx%d relu=%d, %s", rows, cols, relu, g);
				float *y = kc_guarded_f(n);
				memcpy(y, in, n * sizeof(float));
				kernels_bias_act(NULL, kc_geom_at(gi), y, bias, rows, cols, relu);
				kc_check_guards_f(y, n, what);
				kc_expect_close(what, y, ref, n, 1e-6, 1e-6, kc_seed);
				kc_expect_same_f(what, y, host_y, n, kc_seed);
				kc_free_guarded_f(y);
			}
			free(in);
			free(bias);
			free(host_y);
			free(ref);
		}
	}
}

Test(kernels_host, relu_backward)
{
	const size_t sizes[] = {1, 255, 256, 257, 10007};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		struct rng r = rng_make(kc_seed, 300 + s);
		float *dy0 = malloc(n * sizeof(float)), *act = malloc(n * sizeof(float));
		float *host_dy = malloc(n * sizeof(float));
		double *ref = kc_dbuf(n);
		cr_assert(dy0 && act && host_dy);
		ref_fill_uniform(&r, dy0, n, -1.0, 1.0);
		ref_fill_uniform(&r, act, n, -1.0, 1.0);
		for (size_t i = 0; i < n; i += 7)
			act[i] = 0.0f; /* ReLU outputs are often exactly zero */
		ref_widen(dy0, ref, n);
		ref_relu_backward(ref, act, n);
		memcpy(host_dy, dy0, n * sizeof(float));
		backend_relu_backward(&kc_host, host_dy, act, n);

		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], g[64];
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "relu_backward n=%zu, %s", n, g);
			float *dy = kc_guarded_f(n);
			memcpy(dy, dy0, n * sizeof(float));
			kernels_relu_backward(NULL, kc_geom_at(gi), dy, act, n);
			kc_check_guards_f(dy, n, what);
			kc_expect_close(what, dy, ref, n, 0.0, 0.0, kc_seed);
			kc_expect_same_f(what, dy, host_dy, n, kc_seed);
			kc_free_guarded_f(dy);
		}
		free(dy0);
		free(act);
		free(host_dy);
		free(ref);
	}
}

Test(kernels_host, softmax_xent)
{
	const int shapes[][2] = {{1, 1}, {1, 10}, {7, 10}, {64, 10}, {300, 33}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int with_grad = 0; with_grad <= 1; with_grad++) {
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			float scale = 1.0f / (float)rows;
			struct rng r = rng_make(kc_seed, 400 + 2 * s + with_grad);
			float *logits = malloc(n * sizeof(float));
			int32_t *labels = malloc((size_t)rows * sizeof(int32_t));
			float *host_loss = malloc((size_t)rows * sizeof(float));
			float *host_d = malloc(n * sizeof(float));
			double *ref_loss = kc_dbuf((size_t)rows), *ref_d = kc_dbuf(n);
			cr_assert(logits && labels && host_loss && host_d);
			ref_fill_uniform(&r, logits, n, -8.0, 8.0);
			ref_fill_labels(&r, labels, (size_t)rows, cols);
			for (int i = 0; i < rows; i++)
				ref_loss[i] = ref_softmax_xent_row(logits + (size_t)i * cols, labels[i], cols,
								   scale, ref_d + (size_t)i * cols);
			backend_softmax_xent(&kc_host, logits, labels, rows, cols, scale, host_loss,
					       with_grad ? host_d : NULL);

			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[160], g[64];
				kc_geom_name(gi, g, sizeof(g));
				snprintf(what, sizeof(what), "softmax_xent %dx%d%s, %s", rows, cols,
					 with_grad ? " with gradient" : "", g);
				float *loss = kc_guarded_f((size_t)rows);
				float *d = kc_guarded_f(n);
				kernels_softmax_xent(NULL, kc_geom_at(gi), logits, labels, rows, cols, scale,
						     loss, with_grad ? d : NULL);
				kc_check_guards_f(loss, (size_t)rows, what);
				kc_check_guards_f(d, n, what);
				kc_expect_close(what, loss, ref_loss, (size_t)rows, 1e-5, 1e-5, kc_seed);
				kc_expect_same_f(what, loss, host_loss, (size_t)rows, kc_seed);
				if (with_grad) {
					kc_expect_close(what, d, ref_d, n, 1e-6, 1e-5, kc_seed);
					kc_expect_same_f(what, d, host_d, n, kc_seed);
				} else {
					for (size_t i = 0; i < n; i++)
						cr_assert(d[i] == KC_GUARD_F, "%s: wrote dlogits[%zu] though it was NULL",
							  what, i);
				}
				kc_free_guarded_f(loss);
				kc_free_guarded_f(d);
			}
			free(logits);
			free(labels);
			free(host_loss);
			free(host_d);
			free(ref_loss);
			free(ref_d);
		}
	}
}

Test(kernels_host, argmax_hits)
{
	const int shapes[][2] = {{1, 1}, {1, 10}, {9, 10}, {257, 10}, {100, 3}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		size_t n = (size_t)rows * cols;
		struct rng r = rng_make(kc_seed, 500 + s);
		float *logits = malloc(n * sizeof(float));
		int32_t *labels = malloc((size_t)rows * sizeof(int32_t));
		int32_t *hits0 = malloc((size_t)rows * sizeof(int32_t));
		int32_t *host_hits = malloc((size_t)rows * sizeof(int32_t));
		int32_t *ref_hits = malloc((size_t)rows * sizeof(int32_t));
		cr_assert(logits && labels && hits0 && host_hits && ref_hits);
		/* Few distinct values, so rows have ties: the first maximum wins. */
		for (size_t i = 0; i < n; i++)
			logits[i] = (float)rng_below(&r, 4);
		ref_fill_labels(&r, labels, (size_t)rows, cols);
		for (int i = 0; i < rows; i++) {
			hits0[i] = (int32_t)rng_below(&r, 5);
			ref_hits[i] = hits0[i] + (ref_argmax_row(logits + (size_t)i * cols, cols) == labels[i]);
		}
		memcpy(host_hits, hits0, (size_t)rows * sizeof(int32_t));
		backend_argmax_hits(&kc_host, logits, labels, rows, cols, host_hits);
		kc_expect_same_i("argmax_hits host backend", host_hits, ref_hits, (size_t)rows, kc_seed);

		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], g[64];
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "argmax_hits %dx%d, %s", rows, cols, g);
			int32_t *hits = kc_guarded_i((size_t)rows);
			memcpy(hits, hits0, (size_t)rows * sizeof(int32_t));
			kernels_argmax_hits(NULL, kc_geom_at(gi), logits, labels, rows, cols, hits);
			kc_check_guards_i(hits, (size_t)rows, what);
			kc_expect_same_i(what, hits, ref_hits, (size_t)rows, kc_seed);
			kc_free_guarded_i(hits);
		}
		free(logits);
		free(labels);
		free(hits0);
		free(host_hits);
		free(ref_hits);
	}
}

Test(kernels_host, sgd_update)
{
	const size_t sizes[] = {1, 7850, 256, 257, 101770};
	const float moms[] = {0.0f, 0.9f};
	const float lr = 0.05f;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int mi = 0; mi < 2; mi++) {
			size_t n = sizes[s];
			float mom = moms[mi], wd = mi ? 0.01f : 0.0f; /* with momentum, with weight decay */
			struct rng r = rng_make(kc_seed, 600 + 2 * s + mi);
			float *p0 = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
			float *v0 = malloc(n * sizeof(float));
			float *host_p = malloc(n * sizeof(float)), *host_v = malloc(n * sizeof(float));
			double *ref_p = kc_dbuf(n), *ref_v = kc_dbuf(n);
			cr_assert(p0 && g && v0 && host_p && host_v);
			ref_fill_normal(&r, p0, n, 0.0, 0.1);
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			ref_fill_normal(&r, v0, n, 0.0, 0.5);
			ref_widen(p0, ref_p, n);
			ref_widen(v0, ref_v, n);
			ref_sgd_update(ref_p, g, ref_v, n, lr, mom, wd);
			memcpy(host_p, p0, n * sizeof(float));
			memcpy(host_v, v0, n * sizeof(float));
			/* The rate is the table's entry at the step counter: lr sits at index 2. */
			const float table[3] = {1e3f, -1.0f, lr};
			const int32_t at = 2;
			backend_sgd_update(&kc_host, host_p, g, host_v, n, table, &at, mom, wd);

			/* Two steps with the same gradient on each grid: accumulation shows double visits. */
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[160], gn[64];
				kc_geom_name(gi, gn, sizeof(gn));
				snprintf(what, sizeof(what), "sgd_update n=%zu momentum=%g, %s", n,
					 (double)mom, gn);
				float *p = kc_guarded_f(n), *v = kc_guarded_f(n);
				memcpy(p, p0, n * sizeof(float));
				memcpy(v, v0, n * sizeof(float));
				kernels_sgd_update(NULL, kc_geom_at(gi), p, g, v, n, table, &at, mom, wd);
				kc_check_guards_f(p, n, what);
				kc_check_guards_f(v, n, what);
				kc_expect_close(what, p, ref_p, n, 1e-6, 1e-5, kc_seed);
				kc_expect_close(what, v, ref_v, n, 1e-6, 1e-5, kc_seed);
				kc_expect_same_f(what, p, host_p, n, kc_seed);
				kc_expect_same_f(what, v, host_v, n, kc_seed);
				kc_free_guarded_f(p);
				kc_free_guarded_f(v);
			}
			free(p0);
			free(g);
			free(v0);
			free(host_p);
			free(host_v);
			free(ref_p);
			free(ref_v);
		}
	}
}

/*
 * AdamW: 3 updates on each grid against PyTorch's formula in double and
 * bitwise against the host backend; the update count advances once per update.
 */
Test(kernels_host, adamw_update)
{
	const size_t sizes[] = {1, 7850, 257, 101770};
	const float wds[] = {0.0f, 0.01f};
	const float table[3] = {1e3f, 2e-3f, -1.0f}; /* the rate sits at index 1 */
	const int32_t at = 1;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (int wi = 0; wi < 2; wi++) {
			size_t n = sizes[s];
			struct adamw_hyper h = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
						.weight_decay = wds[wi]};
			struct rng r = rng_make(kc_seed, 800 + 2 * s + wi);
			float *p0 = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
			float *host_p = malloc(n * sizeof(float)), *host_mv = calloc(2 * n, sizeof(float));
			double *ref_p = kc_dbuf(n), *ref_m = kc_dbuf(n), *ref_v = kc_dbuf(n);
			cr_assert(p0 && g && host_p && host_mv);
			ref_fill_normal(&r, p0, n, 0.0, 0.1);
			ref_fill_normal(&r, g, n, 0.0, 1.0);
			ref_widen(p0, ref_p, n);
			memset(ref_m, 0, n * sizeof(double));
			memset(ref_v, 0, n * sizeof(double));
			memcpy(host_p, p0, n * sizeof(float));
			int32_t host_t = 0;
			for (int k = 1; k <= 3; k++) {
				ref_adamw_update(ref_p, g, ref_m, ref_v, n, table[at], k, h.beta1, h.beta2,
						 h.eps, h.weight_decay);
				backend_adamw_update(&kc_host, host_p, g, host_mv, host_mv + n, n, table, &at,
						     &host_t, h);
			}
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[160], gn[64];
				kc_geom_name(gi, gn, sizeof(gn));
				snprintf(what, sizeof(what), "adamw_update n=%zu wd=%g, %s", n,
					 (double)h.weight_decay, gn);
				float *p = kc_guarded_f(n), *mv = kc_guarded_f(2 * n);
				memcpy(p, p0, n * sizeof(float));
				memset(mv, 0, 2 * n * sizeof(float));
				int32_t t = 0;
				for (int k = 1; k <= 3; k++)
					kernels_adamw_update(NULL, kc_geom_at(gi), p, g, mv, mv + n, n, table, &at,
							     &t, h);
				cr_expect_eq(t, 3, "%s: update count %d after 3 updates", what, t);
				kc_check_guards_f(p, n, what);
				kc_check_guards_f(mv, 2 * n, what);
				kc_expect_close(what, p, ref_p, n, 1e-6, 1e-5, kc_seed);
				kc_expect_close(what, mv, ref_m, n, 1e-6, 1e-5, kc_seed);
				kc_expect_close(what, mv + n, ref_v, n, 1e-6, 1e-5, kc_seed);
				kc_expect_same_f(what, p, host_p, n, kc_seed);
				kc_expect_same_f(what, mv, host_mv, 2 * n, kc_seed);
				kc_free_guarded_f(p);
				kc_free_guarded_f(mv);
			}
			cr_expect_eq(host_t, 3);
			free(p0);
			free(g);
			free(host_p);
			free(host_mv);
			free(ref_p);
			free(ref_m);
			free(ref_v);
		}
}

/* Plain SGD may go without a velocity buffer on the device. */
Test(kernels_host, sgd_update_without_velocity)
{
	const size_t n = 1000;
	struct rng r = rng_make(kc_seed, 700);
	float *p = kc_guarded_f(n), *g = malloc(n * sizeof(float));
	double *ref_p = kc_dbuf(n), *ref_v = kc_dbuf(n);
	cr_assert_not_null(g);
	ref_fill_normal(&r, p, n, 0.0, 0.1);
	ref_fill_normal(&r, g, n, 0.0, 1.0);
	ref_widen(p, ref_p, n);
	ref_sgd_update(ref_p, g, ref_v, n, 0.01, 0.0, 0.0);
	const float rate = 0.01f;
	const int32_t at = 0;
	kernels_sgd_update(NULL, &kc_test_geoms[2], p, g, NULL, n, &rate, &at, 0.0f, 0.0f);
	kc_check_guards_f(p, n, "sgd_update without velocity");
	kc_expect_close("sgd_update without velocity", p, ref_p, n, 1e-7, 1e-6, kc_seed);
	kc_free_guarded_f(p);
	free(g);
	free(ref_p);
	free(ref_v);
}

Test(kernels_host, scale)
{
	const size_t sizes[] = {1, 100, 4096, 65537};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		struct rng r = rng_make(kc_seed, 800 + s);
		float *x0 = malloc(n * sizeof(float));
		double *ref = kc_dbuf(n);
		cr_assert_not_null(x0);
		ref_fill_uniform(&r, x0, n, -3.0, 3.0);
		for (size_t i = 0; i < n; i++)
			ref[i] = (double)x0[i] * 0.5; /* exact in float too */
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], g[64];
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "scale n=%zu, %s", n, g);
			float *x = kc_guarded_f(n);
			memcpy(x, x0, n * sizeof(float));
			kernels_scale(NULL, kc_geom_at(gi), x, n, 0.5f);
			kc_check_guards_f(x, n, what);
			kc_expect_close(what, x, ref, n, 0.0, 0.0, kc_seed);
			kc_free_guarded_f(x);
		}
		free(x0);
		free(ref);
	}
}

/*
 * One training step's element work chained as the backend chains it, with
 * the cursor advanced in "device" memory between two steps: the second step
 * must gather the next batch.
 */
Test(kernels_host, cursor_drives_next_gather)
{
	enum { N_IMG = 20, PIX = 5, B = 4 };
	struct rng r = rng_make(kc_seed, 900);
	uint8_t images[N_IMG * PIX], labels[N_IMG];
	int32_t index[3 * B], cursor = 0, y[B];
	float x[B * PIX];
	ref_fill_bytes(&r, images, sizeof(images));
	ref_fill_bytes(&r, labels, sizeof(labels));
	for (int i = 0; i < 3 * B; i++)
		index[i] = (int32_t)rng_below(&r, N_IMG);
	for (int step = 0; step < 3; step++) {
		kernels_gather(NULL, NULL, images, labels, PIX, index, &cursor, B, x, y);
		kernels_advance(NULL, NULL, &cursor, B);
		for (int i = 0; i < B; i++) {
			int32_t e = index[step * B + i];
			cr_assert_eq(y[i], labels[e], "step %d row %d: label of image %d expected", step,
				     i, e);
			for (int p = 0; p < PIX; p++)
				cr_assert(x[i * PIX + p] == normalize_pixel_elem(images[e * PIX + p]));
		}
	}
	cr_assert_eq(cursor, 3 * B);
}
