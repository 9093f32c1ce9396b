/*
 * test_kernels_host.c - the CUDA kernel file itself, run on the CPU: the
 * batch, loss, optimizer and GEMM-epilogue kernels (the convolution stages:
 * tests/test_kernels_conv.c).
 *
 *   ctest --test-dir build -R test_kernels_host --output-on-failure
 *
 * cuda/kernels.cu is compiled by the host C compiler with the stand-in
 * tests/cuda_host/cuda_runtime.h (tests/cuda_host/kernels_host.c), so every
 * launcher here runs the very kernels, index arithmetic, bounds checks and
 * launch geometry that nvcc builds into the CUDA backend, as nested loops
 * over blocks and threads. This test needs no CUDA toolkit and runs in every
 * build. It calls the launchers only (never the launch macro), so it holds
 * whichever way the stand-in spells the launch.
 *
 * Each kernel is launched with the geometry the backend uses (geom NULL) and
 * with deliberately small or oversized grids, so the grid-stride loops wrap
 * several times or leave threads idle; the fused kernels also with grids
 * whose thread counts fall on either side of the boundary between their two
 * ranges of items. Results are compared with
 *   - the naive double-precision references of tests/ref.c (atol + rtol*|ref|),
 *   - the host backend's op (cpu/backend_host.c), which loops over the same
 *     elem.h bodies: the result must be identical, bit for bit (the bias
 *     gradient, a sum the host takes as a GEMM, to a tolerance, and exactly
 *     on whole-number inputs).
 * Outputs sit between guard words that must survive every launch and start
 * as guard values, so an item never written shows too; the kernels that
 * accumulate (argmax hits, the optimizers, the counters) show an item
 * processed twice as a wrong value. Inputs come from MNIST_TEST_SEED
 * (tests/ref.h); the seed is printed with every mismatch.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_runtime.h" /* the stand-in: tests/cuda_host/ */
#include "elem.h"
#include "fastdiv.h"
#include "kernel_check.h"
#include "kernels.h"
#include "ref.h"
#include "train/head.h"

TestSuite(kernels_host, .init = kc_setup, .fini = kc_teardown);

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a data set to gather from ---------------------------------------------------- */

struct dataset {
	int n_img, pixels, len;
	uint8_t *images, *labels;
	int32_t *index;
};

static struct dataset dataset_make(struct rng *r, int n_img, int pixels, int len)
{
	struct dataset d = {n_img, pixels, len, malloc((size_t)n_img * pixels),
			    malloc((size_t)n_img), malloc((size_t)(len ? len : 1) * sizeof(int32_t))};
	cr_assert(d.images && d.labels && d.index);
	ref_fill_bytes(r, d.images, (size_t)n_img * pixels);
	ref_fill_bytes(r, d.labels, (size_t)n_img);
	for (int i = 0; i < len; i++)
		d.index[i] = (int32_t)rng_below(r, (uint64_t)n_img);
	return d;
}

static void dataset_free(struct dataset *d)
{
	free(d->images);
	free(d->labels);
	free(d->index);
}

static struct gather_req gather_of(const struct dataset *d, const int32_t *cursor, int count,
				   int batch_last, float *x, int32_t *y)
{
	struct gather_req g = {.images = d->images, .labels = d->labels, .pixels = d->pixels,
			       .index = d->index, .len = d->len, .cursor = cursor, .count = count,
			       .batch_last = batch_last, .x = x, .y = y};
	return g;
}

/*
 * The reference of a gather at cursor: rows = min(count, len - cursor) (none
 * past the end) normalized rows, (rows, pixels) or (pixels, rows) when
 * batch_last; x and y past the rows taken keep the guard values.
 */
static int ref_gather(const struct dataset *d, int cursor, int count, int batch_last, double *x,
		      int32_t *y)
{
	int rows = d->len - cursor < count ? d->len - cursor : count;
	rows = rows < 0 ? 0 : rows;
	for (size_t i = 0; i < (size_t)count * d->pixels; i++)
		x[i] = KC_GUARD_F;
	for (int i = 0; i < count; i++)
		y[i] = KC_GUARD_I;
	for (int i = 0; i < rows; i++) {
		int32_t e = d->index[cursor + i];
		y[i] = d->labels[e];
		for (int p = 0; p < d->pixels; p++) {
			size_t at = batch_last ? (size_t)p * rows + i : (size_t)i * d->pixels + p;
			x[at] = ref_normalize_pixel(d->images[(size_t)e * d->pixels + p]);
		}
	}
	return rows;
}

/* ---- step counters between guards -------------------------------------------------- */

/* Three counter blocks: the middle one is used, the outer two must keep the guard. */
struct guarded_counters {
	struct step_counters c[3];
};

static void counters_init(struct guarded_counters *g, int32_t cursor, int32_t step,
			  int32_t updates)
{
	for (int i = 0; i < 3; i++)
		g->c[i] = (struct step_counters){KC_GUARD_I, KC_GUARD_I, KC_GUARD_I, KC_GUARD_I};
	g->c[1] = (struct step_counters){cursor, step, updates, KC_GUARD_I};
}

static void counters_expect(const struct guarded_counters *g, int32_t cursor, int32_t step,
			    int32_t updates, const char *what)
{
	const struct step_counters *c = &g->c[1];
	cr_assert(c->cursor == cursor && c->step == step && c->updates == updates &&
			  c->spare == KC_GUARD_I,
		  "%s: counters {cursor %d, step %d, updates %d, spare %d}, expected {%d, %d, %d, "
		  "untouched}",
		  what, c->cursor, c->step, c->updates, c->spare, cursor, step, updates);
	for (int i = 0; i < 3; i += 2)
		cr_assert(g->c[i].cursor == KC_GUARD_I && g->c[i].step == KC_GUARD_I &&
				  g->c[i].updates == KC_GUARD_I && g->c[i].spare == KC_GUARD_I,
			  "%s: wrote beside the counters", what);
}

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
	for (size_t i = 0; i < N_OF(cases); i++) {
		struct kernel_geom g = kernel_geom_for(cases[i].n);
		cr_assert_eq(g.block, KERNEL_BLOCK, "n=%zu: block %u", cases[i].n, g.block);
		cr_assert_eq(g.grid, cases[i].grid, "n=%zu: grid %u, expected %u", cases[i].n, g.grid,
			     cases[i].grid);
		/* Enough threads for every item, or the most blocks allowed. */
		cr_assert(g.grid == KERNEL_MAX_GRID || (size_t)g.grid * g.block >= cases[i].n);
	}
	cr_assert(KERNEL_BLOCK <= 1024 && KERNEL_BLOCK % 32 == 0, "block must be whole warps");
	/* Other block sizes: the grid covers the items, capped the same. */
	struct {
		size_t n;
		unsigned int block, grid;
	} sized[] = {
		{0, 64, 0}, {1, 64, 1}, {64, 64, 1}, {65, 64, 2}, {3136, 64, 49},
		{(size_t)64 * KERNEL_MAX_GRID + 1, 64, KERNEL_MAX_GRID}, {100, 32, 4},
	};
	for (size_t i = 0; i < N_OF(sized); i++) {
		struct kernel_geom g = kernel_geom_sized(sized[i].n, sized[i].block);
		cr_assert(g.block == sized[i].block && g.grid == sized[i].grid,
			  "n=%zu in blocks of %u: grid %u block %u, expected grid %u", sized[i].n,
			  sized[i].block, g.grid, g.block, sized[i].grid);
	}
}

/* One launch since `before`, with the backend's geometry for `work` items. */
static void expect_launch(unsigned long before, size_t work, const char *what)
{
	struct kernel_geom want = kernel_geom_for(work);
	cr_assert_eq(fake_cuda_stats.launches, before + 1, "%s: %lu launches, expected 1", what,
		     fake_cuda_stats.launches - before);
	cr_assert_eq(fake_cuda_stats.grid, want.grid, "%s: grid %u, expected %u (%zu items)", what,
		     fake_cuda_stats.grid, want.grid, work);
	cr_assert_eq(fake_cuda_stats.block, want.block, "%s: block %u", what, fake_cuda_stats.block);
}

/*
 * Each launcher's default geometry is kernel_geom_for(its documented work
 * size), one launch each. Sizes are chosen so that the work sizes one might
 * confuse (rows taken for count, rows * cols for rows, the update without the
 * gather, the windows without the im2col entries, pooled for unpooled) give
 * other grids.
 */
Test(kernels_host, launchers_use_backend_geometry)
{
	struct rng r = rng_make(kc_seed, 50);
	struct dataset d = dataset_make(&r, 30, 33, 50);
	enum { COUNT = 40, ROWS = 600, COLS = 3, N = 700 };
	float *x = calloc((size_t)COUNT * 33, sizeof(float));
	int32_t *y = calloc(COUNT, sizeof(int32_t));
	float *logits = calloc((size_t)ROWS * COLS, sizeof(float));
	float *dl = calloc((size_t)ROWS * COLS, sizeof(float)), *loss = calloc(ROWS, sizeof(float));
	int32_t *labels = calloc(ROWS, sizeof(int32_t)), *hits = calloc(ROWS, sizeof(int32_t));
	float *p = calloc(N, sizeof(float)), *g = calloc(N, sizeof(float));
	float *m = calloc(N, sizeof(float)), *v = calloc(N, sizeof(float));
	cr_assert(x && y && logits && dl && loss && labels && hits && p && g && m && v);
	const float lr[1] = {0.1f};
	struct step_counters cnt = {40, 1, 1, 0}; /* 10 rows left: the gathers take 10 of 40 */
	unsigned long before;

	struct gather_req gr = gather_of(&d, &cnt.cursor, COUNT, 0, x, y);
	before = fake_cuda_stats.launches;
	kernels_gather(NULL, NULL, &gr);
	expect_launch(before, (size_t)COUNT * 33, "gather (count * pixels)");

	before = fake_cuda_stats.launches;
	kernels_advance(NULL, NULL, &cnt.spare, 1);
	expect_launch(before, 1, "advance");

	struct xent_req xr = {.logits = logits, .labels = labels, .rows = ROWS, .cols = COLS,
			      .scale = 1.0f, .row_loss = loss, .dlogits = dl};
	before = fake_cuda_stats.launches;
	kernels_softmax_xent(NULL, NULL, &xr);
	expect_launch(before, (size_t)ROWS * 32, "softmax_xent (rows * 32 lanes)");

	before = fake_cuda_stats.launches;
	kernels_argmax_hits(NULL, NULL, logits, labels, ROWS, COLS, hits);
	expect_launch(before, ROWS, "argmax_hits (rows)");

	before = fake_cuda_stats.launches;
	kernels_clip_scale(NULL, NULL, g, N, loss, 1.0f);
	expect_launch(before, N, "clip_scale (n)");
	/* The norm: one block of CLIP_PARTS threads, a part each, whatever n. */
	before = fake_cuda_stats.launches;
	kernels_clip_norm(NULL, NULL, g, N, loss);
	cr_assert(fake_cuda_stats.launches == before + 1 && fake_cuda_stats.grid == 1 &&
			  fake_cuda_stats.block == CLIP_PARTS,
		  "clip_norm: %lu launches, the last %u x %u, expected one of 1 x %d",
		  fake_cuda_stats.launches - before, fake_cuda_stats.grid, fake_cuda_stats.block,
		  CLIP_PARTS);

	before = fake_cuda_stats.launches;
	kernels_grad_accumulate(NULL, NULL, p, g, N);
	expect_launch(before, N, "grad_accumulate (n)");
	int64_t *q = calloc(N + 2, sizeof(int64_t));
	cr_assert(q);
	before = fake_cuda_stats.launches;
	kernels_fixed_accumulate(NULL, NULL, q, g, N, fixed_limit_elem(4), 1);
	expect_launch(before, N, "fixed_accumulate (n)");
	before = fake_cuda_stats.launches;
	kernels_fixed_decode(NULL, NULL, g, q, N);
	expect_launch(before, N + 1, "fixed_decode (n + 1: the count moved by item n)");
	free(q);

	before = fake_cuda_stats.launches;
	kernels_sgd_update(NULL, NULL, p, g, v, N, lr, &cnt, 0.9f, 0.0f, NULL);
	expect_launch(before, N, "sgd_update (n)");
	before = fake_cuda_stats.launches;
	kernels_sgd_update(NULL, NULL, p, g, v, N, lr, &cnt, 0.9f, 0.0f, &gr);
	expect_launch(before, N + (size_t)COUNT * 33, "sgd_update with the next batch");

	struct adamw_hyper h = {0.9f, 0.999f, 1e-8f, 0.0f};
	before = fake_cuda_stats.launches;
	kernels_adamw_update(NULL, NULL, p, g, m, v, N, lr, &cnt, h, NULL);
	expect_launch(before, N, "adamw_update (n)");
	before = fake_cuda_stats.launches;
	kernels_adamw_update(NULL, NULL, p, g, m, v, N, lr, &cnt, h, &gr);
	expect_launch(before, N + (size_t)COUNT * 33, "adamw_update with the next batch");

	before = fake_cuda_stats.launches;
	kernels_bias_act(NULL, NULL, logits, p, ROWS, COLS, 1);
	expect_launch(before, (size_t)ROWS * COLS, "bias_act (rows * cols)");

	before = fake_cuda_stats.launches;
	kernels_relu_backward(NULL, NULL, dl, logits, (size_t)ROWS * COLS);
	expect_launch(before, (size_t)ROWS * COLS, "relu_backward (n)");

	before = fake_cuda_stats.launches;
	kernels_bias_grad(NULL, NULL, logits, 3, 0, ROWS, 3, loss);
	expect_launch(before, ROWS, "bias_grad (m)");

	/* By block reduction: a block per sum, or per 32 sums when trans_a. */
	before = fake_cuda_stats.launches;
	kernels_bias_grad_block(NULL, NULL, logits, 3, 0, ROWS, 3, loss);
	expect_launch(before, (size_t)ROWS * 256, "bias_grad_block (m blocks)");
	before = fake_cuda_stats.launches;
	kernels_bias_grad_block(NULL, NULL, logits, ROWS, 1, ROWS, 3, loss);
	expect_launch(before, (size_t)(ROWS + 31) / 32 * 256, "bias_grad_block trans_a (m / 32 blocks)");

	/* LeNet-5's stages at 2 images: the convolution stage kernels' work sizes. */
	const int B = 2;
	struct conv_shape c1 = conv_shape_make(1, 28, 28, 5, 2), c2 = conv_shape_make(6, 14, 14, 5, 0);
	struct pool_shape p1 = pool_shape_make(6, 28, 28, 2), p2 = pool_shape_make(16, 10, 10, 2);
	struct conv_stage s1 = {&c1, &p1, 6, B, 0}, s2 = {&c2, &p2, 16, B, 1};
	size_t z1 = (size_t)6 * 28 * 28 * B, y1 = (size_t)6 * 14 * 14 * B, cols1 = (size_t)25 * 28 * 28 * B;
	float *fx = calloc(cols1, sizeof(float)), *fw = calloc(6 * 150 + 16 * 150, sizeof(float));
	float *fy = calloc(z1, sizeof(float)), *fz = calloc(z1, sizeof(float));
	float *fcols = calloc(cols1, sizeof(float)), *fb = calloc(16, sizeof(float));
	int32_t *arg = calloc(z1, sizeof(int32_t));
	cr_assert(fx && fw && fy && fz && fcols && fb && arg);
	before = fake_cuda_stats.launches;
	kernels_conv_forward(NULL, NULL, &s1, fx, fw, fb, fy, arg, fcols);
	expect_launch(before, y1 + cols1, "conv_forward (windows, then cols)");
	before = fake_cuda_stats.launches;
	kernels_conv_forward(NULL, NULL, &s1, fx, fw, fb, fy, arg, NULL);
	expect_launch(before, y1, "conv_forward without cols (windows)");
	before = fake_cuda_stats.launches;
	kernels_pool_backward(NULL, NULL, &s1, fy, fy, arg, fz);
	expect_launch(before, y1, "pool_backward (the pool windows)");
	before = fake_cuda_stats.launches;
	kernels_conv_backward_data(NULL, NULL, &s2, fw, fy, &s1, fy, arg, fz);
	expect_launch(before, y1, "conv_backward_data (the stage below's pool windows)");
	before = fake_cuda_stats.launches;
	kernels_conv_patch(NULL, NULL, &s1, fx, fw, fb, fy, arg);
	expect_launch(before, (size_t)32 * 2 * 14 * 14,
		      "conv_patch (32 lanes a group of 4 channels and window)");
	size_t blocks2 = (size_t)32 * 2 * 7 * 7; /* 32 lanes, 2 groups of 3 channels, 7 x 7 blocks */
	before = fake_cuda_stats.launches;
	kernels_conv_backward_patch(NULL, NULL, &s2, fw, fy, &s1, fy, arg, fz);
	expect_launch(before, blocks2, "conv_backward_patch (32 lanes a group of channels and block)");
	/* The work the plans size their blocks of 64 by (cuda/conv_plan.cu). */
	cr_assert_eq(kernels_conv_patch_work(&s1), (size_t)32 * 2 * 14 * 14);
	cr_assert_eq(kernels_conv_backward_patch_work(&s2, &s1), blocks2);

	free(fx);
	free(fw);
	free(fy);
	free(fz);
	free(fcols);
	free(fb);
	free(arg);
	free(x);
	free(y);
	free(logits);
	free(dl);
	free(loss);
	free(labels);
	free(hits);
	free(p);
	free(g);
	free(m);
	free(v);
	dataset_free(&d);
}

/* Nothing to do launches nothing (a zero-block launch is an error on a GPU), and touches nothing. */
Test(kernels_host, empty_work_launches_nothing)
{
	float f = 1.0f;
	int32_t i = 7;
	uint8_t byte = 0;
	struct step_counters cnt = {3, 1, 1, 0};
	const float lr = 0.1f;
	struct gather_req none = {.images = &byte, .labels = &byte, .pixels = 784, .index = &i,
				  .len = 1, .cursor = &cnt.cursor, .count = 0, .x = &f, .y = &i};
	kernels_gather(NULL, NULL, &none);
	struct gather_req no_pixels = none;
	no_pixels.pixels = 0;
	no_pixels.count = 32;
	kernels_gather(NULL, NULL, &no_pixels);
	struct xent_req xr = {.logits = &f, .labels = &i, .rows = 0, .cols = 10, .scale = 1.0f,
			      .row_loss = &f, .dlogits = &f};
	kernels_softmax_xent(NULL, NULL, &xr);
	xr.rows = 4;
	xr.cols = 0;
	kernels_softmax_xent(NULL, NULL, &xr);
	kernels_argmax_hits(NULL, NULL, &f, &i, 0, 10, &i);
	kernels_clip_scale(NULL, NULL, &f, 0, &lr, 1e-3f);
	kernels_grad_accumulate(NULL, NULL, &f, &f, 0);
	int64_t q = 5;
	kernels_fixed_accumulate(NULL, NULL, &q, &f, 0, 1.0, 1);
	cr_assert_eq(q, 5);
	kernels_sgd_update(NULL, NULL, &f, &f, &f, 0, &lr, &cnt, 0.9f, 0.0f, NULL);
	kernels_sgd_update(NULL, NULL, &f, &f, &f, 0, &lr, &cnt, 0.9f, 0.0f, &none);
	struct adamw_hyper h = {0.9f, 0.999f, 1e-8f, 0.0f};
	kernels_adamw_update(NULL, NULL, &f, &f, &f, &f, 0, &lr, &cnt, h, NULL);
	kernels_adamw_update(NULL, NULL, &f, &f, &f, &f, 0, &lr, &cnt, h, &no_pixels);
	kernels_bias_act(NULL, NULL, &f, &f, 0, 10, 1);
	kernels_bias_act(NULL, NULL, &f, &f, 32, 0, 1);
	kernels_relu_backward(NULL, NULL, &f, &f, 0);
	kernels_bias_grad(NULL, NULL, &f, 1, 0, 0, 5, &f);
	kernels_bias_grad(NULL, NULL, &f, 1, 1, 0, 5, &f);
	struct conv_shape cs = conv_shape_make(1, 4, 4, 3, 1);
	struct pool_shape ps = pool_shape_make(2, 4, 4, 2);
	struct conv_stage st = {&cs, &ps, 2, 0, 0};
	kernels_conv_forward(NULL, NULL, &st, &f, &f, &f, &f, &i, &f);
	kernels_pool_backward(NULL, NULL, &st, &f, &f, &i, &f);
	kernels_conv_backward_data(NULL, NULL, &st, &f, &f, &st, &f, &i, &f);
	cr_assert_eq(fake_cuda_stats.launches, 0);
	cr_assert(f == 1.0f && i == 7 && cnt.cursor == 3 && cnt.step == 1 && cnt.updates == 1);
}

/*
 * A geometry CUDA refuses runs nothing; the check in KERNEL_LAUNCH stops the
 * program (on a GPU: CUDA_CHECK_LAUNCH's cudaGetLastError, then MPI_Abort).
 */
Test(kernels_host, a_refused_launch_is_stopped_by_the_launch_check, .signal = SIGABRT)
{
	float dy = 1.0f, y = 1.0f;
	const struct kernel_geom zero_grid = {0, KERNEL_BLOCK};
	kernels_relu_backward(NULL, &zero_grid, &dy, &y, 1);
	cr_log_error("kernels_relu_backward returned after a launch with grid 0");
}

/* ---- the batch ------------------------------------------------------------------- */

/*
 * The gather at cursors in the index, at its end (the last batch clipped to
 * what is left) and past it (no rows), in both layouts: the batch-last one
 * with the rows taken as its leading dimension.
 */
Test(kernels_host, gather)
{
	const int shapes[][3] = {/* images, pixels, count */
				 {1, 1, 1}, {40, 7, 5}, {300, 784, 32}, {50, 13, 64}, {9, 3, 300}};
	for (size_t s = 0; s < N_OF(shapes); s++) {
		int n_img = shapes[s][0], pixels = shapes[s][1], count = shapes[s][2];
		int len = 3 * count + 5;
		struct rng r = rng_make(kc_seed, 100 + s);
		struct dataset d = dataset_make(&r, n_img, pixels, len);
		size_t nx = (size_t)count * pixels;
		/* Inside, a full batch at the end, clipped to count - 1 and to 1 row, at the end, past it. */
		const int cursors[] = {(int)rng_below(&r, (uint64_t)(len - count + 1)), len - count,
				       len - count + 1, len - 1, len, len + 3};
		for (size_t ci = 0; ci < N_OF(cursors); ci++)
			for (int last = 0; last <= 1; last++) {
				int32_t cursor = cursors[ci];
				double *ref_x = kc_dbuf(nx);
				int32_t *ref_y = kc_guard_filled_i((size_t)count);
				int rows = ref_gather(&d, cursor, count, last, ref_x, ref_y);
				float *host_x = kc_guard_filled_f(nx);
				int32_t *host_y = kc_guard_filled_i((size_t)count);
				struct gather_req hg = gather_of(&d, &cursor, count, last, host_x, host_y);
				backend_gather(&kc_host, &hg);

				for (int gi = -1; gi < KC_N_GEOMS; gi++) {
					char what[200], gn[64];
					kc_geom_name(gi, gn, sizeof(gn));
					snprintf(what, sizeof(what),
						 "gather %d of %dx%d at %d (%d rows taken)%s, %s", count, n_img,
						 pixels, cursor, rows, last ? " batch-last" : "", gn);
					float *x = kc_guarded_f(nx);
					int32_t *y = kc_guarded_i((size_t)count);
					struct gather_req kg = gather_of(&d, &cursor, count, last, x, y);
					kernels_gather(NULL, kc_geom_at(gi), &kg);
					kc_check_guards_f(x, nx, what);
					kc_check_guards_i(y, (size_t)count, what);
					kc_expect_close(what, x, ref_x, nx, 1e-6, 1e-6, kc_seed);
					kc_expect_same_i(what, y, ref_y, (size_t)count, kc_seed);
					kc_expect_same_f(what, x, host_x, nx, kc_seed);
					kc_expect_same_i(what, y, host_y, (size_t)count, kc_seed);
					cr_assert_eq(cursor, cursors[ci], "%s: moved the cursor", what);
					kc_free_guarded_f(x);
					kc_free_guarded_i(y);
				}
				free(ref_x);
				free(ref_y);
				free(host_x);
				free(host_y);
			}
		dataset_free(&d);
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
		cr_assert(cur[0] == KC_GUARD_I && cur[2] == KC_GUARD_I,
			  "advance with %s: wrote beside the cursor", g);
	}
}

/* ---- loss ------------------------------------------------------------------------ */

/*
 * Softmax cross-entropy: the losses, the gradient unless NULL, through the
 * ReLU gate when relu (logits that are a ReLU's output: many exact zeros), and
 * the counters moved on exactly once per launch whatever the geometry (the
 * thread of row 0), or left alone when NULL.
 */
Test(kernels_host, softmax_xent)
{
	const int shapes[][2] = {{1, 1}, {1, 10}, {7, 10}, {64, 10}, {300, 33}};
	for (size_t s = 0; s < N_OF(shapes); s++)
		for (int variant = 0; variant < 3; variant++) {
			/* 0: loss only; 1: with the gradient; 2: with the gradient through the ReLU. */
			int rows = shapes[s][0], cols = shapes[s][1];
			int with_grad = variant > 0, relu = variant == 2;
			size_t n = (size_t)rows * cols;
			float scale = 1.0f / (float)rows;
			struct rng r = rng_make(kc_seed, 400 + 3 * s + variant);
			float *logits = kc_rand_f(&r, n, -8.0, 8.0);
			if (relu)
				for (size_t i = 0; i < n; i++)
					logits[i] = logits[i] > 0.0f ? logits[i] : 0.0f;
			int32_t *labels = malloc((size_t)rows * sizeof(int32_t));
			cr_assert_not_null(labels);
			ref_fill_labels(&r, labels, (size_t)rows, cols);
			double *ref_loss = kc_dbuf((size_t)rows), *ref_d = kc_dbuf(n);
			for (int i = 0; i < rows; i++)
				ref_loss[i] = ref_softmax_xent_row(logits + (size_t)i * cols, labels[i], cols,
								   scale, ref_d + (size_t)i * cols);
			if (relu)
				ref_relu_backward(ref_d, logits, n);
			float *host_loss = kc_guard_filled_f((size_t)rows), *host_d = kc_guard_filled_f(n);
			struct step_counters host_cnt = {11, 4, 9, 0};
			struct xent_req hr = {.logits = logits, .labels = labels, .rows = rows,
					      .cols = cols, .scale = scale, .row_loss = host_loss,
					      .dlogits = with_grad ? host_d : NULL, .relu = relu,
					      .counters = &host_cnt};
			backend_softmax_xent(&kc_host, &hr);
			cr_assert(host_cnt.cursor == 11 + rows && host_cnt.step == 5 && host_cnt.updates == 10,
				  "host backend's counters");

			for (int gi = -1; gi < KC_N_GEOMS; gi++)
				for (int with_counters = 0; with_counters <= 1; with_counters++) {
					char what[200], g[64];
					kc_geom_name(gi, g, sizeof(g));
					snprintf(what, sizeof(what), "softmax_xent %dx%d%s%s%s, %s", rows, cols,
						 with_grad ? " with gradient" : "", relu ? " through ReLU" : "",
						 with_counters ? " and counters" : "", g);
					float *loss = kc_guarded_f((size_t)rows), *d = kc_guarded_f(n);
					struct guarded_counters gc;
					counters_init(&gc, 11, 4, 9);
					struct xent_req kr = hr;
					kr.row_loss = loss;
					kr.dlogits = with_grad ? d : NULL;
					kr.counters = with_counters ? &gc.c[1] : NULL;
					kernels_softmax_xent(NULL, kc_geom_at(gi), &kr);
					kc_check_guards_f(loss, (size_t)rows, what);
					kc_check_guards_f(d, n, what);
					kc_expect_close(what, loss, ref_loss, (size_t)rows, 1e-5, 1e-5, kc_seed);
					kc_expect_same_f(what, loss, host_loss, (size_t)rows, kc_seed);
					if (with_grad) {
						kc_expect_close(what, d, ref_d, n, 1e-6, 1e-5, kc_seed);
						kc_expect_same_f(what, d, host_d, n, kc_seed);
					} else {
						for (size_t i = 0; i < n; i++)
							cr_assert(d[i] == KC_GUARD_F,
								  "%s: wrote dlogits[%zu] though it was NULL", what, i);
					}
					if (with_counters)
						counters_expect(&gc, 11 + rows, 5, 10, what);
					else
						counters_expect(&gc, 11, 4, 9, what);
					/* A second launch moves them on once more. */
					if (with_counters) {
						kernels_softmax_xent(NULL, kc_geom_at(gi), &kr);
						counters_expect(&gc, 11 + 2 * rows, 6, 11, what);
					}
					kc_free_guarded_f(loss);
					kc_free_guarded_f(d);
				}
			free(logits);
			free(labels);
			free(ref_loss);
			free(ref_d);
			free(host_loss);
			free(host_d);
		}
}

/* A step's head as the model builds it (host/train/model.c: model_step) over these buffers. */
static struct head_req head_of(int rows, int in, int cols, int relu, int dx_way, const float *x,
			       const float *w, const float *b, float *y, const int32_t *labels,
			       float *loss, float *d, float *dx, struct step_counters *counters)
{
	struct head_req h;
	memset(&h, 0, sizeof(h));
	h.forward = (struct gemm_req){.trans_b = 1, .m = rows, .n = cols, .k = in, .alpha = 1.0f,
				      .a = x, .lda = in, .b = w, .ldb = in, .c = y, .ldc = cols,
				      .epilogue = relu ? GEMM_EPILOGUE_BIAS_RELU : GEMM_EPILOGUE_BIAS,
				      .bias = b};
	h.loss = (struct xent_req){.logits = y, .labels = labels, .rows = rows, .cols = cols,
				   .scale = 1.0f / (float)rows, .row_loss = loss, .dlogits = d,
				   .relu = relu, .counters = counters};
	if (dx_way) /* 1: plain, 2: through x's ReLU */
		h.input_grad = (struct gemm_req){.m = rows, .n = in, .k = cols, .alpha = 1.0f, .a = d,
						 .lda = cols, .b = w, .ldb = in, .c = dx, .ldc = in,
						 .epilogue = dx_way == 2 ? GEMM_EPILOGUE_DRELU
									 : GEMM_EPILOGUE_NONE,
						 .act = x};
	return h;
}

/*
 * The head in one launch against the host backend's three ops (its forward
 * GEMM, the loss, its input-gradient GEMM): logits, losses, dlogits and dx
 * within float rounding of a sum in another order, every geometry, the
 * counters moved on exactly once; and which requests it takes.
 */
Test(kernels_host, head)
{
	/* 300 and 784 inputs: a lane's ks in batches of 4 and one at a time after them. */
	const int shapes[][3] = {{1, 1, 1},   {7, 84, 10}, {33, 256, 10}, {9, 20, 16},
				 {5, 3, 12},  {4, 300, 16}, {3, 784, 10}};
	for (size_t s = 0; s < N_OF(shapes); s++)
		for (int variant = 0; variant < 4; variant++) {
			/* 0: no input gradient; 1: plain; 2: through the ReLU below; 3: ReLU logits, 2. */
			int rows = shapes[s][0], in = shapes[s][1], cols = shapes[s][2];
			int dx_way = variant == 0 ? 0 : variant == 1 ? 1 : 2, relu = variant == 3;
			size_t nx = (size_t)rows * in, ny = (size_t)rows * cols;
			struct rng r = rng_make(kc_seed, 900 + 4 * s + variant);
			float *x = kc_rand_f(&r, nx, -1.0, 1.0), *w = kc_rand_f(&r, (size_t)cols * in, -0.5, 0.5);
			float *b = kc_rand_f(&r, (size_t)cols, -0.5, 0.5);
			if (dx_way == 2) /* a ReLU's output: many exact zeros */
				for (size_t i = 0; i < nx; i++)
					x[i] = x[i] > 0.0f ? x[i] : 0.0f;
			int32_t *labels = malloc((size_t)rows * sizeof(int32_t));
			cr_assert_not_null(labels);
			ref_fill_labels(&r, labels, (size_t)rows, cols);
			float *hy = kc_guard_filled_f(ny), *hl = kc_guard_filled_f((size_t)rows);
			float *hd = kc_guard_filled_f(ny), *hdx = kc_guard_filled_f(nx);
			struct step_counters hc = {11, 4, 9, 0};
			struct head_req hh = head_of(rows, in, cols, relu, dx_way, x, w, b, hy, labels, hl,
						     hd, hdx, &hc);
			head_run(&kc_host, &hh, "");
			double *ry = kc_dbuf(ny), *rl = kc_dbuf((size_t)rows), *rd = kc_dbuf(ny);
			double *rdx = kc_dbuf(nx);
			ref_widen(hy, ry, ny);
			ref_widen(hl, rl, (size_t)rows);
			ref_widen(hd, rd, ny);
			ref_widen(hdx, rdx, nx);
			cr_assert(kernels_head_fits(&hh), "head %dx%dx%d: not taken", rows, in, cols);

			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[200], g[64];
				kc_geom_name(gi, g, sizeof(g));
				snprintf(what, sizeof(what), "head %dx%dx%d%s%s, %s", rows, in, cols,
					 dx_way == 0 ? "" : dx_way == 1 ? " with dx" : " with dx through ReLU",
					 relu ? ", ReLU logits" : "", g);
				float *y = kc_guarded_f(ny), *l = kc_guarded_f((size_t)rows);
				float *d = kc_guarded_f(ny), *dx = kc_guarded_f(nx);
				struct guarded_counters gc;
				counters_init(&gc, 11, 4, 9);
				struct head_req kh = head_of(rows, in, cols, relu, dx_way, x, w, b, y, labels, l,
							     d, dx, &gc.c[1]);
				kernels_head(NULL, kc_geom_at(gi), &kh);
				kc_check_guards_f(y, ny, what);
				kc_check_guards_f(l, (size_t)rows, what);
				kc_check_guards_f(d, ny, what);
				kc_check_guards_f(dx, nx, what);
				kc_expect_close(what, y, ry, ny, 1e-5, 1e-5, kc_seed);
				kc_expect_close(what, l, rl, (size_t)rows, 1e-5, 1e-5, kc_seed);
				kc_expect_close(what, d, rd, ny, 1e-6, 1e-4, kc_seed);
				if (dx_way)
					kc_expect_close(what, dx, rdx, nx, 1e-6, 1e-4, kc_seed);
				else
					for (size_t i = 0; i < nx; i++)
						cr_assert(dx[i] == KC_GUARD_F, "%s: wrote dx[%zu]", what, i);
				counters_expect(&gc, 11 + rows, 5, 10, what);
				kc_free_guarded_f(y);
				kc_free_guarded_f(l);
				kc_free_guarded_f(d);
				kc_free_guarded_f(dx);
			}
			/* What it does not take: too many columns, an output not packed, dx into another operand. */
			struct head_req bad = hh;
			bad.forward.n = bad.loss.cols = HEAD_MAX_COLS + 1;
			cr_assert(!kernels_head_fits(&bad), "%d columns taken", HEAD_MAX_COLS + 1);
			bad = hh;
			bad.forward.ldc = cols + 1;
			cr_assert(!kernels_head_fits(&bad), "a logits row of %d taken", cols + 1);
			if (dx_way) {
				bad = hh;
				bad.input_grad.a = hy;
				cr_assert(!kernels_head_fits(&bad), "an input gradient not from dlogits taken");
			}
			free(x);
			free(w);
			free(b);
			free(labels);
			free(hy);
			free(hl);
			free(hd);
			free(hdx);
			free(ry);
			free(rl);
			free(rd);
			free(rdx);
		}
}

/* ---- a head's dense stages in one kernel ---------------------------------------------- */

#define DH_STAGES 4

/* What a head of dense stages writes: each stage's output, gradients, the loss's. */
struct dense_out {
	float *y[DH_STAGES], *dx[DH_STAGES], *dw[DH_STAGES], *db[DH_STAGES], *loss, *d;
};

/*
 * A head of n dense stages over widths d[0..n] as the model builds it
 * (host/train/model.c: model_step): every stage under the top with a ReLU,
 * the top's when relu; input gradients through the ReLU below, the lowest
 * stage's plain (into a convolution's pool gradient) when low_dx, else none.
 */
static struct head_req dense_head_of(int rows, int n, const int *d, int relu, int low_dx,
				     const float *x, float *const *w, float *const *b,
				     const struct dense_out *o, const int32_t *labels,
				     struct step_counters *counters)
{
	struct head_req h;
	memset(&h, 0, sizeof(h));
	h.n_below = n - 1;
	for (int s = 0; s < n; s++) {
		int top = s == n - 1;
		struct gemm_req f = {.trans_b = 1, .m = rows, .n = d[s + 1], .k = d[s], .alpha = 1.0f,
				     .a = s ? o->y[s - 1] : x, .lda = d[s], .b = w[s], .ldb = d[s],
				     .c = o->y[s], .ldc = d[s + 1], .bias = b[s],
				     .epilogue = top && !relu ? GEMM_EPILOGUE_BIAS
							      : GEMM_EPILOGUE_BIAS_RELU};
		struct gemm_req g;
		memset(&g, 0, sizeof(g));
		if (s > 0 || low_dx)
			g = (struct gemm_req){.m = rows, .n = d[s], .k = d[s + 1], .alpha = 1.0f,
					      .a = top ? o->d : o->dx[s + 1], .lda = d[s + 1],
					      .b = w[s], .ldb = d[s], .c = o->dx[s], .ldc = d[s],
					      .epilogue = s ? GEMM_EPILOGUE_DRELU : GEMM_EPILOGUE_NONE,
					      .act = s ? o->y[s - 1] : NULL};
		/* dW (out, in) = dz^T x, db = dz's column sums; beside but for the model's lowest */
		struct gemm_req wg = {.trans_a = 1, .m = d[s + 1], .n = d[s], .k = rows, .alpha = 1.0f,
				      .a = top ? o->d : o->dx[s + 1], .lda = d[s + 1], .b = f.a,
				      .ldb = d[s], .c = o->dw[s], .ldc = d[s], .bias_grad = o->db[s],
				      .beside = s > 0 || low_dx};
		if (top) {
			h.forward = f;
			h.input_grad = g;
			h.weight_grad = wg;
		} else {
			h.below[s].layer = "";
			h.below[s].forward = f;
			h.below[s].input_grad = g;
			h.below[s].weight_grad = wg;
		}
	}
	h.loss = (struct xent_req){.logits = o->y[n - 1], .labels = labels, .rows = rows,
				   .cols = d[n], .scale = 1.0f / (float)rows, .row_loss = o->loss,
				   .dlogits = o->d, .relu = relu, .counters = counters};
	return h;
}

/* o's buffers for rows over widths d: guarded, or filled with the guard (for the host backend). */
static void dense_out_alloc(struct dense_out *o, int rows, int n, const int *d, int guarded)
{
	float *(*get)(size_t) = guarded ? kc_guarded_f : kc_guard_filled_f;
	memset(o, 0, sizeof(*o));
	for (int s = 0; s < n; s++) {
		o->y[s] = get((size_t)rows * d[s + 1]);
		o->dx[s] = get((size_t)rows * d[s]);
		o->dw[s] = get((size_t)d[s + 1] * d[s]);
		o->db[s] = get((size_t)d[s + 1]);
	}
	o->loss = get((size_t)rows);
	o->d = get((size_t)rows * d[n]);
}

static void dense_out_free(struct dense_out *o, int n, int guarded)
{
	void (*put)(float *) = guarded ? kc_free_guarded_f : (void (*)(float *))free;
	for (int s = 0; s < n; s++) {
		put(o->y[s]);
		put(o->dx[s]);
		put(o->dw[s]);
		put(o->db[s]);
	}
	put(o->loss);
	put(o->d);
}

/* Heads of dense stages: rows, stages, relu (the top's), low_dx, widths. */
static const struct {
	int rows, n, relu, low_dx, d[DH_STAGES + 1];
} dense_cases[] = {
	{9, 3, 0, 1, {40, 24, 16, 10}},   {5, 2, 0, 0, {33, 7, 10}},
	{3, 3, 0, 1, {400, 120, 84, 10}}, {6, 1, 1, 0, {20, 10}},
	{4, 2, 1, 1, {64, 50, 12}},       {7, 4, 0, 1, {17, 40, 3, 33, 40}},
};

/* A case of dense_cases with its random inputs, and the host backend's head run on them. */
struct dense_case {
	int rows, n, relu, low_dx;
	const int *d;
	float *x, *w[DH_STAGES], *b[DH_STAGES];
	int32_t *labels;
	struct dense_out ho; /* the host's outputs */
	struct step_counters hc;
	struct head_req hh;  /* over ho */
};

static void dense_case_make(struct dense_case *c, size_t ci, uint64_t stream)
{
	memset(c, 0, sizeof(*c));
	c->rows = dense_cases[ci].rows;
	c->n = dense_cases[ci].n;
	c->relu = dense_cases[ci].relu;
	c->low_dx = dense_cases[ci].low_dx;
	c->d = dense_cases[ci].d;
	struct rng r = rng_make(kc_seed, stream + ci);
	c->x = kc_rand_f(&r, (size_t)c->rows * c->d[0], -1.0, 1.0);
	for (int s = 0; s < c->n; s++) {
		c->w[s] = kc_rand_f(&r, (size_t)c->d[s + 1] * c->d[s], -0.5, 0.5);
		c->b[s] = kc_rand_f(&r, (size_t)c->d[s + 1], -0.2, 0.3);
	}
	c->labels = malloc((size_t)c->rows * sizeof(int32_t));
	cr_assert_not_null(c->labels);
	ref_fill_labels(&r, c->labels, (size_t)c->rows, c->d[c->n]);
	dense_out_alloc(&c->ho, c->rows, c->n, c->d, 0);
	c->hc = (struct step_counters){11, 4, 9, 0};
	c->hh = dense_head_of(c->rows, c->n, c->d, c->relu, c->low_dx, c->x, c->w, c->b, &c->ho,
			      c->labels, &c->hc);
	head_run(&kc_host, &c->hh, "");
}

static void dense_case_free(struct dense_case *c)
{
	dense_out_free(&c->ho, c->n, 0);
	for (int s = 0; s < c->n; s++) {
		free(c->w[s]);
		free(c->b[s]);
	}
	free(c->x);
	free(c->labels);
}

/*
 * Every stage of a head in one launch against the host backend's ops (its
 * forward GEMMs, the loss, its input-gradient GEMMs): every stage's output,
 * the losses, dlogits and every input gradient within float rounding of
 * sums in another order, the lowest stage's input gradient unwritten when
 * it has none, at every rows_per_block and geometry (grids cut short, blocks
 * of one warp to more than the kernel's), the counters moved on once; and
 * which requests it takes.
 */
Test(kernels_host, dense_head)
{
	for (size_t ci = 0; ci < N_OF(dense_cases); ci++) {
		struct dense_case c;
		dense_case_make(&c, ci, 1300);
		int rows = c.rows, n = c.n, relu = c.relu, low_dx = c.low_dx;
		const int *d = c.d;
		float *x = c.x, **w = c.w, **b = c.b;
		int32_t *labels = c.labels;
		struct dense_out ho = c.ho;
		struct head_req hh = c.hh;
		for (int rb = 1; rb <= DENSE_HEAD_MAX_ROWS; rb++) {
			cr_assert(kernels_dense_head_fits(&hh, rb), "case %zu, %d rows a block: not taken",
				  ci, rb);
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[200], g[64];
				kc_geom_name(gi, g, sizeof(g));
				snprintf(what, sizeof(what),
					 "dense head case %zu (%d rows, %d stages), %d rows a block, %s", ci,
					 rows, n, rb, g);
				struct dense_out o;
				dense_out_alloc(&o, rows, n, d, 1);
				struct guarded_counters gc;
				counters_init(&gc, 11, 4, 9);
				struct head_req kh = dense_head_of(rows, n, d, relu, low_dx, x, w, b, &o, labels,
								   &gc.c[1]);
				kernels_dense_head(NULL, kc_geom_at(gi), &kh, rb);
				for (int s = 0; s < n; s++) {
					size_t ny = (size_t)rows * d[s + 1], nx = (size_t)rows * d[s];
					double *ry = kc_dbuf(ny), *rdx = kc_dbuf(nx);
					ref_widen(ho.y[s], ry, ny);
					ref_widen(ho.dx[s], rdx, nx);
					kc_check_guards_f(o.y[s], ny, what);
					kc_check_guards_f(o.dx[s], nx, what);
					kc_expect_close(what, o.y[s], ry, ny, 1e-5, 1e-5, kc_seed);
					if (s > 0 || low_dx)
						kc_expect_close(what, o.dx[s], rdx, nx, 1e-6, 1e-4, kc_seed);
					else
						for (size_t i = 0; i < nx; i++)
							cr_assert(o.dx[s][i] == KC_GUARD_F, "%s: wrote dx[%zu]",
								  what, i);
					free(ry);
					free(rdx);
				}
				double *rl = kc_dbuf((size_t)rows), *rd = kc_dbuf((size_t)rows * d[n]);
				ref_widen(ho.loss, rl, (size_t)rows);
				ref_widen(ho.d, rd, (size_t)rows * d[n]);
				kc_expect_close(what, o.loss, rl, (size_t)rows, 1e-5, 1e-5, kc_seed);
				kc_expect_close(what, o.d, rd, (size_t)rows * d[n], 1e-6, 1e-4, kc_seed);
				counters_expect(&gc, 11 + rows, 5, 10, what);
				free(rl);
				free(rd);
				dense_out_free(&o, n, 1);
			}
		}
		/* What it does not take. */
		cr_assert(!kernels_dense_head_fits(&hh, 0) &&
				  !kernels_dense_head_fits(&hh, DENSE_HEAD_MAX_ROWS + 1),
			  "case %zu: a block of 0 or %d rows taken", ci, DENSE_HEAD_MAX_ROWS + 1);
		struct head_req bad = hh;
		bad.forward.ldc = d[n] + 1;
		cr_assert(!kernels_dense_head_fits(&bad, 1), "case %zu: a logits row of %d taken", ci,
			  d[n] + 1);
		if (n > 1) {
			bad = hh;
			bad.forward.a = x;
			cr_assert(!kernels_dense_head_fits(&bad, 1),
				  "case %zu: a top not reading the stage under it taken", ci);
			if (n > 2 || low_dx) {
				bad = hh;
				bad.below[n - 2].input_grad.a = ho.d;
				cr_assert(!kernels_dense_head_fits(&bad, 1),
					  "case %zu: a gradient not from the stage above taken", ci);
			}
			bad = hh;
			memset(&bad.input_grad, 0, sizeof(bad.input_grad));
			cr_assert(!kernels_dense_head_fits(&bad, 1),
				  "case %zu: a top without its input gradient taken", ci);
		}
		bad = hh;
		(n > 1 ? &bad.below[0].forward : &bad.forward)->epilogue = GEMM_EPILOGUE_NONE;
		cr_assert(!kernels_dense_head_fits(&bad, 1), "case %zu: a forward without its bias taken",
			  ci);
		dense_case_free(&c);
	}
}

/*
 * The head over a convolution stage: the lowest dense stage's input
 * gradient on through the pool below (batch first) into the convolution's
 * dz, against the host backend's input-gradient GEMM then pool gradient:
 * every pixel of dz (zeros but at each window's maximum, gated by the
 * pool's ReLU output), the input gradient itself left unwritten; and the
 * pools it does not take.
 */
Test(kernels_host, dense_head_pool)
{
	const int rows = 5, d[] = {18, 16, 10}, n = 2;
	struct conv_shape cs = conv_shape_make(3, 5, 7, 2, 0); /* 3 x 4 x 6 out */
	struct pool_shape ps = pool_shape_make(3, cs.oh, cs.ow, 2); /* 3 x 2 x 3: 18 */
	struct rng r = rng_make(kc_seed, 1400);
	float *x = kc_rand_f(&r, (size_t)rows * d[0], -1.0, 1.0), *w[2], *b[2];
	for (size_t i = 0; i < (size_t)rows * d[0]; i++) /* a pool of ReLU outputs */
		x[i] = x[i] > 0.0f ? x[i] : 0.0f;
	for (int st = 0; st < n; st++) {
		w[st] = kc_rand_f(&r, (size_t)d[st + 1] * d[st], -0.5, 0.5);
		b[st] = kc_rand_f(&r, (size_t)d[st + 1], -0.2, 0.3);
	}
	size_t nz = (size_t)ps.c * ps.h * ps.w * rows, nw = (size_t)d[0] * rows;
	int32_t *labels = malloc((size_t)rows * sizeof(int32_t)), *arg = malloc(nw * sizeof(int32_t));
	cr_assert(labels && arg);
	ref_fill_labels(&r, labels, (size_t)rows, d[n]);
	for (size_t i = 0; i < nw; i++)
		arg[i] = (int32_t)(rng_uniform(&r) * 4.0) % 4;
	struct conv_stage stage = {&cs, &ps, 3, rows, 1};
	struct dense_out ho;
	dense_out_alloc(&ho, rows, n, d, 0);
	float *hz = kc_guard_filled_f(nz);
	struct step_counters hc = {0, 0, 0, 0};
	struct head_req hh = dense_head_of(rows, n, d, 0, 1, x, w, b, &ho, labels, &hc);
	hh.pool = stage;
	hh.pool_layer = "";
	hh.pool_y = x;
	hh.pool_arg = arg;
	hh.pool_dz = hz;
	head_run(&kc_host, &hh, "");
	double *rz = kc_dbuf(nz);
	ref_widen(hz, rz, nz);
	for (int rb = 1; rb <= DENSE_HEAD_MAX_ROWS; rb++) {
		cr_assert(kernels_dense_head_fits(&hh, rb), "pool: %d rows a block not taken", rb);
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], g[64];
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "dense head over a pool, %d rows a block, %s", rb, g);
			struct dense_out o;
			dense_out_alloc(&o, rows, n, d, 1);
			float *z = kc_guarded_f(nz);
			struct head_req kh = dense_head_of(rows, n, d, 0, 1, x, w, b, &o, labels, NULL);
			kh.pool = stage;
			kh.pool_y = x;
			kh.pool_arg = arg;
			kh.pool_dz = z;
			kernels_dense_head(NULL, kc_geom_at(gi), &kh, rb);
			kc_check_guards_f(z, nz, what);
			kc_expect_close(what, z, rz, nz, 1e-6, 1e-4, kc_seed);
			for (size_t i = 0; i < nw; i++)
				cr_assert(o.dx[0][i] == KC_GUARD_F, "%s: wrote the pool's dy[%zu]", what, i);
			kc_free_guarded_f(z);
			dense_out_free(&o, n, 1);
		}
	}
	struct head_req bad = hh;
	bad.pool.batch_first = 0;
	cr_assert(!kernels_dense_head_fits(&bad, 1), "a pool batch innermost taken");
	bad = hh;
	bad.pool_y = ho.y[0];
	cr_assert(!kernels_dense_head_fits(&bad, 1), "a pool whose output is not the input taken");
	struct pool_shape ragged = pool_shape_make(3, cs.oh + 1, cs.ow, 2);
	bad = hh;
	bad.pool.pool = &ragged;
	cr_assert(!kernels_dense_head_fits(&bad, 1), "a pool with a ragged edge taken");
	free(rz);
	free(hz);
	dense_out_free(&ho, n, 0);
	for (int st = 0; st < n; st++) {
		free(w[st]);
		free(b[st]);
	}
	free(x);
	free(labels);
	free(arg);
}

/*
 * A head's weight gradients in one launch against the host backend's GEMMs
 * (dz^T x and the bias gradient), from the host's own dz and activations:
 * every dW and db within float rounding of sums in another order, at every
 * geometry; and which requests it takes.
 */
Test(kernels_host, dense_wgrad)
{
	for (size_t ci = 0; ci < N_OF(dense_cases); ci++) {
		struct dense_case c;
		dense_case_make(&c, ci, 1500);
		int rows = c.rows, n = c.n;
		const int *d = c.d;
		struct dense_out ho = c.ho;
		struct head_req hh = c.hh;
		cr_assert(kernels_dense_wgrad_fits(&hh), "case %zu: not taken", ci);
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], g[64];
			kc_geom_name(gi, g, sizeof(g));
			snprintf(what, sizeof(what), "dense weight gradients case %zu (%d rows, %d stages), %s",
				 ci, rows, n, g);
			struct head_req kh = hh;
			float *dw[DH_STAGES], *db[DH_STAGES];
			for (int s = 0; s < n; s++) {
				struct gemm_req *wg = s == n - 1 ? &kh.weight_grad : &kh.below[s].weight_grad;
				wg->c = dw[s] = kc_guarded_f((size_t)d[s + 1] * d[s]);
				wg->bias_grad = db[s] = kc_guarded_f((size_t)d[s + 1]);
			}
			kernels_dense_wgrad(NULL, kc_geom_at(gi), &kh);
			for (int s = 0; s < n; s++) {
				size_t nw = (size_t)d[s + 1] * d[s], nb = (size_t)d[s + 1];
				double *rw = kc_dbuf(nw), *rb = kc_dbuf(nb);
				ref_widen(ho.dw[s], rw, nw);
				ref_widen(ho.db[s], rb, nb);
				kc_check_guards_f(dw[s], nw, what);
				kc_check_guards_f(db[s], nb, what);
				kc_expect_close(what, dw[s], rw, nw, 1e-6, 1e-4, kc_seed);
				kc_expect_close(what, db[s], rb, nb, 1e-6, 1e-4, kc_seed);
				free(rw);
				free(rb);
				kc_free_guarded_f(dw[s]);
				kc_free_guarded_f(db[s]);
			}
		}
		struct head_req bad = hh;
		bad.weight_grad.bias_grad = NULL;
		cr_assert(!kernels_dense_wgrad_fits(&bad), "case %zu: no bias gradient taken", ci);
		bad = hh;
		bad.weight_grad.trans_a = 0;
		cr_assert(!kernels_dense_wgrad_fits(&bad), "case %zu: dz not transposed taken", ci);
		if (n > 1) {
			bad = hh;
			bad.below[0].weight_grad.k = rows + 1;
			cr_assert(!kernels_dense_wgrad_fits(&bad), "case %zu: k past the batch taken", ci);
		}
		dense_case_free(&c);
	}
}

/* The dense head's limits: a stage's inputs, and its rows' values in shared memory. */
Test(kernels_host, dense_head_limits)
{
	const int wide[] = {DENSE_HEAD_MAX_IN + 4, 16, 10}, full[] = {512, 512, 10};
	static float dummy[1];
	float *w[2] = {dummy, dummy}, *b[2] = {dummy, dummy};
	struct dense_out o;
	for (int i = 0; i < DH_STAGES; i++)
		o.y[i] = o.dx[i] = o.dw[i] = o.db[i] = dummy;
	o.loss = o.d = dummy;
	struct head_req h = dense_head_of(8, 2, wide, 0, 1, dummy, w, b, &o, NULL, NULL);
	cr_assert(!kernels_dense_head_fits(&h, 1), "%d inputs a stage taken", DENSE_HEAD_MAX_IN + 4);
	h = dense_head_of(8, 2, full, 0, 1, dummy, w, b, &o, NULL, NULL);
	/* 1 row: 1034 floats of values and 4096 of gradients; 4 rows: 4136 and 4096 */
	cr_assert(kernels_dense_head_fits(&h, 1), "512, 512, 10 at 1 row a block not taken");
	cr_assert(!kernels_dense_head_fits(&h, 4), "512, 512, 10 at 4 rows a block taken (%d floats)",
		  4 * 1034 + 2 * 512 * DENSE_HEAD_MAX_ROWS);
}

Test(kernels_host, argmax_hits)
{
	const int shapes[][2] = {{1, 1}, {1, 10}, {9, 10}, {257, 10}, {100, 3}};
	for (size_t s = 0; s < N_OF(shapes); s++) {
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

/* ---- the optimizers, and the next batch in the same launch ---------------------------- */

/* The next batch an optimizer's launch gathers, its reference and the host's result. */
struct next_batch {
	struct dataset d;
	int count, batch_last, rows;
	size_t nx;
	double *ref_x;
	int32_t *ref_y;
	float *host_x;
	int32_t *host_y;
};

static void next_batch_make(struct next_batch *nb, struct rng *r, int count, int pixels, int len,
			    int batch_last, int cursor)
{
	nb->d = dataset_make(r, 17, pixels, len);
	nb->count = count;
	nb->batch_last = batch_last;
	nb->nx = (size_t)count * pixels;
	nb->ref_x = kc_dbuf(nb->nx);
	nb->ref_y = kc_guard_filled_i((size_t)count);
	nb->rows = ref_gather(&nb->d, cursor, count, batch_last, nb->ref_x, nb->ref_y);
	nb->host_x = kc_guard_filled_f(nb->nx);
	nb->host_y = kc_guard_filled_i((size_t)count);
}

static void next_batch_free(struct next_batch *nb)
{
	dataset_free(&nb->d);
	free(nb->ref_x);
	free(nb->ref_y);
	free(nb->host_x);
	free(nb->host_y);
}

/* The kernel's gathered batch x, y against the reference and the host's. */
static void next_batch_expect(const struct next_batch *nb, const float *x, const int32_t *y,
			      const char *what)
{
	kc_check_guards_f(x, nb->nx, what);
	kc_check_guards_i(y, (size_t)nb->count, what);
	kc_expect_close(what, x, nb->ref_x, nb->nx, 1e-6, 1e-6, kc_seed);
	kc_expect_same_i(what, y, nb->ref_y, (size_t)nb->count, kc_seed);
	kc_expect_same_f(what, x, nb->host_x, nb->nx, kc_seed);
	kc_expect_same_i(what, y, nb->host_y, (size_t)nb->count, kc_seed);
}

/*
 * SGD, plain (no velocity buffer) and with momentum and weight decay, at the
 * rate lr[counters->step - 1]; alone and with the next batch's gather after
 * its n items (at a cursor inside the index, or at its end where the batch is
 * clipped), the counters read and left as they were.
 */
Test(kernels_host, sgd_update)
{
	const size_t sizes[] = {1, 256, 257, 7850, 101770};
	const float moms[] = {0.0f, 0.9f};
	const float table[4] = {1e3f, -1.0f, 0.05f, 7.0f}; /* step 3: the rate at index 2 */
	for (size_t s = 0; s < N_OF(sizes); s++)
		for (int mi = 0; mi < 2; mi++)
			for (int fused = 0; fused <= 1; fused++) {
				size_t n = sizes[s];
				float mom = moms[mi], wd = mi ? 0.01f : 0.0f;
				struct rng r = rng_make(kc_seed, 600 + 4 * s + 2 * mi + fused);
				float *p0 = kc_rand_f(&r, n, -0.2, 0.2), *g = kc_rand_f(&r, n, -1.0, 1.0);
				float *v0 = kc_rand_f(&r, n, -0.5, 0.5);
				double *ref_p = kc_dbuf(n), *ref_v = kc_dbuf(n);
				ref_widen(p0, ref_p, n);
				ref_widen(v0, ref_v, n);
				ref_sgd_update(ref_p, g, ref_v, n, table[2], mom, wd);
				/* The cursor: a full batch, or at the end, where 3 of 5 rows are left. */
				const int cursor = (s + (size_t)mi) % 2 ? 4 : 20;
				struct next_batch nb;
				next_batch_make(&nb, &r, 5, 13, 23, (int)(s % 2), cursor);
				struct step_counters host_cnt = {cursor, 3, 8, 0};
				float *host_p = malloc(n * sizeof(float)), *host_v = malloc(n * sizeof(float));
				cr_assert(host_p && host_v);
				memcpy(host_p, p0, n * sizeof(float));
				memcpy(host_v, v0, n * sizeof(float));
				struct gather_req hg = gather_of(&nb.d, &host_cnt.cursor, nb.count,
								 nb.batch_last, nb.host_x, nb.host_y);
				backend_sgd_update(&kc_host, host_p, g, mom != 0.0f ? host_v : NULL, n, table,
						   &host_cnt, mom, wd, fused ? &hg : NULL);

				struct kernel_geom geoms[KC_N_GEOMS + 12];
				int n_geoms = kc_fused_geoms(n, n + (fused ? nb.nx : 0), geoms, (int)N_OF(geoms));
				for (int gi = -1; gi < n_geoms; gi++) {
					char what[200], gn[64];
					kc_geoms_name(gi, geoms, gn, sizeof(gn));
					snprintf(what, sizeof(what), "sgd_update n=%zu momentum=%g wd=%g%s, %s", n,
						 (double)mom, (double)wd,
						 fused ? (nb.rows < nb.count ? " then a clipped batch"
									    : " then the next batch")
						       : "",
						 gn);
					float *p = kc_guarded_f(n), *v = kc_guarded_f(n);
					float *x = kc_guarded_f(nb.nx);
					int32_t *y = kc_guarded_i((size_t)nb.count);
					memcpy(p, p0, n * sizeof(float));
					memcpy(v, v0, n * sizeof(float));
					struct guarded_counters gc;
					counters_init(&gc, cursor, 3, 8);
					struct gather_req kg = gather_of(&nb.d, &gc.c[1].cursor, nb.count,
									 nb.batch_last, x, y);
					kernels_sgd_update(NULL, gi < 0 ? NULL : &geoms[gi], p, g,
							   mom != 0.0f ? v : NULL, n, table, &gc.c[1], mom, wd,
							   fused ? &kg : NULL);
					kc_check_guards_f(p, n, what);
					kc_check_guards_f(v, n, what);
					kc_expect_close(what, p, ref_p, n, 1e-6, 1e-5, kc_seed);
					kc_expect_same_f(what, p, host_p, n, kc_seed);
					if (mom != 0.0f) {
						kc_expect_close(what, v, ref_v, n, 1e-6, 1e-5, kc_seed);
						kc_expect_same_f(what, v, host_v, n, kc_seed);
					} else {
						kc_expect_same_f(what, v, v0, n, kc_seed); /* passed as NULL */
					}
					if (fused) {
						next_batch_expect(&nb, x, y, what);
					} else {
						for (size_t i = 0; i < nb.nx; i++)
							cr_assert(x[i] == KC_GUARD_F, "%s: gathered without a batch", what);
					}
					counters_expect(&gc, cursor, 3, 8, what);
					kc_free_guarded_f(p);
					kc_free_guarded_f(v);
					kc_free_guarded_f(x);
					kc_free_guarded_i(y);
				}
				free(p0);
				free(g);
				free(v0);
				free(ref_p);
				free(ref_v);
				free(host_p);
				free(host_v);
				next_batch_free(&nb);
			}
}

/*
 * AdamW: 3 updates on each grid, t = counters->updates (1, 2, 3, as the loss
 * op counts them), the rate lr[counters->step - 1], against PyTorch's formula
 * in double and bitwise against the host backend; the last update also
 * gathers the next batch.
 */
Test(kernels_host, adamw_update)
{
	const size_t sizes[] = {1, 257, 7850, 101770};
	const float wds[] = {0.0f, 0.01f};
	const float table[3] = {1e3f, 2e-3f, -1.0f}; /* step 2: the rate at index 1 */
	for (size_t s = 0; s < N_OF(sizes); s++)
		for (int wi = 0; wi < 2; wi++) {
			size_t n = sizes[s];
			struct adamw_hyper h = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
						.weight_decay = wds[wi]};
			struct rng r = rng_make(kc_seed, 800 + 2 * s + wi);
			float *p0 = kc_rand_f(&r, n, -0.2, 0.2), *g = kc_rand_f(&r, n, -1.0, 1.0);
			double *ref_p = kc_dbuf(n), *ref_m = kc_dbuf(n), *ref_v = kc_dbuf(n);
			ref_widen(p0, ref_p, n);
			memset(ref_m, 0, n * sizeof(double));
			memset(ref_v, 0, n * sizeof(double));
			const int cursor = wi ? 21 : 0; /* with weight decay, a clipped last batch */
			struct next_batch nb;
			next_batch_make(&nb, &r, 4, 9, 23, wi, cursor);
			float *host_p = malloc(n * sizeof(float)), *host_mv = calloc(2 * n, sizeof(float));
			cr_assert(host_p && host_mv);
			memcpy(host_p, p0, n * sizeof(float));
			for (int k = 1; k <= 3; k++) {
				ref_adamw_update(ref_p, g, ref_m, ref_v, n, table[1], k, h.beta1, h.beta2,
						 h.eps, h.weight_decay);
				struct step_counters hc = {cursor, 2, k, 0};
				struct gather_req hg = gather_of(&nb.d, &hc.cursor, nb.count, nb.batch_last,
								 nb.host_x, nb.host_y);
				backend_adamw_update(&kc_host, host_p, g, host_mv, host_mv + n, n, table, &hc, h,
						     k == 3 ? &hg : NULL);
			}
			struct kernel_geom geoms[KC_N_GEOMS + 12];
			int n_geoms = kc_fused_geoms(n, n + nb.nx, geoms, (int)N_OF(geoms));
			for (int gi = -1; gi < n_geoms; gi++) {
				char what[200], gn[64];
				kc_geoms_name(gi, geoms, gn, sizeof(gn));
				snprintf(what, sizeof(what), "adamw_update n=%zu wd=%g, %s", n,
					 (double)h.weight_decay, gn);
				float *p = kc_guarded_f(n), *mv = kc_guarded_f(2 * n);
				float *x = kc_guarded_f(nb.nx);
				int32_t *y = kc_guarded_i((size_t)nb.count);
				memcpy(p, p0, n * sizeof(float));
				memset(mv, 0, 2 * n * sizeof(float));
				for (int k = 1; k <= 3; k++) {
					struct guarded_counters gc;
					counters_init(&gc, cursor, 2, k);
					struct gather_req kg = gather_of(&nb.d, &gc.c[1].cursor, nb.count,
									 nb.batch_last, x, y);
					kernels_adamw_update(NULL, gi < 0 ? NULL : &geoms[gi], p, g, mv, mv + n, n,
							     table, &gc.c[1], h, k == 3 ? &kg : NULL);
					counters_expect(&gc, cursor, 2, k, what);
					if (k < 3)
						for (size_t i = 0; i < nb.nx; i++)
							cr_assert(x[i] == KC_GUARD_F, "%s: gathered without a batch",
								  what);
				}
				kc_check_guards_f(p, n, what);
				kc_check_guards_f(mv, 2 * n, what);
				kc_expect_close(what, p, ref_p, n, 1e-6, 1e-5, kc_seed);
				kc_expect_close(what, mv, ref_m, n, 1e-6, 1e-5, kc_seed);
				kc_expect_close(what, mv + n, ref_v, n, 1e-6, 1e-5, kc_seed);
				kc_expect_same_f(what, p, host_p, n, kc_seed);
				kc_expect_same_f(what, mv, host_mv, 2 * n, kc_seed);
				next_batch_expect(&nb, x, y, what);
				kc_free_guarded_f(p);
				kc_free_guarded_f(mv);
				kc_free_guarded_f(x);
				kc_free_guarded_i(y);
			}
			free(p0);
			free(g);
			free(ref_p);
			free(ref_m);
			free(ref_v);
			free(host_p);
			free(host_mv);
			next_batch_free(&nb);
		}
}

/* An optimizer launch with no parameters left to update still gathers the next batch. */
Test(kernels_host, update_without_parameters_gathers)
{
	struct rng r = rng_make(kc_seed, 850);
	struct next_batch nb;
	next_batch_make(&nb, &r, 6, 11, 30, 1, 7);
	struct step_counters hc = {7, 1, 1, 0};
	struct gather_req hg = gather_of(&nb.d, &hc.cursor, nb.count, 1, nb.host_x, nb.host_y);
	backend_gather(&kc_host, &hg);
	const float lr = 0.1f;
	struct adamw_hyper h = {0.9f, 0.999f, 1e-8f, 0.0f};
	for (int adamw = 0; adamw <= 1; adamw++)
		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], gn[64];
			kc_geom_name(gi, gn, sizeof(gn));
			snprintf(what, sizeof(what), "%s_update of 0 parameters then a batch, %s",
				 adamw ? "adamw" : "sgd", gn);
			float *x = kc_guarded_f(nb.nx), *p = kc_guarded_f(0);
			int32_t *y = kc_guarded_i((size_t)nb.count);
			struct guarded_counters gc;
			counters_init(&gc, 7, 1, 1);
			struct gather_req kg = gather_of(&nb.d, &gc.c[1].cursor, nb.count, 1, x, y);
			if (adamw)
				kernels_adamw_update(NULL, kc_geom_at(gi), p, p, p, p, 0, &lr, &gc.c[1], h, &kg);
			else
				kernels_sgd_update(NULL, kc_geom_at(gi), p, p, p, 0, &lr, &gc.c[1], 0.9f, 0.0f,
						   &kg);
			kc_check_guards_f(p, 0, what);
			next_batch_expect(&nb, x, y, what);
			counters_expect(&gc, 7, 1, 1, what);
			kc_free_guarded_f(x);
			kc_free_guarded_f(p);
			kc_free_guarded_i(y);
		}
	next_batch_free(&nb);
}

/* ---- what a GEMM's epilogue does, where cuBLASLt cannot --------------------------- */

/*
 * The host backend's GEMM epilogue on C as it stands: C = 0 * 0 + 1 * C (exact),
 * then the epilogue over C (rows, cols), as cpu/gemm_host.c applies it.
 */
static void host_epilogue(float *c, int rows, int cols, enum gemm_epilogue e, const float *bias,
			  const float *act)
{
	float *za = calloc((size_t)rows, sizeof(float)), *zb = calloc((size_t)cols, sizeof(float));
	cr_assert(za && zb);
	struct gemm_req g = {.m = rows, .n = cols, .k = 1, .alpha = 1.0f, .a = za, .lda = 1,
			     .b = zb, .ldb = cols, .beta = 1.0f, .c = c, .ldc = cols,
			     .epilogue = e, .bias = bias, .act = act};
	backend_gemm(&kc_host, &g);
	free(za);
	free(zb);
}

Test(kernels_host, bias_act)
{
	const int shapes[][2] = {{1, 1}, {3, 10}, {17, 33}, {64, 100}, {32, 512}};
	for (size_t s = 0; s < N_OF(shapes); s++)
		for (int relu = 0; relu <= 1; relu++) {
			int rows = shapes[s][0], cols = shapes[s][1];
			size_t n = (size_t)rows * cols;
			struct rng r = rng_make(kc_seed, 200 + 2 * s + relu);
			float *in = kc_rand_f(&r, n, -2.0, 2.0), *bias = kc_rand_f(&r, (size_t)cols, -1.0, 1.0);
			double *ref = kc_dbuf(n);
			ref_widen(in, ref, n);
			ref_bias_act(ref, bias, rows, cols, relu);
			float *host_y = malloc(n * sizeof(float));
			cr_assert_not_null(host_y);
			memcpy(host_y, in, n * sizeof(float));
			host_epilogue(host_y, rows, cols, relu ? GEMM_EPILOGUE_BIAS_RELU : GEMM_EPILOGUE_BIAS,
				      bias, NULL);
			kc_expect_close("host GEMM bias epilogue", host_y, ref, n, 1e-6, 1e-6, kc_seed);

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

/*
 * Gradient clipping, its two launches on every geometry (the norm's block 0
 * alone, whatever the grid; the scale a grid-stride loop): the norm and the
 * gradients bit for bit the host backend's (elem.h's order, CLIP_PARTS) and
 * close to torch.nn.utils.clip_grad_norm_ in double; clipped (the bound a
 * tenth of the norm) and not (ten times it: untouched), sizes about the
 * partial sums' row. An empty buffer has the norm 0.
 */
Test(kernels_host, clip_grad_norm)
{
	const size_t sizes[] = {1, CLIP_PARTS - 1, CLIP_PARTS, CLIP_PARTS + 1, 7850, 101770};
	for (size_t s = 0; s < N_OF(sizes); s++)
		for (int clip = 0; clip < 2; clip++) {
			size_t n = sizes[s];
			struct rng r = rng_make(kc_seed, 700 + 2 * s + clip);
			float *g0 = kc_rand_f(&r, n, -1.0, 1.0);
			double *ref = kc_dbuf(n);
			double norm = ref_clip_grad_norm(g0, ref, n, 0.0);
			float max_norm = (float)(norm * (clip ? 0.1 : 10.0));
			ref_clip_grad_norm(g0, ref, n, max_norm);
			float *host_g = malloc(n * sizeof(float)), host_norm = 0.0f;
			cr_assert_not_null(host_g);
			memcpy(host_g, g0, n * sizeof(float));
			backend_clip_grad_norm(&kc_host, host_g, n, max_norm, &host_norm);
			cr_expect(fabs((double)host_norm - norm) <= 1e-6 * norm,
				  "host norm %.9g, double %.9g (seed %llu)", (double)host_norm, norm,
				  (unsigned long long)kc_seed);
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				char what[160], gn[64];
				kc_geom_name(gi, gn, sizeof(gn));
				snprintf(what, sizeof(what), "clip_grad_norm n=%zu %s, %s", n,
					 clip ? "clipped" : "not clipped", gn);
				float *g = kc_guarded_f(n), *nm = kc_guarded_f(1);
				memcpy(g, g0, n * sizeof(float));
				kernels_clip_norm(NULL, kc_geom_at(gi), g, n, nm);
				kc_check_guards_f(nm, 1, what);
				kc_expect_same_f(what, nm, &host_norm, 1, kc_seed);
				kernels_clip_scale(NULL, kc_geom_at(gi), g, n, nm, max_norm);
				kc_check_guards_f(g, n, what);
				kc_expect_close(what, g, ref, n, 1e-12, 2e-6, kc_seed);
				kc_expect_same_f(what, g, host_g, n, kc_seed);
				if (!clip)
					kc_expect_same_f(what, g, g0, n, kc_seed);
				kc_free_guarded_f(g);
				kc_free_guarded_f(nm);
			}
			free(g0);
			free(ref);
			free(host_g);
		}
	float *nm = kc_guarded_f(1), f = 3.0f;
	kernels_clip_norm(NULL, NULL, &f, 0, nm);
	cr_expect(nm[0] == 0.0f, "the norm of nothing is %g", (double)nm[0]);
	kc_free_guarded_f(nm);
}

/*
 * Micro-batch mode's kernels (--micro-batch, --exact; docs/exact.md) on every
 * geometry, bit for bit the host backend's ops: grad_accumulate's float
 * adds; three micro-batches into the int64 accumulator, the second with
 * elements out of range (at the bound, beyond it, NaN, infinite) that are
 * counted into slot n, not encoded; then the decode, which moves the count
 * into slot n + 1 and zeroes slot n, and a second step, whose count adds to
 * the first's there. Outputs between guard words.
 */
static int64_t *guarded_i64(size_t n)
{
	int64_t *p = malloc((n + 2 * KC_GUARD) * sizeof(*p));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n + 2 * KC_GUARD; i++)
		p[i] = (int64_t)0x5a5a5a5a5a5a5a5all;
	memset(p + KC_GUARD, 0, n * sizeof(*p)); /* zeroed, as an allocation is */
	return p + KC_GUARD;
}

static void check_guards_i64(const int64_t *p, size_t n, const char *what)
{
	for (size_t i = 1; i <= KC_GUARD; i++)
		cr_assert(p[-(ptrdiff_t)i] == (int64_t)0x5a5a5a5a5a5a5a5all &&
				  p[n - 1 + i] == (int64_t)0x5a5a5a5a5a5a5a5all,
			  "%s: a guard word around the int64 buffer was overwritten", what);
}

static void expect_same_i64(const char *what, const int64_t *got, const int64_t *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(got[i], want[i], "%s: slot %zu is %lld, the host backend's %lld (seed %llu)",
			     what, i, (long long)got[i], (long long)want[i],
			     (unsigned long long)kc_seed);
}

Test(kernels_host, micro_batch_accumulation)
{
	const size_t sizes[] = {1, 255, 256, 257, 7850};
	enum { K = 3 };
	for (size_t s = 0; s < N_OF(sizes); s++) {
		size_t n = sizes[s];
		struct rng r = rng_make(kc_seed, 900 + s);
		double limit = fixed_limit_elem(K);
		float *gk[K];
		for (int k = 0; k < K; k++)
			gk[k] = kc_rand_f(&r, n, -2.0, 2.0);
		float edge = (float)ldexp(limit, -FIXED_SHIFT);
		const float bad[] = {edge, -edge, 2.0f * edge, NAN, INFINITY};
		for (size_t i = 0; i < N_OF(bad) && i < n; i++)
			gk[1][(i * 97) % n] = bad[i];
		long long n_bad = (long long)(n < N_OF(bad) ? n : N_OF(bad));
		/* the host backend's results */
		float *host_acc = malloc(n * sizeof(float)), *host_g = malloc(n * sizeof(float));
		int64_t *host_q = calloc(n + 2, sizeof(int64_t));
		cr_assert(host_acc && host_g && host_q);
		memcpy(host_acc, gk[0], n * sizeof(float));
		backend_grad_accumulate(&kc_host, host_acc, gk[2], n);
		for (int k = 0; k < K; k++)
			backend_fixed_accumulate(&kc_host, host_q, gk[k], n, limit, k == 0);
		cr_assert_eq(host_q[n], n_bad, "host: %lld out of range, want %lld",
			     (long long)host_q[n], n_bad);
		backend_fixed_decode(&kc_host, host_g, host_q, n);
		cr_assert(host_q[n] == 0 && host_q[n + 1] == n_bad, "host: the count not moved");

		for (int gi = -1; gi < KC_N_GEOMS; gi++) {
			char what[160], gn[64];
			kc_geom_name(gi, gn, sizeof(gn));
			snprintf(what, sizeof(what), "grad_accumulate n=%zu, %s", n, gn);
			float *acc = kc_guarded_f(n);
			memcpy(acc, gk[0], n * sizeof(float));
			kernels_grad_accumulate(NULL, kc_geom_at(gi), acc, gk[2], n);
			kc_check_guards_f(acc, n, what);
			kc_expect_same_f(what, acc, host_acc, n, kc_seed);

			snprintf(what, sizeof(what), "fixed_accumulate n=%zu, %s", n, gn);
			int64_t *q = guarded_i64(n + 2);
			for (int k = 0; k < K; k++)
				kernels_fixed_accumulate(NULL, kc_geom_at(gi), q, gk[k], n, limit, k == 0);
			check_guards_i64(q, n + 2, what);
			cr_assert_eq(q[n], n_bad, "%s: %lld counted, want %lld", what, (long long)q[n],
				     n_bad);
			snprintf(what, sizeof(what), "fixed_decode n=%zu, %s", n, gn);
			float *g = kc_guarded_f(n);
			kernels_fixed_decode(NULL, kc_geom_at(gi), g, q, n);
			check_guards_i64(q, n + 2, what);
			kc_check_guards_f(g, n, what);
			expect_same_i64(what, q, host_q, n + 2);
			kc_expect_same_f(what, g, host_g, n, kc_seed);
			/* a second step: its count adds to the first's in slot n + 1 */
			for (int k = 0; k < K; k++)
				kernels_fixed_accumulate(NULL, kc_geom_at(gi), q, gk[k], n, limit, k == 0);
			kernels_fixed_decode(NULL, kc_geom_at(gi), g, q, n);
			cr_assert(q[n] == 0 && q[n + 1] == 2 * n_bad,
				  "%s: after two steps slots n, n + 1 hold %lld, %lld; want 0, %lld", what,
				  (long long)q[n], (long long)q[n + 1], 2 * n_bad);
			kc_expect_same_f(what, g, host_g, n, kc_seed);
			kc_free_guarded_f(acc);
			kc_free_guarded_f(g);
			free(q - KC_GUARD);
		}
		for (int k = 0; k < K; k++)
			free(gk[k]);
		free(host_acc);
		free(host_g);
		free(host_q);
	}
}

Test(kernels_host, relu_backward)
{
	const int shapes[][2] = {{1, 1}, {1, 255}, {1, 256}, {1, 257}, {97, 103}};
	for (size_t s = 0; s < N_OF(shapes); s++) {
		int rows = shapes[s][0], cols = shapes[s][1];
		size_t n = (size_t)rows * cols;
		struct rng r = rng_make(kc_seed, 300 + s);
		float *dy0 = kc_rand_f(&r, n, -1.0, 1.0), *act = kc_rand_f(&r, n, -1.0, 1.0);
		for (size_t i = 0; i < n; i += 7)
			act[i] = 0.0f; /* ReLU outputs are often exactly zero */
		double *ref = kc_dbuf(n);
		ref_widen(dy0, ref, n);
		ref_relu_backward(ref, act, n);
		float *host_dy = malloc(n * sizeof(float));
		cr_assert_not_null(host_dy);
		memcpy(host_dy, dy0, n * sizeof(float));
		host_epilogue(host_dy, rows, cols, GEMM_EPILOGUE_DRELU, NULL, act);
		kc_expect_close("host GEMM ReLU-gradient epilogue", host_dy, ref, n, 0.0, 0.0, kc_seed);

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

/*
 * The bias gradient, op(A) stored (m, k), or (k, m) when trans_a, at a row
 * stride wider than the matrix (the padding NaN: a stray read shows), against
 * the sums in double and the host GEMM's bias gradient: to a tolerance on
 * random inputs, exactly on whole numbers (every partial sum exact in float).
 */
Test(kernels_host, bias_grad)
{
	const int shapes[][2] = {{1, 1}, {10, 32}, {300, 7}, {16, 1000}, {257, 3}, {6, 0}};
	for (size_t s = 0; s < N_OF(shapes); s++)
		for (int trans = 0; trans <= 1; trans++)
			for (int whole = 0; whole <= 1; whole++) {
				int m = shapes[s][0], k = shapes[s][1];
				int rows = trans ? k : m, cols = trans ? m : k, lda = cols + 3;
				size_t na = (size_t)(rows ? rows : 1) * lda;
				struct rng r = rng_make(kc_seed, 1000 + 4 * s + 2 * trans + whole);
				float *a = whole ? kc_whole_f(&r, na, -9, 9) : kc_rand_f(&r, na, -1.0, 1.0);
				for (int i = 0; i < rows; i++)
					for (int j = cols; j < lda; j++)
						a[(size_t)i * lda + j] = NAN;
				double *ref = kc_dbuf((size_t)m);
				ref_bias_grad(trans, m, k, a, lda, ref);
				/* Largest error of a float sum of k terms of magnitude 1: k * eps. */
				double tol = whole ? 0.0 : 1e-6 * (k + 1);
				float *host = NULL;
				if (k > 0) {
					/* C (m, 1) = op(A) * 0, and the bias gradient of op(A). */
					float *zb = calloc((size_t)k, sizeof(float)), *c = calloc((size_t)m, sizeof(float));
					host = kc_guard_filled_f((size_t)m);
					cr_assert(zb && c);
					struct gemm_req g = {.trans_a = trans, .m = m, .n = 1, .k = k, .alpha = 1.0f,
							     .a = a, .lda = lda, .b = zb, .ldb = 1, .c = c, .ldc = 1,
							     .bias_grad = host};
					backend_gemm(&kc_host, &g);
					kc_expect_close("host GEMM bias gradient", host, ref, (size_t)m, tol, 0.0,
							kc_seed);
					free(zb);
					free(c);
				}
				for (int gi = -1; gi < KC_N_GEOMS; gi++) {
					char what[160], gn[64];
					kc_geom_name(gi, gn, sizeof(gn));
					snprintf(what, sizeof(what), "bias_grad m=%d k=%d lda=%d trans_a=%d%s, %s", m,
						 k, lda, trans, whole ? " whole numbers" : "", gn);
					for (int block = 0; block <= 1; block++) {
						char named[200];
						snprintf(named, sizeof(named), "%s%s", what,
							 block ? ", by block reduction" : "");
						float *out = kc_guarded_f((size_t)m);
						if (block)
							kernels_bias_grad_block(NULL, kc_geom_at(gi), a, lda, trans,
										m, k, out);
						else
							kernels_bias_grad(NULL, kc_geom_at(gi), a, lda, trans, m, k,
									  out);
						kc_check_guards_f(out, (size_t)m, named);
						kc_expect_close(named, out, ref, (size_t)m, tol, 0.0, kc_seed);
						if (whole && host)
							kc_expect_same_f(named, out, host, (size_t)m, kc_seed);
						kc_free_guarded_f(out);
					}
				}
				free(a);
				free(ref);
				free(host);
			}
}

/* ---- a training step's element work, chained -------------------------------------- */

/*
 * The batch work of an epoch chained as the trainer chains it (host/train/
 * train.c): the first batch gathered at the counters' cursor; then each step's
 * loss moves the counters on, and the optimizer's launch updates at the
 * step's rate and gathers the next batch at the moved cursor, the last batch
 * clipped to what is left of the index. Each batch must be the index's next
 * rows and the parameters must have taken each step's rate once.
 */
Test(kernels_host, step_chain)
{
	enum { N_IMG = 20, PIX = 5, B = 4, LEN = 3 * B + 2, STEPS = 4, NP = 300 };
	struct rng r = rng_make(kc_seed, 900);
	struct dataset d = dataset_make(&r, N_IMG, PIX, LEN);
	const float lr[STEPS] = {0.5f, 0.25f, 0.125f, 0.0625f};
	for (int gi = -1; gi < KC_N_GEOMS; gi++) {
		char gn[64];
		kc_geom_name(gi, gn, sizeof(gn));
		const struct kernel_geom *geom = kc_geom_at(gi);
		struct guarded_counters gc;
		counters_init(&gc, 0, 0, 0);
		float x[B * PIX], logits[B * 3], dl[B * 3], loss[B], p[NP], grad[NP];
		int32_t y[B];
		for (int i = 0; i < NP; i++) {
			p[i] = 0.0f;
			grad[i] = 1.0f;
		}
		memset(logits, 0, sizeof(logits));
		struct gather_req gr = gather_of(&d, &gc.c[1].cursor, B, 0, x, y);
		kernels_gather(NULL, geom, &gr);
		for (int step = 0; step < STEPS; step++) {
			int rows = LEN - step * B < B ? LEN - step * B : B;
			for (int i = 0; i < rows; i++) {
				int32_t e = d.index[step * B + i];
				cr_assert_eq(y[i], d.labels[e], "%s, step %d row %d: label of image %d expected",
					     gn, step, i, e);
				for (int q = 0; q < PIX; q++)
					cr_assert(x[i * PIX + q] == normalize_pixel_elem(d.images[e * PIX + q]),
						  "%s, step %d row %d pixel %d", gn, step, i, q);
				logits[i * 3] = (float)y[i]; /* any numbers: only the counters matter here */
			}
			for (int i = 0; i < rows; i++)
				y[i] %= 3;
			struct xent_req xr = {.logits = logits, .labels = y, .rows = rows, .cols = 3,
					      .scale = 1.0f, .row_loss = loss, .dlogits = dl,
					      .counters = &gc.c[1]};
			kernels_softmax_xent(NULL, geom, &xr);
			char what[96];
			snprintf(what, sizeof(what), "%s, after step %d's loss", gn, step);
			counters_expect(&gc, step * B + rows, step + 1, step + 1, what);
			kernels_sgd_update(NULL, geom, p, grad, NULL, NP, lr, &gc.c[1], 0.0f, 0.0f, &gr);
		}
		counters_expect(&gc, LEN, STEPS, STEPS, gn);
		double want = 0.0;
		for (int k = 0; k < STEPS; k++)
			want -= lr[k];
		for (int i = 0; i < NP; i++)
			cr_assert(p[i] == (float)want, "%s: p[%d] = %g, expected %g (each step's rate once)",
				  gn, i, (double)p[i], want);
	}
	dataset_free(&d);
}

/* ---- our GEMMs: what both tests share ---------------------------------------------- */

/* A GEMM operand (rows, cols) at row stride ld, whole numbers or not, NaN past cols. */
static float *gemm_operand(struct rng *r, int rows, int cols, int ld, int whole)
{
	float *x = whole ? kc_whole_f(r, (size_t)rows * ld, -3, 3) : kc_rand_f(r, (size_t)rows * ld, -1.0, 1.0);
	for (int i = 0; i < rows; i++)
		for (int j = cols; j < ld; j++)
			x[(size_t)i * ld + j] = NAN;
	return x;
}

/*
 * In double: ref (m, n at ldc) = 1.5 op(A) op(B) + beta c0, and ref_bg the bias
 * gradient of op(A), the two GEMM tests' expectations.
 */
static void gemm_reference(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
			   const float *b, int ldb, float beta, const float *c0, int ldc, double *ref,
			   double *ref_bg)
{
	for (size_t i = 0; i < (size_t)m * ldc; i++)
		ref[i] = c0[i];
	ref_gemm(trans_a, trans_b, m, n, k, 1.5, a, lda, b, ldb, beta, ref, ldc);
	ref_bias_grad(trans_a, m, k, a, lda, ref_bg);
}

/*
 * C (m, n) at ldc against the reference, nothing written past n (NaN or
 * c0's old value there), and the bias gradient against its reference, or
 * untouched (its guard value) when there is none.
 */
static void gemm_expect(const char *what, const float *c, const float *c0, const double *ref, int m,
			int n, int ldc, const float *bg, const double *ref_bg, int with_bias, double atol,
			double rtol)
{
	for (int i = 0; i < m; i++) {
		kc_expect_close(what, c + (size_t)i * ldc, ref + (size_t)i * ldc, (size_t)n, atol, rtol,
				kc_seed);
		for (int j = n; j < ldc; j++)
			cr_assert(isnan(c[(size_t)i * ldc + j]) || c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j],
				  "%s: wrote C[%d, %d] past n", what, i, j);
	}
	if (with_bias)
		kc_expect_close(what, bg, ref_bg, (size_t)m, atol, rtol, kc_seed);
	else
		for (int i = 0; i < m; i++)
			cr_assert(bg[i] == KC_GUARD_F, "%s: wrote a bias gradient", what);
}

/* ---- our GEMM split over k ---------------------------------------------------------- */

/*
 * kernels_gemm_ksplit against the triple loop in double: every transpose, a
 * row stride wider than the matrix (NaN padding: a stray read shows), the
 * bias gradient or none, beta 0 over a C full of NaN (ignored, as BLAS does)
 * or beta 0.5 over old values, chunk counts from one to more than k's tiles,
 * every geometry (a thread per micro-tile: with slices of the tile where the
 * block has threads to spare, walking the chunk more than once where it has
 * too few). Whole numbers give
 * exact sums whatever the order: equal to the reference; random values to a
 * tolerance.
 */
Test(kernels_host, gemm_ksplit)
{
	/* m, n, k: the convolutions' weight gradients' shape at a small k, odd sizes, one value. */
	const int shapes[][3] = {{6, 25, 1100}, {16, 150, 410}, {3, 4, 37}, {1, 1, 1}, {10, 84, 256}};
	const int chunk_counts[] = {1, 7, 1000};
	for (size_t s = 0; s < N_OF(shapes); s++)
		for (int variant = 0; variant < 8; variant++) {
			int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
			int trans_a = variant & 1, trans_b = (variant >> 1) & 1, whole = variant >> 2;
			int with_bias = (variant + (int)s) % 2, with_beta = variant % 3 == 0;
			int ar = trans_a ? k : m, ac = trans_a ? m : k, br = trans_b ? n : k, bc = trans_b ? k : n;
			int lda = ac + 2, ldb = bc + 1, ldc = n + 3;
			struct rng r = rng_make(kc_seed, 1200 + 8 * s + variant);
			float *a = gemm_operand(&r, ar, ac, lda, whole), *b = gemm_operand(&r, br, bc, ldb, whole);
			float beta = with_beta ? 0.5f : 0.0f;
			float *c0 = kc_whole_f(&r, (size_t)m * ldc, -4, 4);
			double *ref = kc_dbuf((size_t)m * ldc), *ref_bg = kc_dbuf((size_t)m);
			gemm_reference(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c0, ldc, ref, ref_bg);
			double atol = whole ? 0.0 : 1e-5 * k, rtol = whole ? 0.0 : 1e-5;
			size_t outs = (size_t)m * n + (size_t)m;
			for (size_t ci = 0; ci < N_OF(chunk_counts); ci++)
				for (int gi = -1; gi < KC_N_GEOMS; gi++) {
					/*
					 * Every block's threads are fibers here (both kernels wait at
					 * barriers), which ASan makes slow: the largest shape at the
					 * backend's geometry, an odd small one and a wide one only,
					 * the 1000-block grid (idle blocks) for the two smallest
					 * shapes only (the 7-block grid leaves blocks idle too).
					 */
					if ((size_t)m * n > 1000 && gi != -1 && gi != 2 && gi != 4)
						continue;
					if ((size_t)m * n > 12 && gi == KC_N_GEOMS - 1)
						continue;
					/* A chunk per tile (1000 is past every k here): two grids suffice. */
					if (chunk_counts[ci] == 1000 && gi != -1 && gi != 2)
						continue;
					char what[200], gn[64];
					kc_geom_name(gi, gn, sizeof(gn));
					snprintf(what, sizeof(what),
						 "gemm_ksplit %dx%dx%d trans %d%d%s%s%s, %d chunks, %s",
						 m, n, k, trans_a, trans_b,
						 with_bias ? " bias_grad" : "", with_beta ? " beta 0.5" : "",
						 whole ? " whole numbers" : "", chunk_counts[ci], gn);
					float *c = kc_guarded_f((size_t)m * ldc), *bg = kc_guarded_f((size_t)m);
					for (size_t i = 0; i < (size_t)m * ldc; i++)
						c[i] = with_beta ? c0[i] : NAN;
					/* The launcher takes at most a chunk per tile of at least KSPLIT_TILE_MIN. */
					size_t most = (size_t)(k + KSPLIT_TILE_MIN - 1) / KSPLIT_TILE_MIN;
					size_t n_part = ((size_t)chunk_counts[ci] < most ? (size_t)chunk_counts[ci] : most) * outs;
					float *part = kc_guarded_f(n_part);
					struct gemm_req q = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n,
							     .k = k, .alpha = 1.5f, .a = a, .lda = lda, .b = b,
							     .ldb = ldb, .beta = beta, .c = c, .ldc = ldc,
							     .bias_grad = with_bias ? bg : NULL};
					cr_assert(kernels_gemm_ksplit_fits(&q), "%s: fits", what);
					kernels_gemm_ksplit(NULL, kc_geom_at(gi), &q, chunk_counts[ci], part);
					kc_check_guards_f(c, (size_t)m * ldc, what);
					kc_check_guards_f(bg, (size_t)m, what);
					kc_check_guards_f(part, n_part, what);
					gemm_expect(what, c, c0, ref, m, n, ldc, bg, ref_bg, with_bias, atol, rtol);
					kc_free_guarded_f(c);
					kc_free_guarded_f(bg);
					kc_free_guarded_f(part);
				}
			free(a);
			free(b);
			free(c0);
			free(ref);
			free(ref_bg);
		}
}

/*
 * kernels_gemm_ksplit reading B from a convolution's input (r->b_im2col, an
 * implicit GEMM): a convolution's weight gradient, dW (oc, c*k*k) = dz
 * (oc, P) cols^T, with the bias gradient, for convolutions with and without
 * padding (wider than the taps reach too), several channels and images, a
 * 1 x 1 tap. B's entries are the im2col matrix's values summed in the same
 * order, so the result must equal, bit for bit, the same launch on the
 * explicit matrix (the reference's im2col, NaN in r->b where the implicit
 * way must not look: it must not read b), and the triple loop in double to a
 * tolerance. Chunk counts 1 and 7, two geometries.
 */
Test(kernels_host, gemm_ksplit_im2col)
{
	/* c, h, w, k, pad, oc, rows */
	const int convs[][7] = {{1, 8, 8, 5, 2, 6, 3},  {6, 7, 7, 5, 0, 16, 2}, {2, 6, 9, 3, 1, 3, 2},
				{2, 3, 3, 3, 4, 2, 1},  {3, 4, 6, 1, 0, 2, 2}};
	const int chunk_counts[] = {1, 7};
	for (size_t s = 0; s < N_OF(convs); s++) {
		const int *v = convs[s];
		struct conv_shape cs = conv_shape_make(v[0], v[1], v[2], v[3], v[4]);
		int oc = v[5], rows = v[6], taps = cs.c * cs.k * cs.k, p = cs.oh * cs.ow * rows;
		struct rng r = rng_make(kc_seed, 1300 + s);
		float *x = kc_rand_f(&r, (size_t)cs.c * cs.h * cs.w * rows, -1.0, 1.0);
		float *dz = kc_rand_f(&r, (size_t)oc * p, -1.0, 1.0);
		double *cols_d = kc_dbuf((size_t)taps * p);
		ref_im2col(x, &cs, rows, cols_d);
		float *cols = malloc((size_t)taps * p * sizeof(float)), *nans = malloc((size_t)taps * p * sizeof(float));
		cr_assert(cols && nans);
		for (size_t i = 0; i < (size_t)taps * p; i++) {
			cols[i] = (float)cols_d[i];
			nans[i] = NAN;
		}
		double *ref = kc_dbuf((size_t)oc * taps), *ref_bg = kc_dbuf((size_t)oc);
		float *c0 = kc_whole_f(&r, (size_t)oc * taps, -4, 4);
		gemm_reference(0, 1, oc, taps, p, dz, p, cols, p, 0.0f, c0, taps, ref, ref_bg);
		struct gemm_im2col ic = {x, cs, rows};
		for (size_t ci = 0; ci < N_OF(chunk_counts); ci++)
			for (int gi = -1; gi < KC_N_GEOMS; gi += 3) {
				char what[200], gn[64];
				kc_geom_name(gi, gn, sizeof(gn));
				snprintf(what, sizeof(what), "gemm_ksplit im2col c%d %dx%d k%d pad%d -> %d, %d images, %d chunks, %s",
					 cs.c, cs.h, cs.w, cs.k, cs.pad, oc, rows,
					 chunk_counts[ci], gn);
				size_t most = (size_t)(p + KSPLIT_TILE_MIN - 1) / KSPLIT_TILE_MIN;
				size_t n_part = ((size_t)chunk_counts[ci] < most ? (size_t)chunk_counts[ci] : most) *
						((size_t)oc * taps + (size_t)oc);
				float *out[2], *bg[2];
				for (int implicit = 0; implicit <= 1; implicit++) {
					out[implicit] = kc_guarded_f((size_t)oc * taps);
					bg[implicit] = kc_guarded_f((size_t)oc);
					float *part = kc_guarded_f(n_part);
					struct gemm_req q = {.trans_b = 1, .m = oc, .n = taps, .k = p, .alpha = 1.5f,
							     .a = dz, .lda = p, .b = implicit ? nans : cols, .ldb = p,
							     .c = out[implicit], .ldc = taps, .bias_grad = bg[implicit],
							     .b_im2col = implicit ? &ic : NULL};
					cr_assert(kernels_gemm_ksplit_fits(&q), "%s: fits", what);
					cr_assert(!implicit || kernels_gemm_im2col_fits(&q), "%s: fits implicitly", what);
					kernels_gemm_ksplit(NULL, kc_geom_at(gi), &q, chunk_counts[ci], part);
					kc_check_guards_f(out[implicit], (size_t)oc * taps, what);
					kc_check_guards_f(bg[implicit], (size_t)oc, what);
					kc_check_guards_f(part, n_part, what);
					kc_free_guarded_f(part);
				}
				kc_expect_same_f(what, out[1], out[0], (size_t)oc * taps, kc_seed);
				kc_expect_same_f(what, bg[1], bg[0], (size_t)oc, kc_seed);
				gemm_expect(what, out[1], c0, ref, oc, taps, taps, bg[1], ref_bg, 1, 1e-5 * p, 1e-5);
				for (int implicit = 0; implicit <= 1; implicit++) {
					kc_free_guarded_f(out[implicit]);
					kc_free_guarded_f(bg[implicit]);
				}
			}
		free(x);
		free(dz);
		free(cols_d);
		free(cols);
		free(nans);
		free(ref);
		free(ref_bg);
		free(c0);
	}
}

/* ---- our GEMM whole in one kernel ----------------------------------------------------- */

/*
 * kernels_gemm_tile against the triple loop in double, then the epilogue
 * (gemm_map.h) on the reference's value: every transpose, every epilogue and
 * the bias gradient, row strides wider than the matrices (NaN padding: a
 * stray read shows), beta 0 over a C full of NaN (ignored) or beta 0.5, a
 * tile edge cut by m and n, a single value; the backend's geometry and
 * others (a block of fewer threads than a tile's outputs, a grid of fewer
 * blocks than tiles, idle blocks). Whole numbers give exact sums: equal.
 */
Test(kernels_host, gemm_tile)
{
	const int shapes[][3] = {{32, 10, 100}, {10, 70, 32}, {33, 65, 70}, {1, 1, 1}};
	const enum gemm_epilogue epis[] = {GEMM_EPILOGUE_NONE, GEMM_EPILOGUE_BIAS,
					   GEMM_EPILOGUE_BIAS_RELU, GEMM_EPILOGUE_DRELU};
	for (size_t s = 0; s < N_OF(shapes); s++)
		for (int variant = 0; variant < 16; variant++) {
			int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
			int trans_a = variant & 1, trans_b = (variant >> 1) & 1;
			enum gemm_epilogue epi = epis[variant >> 2];
			int whole = (variant + (int)s) % 2, with_beta = variant % 3 == 0;
			int with_bias = epi == GEMM_EPILOGUE_NONE && (variant >> 1) % 2 == 0;
			int ar = trans_a ? k : m, ac = trans_a ? m : k, br = trans_b ? n : k, bc = trans_b ? k : n;
			int lda = ac + 2, ldb = bc + 1, ldc = n + 3;
			struct rng r = rng_make(kc_seed, 1400 + 16 * s + variant);
			float *a = gemm_operand(&r, ar, ac, lda, whole), *b = gemm_operand(&r, br, bc, ldb, whole);
			float *bias = kc_whole_f(&r, (size_t)n, -4, 4);
			float *act = kc_whole_f(&r, (size_t)m * ldc, -1, 1); /* a ReLU's output: 0 or 1 */
			for (size_t i = 0; i < (size_t)m * ldc; i++)
				act[i] = act[i] > 0.0f ? act[i] : 0.0f;
			float beta = with_beta ? 0.5f : 0.0f;
			float *c0 = kc_whole_f(&r, (size_t)m * ldc, -4, 4);
			double *ref = kc_dbuf((size_t)m * ldc), *ref_bg = kc_dbuf((size_t)m);
			gemm_reference(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c0, ldc, ref, ref_bg);
			for (int i = 0; i < m; i++)
				for (int j = 0; j < n; j++) {
					double *v = &ref[(size_t)i * ldc + j];
					if (epi == GEMM_EPILOGUE_BIAS || epi == GEMM_EPILOGUE_BIAS_RELU)
						*v = bias_act_elem((float)*v, bias[j], epi == GEMM_EPILOGUE_BIAS_RELU);
					else if (epi == GEMM_EPILOGUE_DRELU)
						*v = relu_backward_elem((float)*v, act[(size_t)i * ldc + j]);
				}
			double atol = whole ? 0.0 : 1e-5 * k, rtol = whole ? 0.0 : 1e-5;
			for (int gi = -1; gi < KC_N_GEOMS; gi++) {
				/* Every block's threads are fibers here (ASan makes them slow): some grids. */
				if (variant % 4 != 0 && gi != -1 && gi != 2)
					continue;
				char what[200], gn[64];
				kc_geom_name(gi, gn, sizeof(gn));
				snprintf(what, sizeof(what), "gemm_tile %dx%dx%d trans %d%d epilogue %d%s%s%s, %s", m, n,
					 k, trans_a, trans_b, (int)epi, with_bias ? " bias_grad" : "",
					 with_beta ? " beta 0.5" : "", whole ? " whole numbers" : "", gn);
				float *c = kc_guarded_f((size_t)m * ldc), *bg = kc_guarded_f((size_t)m);
				for (size_t i = 0; i < (size_t)m * ldc; i++)
					c[i] = with_beta ? c0[i] : NAN;
				struct gemm_req q = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k,
						     .alpha = 1.5f, .a = a, .lda = lda, .b = b, .ldb = ldb,
						     .beta = beta, .c = c, .ldc = ldc, .epilogue = epi,
						     .bias = bias, .act = act, .bias_grad = with_bias ? bg : NULL};
				cr_assert(kernels_gemm_tile_fits(&q), "%s: fits", what);
				int kstep = (variant + gi) % 2 ? GEMM_TILE_KMAX : GEMM_TILE;
				snprintf(what + strlen(what), sizeof(what) - strlen(what), ", k in steps of %d", kstep);
				kernels_gemm_tile(NULL, kc_geom_at(gi), &q, kstep);
				kc_check_guards_f(c, (size_t)m * ldc, what);
				kc_check_guards_f(bg, (size_t)m, what);
				gemm_expect(what, c, c0, ref, m, n, ldc, bg, ref_bg, with_bias, atol, rtol);
				kc_free_guarded_f(c);
				kc_free_guarded_f(bg);
			}
			free(a);
			free(b);
			free(bias);
			free(act);
			free(c0);
			free(ref);
			free(ref_bg);
		}
}

/* What the whole-in-one-kernel GEMM takes: a k of the dense layers, not too many tiles. */
Test(kernels_host, gemm_tile_fits)
{
	struct gemm_req q = {.m = 32, .n = 512, .k = 784};
	cr_assert(kernels_gemm_tile_fits(&q), "the mlp's first layer at batch 32");
	q.k = GEMM_TILE_MAX_K + 1;
	cr_assert(!kernels_gemm_tile_fits(&q), "k past GEMM_TILE_MAX_K");
	q.k = 1;
	q.bias_grad = (float *)&q;
	q.epilogue = GEMM_EPILOGUE_BIAS;
	cr_assert(!kernels_gemm_tile_fits(&q), "an epilogue and a bias gradient");
	q.epilogue = GEMM_EPILOGUE_NONE;
	cr_assert(kernels_gemm_tile_fits(&q), "a bias gradient alone");
	q.m = 2048 + 1;
	q.n = 2048;
	cr_assert(!kernels_gemm_tile_fits(&q), "past GEMM_TILE_MAX_TILES tiles");
	q.m = 0;
	cr_assert(!kernels_gemm_tile_fits(&q), "m = 0");
}

/* What the GEMM split over k takes: no epilogue, few outputs, short enough edges. */
Test(kernels_host, gemm_ksplit_fits)
{
	float f = 0.0f;
	struct gemm_req q = {.m = 16, .n = 150, .k = 25600, .a = &f, .b = &f, .c = &f, .bias_grad = &f};
	cr_assert(kernels_gemm_ksplit_fits(&q), "LeNet-5's second convolution's weight gradient");
	q.epilogue = GEMM_EPILOGUE_BIAS;
	cr_assert(!kernels_gemm_ksplit_fits(&q), "an epilogue");
	q.epilogue = GEMM_EPILOGUE_NONE;
	/* A tile's rows are KSPLIT_TILE_MIN + 1 floats apart (one of padding). */
	q.m = 1;
	q.n = KSPLIT_MICRO_TILE_FLOATS / (KSPLIT_TILE_MIN + 1) - q.m;
	cr_assert(kernels_gemm_ksplit_fits(&q), "m + n as many rows as the tile holds");
	q.n++;
	cr_assert(!kernels_gemm_ksplit_fits(&q), "m + n past the tile's rows");
	q.k = 0;
	cr_assert(!kernels_gemm_ksplit_fits(&q), "k = 0");
	/* Micro-tiles: 16 x 16 of KSPLIT_MICRO x KSPLIT_MICRO fill a block of 256 threads. */
	cr_assert_eq(KSPLIT_MAX_MICRO, 256);
	q.k = 25600;
	q.m = 16 * KSPLIT_MICRO;
	q.n = 16 * KSPLIT_MICRO;
	cr_assert(kernels_gemm_ksplit_fits(&q), "a blockful of micro-tiles");
	q.n++;
	cr_assert(!kernels_gemm_ksplit_fits(&q), "a micro-tile more than the block's threads");
}

/*
 * fastdiv.h's quotient against the division it replaces: every divisor up to
 * 4096 and a few large ones, with the dividends at and around each multiple
 * of the divisor, the ends of the range and pseudo-random ones.
 */
static void expect_fastdiv(uint32_t d, uint32_t n)
{
	struct fastdiv f = fastdiv_make(d);
	uint32_t got = fastdiv_q(&f, n);
	cr_assert_eq(got, n / d, "fastdiv: %u / %u gave %u, want %u (mul %u, shift %u)", n, d, got,
		     n / d, f.mul, f.shift);
}

Test(kernels_host, fastdiv_exact)
{
	static const uint32_t large[] = {65535, 65536, 65537, 1u << 20, (1u << 20) + 7, 3000017,
					 1u << 30, (1u << 31) - 1, 1u << 31, (1u << 31) + 1, 0xffffffffu};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (uint32_t i = 0; i < 4096 + sizeof(large) / sizeof(large[0]); i++) {
		uint32_t d = i < 4096 ? i + 1 : large[i - 4096];
		uint32_t ends[] = {0, 1, d - 1, d, FASTDIV_MAX_N, FASTDIV_MAX_N - 1, FASTDIV_MAX_N - d};
		for (size_t e = 0; e < sizeof(ends) / sizeof(ends[0]); e++)
			if (ends[e] <= FASTDIV_MAX_N) /* the dividends it is exact for */
				expect_fastdiv(d, ends[e]);
		for (uint64_t q = 1; q * d <= FASTDIV_MAX_N; q = q * 3 + 1) {
			expect_fastdiv(d, (uint32_t)(q * d) - 1);
			expect_fastdiv(d, (uint32_t)(q * d));
			if (q * d + 1 <= FASTDIV_MAX_N)
				expect_fastdiv(d, (uint32_t)(q * d) + 1);
		}
		for (int r = 0; r < 64; r++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			expect_fastdiv(d, (uint32_t)(x >> 33));
		}
	}
	struct fastdiv zero = fastdiv_make(0);
	cr_assert_eq(fastdiv_q(&zero, 12345), 12345u, "a divisor of 0 is taken as 1");
}
