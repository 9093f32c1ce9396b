/*
 * test_kernels_conv.c - the convolution and pooling kernels of cuda/kernels.cu,
 * run on the CPU (see test_kernels_host.c for how), against the naive
 * double-precision references of tests/ref.c and, bit for bit, against the
 * host backend's ops (cpu/conv_host.c), which loop over the same elem.h bodies.
 *
 *   ctest --test-dir build -R test_kernels_host --output-on-failure
 *
 * Layouts are batch-innermost (include/conv_shape.h). Shapes cover LeNet-5's
 * two layers, padding wider than some taps reach,
 * kernels as large as the image, 1x1 taps, ragged pools (a row or column no
 * window covers) and several images per batch; every kernel runs with the
 * backend's geometry and with grids that wrap or leave threads idle, its
 * output between guard words.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_runtime.h" /* the stand-in: tests/cuda_host/ */
#include "kernel_check.h"
#include "kernels.h"
#include "ref.h"

TestSuite(kernels_conv, .init = kc_setup, .fini = kc_teardown);

/* c, h, w, k, pad, batch */
static const int conv_cases[][6] = {
	{1, 28, 28, 5, 2, 2}, {6, 14, 14, 5, 0, 2}, {2, 7, 5, 3, 1, 3},
	{3, 4, 4, 4, 0, 1},   {1, 5, 5, 1, 0, 2},   {2, 3, 3, 5, 2, 2},
};
#define N_CONV ((int)(sizeof(conv_cases) / sizeof(conv_cases[0])))

/* c, h, w, k, batch */
static const int pool_cases[][5] = {
	{6, 28, 28, 2, 2}, {16, 10, 10, 2, 3}, {2, 5, 7, 2, 2}, {3, 6, 6, 3, 1}, {1, 1, 1, 1, 4},
};
#define N_POOL ((int)(sizeof(pool_cases) / sizeof(pool_cases[0])))

static float *frand(struct rng *r, size_t n, double lo, double hi)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	cr_assert_not_null(p);
	ref_fill_uniform(r, p, n, lo, hi);
	return p;
}

/* im2col and its adjoint col2im, shape by shape. */
Test(kernels_conv, im2col_and_col2im)
{
	for (int ci = 0; ci < N_CONV; ci++) {
		const int *k = conv_cases[ci];
		struct conv_shape s = conv_shape_make(k[0], k[1], k[2], k[3], k[4]);
		int batch = k[5];
		size_t nx = (size_t)batch * s.c * s.h * s.w;
		size_t nc = (size_t)s.c * s.k * s.k * batch * s.oh * s.ow;
		struct rng r = rng_make(kc_seed, 1000 + ci);
		float *x = frand(&r, nx, -2.0, 2.0), *dcols = frand(&r, nc, -1.0, 1.0);
		float *host_cols = malloc(nc * sizeof(float)), *host_dx = malloc(nx * sizeof(float));
		double *ref_cols = kc_dbuf(nc), *ref_dx = kc_dbuf(nx);
		cr_assert(host_cols && host_dx);
		ref_im2col(x, &s, batch, ref_cols);
		ref_col2im(dcols, &s, batch, ref_dx);
		backend_im2col(&kc_host, x, &s, batch, host_cols);
		backend_col2im(&kc_host, dcols, &s, batch, host_dx);
		char shape[96], what[192], g[64];
		snprintf(shape, sizeof(shape), "c%d %dx%d k%d pad%d batch %d", s.c, s.h, s.w, s.k, s.pad,
			 batch);
		snprintf(what, sizeof(what), "host im2col %s", shape);
		kc_expect_close(what, host_cols, ref_cols, nc, 0.0, 0.0, kc_seed);
		/* col2im: at most k*k terms of magnitude 1 per pixel, summed in float. */
		snprintf(what, sizeof(what), "host col2im %s", shape);
		kc_expect_close(what, host_dx, ref_dx, nx, 1e-6, 1e-5, kc_seed);
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			kc_geom_name(gi, g, sizeof(g));
			float *cols = kc_guarded_f(nc), *dx = kc_guarded_f(nx);
			kernels_im2col(NULL, kc_geom_at(gi), x, &s, batch, cols);
			kernels_col2im(NULL, kc_geom_at(gi), dcols, &s, batch, dx);
			snprintf(what, sizeof(what), "im2col %s, %s", shape, g);
			kc_check_guards_f(cols, nc, what);
			kc_expect_close(what, cols, ref_cols, nc, 0.0, 0.0, kc_seed);
			kc_expect_same_f(what, cols, host_cols, nc, kc_seed);
			snprintf(what, sizeof(what), "col2im %s, %s", shape, g);
			kc_check_guards_f(dx, nx, what);
			kc_expect_close(what, dx, ref_dx, nx, 1e-6, 1e-5, kc_seed);
			kc_expect_same_f(what, dx, host_dx, nx, kc_seed);
			kc_free_guarded_f(cols);
			kc_free_guarded_f(dx);
		}
		free(x);
		free(dcols);
		free(host_cols);
		free(host_dx);
		free(ref_cols);
		free(ref_dx);
	}
}

Test(kernels_conv, channel_bias_act)
{
	const int shapes[][2] = {{1, 1}, {6, 100}, {16, 257}, {3, 4704}};
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
		for (int relu = 0; relu <= 1; relu++) {
			int ch = shapes[si][0];
			size_t per = (size_t)shapes[si][1], n = (size_t)ch * per;
			struct rng r = rng_make(kc_seed, 1200 + 2 * si + relu);
			float *y0 = frand(&r, n, -2.0, 2.0), *bias = frand(&r, (size_t)ch, -1.0, 1.0);
			float *host_y = malloc(n * sizeof(float));
			double *ref = kc_dbuf(n);
			cr_assert_not_null(host_y);
			ref_widen(y0, ref, n);
			ref_channel_bias_act(ref, bias, ch, per, relu);
			memcpy(host_y, y0, n * sizeof(float));
			backend_channel_bias_act(&kc_host, host_y, bias, ch, per, relu);
			char what[160], g[64];
			snprintf(what, sizeof(what), "host channel_bias_act %dx%zu relu=%d", ch, per, relu);
			kc_expect_close(what, host_y, ref, n, 1e-6, 1e-6, kc_seed);
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				kc_geom_name(gi, g, sizeof(g));
				snprintf(what, sizeof(what), "channel_bias_act %dx%zu relu=%d, %s", ch, per,
					 relu, g);
				float *y = kc_guarded_f(n);
				memcpy(y, y0, n * sizeof(float));
				kernels_channel_bias_act(NULL, kc_geom_at(gi), y, bias, ch, per, relu);
				kc_check_guards_f(y, n, what);
				kc_expect_close(what, y, ref, n, 1e-6, 1e-6, kc_seed);
				kc_expect_same_f(what, y, host_y, n, kc_seed);
				kc_free_guarded_f(y);
			}
			free(y0);
			free(bias);
			free(host_y);
			free(ref);
		}
}

/* Pool inputs from 4 levels, so many windows hold ties: the first maximum must win everywhere. */
static float *pool_input(struct rng *r, size_t n)
{
	float *x = malloc((n ? n : 1) * sizeof(float));
	cr_assert_not_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)rng_below(r, 4) - 1.5f;
	return x;
}

Test(kernels_conv, maxpool_forward_and_backward)
{
	for (int pi = 0; pi < N_POOL; pi++) {
		const int *k = pool_cases[pi];
		struct pool_shape s = pool_shape_make(k[0], k[1], k[2], k[3]);
		int batch = k[4];
		size_t nx = (size_t)s.c * batch * s.h * s.w, ny = (size_t)batch * s.c * s.oh * s.ow;
		struct rng r = rng_make(kc_seed, 1300 + pi);
		float *x = pool_input(&r, nx), *dy = frand(&r, ny, -1.0, 1.0);
		float *host_y = malloc(ny * sizeof(float)), *host_dx = malloc(nx * sizeof(float));
		int32_t *host_arg = malloc(ny * sizeof(int32_t)), *ref_arg = malloc(ny * sizeof(int32_t));
		double *ref_y = kc_dbuf(ny), *ref_dx = kc_dbuf(nx);
		cr_assert(host_y && host_dx && host_arg && ref_arg);
		ref_maxpool(x, &s, batch, ref_y, ref_arg);
		ref_maxpool_backward(dy, ref_arg, &s, batch, ref_dx);
		backend_maxpool(&kc_host, x, &s, batch, host_y, host_arg);
		backend_maxpool_backward(&kc_host, dy, host_arg, &s, batch, host_dx);
		char what[160], g[64];
		snprintf(what, sizeof(what), "host maxpool c%d %dx%d k%d batch %d", s.c, s.h, s.w, s.k,
			 batch);
		kc_expect_close(what, host_y, ref_y, ny, 0.0, 0.0, kc_seed);
		kc_expect_same_i(what, host_arg, ref_arg, ny, kc_seed);
		kc_expect_close(what, host_dx, ref_dx, nx, 0.0, 0.0, kc_seed);
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "maxpool c%d %dx%d k%d batch %d, %s", s.c, s.h, s.w,
				 s.k, batch, g);
			float *y = kc_guarded_f(ny), *dx = kc_guarded_f(nx);
			int32_t *arg = kc_guarded_i(ny);
			kernels_maxpool(NULL, kc_geom_at(gi), x, &s, batch, y, arg);
			kc_check_guards_f(y, ny, what);
			kc_check_guards_i(arg, ny, what);
			kc_expect_close(what, y, ref_y, ny, 0.0, 0.0, kc_seed);
			kc_expect_same_i(what, arg, ref_arg, ny, kc_seed);
			kc_expect_same_f(what, y, host_y, ny, kc_seed);
			kernels_maxpool_backward(NULL, kc_geom_at(gi), dy, arg, &s, batch, dx);
			kc_check_guards_f(dx, nx, what);
			kc_expect_close(what, dx, ref_dx, nx, 0.0, 0.0, kc_seed);
			kc_expect_same_f(what, dx, host_dx, nx, kc_seed);
			kc_free_guarded_f(y);
			kc_free_guarded_f(dx);
			kc_free_guarded_i(arg);
		}
		free(x);
		free(dy);
		free(host_y);
		free(host_dx);
		free(host_arg);
		free(ref_arg);
		free(ref_y);
		free(ref_dx);
	}
}

/* A NaN in a window wins over numbers, the first NaN over later ones (PyTorch's rule). */
Test(kernels_conv, maxpool_nan_wins)
{
	struct pool_shape s = pool_shape_make(1, 2, 6, 2);
	/* Windows: {1, 2, 3, NaN} -> NaN at 3; {NaN, 5, NaN, 0} -> NaN at 0; {-1, -2, -3, -4} -> -1 at 0. */
	const float x[12] = {1.0f, 2.0f, NAN, 5.0f, -1.0f, -2.0f, 3.0f, NAN, NAN, 0.0f, -3.0f, -4.0f};
	const int32_t want_arg[3] = {3, 0, 0};
	float y[3], host_y[3];
	int32_t arg[3], host_arg[3];
	kernels_maxpool(NULL, NULL, x, &s, 1, y, arg);
	backend_maxpool(&kc_host, x, &s, 1, host_y, host_arg);
	for (int i = 0; i < 3; i++) {
		cr_expect_eq(arg[i], want_arg[i], "window %d: kernel argmax %d, want %d", i, arg[i],
			     want_arg[i]);
		cr_expect_eq(host_arg[i], want_arg[i], "window %d: host argmax %d, want %d", i,
			     host_arg[i], want_arg[i]);
	}
	cr_expect(isnan(y[0]) && isnan(y[1]) && y[2] == -1.0f, "kernel: %g %g %g", y[0], y[1], y[2]);
	cr_expect(isnan(host_y[0]) && isnan(host_y[1]) && host_y[2] == -1.0f, "host: %g %g %g",
		  host_y[0], host_y[1], host_y[2]);
}

Test(kernels_conv, transpose)
{
	const int shapes[][2] = {{1, 1}, {1, 40}, {64, 784}, {400, 64}, {17, 33}, {500, 400}};
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int rows = shapes[si][0], cols = shapes[si][1];
		size_t n = (size_t)rows * cols;
		struct rng r = rng_make(kc_seed, 1400 + si);
		float *x = frand(&r, n, -1.0, 1.0), *host_y = malloc(n * sizeof(float));
		double *ref = kc_dbuf(n);
		cr_assert_not_null(host_y);
		for (int i = 0; i < rows; i++)
			for (int j = 0; j < cols; j++)
				ref[(size_t)j * rows + i] = x[(size_t)i * cols + j];
		backend_transpose(&kc_host, x, rows, cols, host_y);
		char what[160], g[64];
		snprintf(what, sizeof(what), "host transpose %dx%d", rows, cols);
		kc_expect_close(what, host_y, ref, n, 0.0, 0.0, kc_seed);
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "transpose %dx%d, %s", rows, cols, g);
			float *y = kc_guarded_f(n);
			kernels_transpose(NULL, kc_geom_at(gi), x, rows, cols, y);
			kc_check_guards_f(y, n, what);
			kc_expect_close(what, y, ref, n, 0.0, 0.0, kc_seed);
			kc_free_guarded_f(y);
		}
		free(x);
		free(host_y);
		free(ref);
	}
}
