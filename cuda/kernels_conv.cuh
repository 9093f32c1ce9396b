/*
 * kernels_conv.cuh - what the convolution kernels share (cuda/kernels_conv.cu:
 * the direct ways and the GEMM ways' halves; cuda/kernels_conv_patch.cu: the
 * patch kernels): the items' coordinates by fastdiv.h, the layouts' offsets,
 * the kernels' arguments and their making.
 */
#ifndef MNIST_DDP_KERNELS_CONV_CUH
#define MNIST_DDP_KERNELS_CONV_CUH

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "fastdiv.h"
#include "kernel_launch.cuh"
#include "kernels.h"

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

static inline struct chwb_divs chwb_divs_make(int batch, int h, int w)
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

/* pool_backward_kernel's and conv_backward_data_kernel's window items. */
struct window_args {
	struct pool_shape p; /* the pool whose windows the items are */
	int rows, batch_first;
	uint32_t n;          /* windows: p.c * p.oh * p.ow * rows */
	struct chwb_divs win;
};

static inline struct window_args window_args_make(const struct pool_shape *p, int rows, int batch_first)
{
	struct window_args a;
	a.p = *p;
	a.rows = rows;
	a.batch_first = batch_first;
	a.n = (uint32_t)work_2d(rows, p->c * p->oh * p->ow);
	a.win = chwb_divs_make(rows, p->oh, p->ow);
	return a;
}

/* The convolution kernels count items in 32 bits: more is a batch the options never allow. */
static inline void conv_items_fit(const char *kernel, size_t n)
{
	if (n <= FASTDIV_MAX_N)
		return;
	fprintf(stderr, "mnist-train: %s: %zu work items, more than the %u its 32-bit indices reach\n",
		kernel, n, FASTDIV_MAX_N);
	abort();
}

/* A stage forward's arguments but its items' counts and the im2col's divisors; a.win its windows. */
static inline struct conv_forward_args forward_args(const struct conv_stage *s, const float *x,
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

#endif /* MNIST_DDP_KERNELS_CONV_CUH */
