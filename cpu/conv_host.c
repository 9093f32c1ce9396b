/*
 * conv_host.c - the host backend's convolution and pooling ops: loops over
 * the element bodies of include/elem.h (im2col_elem, col2im_elem,
 * bias_act_elem, maxpool_window_elem, maxpool_backward_elem), arranged so
 * that the innermost loop runs along an image row and vectorizes.
 *
 * The pools walk window by window (each input pixel belongs to one window at
 * most); LeNet's 2x2 windows have a forward pass of their own (pool_plane_2x2).
 *
 * col2im adds, for each input pixel, the same terms in the same order as
 * col2im_elem (taps ky, then kx, ascending, out-of-range taps skipped): it
 * walks the taps in the outer loops and a whole row of pixels in the inner
 * one, so results are bitwise those of the element body (and of the CUDA
 * kernel, which calls it per pixel); tests/test_kernels_host.c checks that.
 */
#include "conv_host.h"

#include <string.h>

#include "elem.h"
#include "host_vector.h"

HOST_VECTOR_CLONES
void host_im2col(void *ctx, const float *x, const struct conv_shape *s, int batch, float *cols)
{
	size_t plane = (size_t)s->h * s->w, per_image = (size_t)s->oh * s->ow;
	size_t ld = (size_t)batch * per_image;
	for (int ci = 0; ci < s->c; ci++)
		for (int ky = 0; ky < s->k; ky++)
			for (int kx = 0; kx < s->k; kx++) {
				float *row = cols + (size_t)((ci * s->k + ky) * s->k + kx) * ld;
				/* Output columns ox whose tap lands inside the image row. */
				int lo = s->pad - kx > 0 ? s->pad - kx : 0;
				int hi = s->w + s->pad - kx < s->ow ? s->w + s->pad - kx : s->ow;
				for (int b = 0; b < batch; b++) {
					const float *src = x + ((size_t)b * s->c + ci) * plane;
					float *dst = row + (size_t)b * per_image;
					for (int oy = 0; oy < s->oh; oy++) {
						float *d = dst + (size_t)oy * s->ow;
						int iy = oy + ky - s->pad;
						if (iy < 0 || iy >= s->h || lo >= hi) {
							memset(d, 0, (size_t)s->ow * sizeof(float));
							continue;
						}
						for (int ox = 0; ox < lo; ox++)
							d[ox] = 0.0f;
						const float *in = src + (size_t)iy * s->w;
						for (int ox = lo; ox < hi; ox++)
							d[ox] = in[ox + kx - s->pad];
						for (int ox = hi; ox < s->ow; ox++)
							d[ox] = 0.0f;
					}
				}
			}
}

HOST_VECTOR_CLONES
void host_col2im(void *ctx, const float *dcols, const struct conv_shape *s, int batch, float *dx)
{
	size_t per_image = (size_t)s->oh * s->ow, ld = (size_t)batch * per_image;
	for (int b = 0; b < batch; b++)
		for (int ci = 0; ci < s->c; ci++) {
			float *plane = dx + ((size_t)b * s->c + ci) * s->h * s->w;
			for (int iy = 0; iy < s->h; iy++) {
				float *acc = plane + (size_t)iy * s->w;
				for (int ix = 0; ix < s->w; ix++)
					acc[ix] = 0.0f;
				for (int ky = 0; ky < s->k; ky++) {
					int oy = iy + s->pad - ky;
					if (oy < 0 || oy >= s->oh)
						continue;
					const float *tap_row = dcols + (size_t)((ci * s->k + ky) * s->k) * ld +
							       (size_t)b * per_image + (size_t)oy * s->ow;
					for (int kx = 0; kx < s->k; kx++) {
						/* Pixels ix whose column ox = ix + pad - kx is an output column. */
						int lo = kx - s->pad > 0 ? kx - s->pad : 0;
						int hi = s->ow + kx - s->pad < s->w ? s->ow + kx - s->pad : s->w;
						const float *src = tap_row + (size_t)kx * ld;
						for (int ix = lo; ix < hi; ix++)
							acc[ix] += src[ix + s->pad - kx];
					}
				}
			}
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

/* One plane's windows, any k. */
static void pool_plane(const float *in, int w, int k, int oh, int ow, float *y, int32_t *arg)
{
	for (int py = 0; py < oh; py++)
		for (int px = 0; px < ow; px++)
			y[py * ow + px] = maxpool_window_elem(in, w, k, py, px, &arg[py * ow + px]);
}

/*
 * One plane's 2x2 windows (LeNet's): maxpool_window_elem's rule as a
 * tournament, each row's pair first, then the second row's winner replacing
 * the first's when maxpool_takes_elem says so. Its indices are the later ones
 * in row order, so ties and NaNs resolve as in the element body, bit for bit
 * (tests/test_kernels_conv.c holds the two against each other), while the
 * chain of dependent selects per window halves.
 */
static inline __attribute__((always_inline)) void pool_plane_2x2(const float *in, int w, int oh,
								int ow, float *restrict y,
								int32_t *restrict arg)
{
	for (int py = 0; py < oh; py++) {
		const float *r0 = in + (size_t)(2 * py) * w, *r1 = r0 + w;
		for (int px = 0; px < ow; px++) {
			float a = r0[2 * px], b = r0[2 * px + 1], c = r1[2 * px], d = r1[2 * px + 1];
			int t01 = maxpool_takes_elem(b, a), t23 = maxpool_takes_elem(d, c);
			float m01 = select_elem(t01, b, a), m23 = select_elem(t23, d, c);
			int t = maxpool_takes_elem(m23, m01);
			y[py * ow + px] = select_elem(t, m23, m01);
			arg[py * ow + px] = t ? 2 + t23 : t01;
		}
	}
}

HOST_VECTOR_CLONES
void host_maxpool(void *ctx, const float *x, const struct pool_shape *s, int batch, float *y,
		  int32_t *arg)
{
	size_t plane = (size_t)s->h * s->w, out_plane = (size_t)s->oh * s->ow;
	for (int b = 0; b < batch; b++)
		for (int c = 0; c < s->c; c++) {
			const float *in = x + ((size_t)c * batch + b) * plane;
			size_t o = ((size_t)b * s->c + c) * out_plane;
			if (s->k == 2)
				pool_plane_2x2(in, s->w, s->oh, s->ow, y + o, arg + o);
			else
				pool_plane(in, s->w, s->k, s->oh, s->ow, y + o, arg + o);
		}
}

/*
 * One plane's gradient, window by window (each input pixel lies in one window
 * at most, so each is written once), then 0 in the rows and columns past the
 * last whole window. k is a constant where this is inlined.
 */
static inline __attribute__((always_inline)) void unpool_plane(const float *dy, const int32_t *arg,
							      int h, int w, int k, int oh, int ow,
							      float *out)
{
	for (int py = 0; py < oh; py++) {
		for (int px = 0; px < ow; px++) {
			float g = dy[py * ow + px];
			int32_t a = arg[py * ow + px];
			for (int ky = 0; ky < k; ky++)
				for (int kx = 0; kx < k; kx++)
					out[(size_t)(py * k + ky) * w + px * k + kx] =
						maxpool_backward_elem(g, a, ky, kx, k);
		}
		for (int ky = 0; ky < k; ky++)
			for (int ix = ow * k; ix < w; ix++)
				out[(size_t)(py * k + ky) * w + ix] = 0.0f;
	}
	for (size_t i = (size_t)oh * k * w; i < (size_t)h * w; i++)
		out[i] = 0.0f;
}

HOST_VECTOR_CLONES
void host_maxpool_backward(void *ctx, const float *dy, const int32_t *arg,
			   const struct pool_shape *s, int batch, float *dx)
{
	size_t plane = (size_t)s->h * s->w, out_plane = (size_t)s->oh * s->ow;
	for (int c = 0; c < s->c; c++)
		for (int b = 0; b < batch; b++) {
			float *out = dx + ((size_t)c * batch + b) * plane;
			size_t o = ((size_t)b * s->c + c) * out_plane;
			if (s->k == 2)
				unpool_plane(dy + o, arg + o, s->h, s->w, 2, s->oh, s->ow, out);
			else
				unpool_plane(dy + o, arg + o, s->h, s->w, s->k, s->oh, s->ow, out);
		}
}
