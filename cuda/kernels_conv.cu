/*
 * kernels_conv.cu - the convolution stages' kernels and their launchers: a
 * stage forward (convolution, bias, ReLU and max-pool, with the im2col
 * matrix the weight gradient needs), the pool's gradient, and the input
 * gradient through the pool and ReLU of the stage below; each convolution
 * summed directly, or, for the ways that leave it to a GEMM
 * (cuda/conv_plan.cu), the im2col matrix alone, the stage's bias, ReLU and
 * pool from the GEMM's output, and the input gradient gathered from the
 * GEMM's W^T dz (col2im); the patch kernels, another way of the plan's, are
 * cuda/kernels_conv_patch.cu's. Grid-stride loops
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
#include "kernels_conv.cuh"

/* ---- convolution stages ------------------------------------------------------------- */

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
