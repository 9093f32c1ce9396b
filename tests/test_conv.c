/*
 * test_conv.c - the convolution stages as the models run them on the host
 * backend (host/train/model.c's calls: ->conv_forward keeping the im2col
 * matrix, ->pool_backward, the weight GEMM with the bias gradient in its
 * epilogue, from the im2col matrix and, on a backend that reads x instead
 * (the host's direct kernels), from x as model.c asks it, ->conv_backward_data
 * through the stage below) against a direct convolution, ReLU and max-pool
 * and their gradients in double (tests/ref.c:
 * ref_conv_stage, ref_pool_relu_backward, ref_conv_backward,
 * ref_conv_backward_data).
 *
 *   ctest --test-dir build -R test_conv --output-on-failure
 *
 * Each case is two stages, A under B, as LeNet-5's conv1 and conv2:
 * x -> A -> B -> y, and a random gradient dy at B's output, in the layout B
 * writes (batch-innermost, or (rows, features) when B is batch_first, as
 * under a dense layer). Shapes: LeNet-5's two stages at batch 64, one image,
 * odd sizes, taps wider than the image, 1 x 1 convolutions and pools, and
 * batches that end inside a vector block (17).
 *
 * The inputs are multiples of 1/4 (|x| <= 1), the weights and biases of 1/8
 * (|w| <= 1/2): every partial sum of both stages' forward passes is then a
 * float exactly, so y, every ReLU decision and every argmax must equal the
 * reference's exactly, ties included (the small grid makes many, and the
 * first maximum in row order must win them), and pool_backward's gate is
 * compared exactly too. The gradients through the GEMMs are float sums:
 * A's dz gets 5e-6 + 1e-5 |ref| (sums of at most 400 products), dW and db
 * 1e-5 + 1e-4 |ref| plus 1e-8 or 2e-8 per term summed (every output pixel of
 * the batch; B's terms are larger): about five times the largest errors seen.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_module.h"
#include "conv_direct.h"
#include "ref.h"

static void *dev(const struct backend *be, const void *h, size_t bytes)
{
	void *d = backend_alloc(be, bytes ? bytes : 1);
	cr_assert_not_null(d);
	if (h)
		backend_upload(be, d, h, bytes);
	return d;
}

static void *host(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	cr_assert_not_null(p);
	return p;
}

static void expect(const char *what, const float *got, const double *want, size_t n, double atol,
		   double rtol, uint64_t seed)
{
	struct ref_cmp c = ref_compare_f(what, got, want, n, atol, rtol, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu off, largest error %g (seed %llu)", what, c.bad, n,
		     c.max_err, (unsigned long long)seed);
}

static void expect_i32(const char *what, const int32_t *got, const int32_t *want, size_t n,
		       uint64_t seed)
{
	struct ref_cmp c = ref_compare_i32(what, got, want, n, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu differ (seed %llu)", what, c.bad, n,
		     (unsigned long long)seed);
}

/* Multiples of unit in [-range * unit, range * unit]. */
static void fill_grid(struct rng *r, float *x, size_t n, int range, float unit)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((int)rng_below(r, (uint64_t)(2 * range + 1)) - range) * unit;
}

/* (rows, features) -> (features, rows), widened. */
static void to_batch_last(const float *x, int rows, int features, double *out)
{
	for (int r = 0; r < rows; r++)
		for (int f = 0; f < features; f++)
			out[(size_t)f * rows + r] = x[(size_t)r * features + f];
}

struct stage_case {
	int c, h, w;                  /* A's input */
	int oc_a, k_a, pad_a, pool_a; /* A */
	int oc_b, k_b, pad_b, pool_b; /* B, on A's output */
	int rows, batch_first;        /* batch_first: B writes (rows, features) */
};

static void stage_case(const struct stage_case *q, uint64_t seed)
{
	struct backend be;
	cr_assert_eq(backend_host_create(NULL, 1, &be), 0);
	int rows = q->rows;
	struct conv_shape sa = conv_shape_make(q->c, q->h, q->w, q->k_a, q->pad_a);
	struct pool_shape pa = pool_shape_make(q->oc_a, sa.oh, sa.ow, q->pool_a);
	struct conv_shape sb = conv_shape_make(q->oc_a, pa.oh, pa.ow, q->k_b, q->pad_b);
	struct pool_shape pb = pool_shape_make(q->oc_b, sb.oh, sb.ow, q->pool_b);
	cr_assert(sa.oh % q->pool_a == 0 && sa.ow % q->pool_a == 0 && sb.oh % q->pool_b == 0 &&
			  sb.ow % q->pool_b == 0 && pb.oh > 0 && pb.ow > 0,
		  "a case whose pools do not tile the convolutions");
	struct conv_stage A = {&sa, &pa, q->oc_a, rows, 0}, B = {&sb, &pb, q->oc_b, rows, q->batch_first};
	char name[160];
	snprintf(name, sizeof(name),
		 "stages c%d %dx%d -> %d k%d pad%d pool%d -> %d k%d pad%d pool%d, %d rows%s", q->c,
		 q->h, q->w, q->oc_a, q->k_a, q->pad_a, q->pool_a, q->oc_b, q->k_b, q->pad_b,
		 q->pool_b, rows, q->batch_first ? ", batch_first" : "");

	int fan_a = q->c * q->k_a * q->k_a, fan_b = q->oc_a * q->k_b * q->k_b;
	int p_a = rows * sa.oh * sa.ow, p_b = rows * sb.oh * sb.ow;
	size_t nx = (size_t)q->c * q->h * q->w * rows;
	size_t nza = (size_t)q->oc_a * p_a, nya = (size_t)q->oc_a * pa.oh * pa.ow * rows;
	size_t nzb = (size_t)q->oc_b * p_b, nyb = (size_t)q->oc_b * pb.oh * pb.ow * rows;
	size_t nca = (size_t)fan_a * p_a, ncb = (size_t)fan_b * p_b;
	/* One flat buffer as a model's: W_a, b_a, W_b, b_b. */
	size_t wa = 0, ba = wa + (size_t)q->oc_a * fan_a, wb = ba + (size_t)q->oc_a;
	size_t bb = wb + (size_t)q->oc_b * fan_b, np = bb + (size_t)q->oc_b;

	struct rng r = rng_make(seed, (uint64_t)(q->c * 7 + q->h * 31 + q->oc_b * 131 + rows));
	float *params = host(np, sizeof(float)), *x = host(nx, sizeof(float));
	float *dy = host(nyb, sizeof(float));
	fill_grid(&r, x, nx, 4, 0.25f);
	fill_grid(&r, params, np, 4, 0.125f);
	ref_fill_uniform(&r, dy, nyb, -1.0, 1.0);

	float *params_d = dev(&be, params, np * sizeof(float)), *x_d = dev(&be, x, nx * sizeof(float));
	float *dy_d = dev(&be, dy, nyb * sizeof(float));
	float *ya_d = dev(&be, NULL, nya * sizeof(float)), *yb_d = dev(&be, NULL, nyb * sizeof(float));
	int32_t *arga_d = dev(&be, NULL, nya * sizeof(int32_t));
	int32_t *argb_d = dev(&be, NULL, nyb * sizeof(int32_t));
	float *colsa_d = dev(&be, NULL, nca * sizeof(float)), *colsb_d = dev(&be, NULL, ncb * sizeof(float));
	float *dza_d = dev(&be, NULL, nza * sizeof(float)), *dzb_d = dev(&be, NULL, nzb * sizeof(float));
	float *grads_d = dev(&be, NULL, np * sizeof(float));

	/* Forward, then back as model_backward goes: B's pool, B's dW and db, A's dz, A's dW and db. */
	backend_conv_forward(&be, &A, x_d, params_d + wa, params_d + ba, ya_d, arga_d, colsa_d);
	backend_conv_forward(&be, &B, ya_d, params_d + wb, params_d + bb, yb_d, argb_d, colsb_d);
	backend_pool_backward(&be, &B, dy_d, yb_d, argb_d, dzb_d);
	struct gemm_req g = {.trans_b = 1, .m = q->oc_b, .n = fan_b, .k = p_b, .alpha = 1.0f,
			     .a = dzb_d, .lda = p_b, .b = colsb_d, .ldb = p_b, .c = grads_d + wb,
			     .ldc = fan_b, .bias_grad = grads_d + bb};
	backend_gemm(&be, &g);
	backend_conv_backward_data(&be, &B, params_d + wb, dzb_d, &A, ya_d, arga_d, dza_d);
	g = (struct gemm_req){.trans_b = 1, .m = q->oc_a, .n = fan_a, .k = p_a, .alpha = 1.0f,
			      .a = dza_d, .lda = p_a, .b = colsa_d, .ldb = p_a, .c = grads_d + wa,
			      .ldc = fan_a, .bias_grad = grads_d + ba};
	backend_gemm(&be, &g);
	/*
	 * The weight GEMMs again as model.c asks a backend that reads x (the
	 * host's direct kernels): no im2col matrix, x named by b_im2col.
	 */
	const int reads_x = backend_conv_wgrad_reads_x(&be);
	float *grads_x_d = dev(&be, NULL, np * sizeof(float));
	if (reads_x) {
		struct gemm_im2col icb = {ya_d, sb, rows}, ica = {x_d, sa, rows};
		g = (struct gemm_req){.trans_b = 1, .m = q->oc_b, .n = fan_b, .k = p_b, .alpha = 1.0f,
				      .a = dzb_d, .lda = p_b, .ldb = p_b, .c = grads_x_d + wb,
				      .ldc = fan_b, .bias_grad = grads_x_d + bb, .b_im2col = &icb};
		backend_gemm(&be, &g);
		g = (struct gemm_req){.trans_b = 1, .m = q->oc_a, .n = fan_a, .k = p_a, .alpha = 1.0f,
				      .a = dza_d, .lda = p_a, .ldb = p_a, .c = grads_x_d + wa,
				      .ldc = fan_a, .bias_grad = grads_x_d + ba, .b_im2col = &ica};
		backend_gemm(&be, &g);
	}

	float *ya = host(nya, sizeof(float)), *yb = host(nyb, sizeof(float));
	int32_t *arga = host(nya, sizeof(int32_t)), *argb = host(nyb, sizeof(int32_t));
	float *colsa = host(nca, sizeof(float)), *colsb = host(ncb, sizeof(float));
	float *dza = host(nza, sizeof(float)), *dzb = host(nzb, sizeof(float));
	float *grads = host(np, sizeof(float)), *grads_x = host(np, sizeof(float));
	backend_download(&be, grads_x, grads_x_d, np * sizeof(float));
	backend_download(&be, ya, ya_d, nya * sizeof(float));
	backend_download(&be, yb, yb_d, nyb * sizeof(float));
	backend_download(&be, arga, arga_d, nya * sizeof(int32_t));
	backend_download(&be, argb, argb_d, nyb * sizeof(int32_t));
	backend_download(&be, colsa, colsa_d, nca * sizeof(float));
	backend_download(&be, colsb, colsb_d, ncb * sizeof(float));
	backend_download(&be, dza, dza_d, nza * sizeof(float));
	backend_download(&be, dzb, dzb_d, nzb * sizeof(float));
	backend_download(&be, grads, grads_d, np * sizeof(float));
	backend_synchronize(&be);

	/* The reference forward pass, stage by stage in double. */
	double *pd = host(np, sizeof(double)), *xd = host(nx, sizeof(double));
	double *want_ya = host(nya, sizeof(double)), *want_yb = host(nyb, sizeof(double));
	int32_t *want_arga = host(nya, sizeof(int32_t)), *want_argb = host(nyb, sizeof(int32_t));
	ref_widen(params, pd, np);
	ref_widen(x, xd, nx);
	ref_conv_stage(xd, pd + wa, pd + ba, &sa, &pa, q->oc_a, rows, want_ya, want_arga, NULL, NULL);
	ref_conv_stage(want_ya, pd + wb, pd + bb, &sb, &pb, q->oc_b, rows, want_yb, want_argb, NULL,
		       NULL);
	char what[256];
	snprintf(what, sizeof(what), "%s: A's y", name);
	expect(what, ya, want_ya, nya, 0.0, 0.0, seed);
	snprintf(what, sizeof(what), "%s: A's argmax", name);
	expect_i32(what, arga, want_arga, nya, seed);
	double *cols_ref = host(nca > ncb ? nca : ncb, sizeof(double));
	ref_im2col(x, &sa, rows, cols_ref);
	snprintf(what, sizeof(what), "%s: A's cols", name);
	expect(what, colsa, cols_ref, nca, 0.0, 0.0, seed);
	ref_im2col(ya, &sb, rows, cols_ref); /* ya: the reference's, checked above */
	snprintf(what, sizeof(what), "%s: B's cols", name);
	expect(what, colsb, cols_ref, ncb, 0.0, 0.0, seed);
	/* B's y in its layout: batch-innermost, or (rows, features). */
	int features = q->oc_b * pb.oh * pb.ow;
	double *yb_bi = host(nyb, sizeof(double));
	if (q->batch_first)
		to_batch_last(yb, rows, features, yb_bi);
	else
		ref_widen(yb, yb_bi, nyb);
	float *yb_got = host(nyb, sizeof(float));
	for (size_t i = 0; i < nyb; i++)
		yb_got[i] = (float)yb_bi[i];
	snprintf(what, sizeof(what), "%s: B's y", name);
	expect(what, yb_got, want_yb, nyb, 0.0, 0.0, seed);
	snprintf(what, sizeof(what), "%s: B's argmax", name);
	expect_i32(what, argb, want_argb, nyb, seed);

	/*
	 * Backwards: B's pool and ReLU (a selection of dy: exact), then the sums.
	 * y and arg: the backend's, equal to the reference's (checked above).
	 */
	double *want_dzb = host(nzb, sizeof(double)), *want_dza = host(nza, sizeof(double));
	double *want_dw = host(np, sizeof(double));
	ref_pool_relu_backward(dy, yb, argb, &pb, rows, q->batch_first, want_dzb);
	snprintf(what, sizeof(what), "%s: B's dz", name);
	expect(what, dzb, want_dzb, nzb, 0.0, 0.0, seed);
	float *dz_f = host(nza > nzb ? nza : nzb, sizeof(float));
	for (size_t i = 0; i < nzb; i++)
		dz_f[i] = (float)want_dzb[i];
	ref_conv_backward(ya, params + wb, dz_f, &sb, q->oc_b, rows, want_dw + wb, want_dw + bb, NULL);
	ref_conv_backward_data(params + wb, dz_f, &sb, q->oc_b, rows, &pa, ya, arga, want_dza);
	snprintf(what, sizeof(what), "%s: A's dz (conv_backward_data)", name);
	expect(what, dza, want_dza, nza, 5e-6, 1e-5, seed);
	for (size_t i = 0; i < nza; i++)
		dz_f[i] = (float)want_dza[i];
	ref_conv_backward(x, params + wa, dz_f, &sa, q->oc_a, rows, want_dw + wa, want_dw + ba, NULL);

	const char *parts[] = {"A's dW", "A's db", "B's dW", "B's db"};
	const size_t at[] = {wa, ba, wb, bb}, n[] = {ba - wa, wb - ba, bb - wb, np - bb};
	const double atol[] = {1e-5 + 1e-8 * p_a, 1e-5 + 1e-8 * p_a, 1e-5 + 2e-8 * p_b,
			       1e-5 + 2e-8 * p_b};
	for (int i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "%s: %s", name, parts[i]);
		expect(what, grads + at[i], want_dw + at[i], n[i], atol[i], 1e-4, seed);
		if (!reads_x)
			continue;
		snprintf(what, sizeof(what), "%s: %s from x (no im2col matrix)", name, parts[i]);
		expect(what, grads_x + at[i], want_dw + at[i], n[i], atol[i], 1e-4, seed);
	}

	void *bufs[] = {params_d, x_d, dy_d, ya_d, yb_d, arga_d, argb_d, colsa_d, colsb_d, dza_d,
			dzb_d, grads_d, grads_x_d};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		backend_free(&be, bufs[i]);
	backend_destroy(&be);
	void *hbufs[] = {params, x, dy, ya, yb, arga, argb, colsa, colsb, dza, dzb, grads, grads_x, pd, xd,
			 want_ya, want_yb, want_arga, want_argb, cols_ref, yb_bi, yb_got,
			 want_dzb, want_dza, want_dw, dz_f};
	for (size_t i = 0; i < sizeof(hbufs) / sizeof(hbufs[0]); i++)
		free(hbufs[i]);
}

Test(conv, lenet_layers_at_batch_64)
{
	/* conv1 (1x28x28 -> 6, 5x5 pad 2, pool 2) under conv2 (-> 16, 5x5, pool 2), then dense */
	const struct stage_case c = {1, 28, 28, 6, 5, 2, 2, 16, 5, 0, 2, 64, 1};
	stage_case(&c, ref_seed(301));
}

Test(conv, odd_shapes_and_pools)
{
	uint64_t seed = ref_seed(302);
	const struct stage_case cases[] = {
		{1, 28, 28, 6, 5, 2, 2, 16, 5, 0, 2, 1, 1},  /* LeNet-5, one image */
		{1, 28, 28, 6, 5, 2, 2, 16, 5, 0, 2, 17, 0}, /* batch-innermost out, a block and one */
		{1, 28, 28, 6, 5, 2, 2, 16, 5, 0, 2, 50, 1}, /* 3 runs of 16 images (AVX-512) and 2 */
		{2, 6, 9, 3, 3, 1, 3, 4, 2, 1, 1, 3, 0},     /* pool 3 of 6x9; B 3x4 through a 1x1 pool */
		{2, 6, 9, 3, 3, 1, 3, 4, 2, 1, 1, 3, 1},
		{3, 8, 8, 2, 3, 1, 2, 5, 4, 0, 1, 17, 1},    /* B's taps cover its whole input */
		{2, 3, 3, 2, 5, 2, 3, 3, 3, 1, 1, 2, 0},     /* taps wider than the image, both stages */
		{4, 6, 6, 1, 1, 0, 2, 2, 3, 0, 1, 5, 1},     /* 1x1 convolution to one channel */
		{1, 8, 4, 2, 3, 1, 4, 3, 1, 0, 1, 16, 0},    /* pool 4 of 8x4; 1x1 convolution above */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		stage_case(&cases[i], seed);
}

/*
 * MNIST_DDP_HOST_ISA names the path of the direct kernels (cpu/conv_direct.c):
 * ctest runs this program again with avx2 and generic, and each run must be
 * on the path it names (generic always can be; avx2 where the CPU has it).
 */
Test(conv, the_isa_named_in_the_environment_is_taken)
{
	const char *want = getenv("MNIST_DDP_HOST_ISA");
	const char *got = host_isa_name(host_isa());
	if (!want) {
		cr_log_info("MNIST_DDP_HOST_ISA unset: the kernels run on %s", got);
		return;
	}
	if (!strcmp(want, "generic"))
		cr_assert_str_eq(got, "generic");
	else if (!strcmp(want, "avx2") && __builtin_cpu_supports("avx2") &&
		 __builtin_cpu_supports("fma"))
		cr_assert_str_eq(got, "avx2");
}
