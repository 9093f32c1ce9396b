/*
 * backend.h - the compute and communication interface the trainer runs on.
 *
 * A backend is a table of function pointers plus a private context. The host
 * backend (cpu/backend_host.c: OpenBLAS + MPI_Allreduce) and the CUDA
 * backend (cuda/backend_cuda.cu: kernels + cuBLAS + NCCL, a loadable module)
 * implement it; the training loop, model, sampler, logging and checkpoints
 * see only this file. How a backend is made (the host's, the CUDA module's,
 * and the choice between them) is include/backend_module.h.
 *
 * Conventions:
 * - Every pointer passed to an op is backend memory from ->alloc, except the
 *   host-side side of ->upload / ->download.
 * - Matrices are row-major; a buffer's shape is given in its comment.
 * - Ops are asynchronous with respect to the host where the backend is
 *   (CUDA: one compute stream); ->download waits for all earlier work.
 * - Library failures are fatal inside the backend (check macros print rank,
 *   host, statement and location, then MPI_Abort): ops return nothing.
 * - Optional entries may be NULL; use the backend_* wrappers below.
 */
#ifndef MNIST_DDP_BACKEND_H
#define MNIST_DDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "conv_shape.h"
#include "elem.h"
#include "gemm_map.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dist;

enum reduce_op {
	REDUCE_MEAN = 0,
	REDUCE_SUM = 1,
};

/*
 * The counters a training step reads and moves on: one block of backend
 * memory, so that a step captured once replays with each step's own values.
 * The loss op of a step (->softmax_xent with `counters`) moves them on once
 * its rows are read: cursor += rows, step += 1, updates += 1. The ops after
 * it in the step (the optimizer, the next batch's gather) see the new values.
 */
struct step_counters {
	int32_t cursor;  /* where in the epoch's index the next batch starts */
	int32_t step;    /* steps of the epoch begun: the running step is step - 1 */
	int32_t updates; /* optimizer updates begun over the run (AdamW's t) */
	int32_t spare;
};

/*
 * A batch gather: r = min(count, len - *cursor) rows (none when negative);
 * for i < r, e = index[*cursor + i]:
 *   x[i, :] = normalize_pixel_elem(images[e, :]), y[i] = labels[e]
 * with x (r, pixels), or (pixels, r) when batch_last (the batch innermost, as
 * a convolution reads it). images (n, pixels) and labels (n) uint8, index
 * (len) int32, cursor one int32 in backend memory (read when the op runs).
 */
struct gather_req {
	const uint8_t *images, *labels;
	int pixels;
	const int32_t *index;
	int len;
	const int32_t *cursor;
	int count;
	int batch_last;
	float *x;
	int32_t *y;
};

/*
 * Softmax cross-entropy of logits (rows, cols) against labels (rows):
 * row_loss (rows) the per-row loss, and unless dlogits is NULL,
 * dlogits (rows, cols) = scale * (softmax - onehot), through the ReLU when
 * relu (the logits are a ReLU's output: relu_backward_elem). counters, unless
 * NULL: moved on as struct step_counters says.
 */
struct xent_req {
	const float *logits;
	const int32_t *labels;
	int rows, cols;
	float scale;
	float *row_loss;
	float *dlogits;
	int relu;
	struct step_counters *counters;
};

/*
 * A convolution stage, batch-innermost (conv_shape.h):
 *   y = maxpool(relu(conv(x, W) + b))
 * x (c, h, w, rows); W (oc, c*k*k), b (oc); y (oc, ph, pw, rows), or
 * (rows, oc*ph*pw) when batch_first (PyTorch's flatten order, for a dense
 * layer next); arg (oc, ph, pw, rows) each window's argmax offset
 * (maxpool_window_elem); cols, unless NULL, the im2col matrix of x
 * (c*k*k, oh*ow*rows), kept for the weight gradient. The pool tiles the
 * convolution's output exactly (oh and ow multiples of its k).
 */
struct conv_stage {
	const struct conv_shape *conv;
	const struct pool_shape *pool;
	int oc, rows;
	int batch_first;
};

/* At most this many dense stages under the top in one head (struct head_req). */
#define HEAD_MAX_BELOW 8

/*
 * A dense stage under the top that a head covers: its forward (BIAS or
 * BIAS_RELU, into the next stage's input), its input gradient (from the
 * stage above's, DRELU through the ReLU below it, or none below it: m == 0
 * when it is the model's lowest stage) and its weight gradient (dW and db,
 * as the model's backward pass sends it). layer: its name, for labels.
 */
struct head_below {
	const char *layer;
	struct gemm_req forward, input_grad, weight_grad;
};

/*
 * The top of a training step, whose layer is dense: its forward (a GEMM with
 * a BIAS or BIAS_RELU epilogue into the logits), the loss on those logits
 * (loss.logits is forward.c), the layer's input gradient from the loss's
 * dlogits (a GEMM, DRELU through the layer below's ReLU or none; m == 0 when
 * the top is the lowest layer: none) and its weight gradient; n_below
 * dense stages under it (below[0] the lowest), whose forwards run first and
 * whose gradients follow the top's; and the pool's gradient of the
 * convolution stage under them, if any. In order (host/train/head.c): the
 * forwards up, the loss, the top's input gradient, then each stage's weight
 * gradient and the input gradient under it, down, then the pool's gradient.
 * A backend may run them as one, the weight gradients where their inputs
 * are ready.
 */
struct head_req {
	struct gemm_req forward;
	struct xent_req loss;
	struct gemm_req input_grad, weight_grad;
	int n_below;
	struct head_below below[HEAD_MAX_BELOW];
	/*
	 * Optional (pool.conv non-NULL): the convolution stage under the lowest
	 * dense stage, whose pool's gradient comes last, into that stage's dz:
	 * ->pool_backward(&pool, the lowest stage's input gradient, pool_y,
	 * pool_arg, pool_dz). pool_layer: its name, for labels.
	 */
	struct conv_stage pool;
	const char *pool_layer;
	const float *pool_y;
	const int32_t *pool_arg;
	float *pool_dz;
};

/* How the problems a backend meets from now on are planned (BACKEND_PLAN_POLICY). */
enum plan_policy {
	PLAN_MEASURE = 0,   /* time every way to run it, keep the fastest */
	PLAN_HEURISTIC = 1, /* the library heuristic's first choice, untimed */
};

/* A backend's switches (->set): each 0 or 1 unless said otherwise. */
enum backend_switch {
	/* GEMMs on TF32 tensor cores (inputs rounded to a 10-bit mantissa, float32 sums); default 0. */
	BACKEND_TF32,
	/*
	 * 1, the default where the device has it: a kernel may start while the one
	 * before it ends (programmatic dependent launch); 0: once it has ended.
	 */
	BACKEND_PDL,
	/*
	 * 1, the default where the device can: the GEMMs sent beside
	 * (gemm_req.beside) run on a second stream, alongside the ops that follow
	 * them until the join; 0: in order. The results are the same.
	 */
	BACKEND_SIDE_STREAM,
	/* enum plan_policy: how the problems met from now on are planned. */
	BACKEND_PLAN_POLICY,
	/*
	 * 1: every rank meets the problems that follow together, in the same
	 * order (a training step): rank 0 decides and every rank takes its
	 * choice; 0: each rank takes the heuristic's on its own (scoring).
	 */
	BACKEND_PLAN_COLLECTIVE,
};

/* What ->plan_text writes. */
enum plan_text_kind {
	PLAN_KEPT,   /* what a checkpoint keeps: the way chosen for each problem */
	PLAN_RECORD, /* the --metrics record's fields: every way weighed and its times too */
	PLAN_TABLE,  /* the same for people (--verbose) */
};

struct backend_ops {
	const char *name; /* "host" or "cuda" */

	/* Memory: alloc returns zero-filled memory, NULL when out of memory. */
	void *(*alloc)(void *ctx, size_t bytes);
	void (*free)(void *ctx, void *p);
	void (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
	void (*download)(void *ctx, void *dst, const void *src, size_t bytes);

	/* C = epilogue(alpha * op(A) * op(B) + beta * C), row-major (see gemm_map.h). */
	void (*gemm)(void *ctx, const struct gemm_req *r);
	/*
	 * Optional: the GEMMs sent beside (gemm_req.beside) are done before any op
	 * that follows. A backend that runs everything in order needs none.
	 */
	void (*join)(void *ctx);
	/*
	 * Optional: bytes of the record a GEMM_EPILOGUE_BIAS_RELU of (rows, cols)
	 * outputs keeps for a later GEMM_EPILOGUE_DRELU (gemm_map.h); NULL or 0:
	 * the backend keeps none, and the output itself decides.
	 */
	size_t (*relu_mask_bytes)(void *ctx, int rows, int cols);
	/*
	 * Optional: 1 when the backend's convolution weight gradients read their
	 * input x (gemm_req.b_im2col) and never B: a step then keeps no im2col
	 * matrix (conv_forward gets cols NULL, the weight gradient B NULL).
	 * NULL or 0: the forward keeps cols for the weight gradient.
	 */
	int (*conv_wgrad_reads_x)(void *ctx);

	/* A batch gather (struct gather_req). */
	void (*gather)(void *ctx, const struct gather_req *g);
	/* *cursor += delta, in stream order. */
	void (*advance)(void *ctx, int32_t *cursor, int delta);

	/* Softmax cross-entropy, its gradient and the step's counters (struct xent_req). */
	void (*softmax_xent)(void *ctx, const struct xent_req *r);
	/* Optional: struct head_req's ops as the backend plans them; NULL: backend_head runs them one by one. */
	void (*head)(void *ctx, const struct head_req *r);
	/* hits (rows) += argmax_hit_row_elem(logits row, label). */
	void (*argmax_hits)(void *ctx, const float *logits, const int32_t *labels, int rows,
			    int cols, int32_t *hits);
	/*
	 * For i < n: sgd_update_elem(&p[i], g[i], &v[i], lr[counters->step - 1],
	 * momentum, weight_decay). lr: a table of rates in backend memory, read
	 * when the op runs with the counters (the step's loss op has counted it).
	 * then, unless NULL: the next batch's gather, after the update (the CUDA
	 * backend runs both in one launch).
	 */
	void (*sgd_update)(void *ctx, float *p, const float *g, float *v, size_t n, const float *lr,
			   const struct step_counters *counters, float momentum, float weight_decay,
			   const struct gather_req *then);
	/*
	 * AdamW: with s = adamw_step_elem(lr[counters->step - 1], counters->updates, h),
	 * for i < n adamw_update_elem(&p[i], g[i], &m[i], &v[i], h, s); m, v (n)
	 * the moments; then as for sgd_update.
	 */
	void (*adamw_update)(void *ctx, float *p, const float *g, float *m, float *v, size_t n,
			     const float *lr, const struct step_counters *counters,
			     struct adamw_hyper h, const struct gather_req *then);
	/*
	 * Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_),
	 * on the backend: *norm = the 2-norm of g (n), its sum of squares in
	 * elem.h's fixed order (CLIP_PARTS), then with coef =
	 * clip_coef_elem(*norm, max_norm), where clip_scales_elem(coef), for
	 * i < n: g[i] = scale_elem(g[i], coef). norm: one float of backend
	 * memory, written and read on the backend (nothing waits for the host).
	 */
	void (*clip_grad_norm)(void *ctx, float *g, size_t n, float max_norm, float *norm);

	/* A convolution stage's forward pass (struct conv_stage): x, W, b -> y, arg, cols. */
	void (*conv_forward)(void *ctx, const struct conv_stage *s, const float *x, const float *w,
			     const float *b, float *y, int32_t *arg, float *cols);
	/*
	 * The gradient at a stage's pre-activation, dz (oc, oh, ow, rows), from
	 * dy, the gradient at its output y (layout as y): each pixel takes
	 * maxpool_backward_elem of its window's dy, through the ReLU
	 * (relu_backward_elem against the window's y, which is the ReLU's output
	 * at the window's maximum); 0 where it was not the maximum.
	 */
	void (*pool_backward)(void *ctx, const struct conv_stage *s, const float *dy, const float *y,
			      const int32_t *arg, float *dz);
	/*
	 * The gradient wrt x of a stage, dz (oc, oh, ow, rows) -> dx = conv^T(dz, W)
	 * (c, h, w, rows), taken on through the stage below (which made x: its
	 * y, arg; x is below's y) as ->pool_backward: dz_below (c', oh', ow', rows).
	 */
	void (*conv_backward_data)(void *ctx, const struct conv_stage *s, const float *w,
				   const float *dz, const struct conv_stage *below,
				   const float *below_y, const int32_t *below_arg, float *dz_below);

	/*
	 * Optional, micro-batch mode (docs/exact.md): a step's gradients summed
	 * over its micro-batches. grad_accumulate: for i < n, acc[i] =
	 * grad_add_elem(acc[i], g[i]). fixed_accumulate (--exact), acc holding
	 * n + 2 int64: for i < n, q = fixed_encode_elem(g[i], limit, &bad),
	 * acc[i] = q when first, else acc[i] + q; the count of elements out of
	 * range (bad) added to acc[n] (first or not: fixed_decode zeroes it).
	 * allreduce_i64: the in-place integer sum of buf (n) over all ranks
	 * (exact, so in any order); a step reduces acc[0..n], its count with
	 * its sums. fixed_decode: for i < n, g[i] = fixed_decode_elem(acc[i]);
	 * then acc[n + 1] += acc[n] and acc[n] = 0, so that acc[n + 1] holds
	 * the count of every step since the buffer was zeroed and the host may
	 * read it when it reads anything else, not after every step (a device
	 * backend counts with an integer atomic add: an integer sum, the same
	 * in any order). A backend has all four or none.
	 */
	void (*grad_accumulate)(void *ctx, float *acc, const float *g, size_t n);
	void (*fixed_accumulate)(void *ctx, int64_t *acc, const float *g, size_t n, double limit,
				 int first);
	void (*fixed_decode)(void *ctx, float *g, int64_t *acc, size_t n);
	void (*allreduce_i64)(void *ctx, int64_t *buf, size_t n);

	/* In-place collective over all ranks of the job. */
	void (*allreduce)(void *ctx, float *buf, size_t n, enum reduce_op op);
	void (*broadcast)(void *ctx, float *buf, size_t n, int root);

	/* Optional: wait for all queued work. NULL when ops are synchronous. */
	void (*synchronize)(void *ctx);

	/*
	 * Optional step capture (CUDA graphs). capture_begin starts recording the
	 * ops that follow; capture_end returns a replayable handle (NULL on
	 * failure, and ops then run normally); replay runs it once more;
	 * graph_nodes says how many nodes (kernels, copies, ...) it holds.
	 */
	int (*capture_begin)(void *ctx);
	void *(*capture_end)(void *ctx);
	void (*replay)(void *ctx, void *graph);
	void (*graph_destroy)(void *ctx, void *graph);
	size_t (*graph_nodes)(void *ctx, void *graph);

	/*
	 * Optional collective deadline (docs/reliability.md). set_timeout: an
	 * allreduce or broadcast not complete after `seconds` (0: no deadline)
	 * ends the job: each rank that waits prints
	 *   rank R on HOST: allreduce at epoch E step S not complete after T s
	 * on stderr and the job is aborted with status 1. set_position: the epoch
	 * and step (as in the loss lines) that the collectives which follow belong
	 * to, for that message, or the epoch's step count after its last step
	 * (what follows is no step); called every launch, so it must be cheap.
	 */
	void (*set_timeout)(void *ctx, double seconds);
	void (*set_position)(void *ctx, int epoch, int step);

	/* Optional: set a switch (enum backend_switch); 0, or -1 where the backend has none such. */
	int (*set)(void *ctx, enum backend_switch sw, int value);

	/*
	 * Optional plans: how the backend runs each problem it met (a GEMM's
	 * shapes, a convolution's, ...: docs/gpu.md, "Plans"), as a text the
	 * program keeps, prints and hands back without reading it (a JSON
	 * object of the backend's own). plan_text: the plan so far, as `kind`
	 * says (malloc'd, the caller frees). plan_follow, collective: run the
	 * problems `text` names the way it names, each reporting `source`
	 * ("checkpoint", "gpu-plan-from") as whose plan it is; 0 when followed,
	 * 1 when set aside because some rank's device or library is not the
	 * plan's (problems are then planned anew; why says which rank and how),
	 * 2 when text is no plan (why says what is wrong).
	 */
	char *(*plan_text)(void *ctx, enum plan_text_kind kind);
	int (*plan_follow)(void *ctx, const char *text, const char *source, char *why,
			   size_t whylen);

	/*
	 * Optional: more of the run's summary line, " key=value" pairs ("" for
	 * none), into buf (the CUDA simulator's modelled step: sim_step_us=).
	 */
	void (*summary)(void *ctx, char *buf, size_t len);

	/*
	 * Optional timing (--profile): an event marks a point in the order of the
	 * backend's work; event_us waits for both events and gives the
	 * microseconds between them (device time on a GPU, the clock on the host,
	 * whose ops are done when they return).
	 */
	void *(*event_create)(void *ctx);
	void (*event_record)(void *ctx, void *ev);
	double (*event_us)(void *ctx, void *start, void *end);
	void (*event_destroy)(void *ctx, void *ev);
	/*
	 * Optional: what the ops that follow are for (a layer's name, a phase:
	 * "fc1", "forward"), for a profile's table (host/train/profile.c, which
	 * wraps a backend); the backends themselves leave it NULL.
	 */
	void (*label)(void *ctx, const char *layer, const char *phase);

	void (*destroy)(void *ctx);
};

struct backend {
	const struct backend_ops *ops;
	void *ctx;
	char device[128]; /* what runs the math, for logs: "cpu" or the GPU's name */
	char fallback[32]; /* --backend auto on the host although GPUs are present: why (a cuda_probe reason); else "" */
};

/*
 * The wrappers: callers (the loop, the model, the tests) use these only; the
 * table itself is for the backends' own files. Each hides the context
 * argument, and the optional entries answer as documented above when absent.
 */
static inline void *backend_alloc(const struct backend *b, size_t bytes)
{
	return b->ops->alloc(b->ctx, bytes);
}
static inline void backend_free(const struct backend *b, void *p)
{
	if (p)
		b->ops->free(b->ctx, p);
}
static inline void backend_upload(const struct backend *b, void *dst, const void *src,
				  size_t bytes)
{
	b->ops->upload(b->ctx, dst, src, bytes);
}
static inline void backend_download(const struct backend *b, void *dst, const void *src,
				    size_t bytes)
{
	b->ops->download(b->ctx, dst, src, bytes);
}
static inline void backend_gemm(const struct backend *b, const struct gemm_req *r)
{
	b->ops->gemm(b->ctx, r);
}
static inline void backend_join(const struct backend *b)
{
	if (b->ops->join)
		b->ops->join(b->ctx);
}
static inline size_t backend_relu_mask_bytes(const struct backend *b, int rows, int cols)
{
	return b->ops->relu_mask_bytes ? b->ops->relu_mask_bytes(b->ctx, rows, cols) : 0;
}
static inline int backend_conv_wgrad_reads_x(const struct backend *b)
{
	return b->ops->conv_wgrad_reads_x ? b->ops->conv_wgrad_reads_x(b->ctx) : 0;
}
static inline void backend_gather(const struct backend *b, const struct gather_req *g)
{
	b->ops->gather(b->ctx, g);
}
static inline void backend_advance(const struct backend *b, int32_t *cursor, int delta)
{
	b->ops->advance(b->ctx, cursor, delta);
}
static inline void backend_softmax_xent(const struct backend *b, const struct xent_req *r)
{
	b->ops->softmax_xent(b->ctx, r);
}
static inline void backend_argmax_hits(const struct backend *b, const float *logits,
				       const int32_t *labels, int rows, int cols, int32_t *hits)
{
	b->ops->argmax_hits(b->ctx, logits, labels, rows, cols, hits);
}
static inline void backend_sgd_update(const struct backend *b, float *p, const float *g,
				      float *v, size_t n, const float *lr,
				      const struct step_counters *counters, float momentum,
				      float weight_decay, const struct gather_req *then)
{
	b->ops->sgd_update(b->ctx, p, g, v, n, lr, counters, momentum, weight_decay, then);
}
static inline void backend_adamw_update(const struct backend *b, float *p, const float *g,
					float *m, float *v, size_t n, const float *lr,
					const struct step_counters *counters,
					struct adamw_hyper h, const struct gather_req *then)
{
	b->ops->adamw_update(b->ctx, p, g, m, v, n, lr, counters, h, then);
}
static inline void backend_clip_grad_norm(const struct backend *b, float *g, size_t n,
					  float max_norm, float *norm)
{
	b->ops->clip_grad_norm(b->ctx, g, n, max_norm, norm);
}
static inline void backend_conv_forward(const struct backend *b, const struct conv_stage *s,
					const float *x, const float *w, const float *bias,
					float *y, int32_t *arg, float *cols)
{
	b->ops->conv_forward(b->ctx, s, x, w, bias, y, arg, cols);
}
static inline void backend_pool_backward(const struct backend *b, const struct conv_stage *s,
					 const float *dy, const float *y, const int32_t *arg,
					 float *dz)
{
	b->ops->pool_backward(b->ctx, s, dy, y, arg, dz);
}
static inline void backend_conv_backward_data(const struct backend *b,
					      const struct conv_stage *s, const float *w,
					      const float *dz, const struct conv_stage *below,
					      const float *below_y, const int32_t *below_arg,
					      float *dz_below)
{
	b->ops->conv_backward_data(b->ctx, s, w, dz, below, below_y, below_arg, dz_below);
}
static inline void backend_allreduce(const struct backend *b, float *buf, size_t n,
				     enum reduce_op op)
{
	b->ops->allreduce(b->ctx, buf, n, op);
}
/* Whether the backend runs micro-batch mode's ops (->grad_accumulate and the fixed-point ones). */
static inline int backend_can_accumulate(const struct backend *b)
{
	return b->ops->grad_accumulate && b->ops->fixed_accumulate && b->ops->fixed_decode &&
	       b->ops->allreduce_i64;
}
static inline void backend_grad_accumulate(const struct backend *b, float *acc, const float *g,
					   size_t n)
{
	b->ops->grad_accumulate(b->ctx, acc, g, n);
}
static inline void backend_fixed_accumulate(const struct backend *b, int64_t *acc, const float *g,
					    size_t n, double limit, int first)
{
	b->ops->fixed_accumulate(b->ctx, acc, g, n, limit, first);
}
static inline void backend_fixed_decode(const struct backend *b, float *g, int64_t *acc,
					size_t n)
{
	b->ops->fixed_decode(b->ctx, g, acc, n);
}
static inline void backend_allreduce_i64(const struct backend *b, int64_t *buf, size_t n)
{
	b->ops->allreduce_i64(b->ctx, buf, n);
}
static inline void backend_broadcast(const struct backend *b, float *buf, size_t n, int root)
{
	b->ops->broadcast(b->ctx, buf, n, root);
}
static inline void backend_synchronize(const struct backend *b)
{
	if (b->ops->synchronize)
		b->ops->synchronize(b->ctx);
}
/*
 * Whether an op's work is done when its call returns (no ->synchronize: the
 * host backend's), so that reading a result waits for nothing.
 */
static inline int backend_is_synchronous(const struct backend *b)
{
	return !b->ops->synchronize;
}
static inline int backend_can_capture(const struct backend *b)
{
	return b->ops->capture_begin && b->ops->capture_end && b->ops->replay;
}
/* 0 when recording started (the ops that follow are recorded, not run). */
static inline int backend_capture_begin(const struct backend *b)
{
	return backend_can_capture(b) ? b->ops->capture_begin(b->ctx) : 1;
}
/* The recorded ops as a replayable handle, or NULL (they have not run either way). */
static inline void *backend_capture_end(const struct backend *b)
{
	return b->ops->capture_end(b->ctx);
}
static inline void backend_replay(const struct backend *b, void *graph)
{
	b->ops->replay(b->ctx, graph);
}
static inline void backend_graph_destroy(const struct backend *b, void *graph)
{
	if (graph && b->ops->graph_destroy)
		b->ops->graph_destroy(b->ctx, graph);
}
/* Nodes of a captured step; 0 for none (no graph, or a backend that cannot say). */
static inline size_t backend_graph_nodes(const struct backend *b, void *graph)
{
	return graph && b->ops->graph_nodes ? b->ops->graph_nodes(b->ctx, graph) : 0;
}
static inline void backend_set_timeout(const struct backend *b, double seconds)
{
	if (b->ops->set_timeout)
		b->ops->set_timeout(b->ctx, seconds);
}
static inline void backend_set_position(const struct backend *b, int epoch, int step)
{
	if (b->ops->set_position)
		b->ops->set_position(b->ctx, epoch, step);
}
/* Set a switch (enum backend_switch): 0, or -1 where the backend has none such. */
static inline int backend_set(const struct backend *b, enum backend_switch sw, int value)
{
	return b->ops->set ? b->ops->set(b->ctx, sw, value) : -1;
}
/* Whether the backend plans its ops (->plan_text). */
static inline int backend_has_plan(const struct backend *b)
{
	return b->ops->plan_text != NULL;
}
/* The plan as `kind` says (malloc'd), or NULL for a backend without plans. */
static inline char *backend_plan_text(const struct backend *b, enum plan_text_kind kind)
{
	return b->ops->plan_text ? b->ops->plan_text(b->ctx, kind) : NULL;
}
/* 0: followed (or nothing to follow); 1: set aside; 2: no plan (why says which). */
static inline int backend_plan_follow(const struct backend *b, const char *text, const char *source,
				      char *why, size_t whylen)
{
	return b->ops->plan_follow ? b->ops->plan_follow(b->ctx, text, source, why, whylen) : 0;
}
/* The backend's part of the summary line, into buf ("" for none). */
static inline void backend_summary(const struct backend *b, char *buf, size_t len)
{
	buf[0] = '\0';
	if (b->ops->summary)
		b->ops->summary(b->ctx, buf, len);
}
/* Whether the backend can time its ops (->event_*). */
static inline int backend_has_events(const struct backend *b)
{
	return b->ops->event_create && b->ops->event_record && b->ops->event_us &&
	       b->ops->event_destroy;
}
static inline void *backend_event_create(const struct backend *b)
{
	return b->ops->event_create(b->ctx);
}
static inline void backend_event_record(const struct backend *b, void *ev)
{
	b->ops->event_record(b->ctx, ev);
}
static inline double backend_event_us(const struct backend *b, void *start, void *end)
{
	return b->ops->event_us(b->ctx, start, end);
}
static inline void backend_event_destroy(const struct backend *b, void *ev)
{
	if (ev)
		b->ops->event_destroy(b->ctx, ev);
}
static inline void backend_label(const struct backend *b, const char *layer, const char *phase)
{
	if (b->ops->label)
		b->ops->label(b->ctx, layer, phase);
}
/* The input gradient of a head's lowest dense stage. */
static inline const struct gemm_req *head_lowest_input_grad(const struct head_req *r)
{
	return r->n_below ? &r->below[0].input_grad : &r->input_grad;
}

/* "host" or "cuda". */
static inline const char *backend_name(const struct backend *b)
{
	return b->ops->name;
}

/* Release what the backend holds; *b is zeroed (a zeroed backend may be destroyed again). */
static inline void backend_destroy(struct backend *b)
{
	if (b->ops && b->ops->destroy)
		b->ops->destroy(b->ctx);
	memset(b, 0, sizeof(*b));
}

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_BACKEND_H */
