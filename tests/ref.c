/*
 * ref.c - naive double-precision references and the tolerance comparison for
 * the tests: see tests/ref.h. Link it into any test program that needs it
 * (tests/cmake/20-core.cmake adds it to the unit tests).
 */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REF_SHOW_FIRST 8

uint64_t ref_seed(uint64_t fallback)
{
	const char *env = getenv("MNIST_TEST_SEED");
	if (!env || !*env)
		return fallback;
	if (!strcmp(env, "random")) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		struct rng r = {(uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec};
		return rng_next(&r) >> 16; /* short enough to retype */
	}
	char *end;
	unsigned long long v = strtoull(env, &end, 0);
	if (end == env || *end) {
		fprintf(stderr, "MNIST_TEST_SEED='%s' is not a number or 'random'; using %llu\n", env,
			(unsigned long long)fallback);
		return fallback;
	}
	return (uint64_t)v;
}

void ref_fill_uniform(struct rng *r, float *x, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(lo + (hi - lo) * rng_uniform(r));
}

void ref_fill_normal(struct rng *r, float *x, size_t n, double mean, double std)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(mean + std * rng_normal(r));
}

void ref_fill_bytes(struct rng *r, uint8_t *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (uint8_t)rng_below(r, 256);
}

void ref_fill_labels(struct rng *r, int32_t *y, size_t n, int classes)
{
	for (size_t i = 0; i < n; i++)
		y[i] = (int32_t)rng_below(r, (uint64_t)classes);
}

void ref_widen(const float *x, double *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = x[i];
}

void ref_gemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const float *a,
	      int lda, const float *b, int ldb, double beta, double *c, int ldc)
{
	for (int i = 0; i < m; i++) {
		for (int j = 0; j < n; j++) {
			double s = 0.0;
			for (int p = 0; p < k; p++) {
				double av = trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
				double bv = trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
				s += av * bv;
			}
			double *cij = &c[(size_t)i * ldc + j];
			*cij = alpha * s + (beta == 0.0 ? 0.0 : beta * *cij);
		}
	}
}

double ref_normalize_pixel(uint8_t p)
{
	return ((double)p / 255.0 - 0.1307) / 0.3081;
}

void ref_bias_act(double *y, const float *bias, int rows, int cols, int relu)
{
	for (int i = 0; i < rows; i++) {
		for (int j = 0; j < cols; j++) {
			double v = y[(size_t)i * cols + j] + (double)bias[j];
			y[(size_t)i * cols + j] = relu && v < 0.0 ? 0.0 : v;
		}
	}
}

void ref_relu_backward(double *dy, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(y[i] > 0.0f))
			dy[i] = 0.0;
}

double ref_softmax_xent_row(const float *logits, int label, int c, double scale,
			    double *dlogits)
{
	double m = logits[0];
	for (int j = 1; j < c; j++)
		if (logits[j] > m)
			m = logits[j];
	double s = 0.0;
	for (int j = 0; j < c; j++)
		s += exp((double)logits[j] - m);
	double lse = m + log(s);
	if (dlogits)
		for (int j = 0; j < c; j++)
			dlogits[j] = scale * (exp((double)logits[j] - lse) - (j == label ? 1.0 : 0.0));
	return lse - (double)logits[label];
}

int ref_argmax_row(const float *logits, int c)
{
	int best = 0;
	for (int j = 1; j < c; j++)
		if (logits[j] > logits[best])
			best = j;
	return best;
}

void ref_sgd_update(double *p, const float *g, double *v, size_t n, double lr, double mom,
		    double wd)
{
	for (size_t i = 0; i < n; i++) {
		double d = (double)g[i] + wd * p[i];
		if (mom != 0.0) {
			v[i] = mom * v[i] + d;
			p[i] -= lr * v[i];
		} else {
			p[i] -= lr * d;
		}
	}
}

double ref_clip_grad_norm(const float *g, double *out, size_t n, double max_norm)
{
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += (double)g[i] * (double)g[i];
	double norm = sqrt(sum), coef = max_norm / (norm + 1e-6);
	for (size_t i = 0; i < n; i++)
		out[i] = coef < 1.0 ? (double)g[i] * coef : (double)g[i];
	return norm;
}

void ref_adamw_update(double *p, const float *g, double *m, double *v, size_t n, double lr,
		      long t, double beta1, double beta2, double eps, double wd)
{
	double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
	for (size_t i = 0; i < n; i++) {
		double gi = (double)g[i];
		p[i] *= 1.0 - lr * wd;
		m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
		v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
		p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
	}
}

/* Pixel (ci, iy, ix) of image b in x (c, h, w, batch) as double, 0 outside the image. */
static double ref_pixel(const float *x, const struct conv_shape *s, int batch, int b, int ci,
			int iy, int ix)
{
	if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
		return 0.0;
	return x[(((size_t)ci * s->h + iy) * s->w + ix) * batch + b];
}

/* Index of output pixel (o, oy, ox) of image b in (oc, oh, ow, batch). */
static size_t ref_out_at(const struct conv_shape *s, int batch, int o, int oy, int ox, int b)
{
	return (((size_t)o * s->oh + oy) * s->ow + ox) * batch + b;
}

void ref_im2col(const float *x, const struct conv_shape *s, int batch, double *cols)
{
	size_t ld = (size_t)s->oh * s->ow * batch;
	for (int ci = 0; ci < s->c; ci++)
		for (int ky = 0; ky < s->k; ky++)
			for (int kx = 0; kx < s->k; kx++)
				for (int oy = 0; oy < s->oh; oy++)
					for (int ox = 0; ox < s->ow; ox++)
						for (int b = 0; b < batch; b++) {
							size_t r = (size_t)(ci * s->k + ky) * s->k + kx;
							size_t col = ((size_t)oy * s->ow + ox) * batch + b;
							cols[r * ld + col] = ref_pixel(x, s, batch, b, ci,
										       oy + ky - s->pad,
										       ox + kx - s->pad);
						}
}

void ref_conv_forward(const float *x, const float *w, const float *bias,
		      const struct conv_shape *s, int oc, int batch, double *y)
{
	for (int o = 0; o < oc; o++)
		for (int b = 0; b < batch; b++)
			for (int oy = 0; oy < s->oh; oy++)
				for (int ox = 0; ox < s->ow; ox++) {
					double sum = bias[o];
					for (int ci = 0; ci < s->c; ci++)
						for (int ky = 0; ky < s->k; ky++)
							for (int kx = 0; kx < s->k; kx++)
								sum += (double)w[((size_t)(o * s->c + ci) * s->k + ky) * s->k + kx] *
								       ref_pixel(x, s, batch, b, ci, oy + ky - s->pad,
										 ox + kx - s->pad);
					y[ref_out_at(s, batch, o, oy, ox, b)] = sum;
				}
}

void ref_conv_backward(const float *x, const float *w, const float *dy,
		       const struct conv_shape *s, int oc, int batch, double *dw, double *db,
		       double *dx)
{
	size_t kk = (size_t)s->c * s->k * s->k;
	memset(dw, 0, (size_t)oc * kk * sizeof(double));
	memset(db, 0, (size_t)oc * sizeof(double));
	if (dx)
		memset(dx, 0, (size_t)batch * s->c * s->h * s->w * sizeof(double));
	for (int o = 0; o < oc; o++)
		for (int b = 0; b < batch; b++)
			for (int oy = 0; oy < s->oh; oy++)
				for (int ox = 0; ox < s->ow; ox++) {
					double g = dy[ref_out_at(s, batch, o, oy, ox, b)];
					db[o] += g;
					for (int ci = 0; ci < s->c; ci++)
						for (int ky = 0; ky < s->k; ky++)
							for (int kx = 0; kx < s->k; kx++) {
								int iy = oy + ky - s->pad, ix = ox + kx - s->pad;
								size_t wi = ((size_t)(o * s->c + ci) * s->k + ky) * s->k + kx;
								dw[wi] += g * ref_pixel(x, s, batch, b, ci, iy, ix);
								if (dx && iy >= 0 && iy < s->h && ix >= 0 && ix < s->w)
									dx[(((size_t)ci * s->h + iy) * s->w + ix) * batch + b] +=
										g * (double)w[wi];
							}
				}
}

/* Offset of window (ch, py, px) of image b in a stage's output: batch innermost or batch first. */
static size_t ref_pooled_at(const struct pool_shape *p, int batch, int batch_first, int ch, int py,
			    int px, int b)
{
	size_t f = ((size_t)ch * p->oh + py) * p->ow + px;
	return batch_first ? (size_t)b * ((size_t)p->c * p->oh * p->ow) + f : f * batch + b;
}

/* PyTorch's ReLU: max(v, 0), a NaN kept. */
static double ref_relu(double v)
{
	return v < 0.0 ? 0.0 : v;
}

void ref_conv_stage_forward(const float *x, const float *w, const float *bias,
			    const struct conv_shape *c, const struct pool_shape *p, int oc,
			    int batch, int batch_first, double *y, int32_t *arg, double *z,
			    double *cols)
{
	size_t nz = (size_t)oc * c->oh * c->ow * batch;
	double *zz = z ? z : malloc((nz ? nz : 1) * sizeof(double));
	if (!zz)
		abort();
	ref_conv_forward(x, w, bias, c, oc, batch, zz);
	if (cols)
		ref_im2col(x, c, batch, cols);
	for (int o = 0; o < oc; o++)
		for (int py = 0; py < p->oh; py++)
			for (int px = 0; px < p->ow; px++)
				for (int b = 0; b < batch; b++) {
					int best = 0;
					double bv = 0.0;
					for (int q = 0; q < p->k * p->k; q++) {
						double v = ref_relu(zz[ref_out_at(c, batch, o, py * p->k + q / p->k,
										 px * p->k + q % p->k, b)]);
						/* Larger wins, and a NaN over a number; the first of equals stays. */
						if (q == 0 || v > bv || (isnan(v) && !isnan(bv))) {
							best = q;
							bv = v;
						}
					}
					y[ref_pooled_at(p, batch, batch_first, o, py, px, b)] = bv;
					arg[(((size_t)o * p->oh + py) * p->ow + px) * batch + b] = best;
				}
	if (!z)
		free(zz);
}

/* ref_pool_relu_backward with dy given by a function of the window: float or double arrays. */
static void ref_pool_gate(const float *dyf, const double *dyd, const float *y, const int32_t *arg,
			  const struct pool_shape *p, int batch, int batch_first, double *dz)
{
	memset(dz, 0, (size_t)p->c * p->h * p->w * batch * sizeof(double));
	for (int ch = 0; ch < p->c; ch++)
		for (int py = 0; py < p->oh; py++)
			for (int px = 0; px < p->ow; px++)
				for (int b = 0; b < batch; b++) {
					size_t o = (((size_t)ch * p->oh + py) * p->ow + px) * batch + b;
					size_t at = ref_pooled_at(p, batch, batch_first, ch, py, px, b);
					int ky = arg[o] / p->k, kx = arg[o] % p->k;
					double g = dyf ? (double)dyf[at] : dyd[o];
					dz[(((size_t)ch * p->h + py * p->k + ky) * p->w + px * p->k + kx) * batch +
					   b] = y[at] > 0.0f ? g : 0.0;
				}
}

void ref_pool_relu_backward(const float *dy, const float *y, const int32_t *arg,
			    const struct pool_shape *p, int batch, int batch_first, double *dz)
{
	ref_pool_gate(dy, NULL, y, arg, p, batch, batch_first, dz);
}

void ref_conv_backward_data(const float *w, const float *dz, const struct conv_shape *c, int oc,
			    int batch, const struct pool_shape *below, const float *below_y,
			    const int32_t *below_arg, double *dz_below)
{
	size_t nx = (size_t)c->c * c->h * c->w * batch;
	double *dx = calloc(nx ? nx : 1, sizeof(double));
	if (!dx)
		abort();
	for (int o = 0; o < oc; o++)
		for (int oy = 0; oy < c->oh; oy++)
			for (int ox = 0; ox < c->ow; ox++)
				for (int b = 0; b < batch; b++) {
					double g = dz[ref_out_at(c, batch, o, oy, ox, b)];
					for (int ci = 0; ci < c->c; ci++)
						for (int ky = 0; ky < c->k; ky++)
							for (int kx = 0; kx < c->k; kx++) {
								int iy = oy + ky - c->pad, ix = ox + kx - c->pad;
								if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w)
									continue;
								dx[(((size_t)ci * c->h + iy) * c->w + ix) * batch + b] +=
									g * (double)w[(((size_t)o * c->c + ci) * c->k + ky) * c->k + kx];
							}
				}
	/* dx is (c, h, w, batch) = the below pool's output layout, batch innermost. */
	ref_pool_gate(NULL, dx, below_y, below_arg, below, batch, 0, dz_below);
	free(dx);
}

void ref_bias_grad(int trans_a, int m, int k, const float *a, int lda, double *out)
{
	for (int i = 0; i < m; i++) {
		double s = 0.0;
		for (int l = 0; l < k; l++)
			s += trans_a ? a[(size_t)l * lda + i] : a[(size_t)i * lda + l];
		out[i] = s;
	}
}

size_t ref_conv_stage_pattern_len(const struct conv_shape *s, const struct pool_shape *p, int oc,
				  int batch)
{
	return (size_t)oc * batch * ((size_t)s->oh * s->ow + (size_t)p->oh * p->ow);
}

void ref_conv_stage(const double *x, const double *w, const double *b,
		    const struct conv_shape *s, const struct pool_shape *p, int oc, int batch,
		    double *y, int32_t *arg, double *gap, uint8_t *pattern)
{
	size_t plane = (size_t)s->oh * s->ow * batch, fan = (size_t)s->c * s->k * s->k;
	double *r = malloc((size_t)oc * plane * sizeof(double));
	if (!r)
		abort();
	/* r = max(conv + bias, 0), (oc, oh, ow, batch) */
	for (int o = 0; o < oc; o++)
		for (int oy = 0; oy < s->oh; oy++)
			for (int ox = 0; ox < s->ow; ox++)
				for (int bi = 0; bi < batch; bi++) {
					double sum = b[o];
					for (int ci = 0; ci < s->c; ci++)
						for (int ky = 0; ky < s->k; ky++)
							for (int kx = 0; kx < s->k; kx++) {
								int iy = oy + ky - s->pad, ix = ox + kx - s->pad;
								if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
									continue;
								sum += w[o * fan + ((size_t)ci * s->k + ky) * s->k + kx] *
								       x[(((size_t)ci * s->h + iy) * s->w + ix) * batch + bi];
							}
					size_t at = ref_out_at(s, batch, o, oy, ox, bi);
					if (pattern)
						pattern[at] = sum > 0.0;
					r[at] = sum > 0.0 ? sum : 0.0;
				}
	/* The pool over r: windows of k x k tiling (oh, ow). */
	for (int o = 0; o < oc; o++)
		for (int py = 0; py < p->oh; py++)
			for (int px = 0; px < p->ow; px++)
				for (int bi = 0; bi < batch; bi++) {
#define REF_WIN(q) r[ref_out_at(s, batch, o, py * p->k + (q) / p->k, px * p->k + (q) % p->k, bi)]
					int best = 0;
					for (int q = 1; q < p->k * p->k; q++)
						if (REF_WIN(q) > REF_WIN(best))
							best = q;
					double next = -INFINITY;
					for (int q = 0; q < p->k * p->k; q++)
						if (q != best && REF_WIN(q) > next)
							next = REF_WIN(q);
					size_t at = (((size_t)o * p->oh + py) * p->ow + px) * batch + bi;
					y[at] = REF_WIN(best);
					arg[at] = best;
					if (gap)
						gap[at] = REF_WIN(best) - next;
					if (pattern)
						pattern[(size_t)oc * plane + at] = (uint8_t)best;
#undef REF_WIN
				}
	free(r);
}

size_t ref_net_pattern_len(const struct model *m, int rows)
{
	size_t n = 0;
	for (int i = 0; i < m->n_layers; i++)
		if (m->layer[i].relu || m->layer[i].kind == LAYER_POOL)
			n += (size_t)rows * (size_t)m->layer[i].out;
	return n ? n : 1;
}

/* One layer of ref_net_loss for one example: in -> out, both NCHW (or flat). */
static void ref_net_layer(const struct layer *l, const double *p, const double *in, double *out,
			  uint8_t *pattern)
{
	if (l->kind == LAYER_DENSE) {
		for (int o = 0; o < l->units; o++) {
			double s = p[l->b_off + o];
			for (int i = 0; i < l->in; i++)
				s += in[i] * p[l->w_off + (size_t)o * l->in + i];
			out[o] = s;
		}
	} else if (l->kind == LAYER_CONV) {
		const struct conv_shape *c = &l->conv;
		for (int o = 0; o < l->units; o++)
			for (int oy = 0; oy < c->oh; oy++)
				for (int ox = 0; ox < c->ow; ox++) {
					double s = p[l->b_off + o];
					for (int ci = 0; ci < c->c; ci++)
						for (int ky = 0; ky < c->k; ky++)
							for (int kx = 0; kx < c->k; kx++) {
								int iy = oy + ky - c->pad, ix = ox + kx - c->pad;
								if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w)
									continue;
								s += in[((size_t)ci * c->h + iy) * c->w + ix] *
								     p[l->w_off + (((size_t)o * c->c + ci) * c->k + ky) * c->k + kx];
							}
					out[((size_t)o * c->oh + oy) * c->ow + ox] = s;
				}
	} else if (l->kind == LAYER_TRANSPOSE) {
		/* Only the backend's layout changes: here every activation is one example's, in order. */
		for (int i = 0; i < l->in; i++)
			out[i] = in[i];
		return;
	} else {
		const struct pool_shape *q = &l->pool;
		for (int ch = 0; ch < q->c; ch++)
			for (int py = 0; py < q->oh; py++)
				for (int px = 0; px < q->ow; px++) {
					const double *w0 = in + ((size_t)ch * q->h + py * q->k) * q->w + px * q->k;
					int best = 0;
					for (int t = 1; t < q->k * q->k; t++)
						if (w0[(t / q->k) * q->w + t % q->k] >
						    w0[(best / q->k) * q->w + best % q->k])
							best = t;
					size_t o = ((size_t)ch * q->oh + py) * q->ow + px;
					out[o] = w0[(best / q->k) * q->w + best % q->k];
					if (pattern)
						pattern[o] = (uint8_t)best;
				}
		return;
	}
	for (int o = 0; o < l->out && l->relu; o++) {
		if (pattern)
			pattern[o] = out[o] > 0.0;
		out[o] = out[o] > 0.0 ? out[o] : 0.0;
	}
}

/* The widest activation of m's network (its input's 784 included). */
static size_t ref_net_width(const struct model *m)
{
	size_t width = 784;
	for (int i = 0; i < m->n_layers; i++)
		width = (size_t)m->layer[i].out > width ? (size_t)m->layer[i].out : width;
	return width;
}

/* Where layer `first`'s input starts in a ref_net_inputs array of `rows` examples. */
static size_t ref_net_input_at(const struct model *m, int rows, int first)
{
	size_t at = 0;
	for (int i = 0; i < first; i++)
		at += (size_t)rows * (size_t)(i ? m->layer[i - 1].out : 784);
	return at;
}

size_t ref_net_inputs_len(const struct model *m, int rows)
{
	return ref_net_input_at(m, rows, m->n_layers);
}

/*
 * Layers first.. of one example r of rows, from a = layer first's input (b: scratch of the
 * same width); each layer's input is copied to inputs (may be NULL) and its pattern bytes
 * written to pattern (may be NULL). Returns the example's loss, its logits to logits.
 */
static double ref_net_row(const struct model *m, const double *params, double *a, double *b,
			  int rows, int r, int first, int32_t label, double *logits,
			  uint8_t *pattern, double *inputs)
{
	size_t at = 0; /* layer i's pattern: rows blocks of out bytes, after the layers before */
	for (int i = 0; i < m->n_layers; i++) {
		const struct layer *l = &m->layer[i];
		int marks = l->relu || l->kind == LAYER_POOL;
		if (i >= first) {
			if (inputs) {
				int in = i ? m->layer[i - 1].out : 784;
				memcpy(inputs + ref_net_input_at(m, rows, i) + (size_t)r * in, a,
				       (size_t)in * sizeof(double));
			}
			ref_net_layer(l, params, a, b,
				      pattern && marks ? pattern + at + (size_t)r * l->out : NULL);
			double *t = a;
			a = b;
			b = t;
		}
		at += marks ? (size_t)rows * l->out : 0;
	}
	double mx = a[0], sum = 0.0;
	for (int j = 1; j < 10; j++)
		mx = a[j] > mx ? a[j] : mx;
	for (int j = 0; j < 10; j++)
		sum += exp(a[j] - mx);
	if (logits)
		for (int j = 0; j < 10; j++)
			logits[(size_t)r * 10 + j] = a[j];
	return mx + log(sum) - a[label];
}

/* ref_net_loss, and ref_net_loss_from when inputs_from is given (x then unused). */
static double ref_net_run(const struct model *m, const double *params, const float *x,
			  const double *inputs_from, int first, const int32_t *labels, int rows,
			  double *logits, uint8_t *pattern, double *inputs)
{
	size_t width = ref_net_width(m);
	double *a = malloc(width * sizeof(double)), *b = malloc(width * sizeof(double));
	if (!a || !b)
		abort();
	int in = first ? m->layer[first - 1].out : 784;
	double loss = 0.0;
	for (int r = 0; r < rows; r++) {
		for (int i = 0; i < in; i++)
			a[i] = inputs_from ? inputs_from[ref_net_input_at(m, rows, first) + (size_t)r * in + i]
					   : x[(size_t)r * 784 + i];
		loss += ref_net_row(m, params, a, b, rows, r, first, labels[r], logits, pattern, inputs);
	}
	free(a);
	free(b);
	return loss / rows;
}

double ref_net_loss(const struct model *m, const double *params, const float *x,
		    const int32_t *labels, int rows, double *logits, uint8_t *pattern)
{
	return ref_net_run(m, params, x, NULL, 0, labels, rows, logits, pattern, NULL);
}

double ref_net_loss_inputs(const struct model *m, const double *params, const float *x,
			   const int32_t *labels, int rows, uint8_t *pattern, double *inputs)
{
	return ref_net_run(m, params, x, NULL, 0, labels, rows, NULL, pattern, inputs);
}

double ref_net_loss_from(const struct model *m, const double *params, const double *inputs,
			 int first, const int32_t *labels, int rows, uint8_t *pattern)
{
	return ref_net_run(m, params, NULL, inputs, first, labels, rows, NULL, pattern, NULL);
}

struct ref_cmp ref_compare_f(const char *what, const float *got, const double *ref, size_t n,
			     double atol, double rtol, uint64_t seed)
{
	struct ref_cmp c = {.n = n};
	for (size_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - ref[i]);
		double bound = atol + rtol * fabs(ref[i]);
		int bad = !(err <= bound); /* NaN on either side is a mismatch */
		if (isnan(err)) {
			if (!isnan(c.max_err)) { /* report the first NaN */
				c.max_err = err;
				c.max_at = i;
			}
		} else if (err > c.max_err) { /* false once max_err is NaN */
			c.max_err = err;
			c.max_at = i;
		}
		if (bad) {
			if (c.bad < REF_SHOW_FIRST)
				fprintf(stderr,
					"%s: mismatch at [%zu]: got %.9g, ref %.9g, |err| %.3g > %.3g (seed %llu)\n",
					what, i, (double)got[i], ref[i], err, bound,
					(unsigned long long)seed);
			c.bad++;
		}
	}
	if (c.bad)
		fprintf(stderr,
			"%s: %zu of %zu outside atol %.3g + rtol %.3g * |ref|; largest |err| %.3g at [%zu] "
			"(seed %llu; rerun with MNIST_TEST_SEED=%llu)\n",
			what, c.bad, n, atol, rtol, c.max_err, c.max_at, (unsigned long long)seed,
			(unsigned long long)seed);
	return c;
}

struct ref_cmp ref_compare_i32(const char *what, const int32_t *got, const int32_t *ref,
			       size_t n, uint64_t seed)
{
	struct ref_cmp c = {.n = n};
	for (size_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - (double)ref[i]);
		if (err > c.max_err) {
			c.max_err = err;
			c.max_at = i;
		}
		if (got[i] != ref[i]) {
			if (c.bad < REF_SHOW_FIRST)
				fprintf(stderr, "%s: mismatch at [%zu]: got %ld, ref %ld (seed %llu)\n",
					what, i, (long)got[i], (long)ref[i], (unsigned long long)seed);
			c.bad++;
		}
	}
	if (c.bad)
		fprintf(stderr, "%s: %zu of %zu differ; largest |err| %.0f at [%zu] (seed %llu)\n", what,
			c.bad, n, c.max_err, c.max_at, (unsigned long long)seed);
	return c;
}
