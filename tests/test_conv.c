/*
 * test_conv.c - the convolution layer as the models run it on the host
 * backend (layer_forward / layer_backward of host/train/model.c: im2col, the
 * GEMMs through gemm_small or OpenBLAS, the channel bias and ReLU, col2im)
 * against a direct convolution and its gradients in double (tests/ref.c).
 *
 *   ctest --test-dir build -R test_conv --output-on-failure
 *
 * Shapes: LeNet-5's two layers at batch 64 (the GEMMs of training size),
 * padding, odd sizes, taps wider than the image, one image; with and without
 * ReLU. The element ops alone (im2col, col2im, bias, pooling) are held against
 * their references in test_kernels_conv.c, host backend and kernels both.
 * Tolerance atol + 1e-4 |ref|: atol 1e-4 for y and dx (sums of at most 400
 * products of order 1), and for dW and db, sums over every output pixel of
 * the batch (50176 at LeNet's first layer), 1e-4 + 2e-8 per pixel: float32
 * rounding grows with the length of the sum.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "train/model.h"
#include "ref.h"

static void *dev(const struct backend *be, const void *h, size_t bytes)
{
	void *d = backend_alloc(be, bytes ? bytes : 1);
	cr_assert_not_null(d);
	if (h)
		backend_upload(be, d, h, bytes);
	return d;
}

static void expect(const char *what, const float *got, const double *want, size_t n, double atol,
		   uint64_t seed)
{
	struct ref_cmp c = ref_compare_f(what, got, want, n, atol, 1e-4, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu off, largest error %g (seed %llu)", what, c.bad, n,
		     c.max_err, (unsigned long long)seed);
}

static void conv_case(int c, int h, int w, int oc, int k, int pad, int rows, int relu,
		      uint64_t seed)
{
	struct backend be;
	struct layer l;
	cr_assert_eq(backend_host_create(NULL, 1, &be), 0);
	model_conv_layer(&l, c, h, w, oc, k, pad, relu, 0);
	const struct conv_shape *s = &l.conv;
	size_t np = l.b_off + (size_t)oc, nx = (size_t)rows * l.in, ny = (size_t)rows * l.out;
	size_t pixels = (size_t)rows * s->oh * s->ow, ncols = pixels * (size_t)l.fan_in;
	struct rng r = rng_make(seed, (uint64_t)(c * 7 + h * 31 + oc * 131 + rows + relu));
	float *params = malloc(np * sizeof(float)), *x = malloc(nx * sizeof(float));
	float *dy = malloc(ny * sizeof(float)), *y = malloc(ny * sizeof(float));
	float *grads = malloc(np * sizeof(float)), *dx = malloc(nx * sizeof(float));
	float *ones = malloc(pixels * sizeof(float));
	double *want_y = calloc(ny, sizeof(double)), *want_dw = calloc(np, sizeof(double));
	double *want_db = calloc((size_t)oc, sizeof(double)), *want_dx = calloc(nx, sizeof(double));
	cr_assert(params && x && dy && y && grads && dx && ones && want_y && want_dw && want_db && want_dx);
	ref_fill_uniform(&r, params, np, -0.5, 0.5);
	ref_fill_uniform(&r, x, nx, -2.0, 2.0);
	ref_fill_uniform(&r, dy, ny, -1.0, 1.0);
	for (size_t i = 0; i < pixels; i++)
		ones[i] = 1.0f;

	float *params_d = dev(&be, params, np * sizeof(float)), *x_d = dev(&be, x, nx * sizeof(float));
	float *y_d = dev(&be, NULL, ny * sizeof(float)), *dy_d = dev(&be, dy, ny * sizeof(float));
	float *grads_d = dev(&be, NULL, np * sizeof(float)), *dx_d = dev(&be, NULL, nx * sizeof(float));
	float *cols_d = dev(&be, NULL, ncols * sizeof(float));
	float *ones_d = dev(&be, ones, pixels * sizeof(float));
	layer_forward(&be, &l, params_d, x_d, y_d, cols_d, NULL, rows);
	layer_backward(&be, &l, params_d, x_d, y_d, dy_d, grads_d, dx_d, cols_d, NULL, ones_d, rows);
	backend_download(&be, y, y_d, ny * sizeof(float));
	backend_download(&be, grads, grads_d, np * sizeof(float));
	backend_download(&be, dx, dx_d, nx * sizeof(float));
	backend_synchronize(&be);

	/* The reference: direct convolution, ReLU, and the gradient through the ReLU's output. */
	ref_conv_forward(x, params, params + l.b_off, s, oc, rows, want_y);
	for (size_t i = 0; i < ny; i++) {
		if (relu && !(want_y[i] > 0.0))
			want_y[i] = 0.0;
		if (relu && !(y[i] > 0.0f))
			dy[i] = 0.0f;
	}
	ref_conv_backward(x, params, dy, s, oc, rows, want_dw, want_db, want_dx);

	char what[160];
	const char *parts[] = {"y", "dW", "db", "dx"};
	const float *got[] = {y, grads, grads + l.b_off, dx};
	const double *want[] = {want_y, want_dw, want_db, want_dx};
	const size_t n[] = {ny, l.b_off, (size_t)oc, nx};
	const double long_sum = 1e-4 + 2e-8 * (double)pixels;
	const double atol[] = {1e-4, long_sum, long_sum, 1e-4};
	for (int i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "conv c%d %dx%d -> %d k%d pad%d, %d rows, relu %d: %s", c, h,
			 w, oc, k, pad, rows, relu, parts[i]);
		expect(what, got[i], want[i], n[i], atol[i], seed);
	}

	void *bufs[] = {params_d, x_d, y_d, dy_d, grads_d, dx_d, cols_d, ones_d};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		backend_free(&be, bufs[i]);
	backend_destroy(&be);
	void *host[] = {params, x, dy, y, grads, dx, ones, want_y, want_dw, want_db, want_dx};
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
}

Test(conv, lenet_layers_at_batch_64)
{
	uint64_t seed = ref_seed(301);
	conv_case(1, 28, 28, 6, 5, 2, 64, 1, seed);
	conv_case(6, 14, 14, 16, 5, 0, 64, 1, seed);
}

Test(conv, odd_shapes_with_and_without_relu)
{
	uint64_t seed = ref_seed(302);
	for (int relu = 0; relu <= 1; relu++) {
		conv_case(1, 28, 28, 6, 5, 2, 1, relu, seed);
		conv_case(2, 7, 5, 3, 3, 1, 3, relu, seed);
		conv_case(3, 4, 4, 5, 4, 0, 2, relu, seed);
		conv_case(2, 3, 3, 2, 5, 2, 2, relu, seed);
		conv_case(4, 6, 6, 1, 1, 0, 5, relu, seed);
	}
}
