/*
 * conv_host.c - the host backend's convolution, pooling and transpose ops:
 * loops over the element bodies of include/elem.h (im2col_elem,
 * maxpool_backward_elem, pool_relu_backward_elem), arranged for
 * the batch-innermost layouts of include/conv_shape.h: the innermost loop
 * runs along the batch, a contiguous run, in blocks of HOST_BLOCK floats
 * that the compiler turns into vector instructions (host_vector.h).
 *
 * im2col only copies and zero-fills whole runs (oh pixels' batches at a
 * time), so it is im2col_elem's result exactly. The pools' gradients compute
 * each element as their element bodies do, the same operations in the same
 * order, for HOST_BLOCK images side by side: results are bitwise those of the
 * CUDA kernels, which call the bodies per element (tests/test_kernels_conv.c
 * holds the two against each other). The convolutions themselves (the
 * forward with its bias, ReLU and pool, the input gradient's transposed
 * convolution, the weight gradient) are direct kernels of cpu/conv_direct.c.
 */
#include "conv_host.h"

#include <string.h>

#include "conv_direct.h"
#include "elem.h"
#include "host_internal.h"
#include "host_vector.h"

void host_im2col(void *ctx, const float *x, const struct conv_shape *s, int batch, float *cols)
{
	size_t nb = (size_t)batch, run = (size_t)s->ow * nb;
	size_t ld = (size_t)s->oh * run, channel = (size_t)s->h * s->w * nb;
	for (int ci = 0; ci < s->c; ci++)
		for (int ky = 0; ky < s->k; ky++)
			for (int kx = 0; kx < s->k; kx++) {
				float *row = cols + (size_t)((ci * s->k + ky) * s->k + kx) * ld;
				const float *xc = x + (size_t)ci * channel;
				/* Output columns ox whose tap lands inside the image row. */
				int lo = s->pad - kx > 0 ? s->pad - kx : 0;
				int hi = s->w + s->pad - kx < s->ow ? s->w + s->pad - kx : s->ow;
				for (int oy = 0; oy < s->oh; oy++) {
					float *d = row + (size_t)oy * run;
					int iy = oy + ky - s->pad;
					if (iy < 0 || iy >= s->h || lo >= hi) {
						memset(d, 0, run * sizeof(float));
						continue;
					}
					memset(d, 0, (size_t)lo * nb * sizeof(float));
					memcpy(d + (size_t)lo * nb,
					       xc + ((size_t)iy * s->w + (size_t)(lo + kx - s->pad)) * nb,
					       (size_t)(hi - lo) * nb * sizeof(float));
					memset(d + (size_t)hi * nb, 0, (size_t)(s->ow - hi) * nb * sizeof(float));
				}
			}
}

HOST_VECTOR_CLONES
void host_maxpool_backward(void *ctx, const float *dy, const int32_t *arg,
			   const struct pool_shape *s, int batch, float *dx)
{
	size_t nb = (size_t)batch;
	for (int c = 0; c < s->c; c++)
		for (int iy = 0; iy < s->h; iy++)
			for (int ix = 0; ix < s->w; ix++) {
				int py = iy / s->k, px = ix / s->k, ky = iy % s->k, kx = ix % s->k;
				float *restrict out = dx + (((size_t)c * s->h + iy) * s->w + ix) * nb;
				if (py >= s->oh || px >= s->ow) {
					memset(out, 0, nb * sizeof(float));
					continue;
				}
				size_t o = (((size_t)c * s->oh + py) * s->ow + px) * nb;
				const float *restrict g = dy + o;
				const int32_t *restrict a = arg + o;
				for (size_t b = 0; b < nb; b++)
					out[b] = maxpool_backward_elem(g[b], a[b], ky, kx, s->k);
			}
}

/* Blocks of HOST_BLOCK x HOST_BLOCK, so that both sides stream through the cache. */
void host_transpose(void *ctx, const float *x, int rows, int cols, float *y)
{
	for (int i0 = 0; i0 < rows; i0 += HOST_BLOCK)
		for (int j0 = 0; j0 < cols; j0 += HOST_BLOCK) {
			int i1 = rows - i0 < HOST_BLOCK ? rows : i0 + HOST_BLOCK;
			int j1 = cols - j0 < HOST_BLOCK ? cols : j0 + HOST_BLOCK;
			for (int j = j0; j < j1; j++)
				for (int i = i0; i < i1; i++)
					y[(size_t)j * rows + i] = x[(size_t)i * cols + j];
		}
}

/* ---- the convolution stages (include/backend.h), from the ops above ------------------- */

/*
 * x -> y and arg by the direct kernel (cpu/conv_direct.c: the convolution,
 * bias, ReLU and max-pool in one pass, no z), into scratch and then
 * transposed to (rows, features) when batch_first; cols, when asked for,
 * by im2col beside it.
 */
void host_conv_forward(void *ctx, const struct conv_stage *st, const float *x, const float *w,
		       const float *b, float *y, int32_t *arg, float *cols)
{
	struct host_ctx *h = ctx;
	const struct conv_shape *s = st->conv;
	size_t pooled = (size_t)st->oc * st->pool->oh * st->pool->ow * (size_t)st->rows;
	if (cols)
		host_im2col(ctx, x, s, st->rows, cols);
	float *out = st->batch_first ? host_scratch(h, HOST_SCRATCH_POOLED, pooled * sizeof(float)) : y;
	conv_direct_forward(x, w, b, s, st->pool, st->oc, st->rows, out, arg);
	if (st->batch_first)
		host_transpose(ctx, out, (int)(pooled / (size_t)st->rows), st->rows, y);
}

/* dz for n <= HOST_BLOCK images side by side: pool_relu_backward_elem, k a constant where inlined. */
HOST_VECTOR_CLONES
void host_pool_relu_backward(const float *dy, const float *y, const int32_t *arg,
			     const struct pool_shape *s, int batch, float *dz)
{
	size_t nb = (size_t)batch;
	for (int c = 0; c < s->c; c++)
		for (int iy = 0; iy < s->h; iy++)
			for (int ix = 0; ix < s->w; ix++) {
				int py = iy / s->k, px = ix / s->k, ky = iy % s->k, kx = ix % s->k;
				float *restrict out = dz + (((size_t)c * s->h + iy) * s->w + ix) * nb;
				size_t o = (((size_t)c * s->oh + py) * s->ow + px) * nb;
				const float *restrict g = dy + o, *restrict gate = y + o;
				const int32_t *restrict a = arg + o;
				for (size_t b = 0; b < nb; b++)
					out[b] = pool_relu_backward_elem(g[b], gate[b], a[b], ky, kx, s->k);
			}
}

/* A batch-first dy and y are turned batch-innermost first (scratch copies). */
void host_pool_backward(void *ctx, const struct conv_stage *st, const float *dy, const float *y,
			const int32_t *arg, float *dz)
{
	struct host_ctx *h = ctx;
	if (st->batch_first) {
		int features = st->oc * st->pool->oh * st->pool->ow;
		size_t bytes = (size_t)features * (size_t)st->rows * sizeof(float);
		float *dyt = host_scratch(h, HOST_SCRATCH_POOLED, bytes);
		float *yt = host_scratch(h, HOST_SCRATCH_GATE, bytes);
		host_transpose(ctx, dy, st->rows, features, dyt);
		host_transpose(ctx, y, st->rows, features, yt);
		dy = dyt;
		y = yt;
	}
	host_pool_relu_backward(dy, y, arg, st->pool, st->rows, dz);
}

/*
 * dx = the transposed convolution of dz (cpu/conv_direct.c: a direct kernel,
 * no dcols = W^T dz matrix and no col2im pass over it), then through the
 * stage below's pool.
 */
void host_conv_backward_data(void *ctx, const struct conv_stage *st, const float *w,
			     const float *dz, const struct conv_stage *below, const float *below_y,
			     const int32_t *below_arg, float *dz_below)
{
	struct host_ctx *h = ctx;
	const struct conv_shape *s = st->conv;
	float *dx = host_scratch(h, HOST_SCRATCH_CONV,
				 (size_t)s->c * s->h * s->w * (size_t)st->rows * sizeof(float));
	conv_direct_input_grad(w, dz, s, st->oc, st->rows, dx);
	host_pool_relu_backward(dx, below_y, below_arg, below->pool, st->rows, dz_below);
}
