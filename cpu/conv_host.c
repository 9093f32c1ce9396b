/*
 * conv_host.c - the host backend's convolution, pooling and transpose ops:
 * loops over the element bodies of include/elem.h (im2col_elem, col2im_elem,
 * bias_act_elem, maxpool_window_elem, maxpool_backward_elem), arranged for
 * the batch-innermost layouts of include/conv_shape.h: the innermost loop
 * runs along the batch, a contiguous run, in blocks of HOST_BLOCK floats
 * that the compiler turns into vector instructions (host_vector.h).
 *
 * im2col only copies and zero-fills whole runs (oh pixels' batches at a
 * time), so it is im2col_elem's result exactly. col2im and max-pool compute
 * each element as their element bodies do, the same operations in the same
 * order, for HOST_BLOCK images side by side: results are bitwise those of the
 * CUDA kernels, which call the bodies per element (tests/test_kernels_conv.c
 * holds the two against each other).
 */
#include "conv_host.h"

#include <string.h>

#include "elem.h"
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

/*
 * Pixel (ci, iy, ix) for n <= HOST_BLOCK images from b0: col2im_elem's sum,
 * taps ky, then kx, ascending. n is a constant where this is inlined for a
 * whole block, so the sums live in one vector register across the taps.
 */
static inline __attribute__((always_inline)) void col2im_pixel(const float *dcols,
							      const struct conv_shape *s,
							      size_t nb, int ci, int iy, int ix,
							      int n, float *restrict out)
{
	size_t ld = (size_t)s->oh * s->ow * nb;
	float acc[HOST_BLOCK];
	for (int j = 0; j < n; j++)
		acc[j] = 0.0f;
	for (int ky = 0; ky < s->k; ky++) {
		int oy = iy + s->pad - ky;
		if (oy < 0 || oy >= s->oh)
			continue;
		for (int kx = 0; kx < s->k; kx++) {
			int ox = ix + s->pad - kx;
			if (ox < 0 || ox >= s->ow)
				continue;
			const float *restrict src = dcols + ((size_t)(ci * s->k + ky) * s->k + kx) * ld +
						    ((size_t)oy * s->ow + ox) * nb;
			for (int j = 0; j < n; j++)
				acc[j] += src[j];
		}
	}
	for (int j = 0; j < n; j++)
		out[j] = acc[j];
}

HOST_VECTOR_CLONES
void host_col2im(void *ctx, const float *dcols, const struct conv_shape *s, int batch, float *dx)
{
	size_t nb = (size_t)batch;
	for (int ci = 0; ci < s->c; ci++)
		for (int iy = 0; iy < s->h; iy++)
			for (int ix = 0; ix < s->w; ix++) {
				float *out = dx + (((size_t)ci * s->h + iy) * s->w + ix) * nb;
				int b0 = 0;
				for (; b0 + HOST_BLOCK <= batch; b0 += HOST_BLOCK)
					col2im_pixel(dcols + b0, s, nb, ci, iy, ix, HOST_BLOCK, out + b0);
				if (b0 < batch)
					col2im_pixel(dcols + b0, s, nb, ci, iy, ix, batch - b0, out + b0);
			}
}

HOST_VECTOR_CLONES
void host_channel_bias_act(void *ctx, float *y, const float *bias, int channels, size_t n,
			   int relu)
{
	for (int c = 0; c < channels; c++) {
		float *restrict row = y + (size_t)c * n;
		const float b = bias[c];
		if (relu)
			for (size_t i = 0; i < n; i++)
				row[i] = bias_act_elem(row[i], b, 1);
		else
			for (size_t i = 0; i < n; i++)
				row[i] = bias_act_elem(row[i], b, 0);
	}
}

/*
 * Window (py, px) for n <= HOST_BLOCK images from b0: maxpool_window_elem's
 * steps, image by image side by side. k is a constant where this is inlined.
 */
static inline __attribute__((always_inline)) void pool_window(const float *xc, int w, int k,
							     size_t nb, int py, int px, int n,
							     float *restrict y, int32_t *restrict arg)
{
	const float *p = xc + ((size_t)py * k * w + (size_t)px * k) * nb;
	float best[HOST_BLOCK];
	int32_t at[HOST_BLOCK];
	for (int j = 0; j < HOST_BLOCK; j++) {
		best[j] = j < n ? p[j] : 0.0f;
		at[j] = 0;
	}
	for (int ky = 0; ky < k; ky++)
		for (int kx = 0; kx < k; kx++) {
			if (ky == 0 && kx == 0)
				continue;
			const float *q = p + ((size_t)ky * w + kx) * nb;
			for (int j = 0; j < HOST_BLOCK; j++) {
				float v = j < n ? q[j] : 0.0f;
				int take = maxpool_takes_elem(v, best[j]);
				best[j] = select_elem(take, v, best[j]);
				at[j] = take ? ky * k + kx : at[j];
			}
		}
	for (int j = 0; j < n; j++) {
		y[j] = best[j];
		arg[j] = at[j];
	}
}

static inline __attribute__((always_inline)) void pool_channel(const float *xc, int w, int k,
							      int oh, int ow, int batch, float *y,
							      int32_t *arg)
{
	size_t nb = (size_t)batch;
	for (int py = 0; py < oh; py++)
		for (int px = 0; px < ow; px++) {
			size_t o = ((size_t)py * ow + px) * nb;
			for (int b0 = 0; b0 < batch; b0 += HOST_BLOCK) {
				int n = batch - b0 < HOST_BLOCK ? batch - b0 : HOST_BLOCK;
				if (n == HOST_BLOCK) /* a constant: the loops over the block vectorize */
					pool_window(xc + b0, w, k, nb, py, px, HOST_BLOCK, y + o + b0,
						    arg + o + b0);
				else
					pool_window(xc + b0, w, k, nb, py, px, n, y + o + b0, arg + o + b0);
			}
		}
}

HOST_VECTOR_CLONES
void host_maxpool(void *ctx, const float *x, const struct pool_shape *s, int batch, float *y,
		  int32_t *arg)
{
	size_t in_ch = (size_t)s->h * s->w * batch, out_ch = (size_t)s->oh * s->ow * batch;
	for (int c = 0; c < s->c; c++) {
		const float *xc = x + (size_t)c * in_ch;
		if (s->k == 2)
			pool_channel(xc, s->w, 2, s->oh, s->ow, batch, y + c * out_ch, arg + c * out_ch);
		else
			pool_channel(xc, s->w, s->k, s->oh, s->ow, batch, y + c * out_ch,
				     arg + c * out_ch);
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
