/*
 * ref.h - naive double-precision references and the comparison helper the
 * tests share (the host unit tests, and the GPU parity tests that hold the
 * CUDA backend against the same oracles).
 *
 * Nothing here depends on Criterion or MPI: ref_compare_* print what they
 * find on stderr and return a summary, and the caller asserts on it.
 *
 * Every reference is written from the definition, element by element, in
 * double precision; none of them calls into elem.h or a BLAS, so a bug in the
 * shared code cannot hide in its own oracle.
 */
#ifndef MNIST_DDP_TESTS_REF_H
#define MNIST_DDP_TESTS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "conv_shape.h"
#include "train/model.h"
#include "train/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The seed for a test's random inputs: MNIST_TEST_SEED from the environment
 * when set (a number, or "random" for a time-based one), else `fallback`.
 * Tests print it in every failure message so a failing run can be replayed.
 */
uint64_t ref_seed(uint64_t fallback);

/* Random fills from r. */
void ref_fill_uniform(struct rng *r, float *x, size_t n, double lo, double hi);
void ref_fill_normal(struct rng *r, float *x, size_t n, double mean, double std);
void ref_fill_bytes(struct rng *r, uint8_t *x, size_t n);
void ref_fill_labels(struct rng *r, int32_t *y, size_t n, int classes);

/* Float buffers widened to double and back. */
void ref_widen(const float *x, double *out, size_t n);

/*
 * Row-major C = alpha * op(A) * op(B) + beta * C over doubles, the textbook
 * triple loop. Sizes and strides as in struct gemm_req: A stored (m, k) with
 * row stride lda, or (k, m) when trans_a; B stored (k, n), or (n, k) when
 * trans_b; C (m, n) with row stride ldc. Entries of C past column n are left
 * alone. beta == 0 ignores C's old contents (as BLAS does).
 */
void ref_gemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const float *a,
	      int lda, const float *b, int ldb, double beta, double *c, int ldc);

/* MNIST pixel normalisation: (p / 255 - 0.1307) / 0.3081. */
double ref_normalize_pixel(uint8_t p);

/* y (rows, cols) = y + bias[col], then max(., 0) when relu. */
void ref_bias_act(double *y, const float *bias, int rows, int cols, int relu);

/* dy[i] = y[i] > 0 ? dy[i] : 0, y the ReLU's output. */
void ref_relu_backward(double *dy, const float *y, size_t n);

/*
 * One row of softmax cross-entropy: returns -log softmax(logits)[label] and,
 * when dlogits is not NULL, writes scale * (softmax - onehot(label)) (c).
 * Log-sum-exp about the row max, in double.
 */
double ref_softmax_xent_row(const float *logits, int label, int c, double scale,
			    double *dlogits);

/* Index of the row's first maximum. */
int ref_argmax_row(const float *logits, int c);

/* One SGD step in double: v = mom * v + g, p -= lr * v (mom != 0); else p -= lr * g. */
/* torch.optim.SGD: d = g + wd p; v = mom v + d, p -= lr v (mom > 0), else p -= lr d. */
void ref_sgd_update(double *p, const float *g, double *v, size_t n, double lr, double mom,
		    double wd);
/*
 * torch.optim.AdamW, update number t (>= 1): p *= 1 - lr wd; m = b1 m + (1 - b1) g;
 * v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 */
void ref_adamw_update(double *p, const float *g, double *m, double *v, size_t n, double lr,
		      long t, double beta1, double beta2, double eps, double wd);

/*
 * torch.nn.utils.clip_grad_norm_ in double: returns the 2-norm of g (n);
 * where max_norm / (norm + 1e-6) < 1, out[i] = g[i] times it, else out[i] = g[i].
 */
double ref_clip_grad_norm(const float *g, double *out, size_t n, double max_norm);

/*
 * Convolution and pooling from their definitions, in the batch-innermost
 * layouts of include/conv_shape.h: images (c, h, w, batch); stride 1
 * convolutions with zero padding, k x k pools with stride k.
 */

/* cols (c*k*k, oh*ow*batch): cols[(ci, ky, kx), (oy, ox, b)] = pixel (ci, oy+ky-pad, ox+kx-pad) of image b, or 0. */
void ref_im2col(const float *x, const struct conv_shape *s, int batch, double *cols);

/*
 * Direct convolution: y (oc, oh, ow, batch) = sum over (ci, ky, kx) of
 * w[o, ci, ky, kx] * pixel (ci, oy+ky-pad, ox+kx-pad) of x (c, h, w, batch) + bias[o].
 */
void ref_conv_forward(const float *x, const float *w, const float *bias,
		      const struct conv_shape *s, int oc, int batch, double *y);

/*
 * Its gradients given dy (oc, oh, ow, batch): dw (oc, c, k, k), db (oc), dx
 * (c, h, w, batch), each from the definition (dx may be NULL).
 */
void ref_conv_backward(const float *x, const float *w, const float *dy,
		       const struct conv_shape *s, int oc, int batch, double *dw, double *db,
		       double *dx);

/*
 * The fused ops of a convolution stage (struct conv_stage, include/backend.h)
 * from the same definitions, one after another in double:
 *
 * Forward: z = conv(x, W) + b (oc, oh, ow, batch) as ref_conv_forward, a =
 * relu(z) with PyTorch's rule (a NaN stays NaN), y = the k x k max-pool of a:
 * each window's first maximum in row order, a NaN winning over numbers (the
 * first NaN of the window); arg (oc, ph, pw, batch) its offset ky*k + kx.
 * y is (oc, ph, pw, batch), or (batch, oc*ph*pw) when batch_first; z and cols
 * (ref_im2col, the stage's side output) are written unless NULL. The pool
 * must tile the convolution's output exactly.
 */
void ref_conv_stage_forward(const float *x, const float *w, const float *bias,
			    const struct conv_shape *c, const struct pool_shape *p, int oc,
			    int batch, int batch_first, double *y, int32_t *arg, double *z,
			    double *cols);

/*
 * Backward through a stage's pool and ReLU: dz (c, h, w, batch) holds, at
 * each window's argmax, the window's dy when its y (the ReLU's output at the
 * maximum) is > 0, else 0; 0 at every other pixel. dy and y in the layout
 * batch_first says (as ref_conv_stage_forward's y), arg (c, ph, pw, batch).
 */
void ref_pool_relu_backward(const float *dy, const float *y, const int32_t *arg,
			    const struct pool_shape *p, int batch, int batch_first, double *dz);

/*
 * The gradient wrt a stage's input: dx (c, h, w, batch) = conv^T(dz, W), every
 * product dz[o, oy, ox, b] * w[o, ci, ky, kx] added to the pixel the tap
 * reads, then taken through the stage below (whose batch-innermost y,
 * below_y, is this stage's x; below_arg its argmax) as ref_pool_relu_backward:
 * dz_below (c, below->h, below->w, batch). dz (oc, oh, ow, batch).
 */
void ref_conv_backward_data(const float *w, const float *dz, const struct conv_shape *c, int oc,
			    int batch, const struct pool_shape *below, const float *below_y,
			    const int32_t *below_arg, double *dz_below);

/*
 * out (m) = the sums over l < k of op(A)[i, l]: A stored (m, k) at row stride
 * lda, or (k, m) when trans_a (a GEMM's bias gradient, gemm_map.h).
 */
void ref_bias_grad(int trans_a, int m, int k, const float *a, int lda, double *out);

/*
 * A convolution stage (include/backend.h, struct conv_stage) in double
 * throughout, parameters included (for central differences), finite values
 * only: z = conv(x, w) + b (oc, oh, ow, batch), then each pool
 * window's largest max(z, 0) into y (oc, ph, pw, batch) and the offset
 * ky*k + kx of its first maximum in row order into arg. x (c, h, w, batch),
 * w (oc, c*k*k), b (oc), all double; p tiles the convolution's output
 * (p->h == s->oh, p->w == s->ow). gap, unless NULL: per window, its largest
 * value less the next largest (0 on a tie, INFINITY for a 1 x 1 window), so a
 * caller comparing float results can tell which argmaxes rounding decides.
 * pattern, unless NULL, gets ref_conv_stage_pattern_len bytes: each
 * pre-activation's sign (z > 0), then each window's argmax.
 */
void ref_conv_stage(const double *x, const double *w, const double *b,
		    const struct conv_shape *s, const struct pool_shape *p, int oc, int batch,
		    double *y, int32_t *arg, double *gap, uint8_t *pattern);
size_t ref_conv_stage_pattern_len(const struct conv_shape *s, const struct pool_shape *p, int oc,
				  int batch);

/*
 * A whole network in double, from PyTorch's definitions with each example's
 * activations in PyTorch's (c, h, w) order, one example at a time (it reads
 * only the model's layer list: kinds, shapes, offsets; transposes change
 * nothing here):
 * the mean softmax cross-entropy over rows examples x (rows, 784) with labels,
 * at parameters params (n_params, double). logits (rows, 10) may be NULL;
 * pattern, when not NULL, gets ref_net_pattern_len bytes: each ReLU unit's
 * on/off and each pool window's argmax, layer by layer, so a caller can tell
 * whether two parameter points lie on the same linear piece.
 */
double ref_net_loss(const struct model *m, const double *params, const float *x,
		    const int32_t *labels, int rows, double *logits, uint8_t *pattern);
size_t ref_net_pattern_len(const struct model *m, int rows);
/*
 * The same from one layer on, for a caller that changes the parameters of layers first..
 * only (a gradient check: what comes before is the same at every point). ref_net_loss_inputs
 * is ref_net_loss (without logits) that also keeps every layer's input of every example in
 * inputs (ref_net_inputs_len doubles); ref_net_loss_from runs layers first.. from those,
 * writing only their bytes of pattern: the same loss, bit for bit, as ref_net_loss at params
 * when layers before first are unchanged since inputs were kept.
 */
size_t ref_net_inputs_len(const struct model *m, int rows);
double ref_net_loss_inputs(const struct model *m, const double *params, const float *x,
			   const int32_t *labels, int rows, uint8_t *pattern, double *inputs);
double ref_net_loss_from(const struct model *m, const double *params, const double *inputs,
			 int first, const int32_t *labels, int rows, uint8_t *pattern);

/* What a comparison found. */
struct ref_cmp {
	size_t n;       /* elements compared */
	size_t bad;     /* elements outside the tolerance (NaN counts as outside) */
	double max_err; /* largest |got - ref| */
	size_t max_at;  /* where it occurred */
};

/*
 * Compare got against ref with tolerance atol + rtol * |ref|. On any mismatch,
 * print to stderr: `what`, the seed, the first few mismatches (index, got,
 * ref, error, bound), the count and the largest error. Returns the summary;
 * the test asserts that .bad is 0.
 */
struct ref_cmp ref_compare_f(const char *what, const float *got, const double *ref, size_t n,
			     double atol, double rtol, uint64_t seed);

/* The same for exact integer results (labels, hit counts). */
struct ref_cmp ref_compare_i32(const char *what, const int32_t *got, const int32_t *ref,
			       size_t n, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_TESTS_REF_H */
