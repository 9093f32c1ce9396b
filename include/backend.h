/*
 * backend.h - the compute and communication interface the trainer runs on.
 *
 * A backend is a table of function pointers plus a private context. The host
 * backend (cpu/backend_host.c: OpenBLAS + MPI_Allreduce) and the CUDA
 * backend (cuda/backend_cuda.cu: kernels + cuBLAS + NCCL, a loadable module)
 * implement it; the training loop, model, sampler, logging and checkpoints
 * see only this file.
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
 * convolution stage under them, if any. In order (backend_head_parts): the
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

/*
 * A backend's plan: for each problem it met (a GEMM's shapes, transposes,
 * epilogue and alignments), the way it runs it, chosen among candidates
 * (cuBLASLt's algorithms with the epilogue fused or in kernels of ours,
 * cublasSgemm, ...) by timing each on the device (docs/gpu.md, "Plans").
 * Names are the backend's own, stable for one GPU model and library version:
 * a plan saved in a checkpoint is given back by name.
 */
#define PLAN_NAME_LEN 96
#define PLAN_KEY_LEN 160
#define PLAN_MAX_CANDIDATES 64

struct plan_candidate {
	char name[PLAN_NAME_LEN];
	double us;       /* measured microseconds per run; < 0: not timed */
	double first_us; /* its first run, one launch on the stream, the host's submission
			    between the events; < 0: not run */
};

struct plan_op {
	char key[PLAN_KEY_LEN];  /* the problem, as the backend names it */
	char op[16];             /* "gemm" */
	char shape[64];          /* for people: "nt 6x25x200704 bias_grad" */
	char chosen[PLAN_NAME_LEN];
	char source[16];         /* "measured", "heuristic"; a given plan: "checkpoint", "gpu-plan-from" */
	int n_candidates;        /* what was considered (0 for an entry given back) */
	struct plan_candidate cand[PLAN_MAX_CANDIDATES];
};

struct plan_info {
	char device[128];  /* the GPU's name */
	char library[64];  /* the math library and its version: "cublasLt 130100" */
	char launch[160];  /* how kernels are launched ("programmatic dependent launch"); not saved */
	int n_ops;
	struct plan_op *ops;
	double measure_ms; /* wall time rank 0 spent timing candidates so far; < 0: not known */
	double warm_ms;    /* of it apart: each timed op's first way's first run; < 0: not known */
};

/* How new problems are planned (->plan_mode). */
enum plan_policy {
	PLAN_MEASURE = 0,   /* time every candidate, keep the fastest */
	PLAN_HEURISTIC = 1, /* the library heuristic's first choice, untimed */
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
	 * Optional: on a simulated device (the CUDA simulator, tests/cudasim/
	 * cudasim.h rule 10), the median interval between the starts of
	 * consecutive steps as events stamp them on its modelled clock, in
	 * microseconds (NAN before two steps were timed); negative on a real device.
	 */
	double (*sim_step_us)(void *ctx);

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

	/*
	 * Optional: 1 lets GEMMs run on TF32 tensor cores (inputs rounded to a
	 * 10-bit mantissa, float32 sums); 0, the default, keeps float32. NULL: the
	 * backend has no such mode.
	 */
	void (*set_tf32)(void *ctx, int on);

	/*
	 * Optional: 0 launches every kernel only once the one before it has
	 * ended; 1, the default where the device has it, lets a kernel start
	 * while the one before it ends (programmatic dependent launch, compute
	 * capability 9.0 and later; the results are the same).
	 */
	void (*set_pdl)(void *ctx, int on);

	/*
	 * Optional: 1, the default where the device can, runs the GEMMs sent
	 * beside (gemm_req.beside) on a second stream, alongside the ops that
	 * follow them until the join; 0 runs them in order (the results are the
	 * same).
	 */
	void (*set_side_stream)(void *ctx, int on);

	/*
	 * Optional plans (struct plan_info). plan_mode: how problems met from now
	 * on are planned, and whether every rank meets them together (collective:
	 * a training step, the same ops in the same order on every rank), in
	 * which case rank 0 decides and every rank takes its choice; outside a
	 * collective stretch each rank takes the heuristic's choice on its own.
	 * plan_get: the plan so far, in backend memory valid until the next call.
	 * plan_set: run the problems named in `in` the way it names (a plan from a
	 * checkpoint, or --gpu-plan-from's), each reporting its op's `source`
	 * (whose plan: "checkpoint", "gpu-plan-from"); 0 when taken, 1 when some
	 * rank's device or library is not the plan's (why says which and how;
	 * nothing of it is taken, problems are planned anew). Collective.
	 */
	void (*plan_mode)(void *ctx, enum plan_policy policy, int collective);
	void (*plan_get)(void *ctx, struct plan_info *out);
	int (*plan_set)(void *ctx, const struct plan_info *in, char *why, size_t whylen);

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
static inline void backend_broadcast(const struct backend *b, float *buf, size_t n, int root)
{
	b->ops->broadcast(b->ctx, buf, n, root);
}
static inline void backend_synchronize(const struct backend *b)
{
	if (b->ops->synchronize)
		b->ops->synchronize(b->ctx);
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
/* A simulated device's modelled median step, us; negative when there is none. */
static inline double backend_sim_step_us(const struct backend *b)
{
	return b->ops->sim_step_us ? b->ops->sim_step_us(b->ctx) : -1.0;
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
/* Whether the backend offers TF32 GEMMs (->set_tf32). */
static inline int backend_has_tf32(const struct backend *b)
{
	return b->ops->set_tf32 != NULL;
}
static inline void backend_set_tf32(const struct backend *b, int on)
{
	if (b->ops->set_tf32)
		b->ops->set_tf32(b->ctx, on);
}
static inline void backend_set_pdl(const struct backend *b, int on)
{
	if (b->ops->set_pdl)
		b->ops->set_pdl(b->ctx, on);
}
static inline void backend_set_side_stream(const struct backend *b, int on)
{
	if (b->ops->set_side_stream)
		b->ops->set_side_stream(b->ctx, on);
}
/* Whether the backend plans its ops (->plan_get). */
static inline int backend_has_plan(const struct backend *b)
{
	return b->ops->plan_get != NULL;
}
static inline void backend_plan_mode(const struct backend *b, enum plan_policy policy,
				     int collective)
{
	if (b->ops->plan_mode)
		b->ops->plan_mode(b->ctx, policy, collective);
}
/* The plan so far; n_ops 0 for a backend without plans. */
static inline void backend_plan_get(const struct backend *b, struct plan_info *out)
{
	memset(out, 0, sizeof(*out));
	if (b->ops->plan_get)
		b->ops->plan_get(b->ctx, out);
}
/* 0: taken (or nothing to take); 1: not runnable here, why says what differs. */
static inline int backend_plan_set(const struct backend *b, const struct plan_info *in,
				   char *why, size_t whylen)
{
	return b->ops->plan_set ? b->ops->plan_set(b->ctx, in, why, whylen) : 0;
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

/* The head of a step (struct head_req) as its ops, in order. */
static inline void backend_head_parts(const struct backend *b, const struct head_req *r,
				      const char *layer)
{
	for (int i = 0; i < r->n_below; i++) {
		backend_label(b, r->below[i].layer, "forward");
		backend_gemm(b, &r->below[i].forward);
	}
	backend_label(b, layer, "forward");
	backend_gemm(b, &r->forward);
	backend_label(b, "", "loss");
	backend_softmax_xent(b, &r->loss);
	if (r->input_grad.m > 0) {
		backend_label(b, layer, "input grad");
		backend_gemm(b, &r->input_grad);
	}
	if (r->weight_grad.m > 0) {
		backend_label(b, layer, "weight grad");
		backend_gemm(b, &r->weight_grad);
	}
	for (int i = r->n_below - 1; i >= 0; i--) {
		const struct head_below *s = &r->below[i];
		if (s->weight_grad.m > 0) {
			backend_label(b, s->layer, "weight grad");
			backend_gemm(b, &s->weight_grad);
		}
		if (s->input_grad.m > 0) {
			backend_label(b, s->layer, "input grad");
			backend_gemm(b, &s->input_grad);
		}
	}
	if (r->pool.conv) {
		backend_label(b, r->pool_layer, "pool grad");
		backend_pool_backward(b, &r->pool, head_lowest_input_grad(r)->c, r->pool_y,
				      r->pool_arg, r->pool_dz);
	}
}
/* The head of a step: the backend's op, or its three ops in order. */
static inline void backend_head(const struct backend *b, const struct head_req *r,
				const char *layer)
{
	if (!b->ops->head) {
		backend_head_parts(b, r, layer);
		return;
	}
	backend_label(b, layer, "head");
	b->ops->head(b->ctx, r);
}
/* "host" or "cuda". */
static inline const char *backend_name(const struct backend *b)
{
	return b->ops->name;
}

/* Host backend: OpenBLAS GEMM with `threads` threads (0: leave as is), MPI_Allreduce. */
int backend_host_create(const struct dist *d, int threads, struct backend *out);

/*
 * What a CUDA probe found on one rank, worst last (so the worst over the ranks
 * is their maximum). Only ABSENT (no driver or no device: a CPU machine) may
 * pass quietly; UNUSABLE means GPUs are there but cannot run this program
 * (driver too old, system not ready, no kernel image, device busy, two ranks
 * on one GPU, ...): the GPU suite fails on it and --backend auto says so.
 */
enum cuda_verdict {
	CUDA_USABLE = 0,
	CUDA_ABSENT = 1,
	CUDA_UNUSABLE = 2,
};
struct cuda_probe {
	enum cuda_verdict verdict;
	char reason[32]; /* a key for summaries: "no-driver", "driver-too-old", "shared-gpu", ... */
	char why[448];   /* what was seen, for people */
	int node_gpus;   /* distinct GPUs the ranks of this node see together; 0: unknown */
};

/*
 * Loadable backends. The CUDA backend is a shared module (build/libmnist-cuda.so,
 * cuda/backend_module.cu) that the program opens with dlopen only when
 * --backend is auto or cuda, so a host run opens no CUDA library and a binary
 * built with CUDA starts where CUDA is missing. The module exports one
 * function, BACKEND_MODULE_ENTRY, that returns its table below. It carries no
 * copy of the host program: what it calls of it (check_fail, die, check_rank,
 * ...) resolves to the executable's own (linked with ENABLE_EXPORTS), where
 * the rank and host identity live.
 *
 * A module from another build is refused: abi and interface come first and
 * keep their place in every version, so that the loader can read them from
 * any module. BACKEND_MODULE_ABI is raised by hand when this table changes;
 * interface (MNIST_DDP_INTERFACE_ID) is a hash of the shared headers in
 * include/, computed by CMake, so a header changed without that is caught too.
 */
#define BACKEND_MODULE_ABI 6
#define BACKEND_MODULE_ENTRY "backend_module_entry"

struct backend_module {
	int abi;               /* BACKEND_MODULE_ABI of the module's build */
	const char *interface; /* MNIST_DDP_INTERFACE_ID of the module's build */
	/*
	 * This rank's verdict on the backend's devices. Collective over the ranks
	 * of the node (they compare the devices they would use): every rank of
	 * the job calls it, or none.
	 */
	void (*probe)(const struct dist *d, struct cuda_probe *out);
	/* Collective over the job: 0, or non-zero with `why` filled, the same outcome on every rank. */
	int (*create)(const struct dist *d, struct backend *out, char *why, size_t whylen);
};

/* Defined by each module: the one symbol it exports. */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const struct backend_module *backend_module_entry(void);
typedef const struct backend_module *(*backend_module_entry_fn)(void);

/*
 * Collective: can every rank of the job run the CUDA backend? Loads the
 * module (`module`, or NULL for libmnist-cuda.so beside the executable, after
 * checking that a CUDA driver loads) on every rank,
 * then, when all loaded, runs its probe. Returns the worst verdict of any rank;
 * *m is this rank's module (NULL when it did not load), *mine what this rank
 * saw, and on every rank *worst_seen and *bad_rank what the lowest rank with
 * the worst verdict saw.
 */
enum cuda_verdict backend_cuda_job_probe(const struct dist *d, const char *module,
					 const struct backend_module **m, struct cuda_probe *mine,
					 struct cuda_probe *worst_seen, int *bad_rank);

/*
 * Choose and create the backend for `choice` (0 auto, 1 host, 2 cuda: enum
 * backend_choice in config.h). Collective: every rank calls it, and all ranks
 * agree on the outcome before any returns, so none is left waiting.
 * auto: cuda when every rank has a usable device, else host; `why` says which
 * and why, as a warning when GPUs are present but unusable (out->fallback then
 * names the reason). cuda: returns 1 on every rank when any rank cannot run
 * it, `why` saying what this rank saw (no module, no driver, a library
 * missing, a CUDA error, or which rank failed). A host choice opens no CUDA
 * library.
 */
int backend_select(int choice, const struct dist *d, int threads, struct backend *out,
		   char *why, size_t whylen);

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
