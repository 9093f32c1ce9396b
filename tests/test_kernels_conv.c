/*
 * test_kernels_conv.c - the convolution-stage kernels of cuda/kernels.cu, run
 * on the CPU (see test_kernels_host.c for how): conv_forward (conv + bias +
 * ReLU + max-pool with its argmax, and the im2col matrix as a second range of
 * the same launch), pool_backward (through the pool and the ReLU) and
 * conv_backward_data (through the stage below's pool and ReLU); and the
 * launches of the plans' GEMM ways (cuda/conv_plan.cu): the im2col matrix
 * alone, the bias, ReLU and pool from a GEMM's z, the input gradient
 * gathered from a GEMM's W^T dz.
 *
 *   ctest --test-dir build -R test_kernels_host --output-on-failure
 *
 * References: tests/ref.c's stage functions in double, from the definitions
 * (PyTorch's), and the host backend's ops (cpu/conv_host.c), which compose
 * im2col, a GEMM and element loops. The kernels sum a convolution directly,
 * in another order than the host's GEMM, so on random inputs their
 * convolutions agree with both within float tolerance, and a window's argmax
 * is compared where the reference's choice is clear by more than that
 * tolerance; on whole-number inputs every sum is exact in float, and there
 * everything is compared exactly: values, argmax (with many ties, so the
 * first maximum must win everywhere) and against the host. The element parts
 * (the im2col entries, the pool backward, given the same inputs) agree with
 * the host bit for bit always.
 *
 * Layouts are batch-innermost (include/conv_shape.h), a stage's output also
 * batch-first (PyTorch's flatten order). Shapes cover LeNet-5's two stages,
 * k=3 pools, 1x1 taps, padding wider than the taps reach, taps as large as
 * the image, several channels on both sides and several images; every
 * kernel runs with the backend's geometry and with grids that wrap or leave
 * threads idle, conv_forward also with grids whose thread counts fall on
 * either side of the boundary between its window items and its im2col items.
 * Outputs sit between guard words and start as guard values.
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

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- stages -------------------------------------------------------------------------- */

/* A stage: input channels, height, width, taps k, padding; output channels; pool k; images. */
struct stage_case {
	int c, h, w, k, pad, oc, pk, batch;
	const char *name;
};

static const struct stage_case stage_cases[] = {
	{1, 28, 28, 5, 2, 6, 2, 3, "LeNet-5 stage 1"},
	{6, 14, 14, 5, 0, 16, 2, 3, "LeNet-5 stage 2"},
	{2, 6, 9, 3, 1, 3, 3, 2, "k=3 pools over 6x9"},
	{3, 4, 6, 1, 0, 2, 2, 2, "1x1 taps"},
	{2, 3, 3, 3, 4, 2, 3, 1, "padding wider than the taps reach"},
	{3, 4, 4, 4, 0, 2, 1, 1, "taps as large as the image, 1x1 pool"},
	{4, 5, 5, 2, 1, 5, 2, 4, "several channels, even taps"},
	{2, 4, 4, 3, 1, 1, 4, 5, "one window per image"},
};

/* The shapes of a stage and its buffers' sizes; used in place (st points into it). */
struct kstage {
	struct conv_shape conv;
	struct pool_shape pool;
	struct conv_stage st;
	size_t nx, nw, nz, ny, ncols;
	char name[160];
};

static void stage_make(struct kstage *s, const struct stage_case *c, int batch_first)
{
	s->conv = conv_shape_make(c->c, c->h, c->w, c->k, c->pad);
	s->pool = pool_shape_make(c->oc, s->conv.oh, s->conv.ow, c->pk);
	cr_assert(s->conv.oh % c->pk == 0 && s->conv.ow % c->pk == 0,
		  "%s: the pool must tile the convolution's output", c->name);
	s->st = (struct conv_stage){&s->conv, &s->pool, c->oc, c->batch, batch_first};
	size_t b = (size_t)c->batch, fan_in = (size_t)c->c * c->k * c->k;
	s->nx = (size_t)c->c * c->h * c->w * b;
	s->nw = (size_t)c->oc * fan_in;
	s->nz = (size_t)c->oc * s->conv.oh * s->conv.ow * b;
	s->ny = (size_t)c->oc * s->pool.oh * s->pool.ow * b;
	s->ncols = fan_in * s->conv.oh * s->conv.ow * b;
	snprintf(s->name, sizeof(s->name), "%s (c%d %dx%d k%d pad%d -> %d, pool %d, batch %d%s)",
		 c->name, c->c, c->h, c->w, c->k, c->pad, c->oc, c->pk, c->batch,
		 batch_first ? ", batch-first" : "");
}

/* Weights at the scale of PyTorch's default initialisation, or whole numbers. */
static float *stage_weights(struct rng *r, const struct kstage *s, int whole)
{
	double a = 1.0 / sqrt((double)s->conv.c * s->conv.k * s->conv.k);
	return whole ? kc_whole_f(r, s->nw, -2, 2) : kc_rand_f(r, s->nw, -a, a);
}

/*
 * Whether window o (oc, ph, pw, batch order) has an argmax that float
 * rounding of `margin` cannot move: no other value of the window within
 * margin below its ReLU'd maximum (values equal to it are ties, which both
 * sides give to the first), and, when all are clamped, no pre-activation
 * within margin below 0. z: the reference's (oc, oh, ow, batch).
 */
static int window_decided(const struct kstage *s, const double *z, const double *y_inner,
			  size_t o, double margin)
{
	size_t b = (size_t)s->st.rows, rest = o / b;
	int bi = (int)(o % b), px = (int)(rest % (size_t)s->pool.ow);
	rest /= (size_t)s->pool.ow;
	int py = (int)(rest % (size_t)s->pool.oh), ch = (int)(rest / (size_t)s->pool.oh);
	double best = y_inner[o];
	int k = s->pool.k;
	for (int q = 0; q < k * k; q++) {
		int oy = py * k + q / k, ox = px * k + q % k;
		double v = z[(((size_t)ch * s->conv.oh + oy) * s->conv.ow + ox) * b + (size_t)bi];
		double rv = v < 0.0 ? 0.0 : v;
		if (isnan(v))
			continue;
		if (rv != best && rv >= best - margin)
			return 0;
		if (best == 0.0 && v < 0.0 && v >= -margin)
			return 0;
	}
	return 1;
}

/* The reference's y in batch-innermost order, whatever its layout. */
static void y_innermost(const struct kstage *s, const double *y, double *inner)
{
	size_t b = (size_t)s->st.rows, f = s->ny / b;
	for (size_t i = 0; i < s->ny; i++)
		inner[i] = s->st.batch_first ? y[(i % b) * f + i / b] : y[i];
}

/* got's argmax against want where decided (every window when decided is NULL). */
static void expect_arg(const char *what, const int32_t *got, const int32_t *want,
		       const unsigned char *decided, size_t n)
{
	int32_t *masked = malloc((n ? n : 1) * sizeof(int32_t));
	cr_assert_not_null(masked);
	for (size_t i = 0; i < n; i++)
		masked[i] = !decided || decided[i] ? want[i] : got[i];
	kc_expect_same_i(what, got, masked, n, kc_seed);
	free(masked);
}

/* ---- conv_forward ---------------------------------------------------------------------- */

/*
 * A forward case: a stage's inputs (random or whole numbers), the
 * reference's outputs (y, its batch-innermost copy, argmax, z with the bias,
 * cols), the windows whose argmax rounding cannot move (at least 3 in 4) and
 * the tolerance of float sums of up to 150 products against double.
 */
struct fwd_case {
	float *x, *w, *b;
	double *ref_y, *ref_z, *ref_cols, *inner;
	int32_t *ref_arg;
	unsigned char *decided;
	double atol, rtol;
};

static void fwd_case_make(struct fwd_case *f, const struct kstage *s, uint64_t stream, int whole)
{
	struct rng r = rng_make(kc_seed, stream);
	f->x = whole ? kc_whole_f(&r, s->nx, -2, 2) : kc_rand_f(&r, s->nx, -1.0, 1.0);
	f->w = stage_weights(&r, s, whole);
	f->b = whole ? kc_whole_f(&r, (size_t)s->st.oc, -3, 3)
		     : kc_rand_f(&r, (size_t)s->st.oc, -0.3, 0.3);
	f->ref_y = kc_dbuf(s->ny);
	f->ref_z = kc_dbuf(s->nz);
	f->ref_cols = kc_dbuf(s->ncols);
	f->inner = kc_dbuf(s->ny);
	f->ref_arg = malloc(s->ny * sizeof(int32_t));
	f->decided = malloc(s->ny);
	cr_assert(f->ref_arg && f->decided);
	ref_conv_stage_forward(f->x, f->w, f->b, &s->conv, &s->pool, s->st.oc, s->st.rows,
			       s->st.batch_first, f->ref_y, f->ref_arg, f->ref_z, f->ref_cols);
	y_innermost(s, f->ref_y, f->inner);
	/* Float sums of up to 150 products against double: well inside 5e-5. */
	f->atol = whole ? 0.0 : 5e-5;
	f->rtol = whole ? 0.0 : 1e-5;
	size_t n_decided = 0;
	for (size_t o = 0; o < s->ny; o++) {
		f->decided[o] = whole || window_decided(s, f->ref_z, f->inner, o, 4 * f->atol + 1e-6);
		n_decided += f->decided[o];
	}
	cr_assert(n_decided * 4 >= s->ny * 3, "%s: only %zu of %zu windows decided", s->name,
		  n_decided, s->ny);
}

static void fwd_case_free(struct fwd_case *f)
{
	free(f->x);
	free(f->w);
	free(f->b);
	free(f->ref_y);
	free(f->ref_z);
	free(f->ref_cols);
	free(f->inner);
	free(f->ref_arg);
	free(f->decided);
}

/*
 * Every stage case in both output layouts, with and without the im2col
 * matrix, on random and on whole-number inputs.
 */
Test(kernels_conv, conv_forward)
{
	for (size_t ci = 0; ci < N_OF(stage_cases); ci++)
		for (int bf = 0; bf <= 1; bf++)
			for (int whole = 0; whole <= 1; whole++) {
				struct kstage s;
				stage_make(&s, &stage_cases[ci], bf);
				struct fwd_case f;
				fwd_case_make(&f, &s, 1100 + 4 * ci + 2 * bf + whole, whole);
				const float *x = f.x, *w = f.w, *b = f.b;
				const double *ref_y = f.ref_y, *ref_cols = f.ref_cols;
				const int32_t *ref_arg = f.ref_arg;
				const unsigned char *decided = f.decided;
				double atol = f.atol, rtol = f.rtol;

				float *host_y = kc_guard_filled_f(s.ny), *host_cols = kc_guard_filled_f(s.ncols);
				int32_t *host_arg = kc_guard_filled_i(s.ny);
				backend_conv_forward(&kc_host, &s.st, x, w, b, host_y, host_arg, host_cols);
				char what[320], gn[64];
				snprintf(what, sizeof(what), "host conv_forward %s%s", s.name,
					 whole ? " whole numbers" : "");
				kc_expect_close(what, host_y, ref_y, s.ny, atol, rtol, kc_seed);
				expect_arg(what, host_arg, ref_arg, decided, s.ny);
				kc_expect_close(what, host_cols, ref_cols, s.ncols, 0.0, 0.0, kc_seed);

				size_t windows = s.ny;
				for (int with_cols = 0; with_cols <= 1; with_cols++) {
					struct kernel_geom geoms[KC_N_GEOMS + 12];
					int n_geoms = kc_fused_geoms(windows, windows + (with_cols ? s.ncols : 0), geoms,
								  (int)N_OF(geoms));
					for (int gi = -1; gi < n_geoms; gi++) {
						kc_geoms_name(gi, geoms, gn, sizeof(gn));
						snprintf(what, sizeof(what), "conv_forward %s%s%s, %s", s.name,
							 with_cols ? " with cols" : "",
							 whole ? " whole numbers" : "", gn);
						float *y = kc_guarded_f(s.ny), *cols = kc_guarded_f(s.ncols);
						int32_t *arg = kc_guarded_i(s.ny);
						kernels_conv_forward(NULL, gi < 0 ? NULL : &geoms[gi], &s.st, x, w, b, y,
								     arg, with_cols ? cols : NULL);
						kc_check_guards_f(y, s.ny, what);
						kc_check_guards_i(arg, s.ny, what);
						kc_check_guards_f(cols, s.ncols, what);
						kc_expect_close(what, y, ref_y, s.ny, atol, rtol, kc_seed);
						expect_arg(what, arg, ref_arg, decided, s.ny);
						if (whole) {
							kc_expect_same_f(what, y, host_y, s.ny, kc_seed);
							kc_expect_same_i(what, arg, host_arg, s.ny, kc_seed);
						} else {
							expect_arg(what, arg, host_arg, decided, s.ny);
						}
						if (with_cols) {
							kc_expect_close(what, cols, ref_cols, s.ncols, 0.0, 0.0, kc_seed);
							kc_expect_same_f(what, cols, host_cols, s.ncols, kc_seed);
						} else {
							for (size_t i = 0; i < s.ncols; i++)
								cr_assert(cols[i] == KC_GUARD_F,
									  "%s: wrote cols[%zu] though it was NULL", what, i);
						}
						kc_free_guarded_f(y);
						kc_free_guarded_f(cols);
						kc_free_guarded_i(arg);
					}
				}
				if (!whole) {
					/* Kernel against host directly, to both their tolerances. */
					float *y = kc_guard_filled_f(s.ny);
					int32_t *arg = kc_guard_filled_i(s.ny);
					kernels_conv_forward(NULL, NULL, &s.st, x, w, b, y, arg, NULL);
					double *h = kc_dbuf(s.ny);
					ref_widen(host_y, h, s.ny);
					snprintf(what, sizeof(what), "conv_forward %s against the host", s.name);
					kc_expect_close(what, y, h, s.ny, 2 * atol, 2 * rtol, kc_seed);
					free(h);
					free(y);
					free(arg);
				}
				fwd_case_free(&f);
				free(host_y);
				free(host_cols);
				free(host_arg);
			}
}

/*
 * NaN and infinities in a stage's input and weights. bias_act_elem's ReLU
 * (!(y > 0) ? 0 : y) sends a NaN to 0, where PyTorch's keeps it, so a NaN
 * never reaches the pool and maxpool_takes_elem's NaN rule is not reachable
 * through a stage: the windows a NaN feeds differ from PyTorch's (NaN there) and are
 * held to the host backend, which applies the same bodies, bit for bit
 * (whole numbers elsewhere, so that every finite sum is exact); the windows
 * it does not feed, an infinity among them, to the reference.
 */
Test(kernels_conv, conv_forward_nan_and_inf)
{
	const struct stage_case c = {1, 8, 8, 3, 1, 3, 2, 2, "NaN and Inf"};
	for (int bf = 0; bf <= 1; bf++) {
		struct kstage s;
		stage_make(&s, &c, bf);
		struct rng r = rng_make(kc_seed, 1300 + bf);
		/* Whole numbers: every finite sum exact, so the host's GEMM agrees bit for bit. */
		float *x = kc_whole_f(&r, s.nx, -2, 2);
		float *w = stage_weights(&r, &s, 1), *b = kc_whole_f(&r, 3, -2, 2);
		for (int i = 0; i < 9; i++)
			w[i] = fabsf(w[i]) + 1.0f; /* filter 0 positive: an infinity passes its ReLU */
		x[(1 * 8 + 1) * 2 + 0] = NAN;      /* pixel (1, 1) of image 0 */
		x[(6 * 8 + 6) * 2 + 0] = INFINITY; /* pixel (6, 6) of image 0 */
		x[(3 * 8 + 4) * 2 + 1] = -INFINITY;
		w[2 * 9 + 4] = NAN; /* filter 2's centre tap: all its outputs NaN before the ReLU */
		double *ref_y = kc_dbuf(s.ny), *ref_cols = kc_dbuf(s.ncols), *inner = kc_dbuf(s.ny);
		int32_t *ref_arg = malloc(s.ny * sizeof(int32_t));
		cr_assert_not_null(ref_arg);
		ref_conv_stage_forward(x, w, b, &s.conv, &s.pool, 3, s.st.rows, bf, ref_y, ref_arg, NULL,
				       ref_cols);
		size_t n_nan = 0, n_inf = 0;
		for (size_t i = 0; i < s.ny; i++) {
			n_nan += isnan(ref_y[i]) != 0;
			n_inf += isinf(ref_y[i]) != 0;
		}
		cr_assert(n_nan > s.ny / 3 && n_inf > 0, "%s: %zu NaN and %zu infinite windows", s.name,
			  n_nan, n_inf);
		float *host_y = kc_guard_filled_f(s.ny), *host_cols = kc_guard_filled_f(s.ncols);
		int32_t *host_arg = kc_guard_filled_i(s.ny);
		backend_conv_forward(&kc_host, &s.st, x, w, b, host_y, host_arg, host_cols);
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[240], gn[64];
			kc_geom_name(gi, gn, sizeof(gn));
			snprintf(what, sizeof(what), "conv_forward %s, %s", s.name, gn);
			float *y = kc_guarded_f(s.ny), *cols = kc_guarded_f(s.ncols);
			int32_t *arg = kc_guarded_i(s.ny);
			kernels_conv_forward(NULL, kc_geom_at(gi), &s.st, x, w, b, y, arg, cols);
			kc_check_guards_f(y, s.ny, what);
			kc_check_guards_i(arg, s.ny, what);
			kc_check_guards_f(cols, s.ncols, what);
			kc_expect_same_f(what, y, host_y, s.ny, kc_seed);
			kc_expect_same_i(what, arg, host_arg, s.ny, kc_seed);
			kc_expect_same_f(what, cols, host_cols, s.ncols, kc_seed);
			kc_expect_close_special(what, cols, ref_cols, s.ncols, 0.0, 0.0, kc_seed);
			/* Where the reference holds no NaN: the values, and the argmax of the infinite windows. */
			double *want = kc_dbuf(s.ny);
			for (size_t i = 0; i < s.ny; i++)
				want[i] = isnan(ref_y[i]) ? (double)y[i] : ref_y[i];
			kc_expect_close_special(what, y, want, s.ny, 0.0, 0.0, kc_seed);
			y_innermost(&s, ref_y, inner);
			for (size_t o = 0; o < s.ny; o++)
				if (isinf(inner[o]))
					cr_assert_eq(arg[o], ref_arg[o], "%s: window %zu's argmax %d, want %d",
						     what, o, arg[o], ref_arg[o]);
			free(want);
			kc_free_guarded_f(y);
			kc_free_guarded_f(cols);
			kc_free_guarded_i(arg);
		}
		free(x);
		free(w);
		free(b);
		free(ref_y);
		free(ref_cols);
		free(inner);
		free(ref_arg);
		free(host_y);
		free(host_cols);
		free(host_arg);
	}
}

/*
 * kernels_conv_patch (the forward's patch in registers, four output channels
 * a thread) against kernels_conv_forward, bit for bit (the same sums in the
 * same order): every stage case it takes (a short last group of channels, a
 * 1x1 pool, padding) in both layouts (batch first at 37 images), on random
 * inputs with a NaN and an infinity planted and on whole numbers, at the
 * backend's geometry and
 * grids that wrap or leave threads idle; the cases whose pools it does not
 * take are refused.
 */
Test(kernels_conv, conv_patch)
{
	int n_fit = 0;
	for (size_t ci = 0; ci < N_OF(stage_cases); ci++)
		for (int bf = 0; bf <= 1; bf++)
			for (int whole = 0; whole <= 1; whole++) {
				/* Batch first with 37 images: a second, short group of 32 lanes. */
				struct stage_case sc = stage_cases[ci];
				if (bf)
					sc.batch = 37;
				struct kstage s;
				stage_make(&s, &sc, bf);
				int fits = s.conv.k <= CONV_PATCH_MAX_K && s.pool.k <= CONV_PATCH_MAX_POOL;
				cr_assert_eq(kernels_conv_patch_fits(&s.st), fits, "%s: fits", s.name);
				if (!fits)
					continue;
				n_fit += !bf && !whole;
				struct rng r = rng_make(kc_seed, 1400 + 4 * ci + 2 * bf + whole);
				float *x = whole ? kc_whole_f(&r, s.nx, -2, 2) : kc_rand_f(&r, s.nx, -1.0, 1.0);
				float *w = stage_weights(&r, &s, whole);
				float *b = whole ? kc_whole_f(&r, (size_t)s.st.oc, -3, 3)
						 : kc_rand_f(&r, (size_t)s.st.oc, -0.3, 0.3);
				if (!whole) {
					x[0] = NAN;
					x[s.nx - 1] = INFINITY;
				}
				float *want_y = kc_guard_filled_f(s.ny);
				int32_t *want_arg = kc_guard_filled_i(s.ny);
				kernels_conv_forward(NULL, NULL, &s.st, x, w, b, want_y, want_arg, NULL);
				for (int gi = -1; gi < KC_N_GEOMS; gi++) {
					char what[240], gn[64];
					kc_geom_name(gi, gn, sizeof(gn));
					snprintf(what, sizeof(what), "conv_patch %s%s, %s", s.name,
						 whole ? " whole numbers" : " with NaN and Inf", gn);
					float *y = kc_guarded_f(s.ny);
					int32_t *arg = kc_guarded_i(s.ny);
					kernels_conv_patch(NULL, kc_geom_at(gi), &s.st, x, w, b, y, arg);
					kc_check_guards_f(y, s.ny, what);
					kc_check_guards_i(arg, s.ny, what);
					kc_expect_same_f(what, y, want_y, s.ny, kc_seed);
					kc_expect_same_i(what, arg, want_arg, s.ny, kc_seed);
					kc_free_guarded_f(y);
					kc_free_guarded_i(arg);
				}
				free(x);
				free(w);
				free(b);
				free(want_y);
				free(want_arg);
			}
	cr_assert_geq(n_fit, 5, "only %d stage cases fit the patch kernel", n_fit);
}

/* ---- pool_backward --------------------------------------------------------------------- */

/*
 * A stage's output as the backward pass sees it: y >= 0 with many exact
 * zeros (the ReLU's), argmax offsets anywhere in their windows.
 */
static void pool_inputs(struct rng *r, const struct kstage *s, float *y, int32_t *arg)
{
	for (size_t i = 0; i < s->ny; i++) {
		y[i] = rng_below(r, 3) == 0 ? 0.0f : (float)(0.1 + 2.0 * rng_uniform(r));
		arg[i] = (int32_t)rng_below(r, (uint64_t)(s->pool.k * s->pool.k));
	}
}

/*
 * Every stage case in both layouts of dy and y: the gradient of each conv
 * output, dy at its window's argmax when the window's y passed the ReLU, else
 * 0; NaN and infinities in dy go where the gate lets them. Exact against the
 * reference, bit for bit against the host.
 */
Test(kernels_conv, pool_backward)
{
	for (size_t ci = 0; ci < N_OF(stage_cases); ci++)
		for (int bf = 0; bf <= 1; bf++) {
			struct kstage s;
			stage_make(&s, &stage_cases[ci], bf);
			struct rng r = rng_make(kc_seed, 1400 + 2 * ci + bf);
			float *y = malloc(s.ny * sizeof(float)), *dy = kc_rand_f(&r, s.ny, -1.0, 1.0);
			int32_t *arg = malloc(s.ny * sizeof(int32_t));
			cr_assert(y && arg);
			pool_inputs(&r, &s, y, arg);
			dy[0] = NAN;
			dy[s.ny / 2] = INFINITY;
			dy[s.ny - 1] = -INFINITY;
			double *ref = kc_dbuf(s.nz);
			ref_pool_relu_backward(dy, y, arg, &s.pool, s.st.rows, bf, ref);
			float *host = kc_guard_filled_f(s.nz);
			backend_pool_backward(&kc_host, &s.st, dy, y, arg, host);
			char what[240], gn[64];
			snprintf(what, sizeof(what), "host pool_backward %s", s.name);
			kc_expect_close_special(what, host, ref, s.nz, 0.0, 0.0, kc_seed);
			struct kernel_geom geoms[KC_N_GEOMS + 12];
			int n_geoms = kc_fused_geoms(s.nz / 2, s.nz, geoms, (int)N_OF(geoms));
			for (int gi = -1; gi < n_geoms; gi++) {
				kc_geoms_name(gi, geoms, gn, sizeof(gn));
				snprintf(what, sizeof(what), "pool_backward %s, %s", s.name, gn);
				float *dz = kc_guarded_f(s.nz);
				kernels_pool_backward(NULL, gi < 0 ? NULL : &geoms[gi], &s.st, dy, y, arg, dz);
				kc_check_guards_f(dz, s.nz, what);
				kc_expect_close_special(what, dz, ref, s.nz, 0.0, 0.0, kc_seed);
				kc_expect_same_f(what, dz, host, s.nz, kc_seed);
				kc_free_guarded_f(dz);
			}
			free(y);
			free(dy);
			free(arg);
			free(ref);
			free(host);
		}
}

/* ---- conv_backward_data ------------------------------------------------------------------ */

/* A stage below (its case) and the stage above it: taps, padding, output channels, pool. */
struct pair_case {
	struct stage_case below;
	int k, pad, oc, pk;
};

static const struct pair_case pair_cases[] = {
	{{1, 28, 28, 5, 2, 6, 2, 3, "LeNet-5"}, 5, 0, 16, 2},
	{{2, 6, 9, 3, 1, 3, 3, 2, "a k=3 pool below"}, 3, 2, 4, 1},
	{{3, 4, 6, 1, 0, 2, 2, 2, "1x1 taps"}, 1, 0, 3, 1},
	{{2, 6, 6, 3, 1, 2, 2, 1, "padding wider than the taps reach"}, 3, 4, 3, 3},
	{{4, 5, 5, 2, 1, 5, 2, 4, "several channels, even taps"}, 2, 1, 6, 2},
	{{1, 8, 8, 3, 1, 2, 2, 2, "taps as large as the image"}, 4, 0, 3, 1},
};

/* The stage above `below`: its input is below's pooled output. */
static void stage_above(struct kstage *s, const struct kstage *below, const struct pair_case *p)
{
	struct stage_case c = {below->pool.c, below->pool.oh, below->pool.ow, p->k, p->pad, p->oc,
			       p->pk, below->st.rows, p->below.name};
	stage_make(s, &c, 0);
}

/*
 * dz of a stage (oc, oh, ow, batch) -> the gradient at the stage below's
 * conv outputs, through its pool and ReLU: random and whole-number inputs,
 * against the reference and the host (to a tolerance; exactly on whole
 * numbers). Then the same as the plans' GEMM ways run it (cuda/conv_plan.cu):
 * dcols = W^T dz gathered by kernels_col2im_backward, against the reference
 * (to the tolerance, exactly on whole numbers), every geometry.
 */
Test(kernels_conv, conv_backward_data)
{
	for (size_t pi = 0; pi < N_OF(pair_cases); pi++)
		for (int whole = 0; whole <= 1; whole++) {
			struct kstage below, s;
			stage_make(&below, &pair_cases[pi].below, 0);
			stage_above(&s, &below, &pair_cases[pi]);
			struct rng r = rng_make(kc_seed, 1500 + 2 * pi + whole);
			float *w = stage_weights(&r, &s, whole);
			float *dz = whole ? kc_whole_f(&r, s.nz, -3, 3) : kc_rand_f(&r, s.nz, -1.0, 1.0);
			float *below_y = malloc(below.ny * sizeof(float));
			int32_t *below_arg = malloc(below.ny * sizeof(int32_t));
			cr_assert(below_y && below_arg);
			pool_inputs(&r, &below, below_y, below_arg);
			double *ref = kc_dbuf(below.nz);
			ref_conv_backward_data(w, dz, &s.conv, s.st.oc, s.st.rows, &below.pool, below_y,
					       below_arg, ref);
			/* Sums of up to k*k*oc products of magnitude 1 / sqrt(fan-in). */
			double atol = whole ? 0.0 : 5e-5, rtol = whole ? 0.0 : 1e-5;
			float *host = kc_guard_filled_f(below.nz);
			backend_conv_backward_data(&kc_host, &s.st, w, dz, &below.st, below_y, below_arg,
						   host);
			char what[400], gn[64];
			snprintf(what, sizeof(what), "host conv_backward_data over %s%s", below.name,
				 whole ? " whole numbers" : "");
			kc_expect_close(what, host, ref, below.nz, atol, rtol, kc_seed);
			double *h = kc_dbuf(below.nz);
			ref_widen(host, h, below.nz);
			struct kernel_geom geoms[KC_N_GEOMS + 12];
			int n_geoms = kc_fused_geoms(below.nz / 3, below.nz, geoms, (int)N_OF(geoms));
			for (int gi = -1; gi < n_geoms; gi++) {
				kc_geoms_name(gi, geoms, gn, sizeof(gn));
				snprintf(what, sizeof(what), "conv_backward_data k%d pad%d -> %d over %s%s, %s",
					 s.conv.k, s.conv.pad, s.st.oc, below.name, whole ? " whole numbers" : "",
					 gn);
				float *dzb = kc_guarded_f(below.nz);
				kernels_conv_backward_data(NULL, gi < 0 ? NULL : &geoms[gi], &s.st, w, dz,
							   &below.st, below_y, below_arg, dzb);
				kc_check_guards_f(dzb, below.nz, what);
				kc_expect_close(what, dzb, ref, below.nz, atol, rtol, kc_seed);
				kc_expect_close(what, dzb, h, below.nz, 2 * atol, 2 * rtol, kc_seed);
				kc_free_guarded_f(dzb);
			}
			/* As the plans' GEMM ways run it: dcols = W^T dz (in double, then float), col2im. */
			float *dcols = malloc(s.ncols * sizeof(float));
			cr_assert_not_null(dcols);
			size_t t = s.nw / (size_t)s.st.oc, p = s.ncols / t;
			for (size_t ti = 0; ti < t; ti++)
				for (size_t j = 0; j < p; j++) {
					double sum = 0.0;
					for (size_t o = 0; o < (size_t)s.st.oc; o++)
						sum += (double)w[o * t + ti] * dz[o * p + j];
					dcols[ti * p + j] = (float)sum;
				}
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				kc_geom_name(gi, gn, sizeof(gn));
				snprintf(what, sizeof(what), "col2im_backward k%d pad%d -> %d over %s%s, %s",
					 s.conv.k, s.conv.pad, s.st.oc, below.name, whole ? " whole numbers" : "",
					 gn);
				float *dzb = kc_guarded_f(below.nz);
				kernels_col2im_backward(NULL, kc_geom_at(gi), &s.st, dcols, &below.st, below_y,
							below_arg, dzb);
				kc_check_guards_f(dzb, below.nz, what);
				kc_expect_close(what, dzb, ref, below.nz, atol, rtol, kc_seed);
				kc_free_guarded_f(dzb);
			}
			free(dcols);
			free(w);
			free(dz);
			free(below_y);
			free(below_arg);
			free(ref);
			free(host);
			free(h);
		}
}

/*
 * kernels_conv_backward_patch (each output channel's dz under a block of
 * input pixels in registers, three input channels at once) against the
 * direct kernel, bit for bit, on every pair case at its own batch and at 37
 * images (a second, short group of 32 lanes), on random dz with a NaN and
 * infinities planted and on whole numbers, at every test geometry; taps
 * wider than it takes are refused.
 */
Test(kernels_conv, conv_backward_patch)
{
	for (size_t pi = 0; pi < N_OF(pair_cases); pi++)
		for (int wide = 0; wide <= 1; wide++)
			for (int whole = 0; whole <= 1; whole++) {
				struct pair_case pc = pair_cases[pi];
				if (wide)
					pc.below.batch = 37;
				struct kstage below, s;
				stage_make(&below, &pc.below, 0);
				stage_above(&s, &below, &pc);
				cr_assert(kernels_conv_backward_patch_fits(&s.st), "%s: fits", below.name);
				struct rng r = rng_make(kc_seed, 1600 + 4 * pi + 2 * wide + whole);
				float *w = stage_weights(&r, &s, whole);
				float *dz = whole ? kc_whole_f(&r, s.nz, -3, 3) : kc_rand_f(&r, s.nz, -1.0, 1.0);
				if (!whole) {
					dz[0] = NAN;
					dz[s.nz / 2] = INFINITY;
					dz[s.nz - 1] = -INFINITY;
				}
				float *below_y = malloc(below.ny * sizeof(float));
				int32_t *below_arg = malloc(below.ny * sizeof(int32_t));
				cr_assert(below_y && below_arg);
				pool_inputs(&r, &below, below_y, below_arg);
				float *want = kc_guard_filled_f(below.nz);
				kernels_conv_backward_data(NULL, NULL, &s.st, w, dz, &below.st, below_y,
							   below_arg, want);
				for (int gi = -1; gi < KC_N_GEOMS; gi++) {
					char what[400], gn[64];
					kc_geom_name(gi, gn, sizeof(gn));
					snprintf(what, sizeof(what),
						 "conv_backward_patch k%d pad%d -> %d over %s, %d images%s, %s",
						 s.conv.k, s.conv.pad, s.st.oc, below.name, s.st.rows,
						 whole ? " whole numbers" : " with NaN and Inf", gn);
					float *dzb = kc_guarded_f(below.nz);
					kernels_conv_backward_patch(NULL, kc_geom_at(gi), &s.st, w, dz, &below.st,
								    below_y, below_arg, dzb);
					kc_check_guards_f(dzb, below.nz, what);
					kc_expect_same_f(what, dzb, want, below.nz, kc_seed);
					kc_free_guarded_f(dzb);
				}
				struct conv_shape wider = s.conv;
				struct conv_stage st = s.st;
				wider.k = CONV_PATCH_MAX_K + 1;
				st.conv = &wider;
				cr_assert(!kernels_conv_backward_patch_fits(&st), "%s: taps of %d fit",
					  below.name, wider.k);
				free(w);
				free(dz);
				free(below_y);
				free(below_arg);
				free(want);
			}
}

/* ---- the GEMM's ways: im2col, pool from z, col2im ----------------------------------------- */

/*
 * A stage forward as the plans' GEMM ways run it (cuda/conv_plan.cu):
 * kernels_conv_im2col writes the im2col matrix alone, exactly the
 * reference's; kernels_conv_pool takes z, the convolution without its bias
 * (here the reference's, in float), and gives y and arg: within float
 * tolerance of the reference on random inputs (the argmax where decided),
 * exactly the reference's and the direct kernel's on whole numbers, ties
 * included. Every stage case, both output layouts, every geometry.
 */
Test(kernels_conv, conv_forward_by_gemm)
{
	for (size_t ci = 0; ci < N_OF(stage_cases); ci++)
		for (int bf = 0; bf <= 1; bf++)
			for (int whole = 0; whole <= 1; whole++) {
				struct kstage s;
				stage_make(&s, &stage_cases[ci], bf);
				struct fwd_case f;
				fwd_case_make(&f, &s, 1700 + 4 * ci + 2 * bf + whole, whole);
				const float *x = f.x, *w = f.w, *b = f.b;
				float *z = malloc(s.nz * sizeof(float));
				cr_assert_not_null(z);
				size_t plane = s.nz / (size_t)s.st.oc;
				for (size_t i = 0; i < s.nz; i++)
					z[i] = (float)(f.ref_z[i] - (double)b[i / plane]);
				float *direct_y = kc_guard_filled_f(s.ny);
				int32_t *direct_arg = kc_guard_filled_i(s.ny);
				kernels_conv_forward(NULL, NULL, &s.st, x, w, b, direct_y, direct_arg, NULL);
				for (int gi = -1; gi < KC_N_GEOMS; gi++) {
					char what[320], gn[64];
					kc_geom_name(gi, gn, sizeof(gn));
					snprintf(what, sizeof(what), "conv_im2col %s%s, %s", s.name,
						 whole ? " whole numbers" : "", gn);
					float *cols = kc_guarded_f(s.ncols);
					kernels_conv_im2col(NULL, kc_geom_at(gi), &s.st, x, cols);
					kc_check_guards_f(cols, s.ncols, what);
					kc_expect_close(what, cols, f.ref_cols, s.ncols, 0.0, 0.0, kc_seed);
					kc_free_guarded_f(cols);

					snprintf(what, sizeof(what), "conv_pool %s%s, %s", s.name,
						 whole ? " whole numbers" : "", gn);
					float *y = kc_guarded_f(s.ny);
					int32_t *arg = kc_guarded_i(s.ny);
					kernels_conv_pool(NULL, kc_geom_at(gi), &s.st, z, b, y, arg);
					kc_check_guards_f(y, s.ny, what);
					kc_check_guards_i(arg, s.ny, what);
					kc_expect_close(what, y, f.ref_y, s.ny, f.atol, f.rtol, kc_seed);
					expect_arg(what, arg, f.ref_arg, f.decided, s.ny);
					if (whole) {
						kc_expect_same_f(what, y, direct_y, s.ny, kc_seed);
						kc_expect_same_i(what, arg, direct_arg, s.ny, kc_seed);
					}
					kc_free_guarded_f(y);
					kc_free_guarded_i(arg);
				}
				fwd_case_free(&f);
				free(z);
				free(direct_y);
				free(direct_arg);
			}
}

/* ---- LeNet-5's stages chained --------------------------------------------------------------- */

static float *narrow(const double *d, size_t n)
{
	float *f = malloc((n ? n : 1) * sizeof(float));
	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++)
		f[i] = (float)d[i];
	return f;
}

/*
 * LeNet-5's convolutional half as a step runs it, on whole numbers (every sum
 * exact): stage 1 forward (batch innermost, with its im2col matrix), stage 2
 * forward (batch-first, the dense layers' layout), the gradient at stage 2's
 * output back through its pool and ReLU, then through its convolution and
 * stage 1's pool and ReLU. Each kernel's output must equal the reference's
 * and the host's exactly, each op fed the reference's inputs.
 */
Test(kernels_conv, lenet_stages_chained)
{
	const struct stage_case c1 = {1, 28, 28, 5, 2, 6, 2, 4, "LeNet-5 stage 1"};
	const struct stage_case c2 = {6, 14, 14, 5, 0, 16, 2, 4, "LeNet-5 stage 2"};
	struct kstage s1, s2;
	stage_make(&s1, &c1, 0);
	stage_make(&s2, &c2, 1);
	struct rng r = rng_make(kc_seed, 1600);
	float *x = kc_whole_f(&r, s1.nx, -2, 2), *w1 = kc_whole_f(&r, s1.nw, -1, 1);
	float *b1 = kc_whole_f(&r, 6, -2, 2), *w2 = kc_whole_f(&r, s2.nw, -1, 1);
	float *b2 = kc_whole_f(&r, 16, -4, 4), *dy2 = kc_whole_f(&r, s2.ny, -3, 3);

	/* The reference, stage by stage, each narrowed to float (exact) for the next. */
	double *ry1 = kc_dbuf(s1.ny), *rcols1 = kc_dbuf(s1.ncols), *ry2 = kc_dbuf(s2.ny);
	double *rcols2 = kc_dbuf(s2.ncols), *rdz2 = kc_dbuf(s2.nz), *rdz1 = kc_dbuf(s1.nz);
	int32_t *rarg1 = malloc(s1.ny * sizeof(int32_t)), *rarg2 = malloc(s2.ny * sizeof(int32_t));
	cr_assert(rarg1 && rarg2);
	ref_conv_stage_forward(x, w1, b1, &s1.conv, &s1.pool, 6, 4, 0, ry1, rarg1, NULL, rcols1);
	float *y1 = narrow(ry1, s1.ny);
	ref_conv_stage_forward(y1, w2, b2, &s2.conv, &s2.pool, 16, 4, 1, ry2, rarg2, NULL, rcols2);
	float *y2 = narrow(ry2, s2.ny);
	ref_pool_relu_backward(dy2, y2, rarg2, &s2.pool, 4, 1, rdz2);
	float *dz2 = narrow(rdz2, s2.nz);
	ref_conv_backward_data(w2, dz2, &s2.conv, 16, 4, &s1.pool, y1, rarg1, rdz1);

	/* The host backend, the same ops on the same inputs. */
	float *hy1 = kc_guard_filled_f(s1.ny), *hcols1 = kc_guard_filled_f(s1.ncols);
	float *hy2 = kc_guard_filled_f(s2.ny), *hcols2 = kc_guard_filled_f(s2.ncols);
	float *hdz2 = kc_guard_filled_f(s2.nz), *hdz1 = kc_guard_filled_f(s1.nz);
	int32_t *harg1 = kc_guard_filled_i(s1.ny), *harg2 = kc_guard_filled_i(s2.ny);
	backend_conv_forward(&kc_host, &s1.st, x, w1, b1, hy1, harg1, hcols1);
	backend_conv_forward(&kc_host, &s2.st, y1, w2, b2, hy2, harg2, hcols2);
	backend_pool_backward(&kc_host, &s2.st, dy2, y2, rarg2, hdz2);
	backend_conv_backward_data(&kc_host, &s2.st, w2, dz2, &s1.st, y1, rarg1, hdz1);

	for (int gi = -1; gi < KC_N_GEOMS; gi++) {
		char what[200], gn[64];
		kc_geom_name(gi, gn, sizeof(gn));
		const struct kernel_geom *g = kc_geom_at(gi);
		float *ky1 = kc_guarded_f(s1.ny), *kcols1 = kc_guarded_f(s1.ncols);
		float *ky2 = kc_guarded_f(s2.ny), *kcols2 = kc_guarded_f(s2.ncols);
		float *kdz2 = kc_guarded_f(s2.nz), *kdz1 = kc_guarded_f(s1.nz);
		int32_t *karg1 = kc_guarded_i(s1.ny), *karg2 = kc_guarded_i(s2.ny);
		kernels_conv_forward(NULL, g, &s1.st, x, w1, b1, ky1, karg1, kcols1);
		kernels_conv_forward(NULL, g, &s2.st, y1, w2, b2, ky2, karg2, kcols2);
		kernels_pool_backward(NULL, g, &s2.st, dy2, y2, rarg2, kdz2);
		kernels_conv_backward_data(NULL, g, &s2.st, w2, dz2, &s1.st, y1, rarg1, kdz1);
		const struct {
			const char *name;
			const float *got, *host;
			const double *ref;
			size_t n;
		} outs[] = {
			{"stage 1 y", ky1, hy1, ry1, s1.ny},
			{"stage 1 cols", kcols1, hcols1, rcols1, s1.ncols},
			{"stage 2 y", ky2, hy2, ry2, s2.ny},
			{"stage 2 cols", kcols2, hcols2, rcols2, s2.ncols},
			{"stage 2 dz", kdz2, hdz2, rdz2, s2.nz},
			{"stage 1 dz", kdz1, hdz1, rdz1, s1.nz},
		};
		for (size_t i = 0; i < N_OF(outs); i++) {
			snprintf(what, sizeof(what), "LeNet-5 chained, %s, %s", outs[i].name, gn);
			kc_check_guards_f(outs[i].got, outs[i].n, what);
			kc_expect_close(what, outs[i].got, outs[i].ref, outs[i].n, 0.0, 0.0, kc_seed);
			double *h = kc_dbuf(outs[i].n);
			ref_widen(outs[i].host, h, outs[i].n);
			kc_expect_close(what, outs[i].got, h, outs[i].n, 0.0, 0.0, kc_seed);
			free(h);
		}
		snprintf(what, sizeof(what), "LeNet-5 chained, argmax, %s", gn);
		kc_check_guards_i(karg1, s1.ny, what);
		kc_check_guards_i(karg2, s2.ny, what);
		kc_expect_same_i(what, karg1, rarg1, s1.ny, kc_seed);
		kc_expect_same_i(what, karg2, rarg2, s2.ny, kc_seed);
		kc_expect_same_i(what, karg1, harg1, s1.ny, kc_seed);
		kc_expect_same_i(what, karg2, harg2, s2.ny, kc_seed);
		kc_free_guarded_f(ky1);
		kc_free_guarded_f(kcols1);
		kc_free_guarded_f(ky2);
		kc_free_guarded_f(kcols2);
		kc_free_guarded_f(kdz2);
		kc_free_guarded_f(kdz1);
		kc_free_guarded_i(karg1);
		kc_free_guarded_i(karg2);
	}
	free(x);
	free(w1);
	free(b1);
	free(w2);
	free(b2);
	free(dy2);
	free(ry1);
	free(rcols1);
	free(ry2);
	free(rcols2);
	free(rdz2);
	free(rdz1);
	free(rarg1);
	free(rarg2);
	free(y1);
	free(y2);
	free(dz2);
	free(hy1);
	free(hcols1);
	free(hy2);
	free(hcols2);
	free(hdz2);
	free(hdz1);
	free(harg1);
	free(harg2);
}
