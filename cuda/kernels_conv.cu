/*
 * kernels_conv.cu - the convolution stages' kernels and their launchers: a
 * stage forward (convolution, bias, ReLU and max-pool, with the im2col
 * matrix the weight gradient needs), the pool's gradient, and the input
 * gradient through the pool and ReLU of the stage below; each convolution
 * summed directly, or, for the ways that leave it to a GEMM
 * (cuda/conv_plan.cu), the im2col matrix alone, the stage's bias, ReLU and
 * pool from the GEMM's output, and the input gradient gathered from the
 * GEMM's W^T dz (col2im). Grid-stride loops
 * over items, each calling include/elem.h's body, as in cuda/kernels.cu
 * (whose file comment says how each build runs them).
 */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "fastdiv.h"
#include "kernel_launch.cuh"

/* ---- convolution stages ------------------------------------------------------------- */

/*
 * The convolution kernels' items are counted in 32 bits and split into
 * coordinates by fastdiv.h's multiplies, not by divisions: at LeNet-5's
 * largest batch (65,536) the most items a launch has, conv2's windows and
 * im2col entries, are about 1.0e9 < 2^31 (FASTDIV_MAX_N); the launchers
 * check it.
 */

/* Where item i of a (c, h, w, batch) array lies: image b, column x, row y, channel c. */
struct chwb {
	uint32_t c;
	int y, x, b;
};

/* A (c, h, w, batch) array's divisors: batch, w, h. */
struct chwb_divs {
	struct fastdiv batch, w, h;
};

static struct chwb_divs chwb_divs_make(int batch, int h, int w)
{
	struct chwb_divs d = {fastdiv_make((uint32_t)batch), fastdiv_make((uint32_t)w),
			      fastdiv_make((uint32_t)h)};
	return d;
}

static __host__ __device__ inline struct chwb chwb_of(uint32_t i, const struct chwb_divs *d)
{
	struct chwb p;
	uint32_t rest = fastdiv_q(&d->batch, i), rest2 = fastdiv_q(&d->w, rest);
	p.b = (int)(i - rest * d->batch.d);
	p.x = (int)(rest - rest2 * d->w.d);
	p.c = fastdiv_q(&d->h, rest2);
	p.y = (int)(rest2 - p.c * d->h.d);
	return p;
}

/* Offset of window (c, py, px) of image b in a stage's output y: batch innermost or batch first. */
static __host__ __device__ inline size_t pooled_at(const struct pool_shape *p, int batch_first,
						   size_t batch, size_t c, int py, int px, int b)
{
	size_t f = (c * (size_t)p->oh + (size_t)py) * (size_t)p->ow + (size_t)px;
	return batch_first ? (size_t)b * ((size_t)p->c * p->oh * p->ow) + f : f * batch + (size_t)b;
}

/* Offset of pixel (c, y, x) of image b in a (c, h, w, batch) array. */
static __host__ __device__ inline size_t chwb_at(int h, int w, size_t batch, size_t c, int y, int x,
						 int b)
{
	return ((c * (size_t)h + (size_t)y) * (size_t)w + (size_t)x) * batch + (size_t)b;
}

/* conv_forward_kernel's arguments, and conv_patch_kernel's (its items: total). */
struct conv_forward_args {
	struct conv_shape s;
	struct pool_shape p;
	int oc, rows, batch_first;
	const float *x, *w, *bias;
	const float *z; /* not NULL: the convolution summed by a GEMM, (oc, oh, ow, rows) */
	float *y, *cols;
	int32_t *arg;
	uint32_t windows, total; /* the window items, then the im2col entries up to total */
	struct chwb_divs win;    /* the windows: (oc, ph, pw, rows) */
	struct fastdiv ld, batch, ow, k; /* an entry: (tap, pixel, b), tap (ci, ky, kx), pixel (oy, ox) */
};

/*
 * Items [0, windows): window i of the output, (oc, py, px, b) batch
 * innermost: conv_pool_window_elem (bias_relu_pool_window_elem of z when
 * z is given), written to y where its layout puts it, and its argmax. Items
 * from windows on, when cols is not NULL: entry (tap, pixel) of the im2col
 * matrix, im2col_elem.
 */
static __global__ void conv_forward_kernel(struct conv_forward_args a)
{
	KERNEL_WAIT_PREVIOUS();
	size_t nb = (size_t)a.rows, fan_in = (size_t)a.s.c * a.s.k * a.s.k;
	uint32_t stride = (uint32_t)grid_stride();
	for (uint32_t i = (uint32_t)grid_first(); i < a.total; i += stride) {
		if (i < a.windows) {
			struct chwb q = chwb_of(i, &a.win);
			size_t at = pooled_at(&a.p, a.batch_first, nb, q.c, q.y, q.x, q.b);
			if (a.z)
				a.y[at] = bias_relu_pool_window_elem(a.z + q.c * ((size_t)a.s.oh * a.s.ow * nb),
								     a.s.ow, a.rows, a.bias[q.c], a.p.k,
								     q.y, q.x, q.b, &a.arg[i]);
			else
				a.y[at] = conv_pool_window_elem(a.x, &a.s, a.rows, a.w + q.c * fan_in,
								a.bias[q.c], a.p.k, q.y, q.x, q.b,
								&a.arg[i]);
			continue;
		}
		uint32_t j = i - a.windows, tap = fastdiv_q(&a.ld, j), col = j - tap * a.ld.d;
		uint32_t pixel = fastdiv_q(&a.batch, col), oy = fastdiv_q(&a.ow, pixel);
		uint32_t kyx = fastdiv_q(&a.k, tap), ci = fastdiv_q(&a.k, kyx);
		int b = (int)(col - pixel * a.batch.d), ox = (int)(pixel - oy * a.ow.d);
		int kx = (int)(tap - kyx * a.k.d), ky = (int)(kyx - ci * a.k.d);
		a.cols[j] = im2col_elem(a.x + (size_t)ci * a.s.h * a.s.w * nb, &a.s, a.rows, (int)oy, ox,
					ky, kx, b);
	}
}

/*
 * Item i < a.total: pool window (py, px) of image b for CONV_PATCH_OC output
 * channels (a group, the last one short; a.win's channel is the group), as
 * conv_forward_kernel's windows are, the
 * same sums in the same order (conv_pixel_elem: over ci, ky, kx; a tap in
 * the padding adds its weight times 0), then bias_act_elem and the window's
 * choice in its order (conv_pool_window_elem): bitwise its output and
 * argmax. Each input channel's patch of the input under the window's
 * k + pool - 1 squared pixels is read once into registers and serves every
 * tap of every pixel of the window for the group's channels; the direct
 * kernel reads an input value once per tap, pixel and channel.
 */
static __global__ void conv_patch_kernel(struct conv_forward_args a)
{
	KERNEL_WAIT_PREVIOUS();
	const int P = CONV_PATCH_MAX_K + CONV_PATCH_MAX_POOL - 1, G = CONV_PATCH_OC;
	const int Q = CONV_PATCH_MAX_POOL;
	size_t nb = (size_t)a.rows, plane = (size_t)a.s.h * a.s.w * nb;
	size_t fan_in = (size_t)a.s.c * a.s.k * a.s.k;
	int k = a.s.k, pk = a.p.k, span = k + pk - 1;
	uint32_t stride = (uint32_t)grid_stride();
	for (uint32_t i = (uint32_t)grid_first(); i < a.total; i += stride) {
		struct chwb q = chwb_of(i, &a.win);
		int o0 = (int)q.c * G, iy0 = q.y * pk - a.s.pad, ix0 = q.x * pk - a.s.pad;
		float acc[CONV_PATCH_OC][CONV_PATCH_MAX_POOL * CONV_PATCH_MAX_POOL];
		for (int g = 0; g < G; g++)
			for (int d = 0; d < Q * Q; d++)
				acc[g][d] = 0.0f;
		for (int ci = 0; ci < a.s.c; ci++) {
			const float *xc = a.x + (size_t)ci * plane + (size_t)q.b;
			float patch[CONV_PATCH_MAX_K + CONV_PATCH_MAX_POOL - 1]
				   [CONV_PATCH_MAX_K + CONV_PATCH_MAX_POOL - 1];
			for (int r = 0; r < P; r++)
				for (int c = 0; c < P; c++) {
					int iy = iy0 + r, ix = ix0 + c;
					patch[r][c] = r < span && c < span && iy >= 0 && iy < a.s.h &&
							      ix >= 0 && ix < a.s.w
						      ? xc[((size_t)iy * a.s.w + (size_t)ix) * nb]
						      : 0.0f;
				}
			KERNEL_UNROLL
			for (int ky = 0; ky < CONV_PATCH_MAX_K; ky++)
				KERNEL_UNROLL
				for (int kx = 0; kx < CONV_PATCH_MAX_K; kx++) {
					if (ky >= k || kx >= k)
						continue;
					float wv[CONV_PATCH_OC];
					for (int g = 0; g < G; g++)
						wv[g] = o0 + g < a.oc
							? a.w[(size_t)(o0 + g) * fan_in + (size_t)((ci * k + ky) * k + kx)]
							: 0.0f;
					for (int dy = 0; dy < Q; dy++)
						for (int dx = 0; dx < Q; dx++) {
							if (dy >= pk || dx >= pk)
								continue;
							float v = patch[ky + dy][kx + dx];
							for (int g = 0; g < G; g++)
								acc[g][dy * Q + dx] += wv[g] * v;
						}
				}
		}
		for (int g = 0; g < G; g++) {
			int o = o0 + g;
			if (o >= a.oc)
				continue;
			float best = 0.0f;
			int32_t at = 0;
			for (int dy = 0; dy < Q; dy++)
				for (int dx = 0; dx < Q; dx++)
					if (dy < pk && dx < pk)
						pool_pick_elem(bias_act_elem(acc[g][dy * Q + dx], a.bias[o], 1),
							       dy * pk + dx, &best, &at);
			size_t window = (((size_t)o * a.p.oh + (size_t)q.y) * a.p.ow + (size_t)q.x) * nb +
					(size_t)q.b;
			a.y[pooled_at(&a.p, a.batch_first, nb, (size_t)o, q.y, q.x, q.b)] = best;
			a.arg[window] = at;
		}
	}
}

/* pool_backward_kernel's and conv_backward_data_kernel's window items. */
struct window_args {
	struct pool_shape p; /* the pool whose windows the items are */
	int rows, batch_first;
	uint32_t n;          /* windows: p.c * p.oh * p.ow * rows */
	struct chwb_divs win;
};

static struct window_args window_args_make(const struct pool_shape *p, int rows, int batch_first)
{
	struct window_args a;
	a.p = *p;
	a.rows = rows;
	a.batch_first = batch_first;
	a.n = (uint32_t)work_2d(rows, p->c * p->oh * p->ow);
	a.win = chwb_divs_make(rows, p->oh, p->ow);
	return a;
}

/*
 * Item i: window (c, py, px, b) of the pool, batch innermost, whose k x k
 * conv outputs in dz (c, h, w, rows) it writes, each
 * pool_relu_backward_elem of the window's dy and y through its argmax.
 */
static __global__ void pool_backward_kernel(struct window_args a, const float *dy, const float *y,
					    const int32_t *arg, float *dz)
{
	KERNEL_WAIT_PREVIOUS();
	size_t nb = (size_t)a.rows;
	uint32_t stride = (uint32_t)grid_stride();
	for (uint32_t i = (uint32_t)grid_first(); i < a.n; i += stride) {
		struct chwb q = chwb_of(i, &a.win);
		size_t at = pooled_at(&a.p, a.batch_first, nb, q.c, q.y, q.x, q.b);
		float g = dy[at], gate = y[at];
		int32_t best = arg[i];
		for (int ky = 0; ky < a.p.k; ky++)
			for (int kx = 0; kx < a.p.k; kx++)
				dz[chwb_at(a.p.h, a.p.w, nb, q.c, q.y * a.p.k + ky, q.x * a.p.k + kx, q.b)] =
					pool_relu_backward_elem(g, gate, best, ky, kx, a.p.k);
	}
}

/*
 * Item i: window (c, py, px, b) of the below stage's pool, batch innermost.
 * Only the window's maximum takes a gradient: conv_backward_data_elem of
 * that pixel of this stage's input, (c, py, px), or, when dcols (W^T dz,
 * summed by a GEMM) is given, col2im_elem of it; the window's k x k conv
 * outputs in dz_below (c', oh', ow', rows) are each pool_relu_backward_elem
 * of it through the argmax and the ReLU, zero but at the maximum.
 */
static __global__ void conv_backward_data_kernel(struct conv_shape s, int oc, struct window_args a,
						 const float *w, const float *dz, const float *dcols,
						 const float *below_y, const int32_t *below_arg,
						 float *dz_below)
{
	KERNEL_WAIT_PREVIOUS();
	size_t nb = (size_t)a.rows;
	uint32_t stride = (uint32_t)grid_stride();
	for (uint32_t i = (uint32_t)grid_first(); i < a.n; i += stride) {
		struct chwb q = chwb_of(i, &a.win);
		int32_t best = below_arg[i];
		float gate = below_y[i];
		float g = dcols ? col2im_elem(dcols, &s, a.rows, (int)q.c, q.y, q.x, q.b)
				: conv_backward_data_elem(w, dz, &s, oc, a.rows, (int)q.c, q.y, q.x, q.b);
		for (int ky = 0; ky < a.p.k; ky++)
			for (int kx = 0; kx < a.p.k; kx++)
				dz_below[chwb_at(a.p.h, a.p.w, nb, q.c, q.y * a.p.k + ky, q.x * a.p.k + kx,
						 q.b)] = pool_relu_backward_elem(g, gate, best, ky, kx, a.p.k);
	}
}

/* ---- launchers ------------------------------------------------------------------------- */

/* The convolution kernels count items in 32 bits: more is a batch the options never allow. */
static void conv_items_fit(const char *kernel, size_t n)
{
	if (n <= FASTDIV_MAX_N)
		return;
	fprintf(stderr, "mnist-train: %s: %zu work items, more than the %u its 32-bit indices reach\n",
		kernel, n, FASTDIV_MAX_N);
	abort();
}

/* A stage forward's arguments but its items' counts and the im2col's divisors; a.win its windows. */
static struct conv_forward_args forward_args(const struct conv_stage *s, const float *x,
					     const float *w, const float *b, float *y, int32_t *arg)
{
	struct conv_forward_args a;
	memset(&a, 0, sizeof(a));
	a.s = *s->conv;
	a.p = *s->pool;
	a.oc = s->oc;
	a.rows = s->rows;
	a.batch_first = s->batch_first;
	a.x = x;
	a.w = w;
	a.bias = b;
	a.y = y;
	a.arg = arg;
	a.win = chwb_divs_make(s->rows, s->pool->oh, s->pool->ow);
	return a;
}

/*
 * conv_forward_kernel's launch: the windows (with windows; from z when given,
 * else summed directly) and, when cols is not NULL, the im2col entries.
 */
static void conv_forward_launch(cudaStream_t stream, const struct kernel_geom *geom,
				const struct conv_stage *s, int with_windows, const float *x,
				const float *w, const float *b, const float *z, float *y,
				int32_t *arg, float *cols)
{
	const struct conv_shape *c = s->conv;
	size_t windows = with_windows ? work_2d(s->rows, s->oc * s->pool->oh * s->pool->ow) : 0;
	size_t n_cols = cols ? work_2d(s->rows, c->oh * c->ow) * (size_t)(c->c * c->k * c->k) : 0;
	if (windows + n_cols == 0)
		return;
	conv_items_fit("conv_forward_kernel", windows + n_cols);
	struct conv_forward_args a = forward_args(s, x, w, b, y, arg);
	a.z = z;
	a.cols = cols;
	a.windows = (uint32_t)windows;
	a.total = (uint32_t)(windows + n_cols);
	a.ld = fastdiv_make((uint32_t)work_2d(s->rows, c->oh * c->ow));
	a.batch = fastdiv_make((uint32_t)s->rows);
	a.ow = fastdiv_make((uint32_t)c->ow);
	a.k = fastdiv_make((uint32_t)c->k);
	struct kernel_geom g = pick_geom(geom, windows + n_cols);
	KERNEL_LAUNCH(conv_forward_kernel, g, stream, a);
}

void kernels_conv_forward(cudaStream_t stream, const struct kernel_geom *geom,
			  const struct conv_stage *s, const float *x, const float *w,
			  const float *b, float *y, int32_t *arg, float *cols)
{
	if (work_2d(s->rows, s->oc * s->pool->oh * s->pool->ow) == 0)
		return;
	conv_forward_launch(stream, geom, s, 1, x, w, b, NULL, y, arg, cols);
}

int kernels_conv_patch_fits(const struct conv_stage *s)
{
	return s->conv->k >= 1 && s->conv->k <= CONV_PATCH_MAX_K && s->pool->k >= 1 &&
	       s->pool->k <= CONV_PATCH_MAX_POOL && s->pool->c == s->oc;
}

void kernels_conv_patch(cudaStream_t stream, const struct kernel_geom *geom,
			const struct conv_stage *s, const float *x, const float *w, const float *b,
			float *y, int32_t *arg)
{
	int groups = (s->oc + CONV_PATCH_OC - 1) / CONV_PATCH_OC;
	size_t n = work_2d(s->rows, groups * s->pool->oh * s->pool->ow);
	if (n == 0)
		return;
	conv_items_fit("conv_patch_kernel", n);
	/* The items: the windows of each group of channels, a.win's channel the group. */
	struct conv_forward_args a = forward_args(s, x, w, b, y, arg);
	a.total = (uint32_t)n;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(conv_patch_kernel, g, stream, a);
}

void kernels_conv_im2col(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct conv_stage *s, const float *x, float *cols)
{
	conv_forward_launch(stream, geom, s, 0, x, NULL, NULL, NULL, NULL, NULL, cols);
}

void kernels_conv_pool(cudaStream_t stream, const struct kernel_geom *geom,
		       const struct conv_stage *s, const float *z, const float *b, float *y,
		       int32_t *arg)
{
	conv_forward_launch(stream, geom, s, 1, NULL, NULL, b, z, y, arg, NULL);
}

void kernels_pool_backward(cudaStream_t stream, const struct kernel_geom *geom,
			   const struct conv_stage *s, const float *dy, const float *y,
			   const int32_t *arg, float *dz)
{
	size_t n = work_2d(s->rows, s->pool->c * s->pool->oh * s->pool->ow);
	if (n == 0)
		return;
	conv_items_fit("pool_backward_kernel", n);
	struct window_args a = window_args_make(s->pool, s->rows, s->batch_first);
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(pool_backward_kernel, g, stream, a, dy, y, arg, dz);
}

static void conv_backward_data_launch(cudaStream_t stream, const struct kernel_geom *geom,
				      const struct conv_stage *s, const float *w, const float *dz,
				      const float *dcols, const struct conv_stage *below,
				      const float *below_y, const int32_t *below_arg,
				      float *dz_below)
{
	const struct pool_shape *bp = below->pool;
	size_t n = work_2d(s->rows, bp->c * bp->oh * bp->ow);
	if (n == 0)
		return;
	conv_items_fit("conv_backward_data_kernel", n);
	/* The below stage's pooled output is this stage's input: batch innermost, as it reads it. */
	struct window_args a = window_args_make(bp, s->rows, 0);
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(conv_backward_data_kernel, g, stream, *s->conv, s->oc, a, w, dz, dcols,
		      below_y, below_arg, dz_below);
}

void kernels_conv_backward_data(cudaStream_t stream, const struct kernel_geom *geom,
				const struct conv_stage *s, const float *w, const float *dz,
				const struct conv_stage *below, const float *below_y,
				const int32_t *below_arg, float *dz_below)
{
	conv_backward_data_launch(stream, geom, s, w, dz, NULL, below, below_y, below_arg,
				  dz_below);
}

void kernels_col2im_backward(cudaStream_t stream, const struct kernel_geom *geom,
			     const struct conv_stage *s, const float *dcols,
			     const struct conv_stage *below, const float *below_y,
			     const int32_t *below_arg, float *dz_below)
{
	conv_backward_data_launch(stream, geom, s, NULL, NULL, dcols, below, below_y, below_arg,
				  dz_below);
}
