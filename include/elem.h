/*
 * elem.h - the one source of per-element math, shared by both backends.
 *
 * Every body here is a `static inline` function of scalars or of one row.
 * The host backend (cpu/backend_host.c) loops over them; each CUDA kernel
 * (cuda/kernels.cu) is a thin index-computing wrapper around them. When nvcc
 * compiles this header the functions become __host__ __device__, so the
 * host unit tests exercise exactly the arithmetic the GPU runs.
 */
#ifndef MNIST_DDP_ELEM_H
#define MNIST_DDP_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "conv_shape.h"

#if defined(__CUDACC__)
#define ELEM_FN static inline __host__ __device__
#else
#define ELEM_FN static inline
#endif

/* MNIST pixel normalisation, the seed's Rescale(1/255) then Normalize(0.1307, 0.3081). */
#define ELEM_PIXEL_MEAN 0.1307f
#define ELEM_PIXEL_STD 0.3081f

ELEM_FN float normalize_pixel_elem(uint8_t p)
{
	return ((float)p * (1.0f / 255.0f) - ELEM_PIXEL_MEAN) * (1.0f / ELEM_PIXEL_STD);
}

/* y = x + b, then max(y, 0) when relu is set. */
ELEM_FN float bias_act_elem(float x, float b, int relu)
{
	float y = x + b;
	return (relu && !(y > 0.0f)) ? 0.0f : y;
}

/* Gradient through ReLU, given the ReLU's output y. */
ELEM_FN float relu_backward_elem(float dy, float y)
{
	return y > 0.0f ? dy : 0.0f;
}

/*
 * Softmax cross-entropy, in pieces that a row's threads can share (the CUDA
 * kernel runs a row's columns on several threads, one thread folding the
 * running max and the sum in column order, so the arithmetic is the row
 * body's below, to the bit).
 */
/* The running maximum, taking logit when it is greater. */
ELEM_FN float xent_max_elem(float max, float logit)
{
	return logit > max ? logit : max;
}

/* A column's exponential, shifted by the row's maximum. */
ELEM_FN float xent_exp_elem(float logit, float max)
{
	return expf(logit - max);
}

/* A column's gradient: scale * (softmax_j - [j == label]), softmax_j = e * inv_sum. */
ELEM_FN float xent_grad_elem(float e, float inv_sum, int is_label, float scale)
{
	float p = e * inv_sum;
	return scale * (p - (is_label ? 1.0f : 0.0f));
}

/* The row's loss, -log softmax_label, from the sum of the exponentials. */
ELEM_FN float xent_loss_elem(float sum, float label_logit, float max)
{
	return logf(sum) - (label_logit - max);
}

/*
 * One row of softmax cross-entropy with its gradient.
 * logits: (c), label in [0, c). Writes dlogits[j] = scale * (softmax_j - [j == label])
 * and returns the row's loss, -log softmax_label. Stable: subtracts the row max.
 * dlogits must not overlap logits.
 */
ELEM_FN float softmax_xent_row_elem(const float *logits, int label, int c, float scale, float *dlogits)
{
	float m = logits[0];
	for (int j = 1; j < c; j++)
		m = xent_max_elem(m, logits[j]);
	/* Each exponential once: dlogits holds them until the sum is known. */
	float s = 0.0f;
	for (int j = 0; j < c; j++) {
		float e = xent_exp_elem(logits[j], m);
		if (dlogits)
			dlogits[j] = e;
		s += e;
	}
	if (dlogits) {
		float inv = 1.0f / s;
		for (int j = 0; j < c; j++)
			dlogits[j] = xent_grad_elem(dlogits[j], inv, j == label, scale);
	}
	return xent_loss_elem(s, logits[label], m);
}

/* 1 when the row's first maximum is at label, else 0. */
ELEM_FN int argmax_hit_row_elem(const float *logits, int label, int c)
{
	int best = 0;
	for (int j = 1; j < c; j++)
		if (logits[j] > logits[best])
			best = j;
	return best == label;
}

/*
 * SGD with optional momentum and weight decay (torch.optim.SGD's convention,
 * dampening 0, the decay in its classic L2 form, added to the gradient):
 *   d = g + weight_decay * p                 (d = g when weight_decay == 0)
 *   v = momentum * v + d;  p -= lr * v        (momentum > 0)
 *   p -= lr * d                               (momentum == 0, v untouched)
 */
ELEM_FN void sgd_update_elem(float *p, float g, float *v, float lr, float momentum,
			     float weight_decay)
{
	if (weight_decay != 0.0f)
		g += weight_decay * *p;
	if (momentum != 0.0f) {
		float nv = momentum * *v + g;
		*v = nv;
		*p -= lr * nv;
	} else {
		*p -= lr * g;
	}
}

/* AdamW's settings (torch.optim.AdamW's names; amsgrad off). */
struct adamw_hyper {
	float beta1, beta2, eps, weight_decay;
};

/* What one AdamW step shares across its elements. */
struct adamw_step {
	float decay;     /* 1 - lr * weight_decay */
	float step_size; /* lr / (1 - beta1^t) */
	float bc2_sqrt;  /* sqrt(1 - beta2^t) */
};

/*
 * The scalars of step t (t >= 1, the count of updates including this one) at
 * rate lr, in double as PyTorch computes them in Python, then rounded to float.
 */
ELEM_FN struct adamw_step adamw_step_elem(float lr, int32_t t, struct adamw_hyper h)
{
	struct adamw_step s;
	double bc1 = 1.0 - pow((double)h.beta1, (double)t);
	double bc2 = 1.0 - pow((double)h.beta2, (double)t);
	s.decay = (float)(1.0 - (double)lr * (double)h.weight_decay);
	s.step_size = (float)((double)lr / bc1);
	s.bc2_sqrt = (float)sqrt(bc2);
	return s;
}

/*
 * AdamW, one element (torch.optim.AdamW's single-tensor formula; the decay is
 * decoupled: it shrinks p, it does not enter the moments):
 *   p *= 1 - lr * weight_decay
 *   m = beta1 * m + (1 - beta1) * g
 *   v = beta2 * v + (1 - beta2) * g * g
 *   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 */
ELEM_FN void adamw_update_elem(float *p, float g, float *m, float *v, struct adamw_hyper h,
			       struct adamw_step s)
{
	float nm = h.beta1 * *m + (1.0f - h.beta1) * g;
	float nv = h.beta2 * *v + (1.0f - h.beta2) * g * g;
	*m = nm;
	*v = nv;
	float denom = sqrtf(nv) / s.bc2_sqrt + h.eps;
	*p = *p * s.decay - s.step_size * (nm / denom);
}

ELEM_FN float scale_elem(float x, float alpha)
{
	return x * alpha;
}

/*
 * Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_, the
 * 2-norm over every gradient of the flat buffer g (n)). The sum of squares
 * is taken in one fixed order, on every backend and for every launch
 * geometry, so that it is the same bits wherever it runs: CLIP_PARTS partial
 * sums, part c = clip_sumsq_elem over g[c], g[c + CLIP_PARTS], ... in order
 * of the index from 0.0f, then folded by halves: for half = CLIP_PARTS / 2,
 * ..., 1, part[c] += part[c + half] for c < half; the norm is
 * clip_norm_elem(part[0]).
 */
#define CLIP_PARTS 1024

ELEM_FN float clip_sumsq_elem(float sum, float g)
{
	return sum + g * g;
}

/* The norm from the folded sum of squares. */
ELEM_FN float clip_norm_elem(float sumsq)
{
	return sqrtf(sumsq);
}

/*
 * PyTorch's coefficient: max_norm / (norm + 1e-6), clamped to at most 1 (a
 * NaN norm gives NaN, as torch.clamp keeps it).
 */
ELEM_FN float clip_coef_elem(float norm, float max_norm)
{
	float coef = max_norm / (norm + 1e-6f);
	return coef > 1.0f ? 1.0f : coef;
}

/*
 * Whether the gradients are scaled by coef (scale_elem): below 1, or NaN
 * (PyTorch multiplies by the clamped coefficient every time; by 1 it changes
 * no bit, so the backends skip it).
 */
ELEM_FN int clip_scales_elem(float coef)
{
	return !(coef >= 1.0f);
}

/*
 * Gradient accumulation over a step's micro-batches (--micro-batch,
 * --global-batch; docs/exact.md): acc += g, in float.
 */
ELEM_FN float grad_add_elem(float acc, float g)
{
	return acc + g;
}

/*
 * --exact: a micro-batch's gradient in 64-bit fixed point, q = llrint(g *
 * 2^FIXED_SHIFT), added into an int64 accumulator with integer adds, which
 * give the same sum in any order. fixed_limit_elem(k) is the bound on |g *
 * 2^FIXED_SHIFT| for a step of k micro-batches: 2^(62 - ceil(log2 k)), so
 * that k terms each below it sum to less than 2^62 in magnitude and no
 * partial sum, in any order, can leave int64. An element at or beyond it,
 * or not finite, is not encoded (0) and counted as out of range
 * (fixed_encode_elem's *bad), and the run stops with a message.
 */
#define FIXED_SHIFT 40

ELEM_FN double fixed_limit_elem(int k)
{
	int c = 0;
	while ((1 << c) < k && c < 30)
		c++;
	return ldexp(1.0, 62 - c);
}

ELEM_FN int64_t fixed_encode_elem(float g, double limit, int *bad)
{
	/* Exact: a float times a power of two (as ldexp, without its call). */
	double x = (double)g * (double)(1ll << FIXED_SHIFT);
	if (!(fabs(x) < limit)) {                 /* out of range, or NaN */
		*bad = 1;
		return 0;
	}
	*bad = 0;
	return llrint(x); /* to nearest, ties to even */
}

/* The float of an accumulated sum: q * 2^-FIXED_SHIFT, rounded once to double, then to float. */
ELEM_FN float fixed_decode_elem(int64_t q)
{
	/* (double)q rounds once; the power of two scales it exactly (as ldexp, without its call). */
	return (float)((double)q * (1.0 / (double)(1ll << FIXED_SHIFT)));
}

/*
 * One entry of the im2col matrix (conv_shape.h): what tap (ky, kx) reads for
 * output pixel (oy, ox) of image b, from one input channel (h, w, batch); 0
 * in the padding.
 */
ELEM_FN float im2col_elem(const float *channel, const struct conv_shape *s, int batch, int oy,
			  int ox, int ky, int kx, int b)
{
	int iy = oy + ky - s->pad, ix = ox + kx - s->pad;
	return iy >= 0 && iy < s->h && ix >= 0 && ix < s->w
		       ? channel[((size_t)iy * s->w + ix) * batch + b]
		       : 0.0f;
}

/*
 * col2im as a gather: the gradient of input pixel (iy, ix) of channel ci of
 * image b is the sum of the im2col entries that read it, taken in tap order
 * (ky, then kx, ascending), so every backend adds the same terms in the same
 * order. dcols (c*k*k, oh*ow*batch): row (ci, ky, kx), column (oy, ox, b)
 * with oy = iy + pad - ky, ox = ix + pad - kx.
 */
ELEM_FN float col2im_elem(const float *dcols, const struct conv_shape *s, int batch, int ci,
			  int iy, int ix, int b)
{
	size_t ld = (size_t)s->oh * s->ow * batch;
	float sum = 0.0f;
	for (int ky = 0; ky < s->k; ky++) {
		int oy = iy + s->pad - ky;
		if (oy < 0 || oy >= s->oh)
			continue;
		const float *row = dcols + (size_t)((ci * s->k + ky) * s->k) * ld +
				   (size_t)oy * s->ow * batch + b;
		for (int kx = 0; kx < s->k; kx++) {
			int ox = ix + s->pad - kx;
			if (ox >= 0 && ox < s->ow)
				sum += row[(size_t)kx * ld + (size_t)ox * batch];
		}
	}
	return sum;
}

/*
 * a when t, else b, chosen by a bit mask: compilers turn a ?: between floats
 * into a branch, which costs a misprediction whenever the choice is data.
 */
ELEM_FN float select_elem(int t, float a, float b)
{
	uint32_t x, y, mask = 0u - (uint32_t)(t != 0);
	memcpy(&x, &a, sizeof(x));
	memcpy(&y, &b, sizeof(y));
	x = (x & mask) | (y & ~mask);
	memcpy(&a, &x, sizeof(a));
	return a;
}

/*
 * Whether v, later in a max-pool window's row order, replaces the window's
 * best so far: when larger, or a NaN over a number (PyTorch's rule).
 */
ELEM_FN int maxpool_takes_elem(float v, float best)
{
	return (v > best) | ((v != v) & (best == best));
}

/*
 * Window (py, px) of image b in one channel (h, w, batch) of a max-pool: the
 * largest of its k x k values, and in *arg its offset ky*k + kx. The first
 * maximum in row order wins, and a NaN wins over numbers (PyTorch's rule).
 */
ELEM_FN float maxpool_window_elem(const float *channel, int w, int k, int batch, int py, int px,
				  int b, int32_t *arg)
{
	const float *p = channel + ((size_t)py * k * w + (size_t)px * k) * batch + b;
	float best = p[0];
	int32_t at = 0;
	for (int ky = 0; ky < k; ky++)
		for (int kx = 0; kx < k; kx++) {
			float v = p[((size_t)ky * w + kx) * batch];
			int take = maxpool_takes_elem(v, best);
			best = select_elem(take, v, best);
			at = take ? ky * k + kx : at;
		}
	*arg = at;
	return best;
}

/* Gradient of the input at offset (ky, kx) of its window: the window's dy where it held the max. */
ELEM_FN float maxpool_backward_elem(float dy, int32_t arg, int ky, int kx, int k)
{
	return arg == ky * k + kx ? dy : 0.0f;
}

/*
 * Through a max-pool and the ReLU before it, backwards: the gradient of the
 * pre-activation at offset (ky, kx) of a window whose output y (the ReLU's
 * output at the window's maximum) has gradient dy.
 */
ELEM_FN float pool_relu_backward_elem(float dy, float y, int32_t arg, int ky, int kx, int k)
{
	return relu_backward_elem(maxpool_backward_elem(dy, arg, ky, kx, k), y);
}

/*
 * One output pixel (oy, ox) of image b of a convolution, before its bias:
 * the sum over the taps (ci, ky, kx), in that order, of w_row[tap] times
 * what the tap reads (im2col_elem) from x (c, h, w, batch). w_row: the
 * output channel's row of W (c*k*k).
 */
ELEM_FN float conv_pixel_elem(const float *x, const struct conv_shape *s, int batch,
			      const float *w_row, int oy, int ox, int b)
{
	size_t plane = (size_t)s->h * s->w * batch, nb = (size_t)batch;
	int iy0 = oy - s->pad, ix0 = ox - s->pad, k = s->k;
	float sum = 0.0f;
	if (iy0 < 0 || ix0 < 0 || iy0 + k > s->h || ix0 + k > s->w) {
		/* A window reaching into the padding: im2col_elem's zeros, tap by tap. */
		for (int ci = 0; ci < s->c; ci++)
			for (int ky = 0; ky < k; ky++)
				for (int kx = 0; kx < k; kx++)
					sum += w_row[(ci * k + ky) * k + kx] *
					       im2col_elem(x + (size_t)ci * plane, s, batch, oy, ox, ky, kx, b);
		return sum;
	}
	/* Inside the image: the same products in the same order, without the bounds checks. */
	const float *corner = x + ((size_t)iy0 * s->w + (size_t)ix0) * nb + (size_t)b;
	for (int ci = 0; ci < s->c; ci++)
		for (int ky = 0; ky < k; ky++) {
			const float *row = corner + (size_t)ci * plane + (size_t)ky * s->w * nb;
			const float *wt = w_row + (ci * k + ky) * k;
			for (int kx = 0; kx < k; kx++)
				sum += wt[kx] * row[(size_t)kx * nb];
		}
	return sum;
}

/*
 * A max-pool window's choice, value by value in its row order: v, at offset
 * `at`, replaces the best so far (*best, *arg) when it is the window's first
 * or maxpool_takes_elem says so.
 */
ELEM_FN void pool_pick_elem(float v, int32_t at, float *best, int32_t *arg)
{
	int take = (at == 0) | maxpool_takes_elem(v, *best);
	*best = select_elem(take, v, *best);
	*arg = take ? at : *arg;
}

/*
 * Window (py, px) of image b of a convolution stage (conv, bias, ReLU, then a
 * pool of k x k windows tiling the output): the largest of the window's
 * bias_act_elem(conv_pixel_elem, bias, 1), and in *arg its offset ky*k + kx,
 * chosen as maxpool_window_elem chooses.
 */
ELEM_FN float conv_pool_window_elem(const float *x, const struct conv_shape *s, int batch,
				    const float *w_row, float bias, int k, int py, int px, int b,
				    int32_t *arg)
{
	float best = 0.0f;
	int32_t at = 0;
	for (int ky = 0; ky < k; ky++)
		for (int kx = 0; kx < k; kx++)
			pool_pick_elem(bias_act_elem(conv_pixel_elem(x, s, batch, w_row, py * k + ky,
								     px * k + kx, b),
						     bias, 1),
				       ky * k + kx, &best, &at);
	*arg = at;
	return best;
}

/*
 * The same window from z, the stage's convolution already summed (one
 * channel of it before the bias, (oh, ow, batch), oh and ow its width: a
 * GEMM's W cols): the largest of the window's bias_act_elem(z, bias, 1), and
 * in *arg its offset, as conv_pool_window_elem chooses.
 */
ELEM_FN float bias_relu_pool_window_elem(const float *z, int ow, int batch, float bias, int k,
					 int py, int px, int b, int32_t *arg)
{
	const float *p = z + ((size_t)py * k * ow + (size_t)px * k) * batch + b;
	float best = 0.0f;
	int32_t at = 0;
	for (int ky = 0; ky < k; ky++)
		for (int kx = 0; kx < k; kx++)
			pool_pick_elem(bias_act_elem(p[((size_t)ky * ow + kx) * batch], bias, 1),
				       ky * k + kx, &best, &at);
	*arg = at;
	return best;
}

/*
 * The gradient of a convolution's input pixel (ci, iy, ix) of image b: the
 * sum over the output channels o < oc, then the taps (ky, then kx,
 * ascending) that read it, of W[o, (ci, ky, kx)] times dz[o, oy, ox, b],
 * dz (oc, oh, ow, batch), W (oc, c*k*k): col2im_elem of W^T dz, summed
 * without the matrix in between. Channel by channel, so that a kernel
 * holding one channel's dz under a block of pixels at a time sums in the
 * same order (cuda/kernels_conv.cu's patch kernel).
 */
ELEM_FN float conv_backward_data_elem(const float *w, const float *dz, const struct conv_shape *s,
				      int oc, int batch, int ci, int iy, int ix, int b)
{
	size_t fan_in = (size_t)s->c * s->k * s->k, plane = (size_t)s->oh * s->ow * batch;
	float sum = 0.0f;
	for (int o = 0; o < oc; o++) {
		const float *wo = w + (size_t)o * fan_in + (size_t)ci * s->k * s->k;
		const float *dzo = dz + (size_t)o * plane + (size_t)b;
		for (int ky = 0; ky < s->k; ky++) {
			int oy = iy + s->pad - ky;
			if (oy < 0 || oy >= s->oh)
				continue;
			for (int kx = 0; kx < s->k; kx++) {
				int ox = ix + s->pad - kx;
				if (ox >= 0 && ox < s->ow)
					sum += wo[ky * s->k + kx] *
					       dzo[((size_t)oy * s->ow + (size_t)ox) * batch];
			}
		}
	}
	return sum;
}

#endif /* MNIST_DDP_ELEM_H */
