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

struct backend_ops {
	const char *name; /* "host" or "cuda" */

	/* Memory: alloc returns zero-filled memory, NULL when out of memory. */
	void *(*alloc)(void *ctx, size_t bytes);
	void (*free)(void *ctx, void *p);
	void (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
	void (*download)(void *ctx, void *dst, const void *src, size_t bytes);

	/* C = alpha * op(A) * op(B) + beta * C, row-major (see gemm_map.h). */
	void (*gemm)(void *ctx, const struct gemm_req *r);

	/*
	 * Batch gather: for i < count, e = index[*cursor + i];
	 *   x[i, :] = normalize_pixel_elem(images[e, :]), y[i] = labels[e].
	 * images (n, pixels) uint8, labels (n) uint8, index (len) int32,
	 * cursor: one int32 in backend memory (so a captured step can replay),
	 * x (count, pixels), y (count) int32.
	 */
	void (*gather)(void *ctx, const uint8_t *images, const uint8_t *labels, int pixels,
		       const int32_t *index, const int32_t *cursor, int count, float *x,
		       int32_t *y);
	/* *cursor += delta, in stream order. */
	void (*advance)(void *ctx, int32_t *cursor, int delta);

	/* y (rows, cols) = bias_act_elem(y, bias[col], relu), bias (cols). */
	void (*bias_act)(void *ctx, float *y, const float *bias, int rows, int cols, int relu);
	/* dy (n) = relu_backward_elem(dy, y), y (n) the ReLU's output. */
	void (*relu_backward)(void *ctx, float *dy, const float *y, size_t n);
	/*
	 * logits (rows, cols), labels (rows) -> row_loss (rows) and
	 * dlogits (rows, cols) = scale * (softmax - onehot); dlogits may be NULL.
	 */
	void (*softmax_xent)(void *ctx, const float *logits, const int32_t *labels, int rows,
			     int cols, float scale, float *row_loss, float *dlogits);
	/* hits (rows) += argmax_hit_row_elem(logits row, label). */
	void (*argmax_hits)(void *ctx, const float *logits, const int32_t *labels, int rows,
			    int cols, int32_t *hits);
	/*
	 * For i < n: sgd_update_elem(&p[i], g[i], &v[i], lr[*step], momentum, weight_decay).
	 * lr: a table of rates, step: one int32, both in backend memory and read
	 * when the op runs, so a captured step replays with its own step's rate.
	 */
	void (*sgd_update)(void *ctx, float *p, const float *g, float *v, size_t n, const float *lr,
			   const int32_t *step, float momentum, float weight_decay);
	/*
	 * AdamW: with s = adamw_step_elem(lr[*step], *t + 1, h), for i < n
	 * adamw_update_elem(&p[i], g[i], &m[i], &v[i], h, s); then *t += 1.
	 * t, the count of updates done, is one int32 in backend memory that the
	 * op itself advances, so a captured step replays with its own bias
	 * correction; lr and step as for sgd_update. m, v (n) the moments.
	 */
	void (*adamw_update)(void *ctx, float *p, const float *g, float *m, float *v, size_t n,
			     const float *lr, const int32_t *step, int32_t *t, struct adamw_hyper h);

	/*
	 * Convolution and pooling, batch-innermost (layouts in conv_shape.h).
	 * im2col: x (c, h, w, batch) -> cols (c*k*k, oh*ow*batch), each entry
	 * im2col_elem.
	 */
	void (*im2col)(void *ctx, const float *x, const struct conv_shape *s, int batch,
		       float *cols);
	/* col2im as a gather: dx (c, h, w, batch), each pixel col2im_elem over dcols (c*k*k, oh*ow*batch). */
	void (*col2im)(void *ctx, const float *dcols, const struct conv_shape *s, int batch,
		       float *dx);
	/* y (channels, n): y[c, i] = bias_act_elem(y[c, i], bias[c], relu), bias (channels). */
	void (*channel_bias_act)(void *ctx, float *y, const float *bias, int channels, size_t n,
				 int relu);
	/*
	 * x (c, h, w, batch) -> y (c, oh, ow, batch), and arg (c, oh, ow, batch)
	 * the offset of each window's max: maxpool_window_elem.
	 */
	void (*maxpool)(void *ctx, const float *x, const struct pool_shape *s, int batch, float *y,
			int32_t *arg);
	/* dx (c, h, w, batch) = maxpool_backward_elem of dy (c, oh, ow, batch) and arg; 0 outside every window. */
	void (*maxpool_backward)(void *ctx, const float *dy, const int32_t *arg,
				 const struct pool_shape *s, int batch, float *dx);
	/* y (cols, rows) = x (rows, cols) transposed: y[j, i] = x[i, j]. */
	void (*transpose)(void *ctx, const float *x, int rows, int cols, float *y);

	/* In-place collective over all ranks of the job. */
	void (*allreduce)(void *ctx, float *buf, size_t n, enum reduce_op op);
	void (*broadcast)(void *ctx, float *buf, size_t n, int root);

	/* Optional: wait for all queued work. NULL when ops are synchronous. */
	void (*synchronize)(void *ctx);

	/*
	 * Optional step capture (CUDA graphs). capture_begin starts recording the
	 * ops that follow; capture_end returns a replayable handle (NULL on
	 * failure, and ops then run normally); replay runs it once more.
	 */
	int (*capture_begin)(void *ctx);
	void *(*capture_end)(void *ctx);
	void (*replay)(void *ctx, void *graph);
	void (*graph_destroy)(void *ctx, void *graph);

	/*
	 * Optional collective deadline (docs/reliability.md). set_timeout: an
	 * allreduce or broadcast not complete after `seconds` (0: no deadline)
	 * ends the job: each rank that waits prints
	 *   rank R on HOST: allreduce at epoch E step S not complete after T s
	 * on stderr and the job is aborted with status 1. set_position: the epoch
	 * and step (as in the loss lines) that the collectives which follow belong
	 * to, for that message; called every step, so it must be cheap.
	 */
	void (*set_timeout)(void *ctx, double seconds);
	void (*set_position)(void *ctx, int epoch, int step);

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
static inline void backend_gather(const struct backend *b, const uint8_t *images,
				  const uint8_t *labels, int pixels, const int32_t *index,
				  const int32_t *cursor, int count, float *x, int32_t *y)
{
	b->ops->gather(b->ctx, images, labels, pixels, index, cursor, count, x, y);
}
static inline void backend_advance(const struct backend *b, int32_t *cursor, int delta)
{
	b->ops->advance(b->ctx, cursor, delta);
}
static inline void backend_bias_act(const struct backend *b, float *y, const float *bias,
				    int rows, int cols, int relu)
{
	b->ops->bias_act(b->ctx, y, bias, rows, cols, relu);
}
static inline void backend_relu_backward(const struct backend *b, float *dy, const float *y,
					 size_t n)
{
	b->ops->relu_backward(b->ctx, dy, y, n);
}
static inline void backend_softmax_xent(const struct backend *b, const float *logits,
					const int32_t *labels, int rows, int cols, float scale,
					float *row_loss, float *dlogits)
{
	b->ops->softmax_xent(b->ctx, logits, labels, rows, cols, scale, row_loss, dlogits);
}
static inline void backend_argmax_hits(const struct backend *b, const float *logits,
				       const int32_t *labels, int rows, int cols, int32_t *hits)
{
	b->ops->argmax_hits(b->ctx, logits, labels, rows, cols, hits);
}
static inline void backend_sgd_update(const struct backend *b, float *p, const float *g,
				      float *v, size_t n, const float *lr, const int32_t *step,
				      float momentum, float weight_decay)
{
	b->ops->sgd_update(b->ctx, p, g, v, n, lr, step, momentum, weight_decay);
}
static inline void backend_adamw_update(const struct backend *b, float *p, const float *g,
					float *m, float *v, size_t n, const float *lr,
					const int32_t *step, int32_t *t, struct adamw_hyper h)
{
	b->ops->adamw_update(b->ctx, p, g, m, v, n, lr, step, t, h);
}
static inline void backend_im2col(const struct backend *b, const float *x,
				  const struct conv_shape *s, int batch, float *cols)
{
	b->ops->im2col(b->ctx, x, s, batch, cols);
}
static inline void backend_col2im(const struct backend *b, const float *dcols,
				  const struct conv_shape *s, int batch, float *dx)
{
	b->ops->col2im(b->ctx, dcols, s, batch, dx);
}
static inline void backend_channel_bias_act(const struct backend *b, float *y, const float *bias,
					    int channels, size_t n, int relu)
{
	b->ops->channel_bias_act(b->ctx, y, bias, channels, n, relu);
}
static inline void backend_maxpool(const struct backend *b, const float *x,
				   const struct pool_shape *s, int batch, float *y, int32_t *arg)
{
	b->ops->maxpool(b->ctx, x, s, batch, y, arg);
}
static inline void backend_maxpool_backward(const struct backend *b, const float *dy,
					    const int32_t *arg, const struct pool_shape *s,
					    int batch, float *dx)
{
	b->ops->maxpool_backward(b->ctx, dy, arg, s, batch, dx);
}
static inline void backend_transpose(const struct backend *b, const float *x, int rows, int cols,
				     float *y)
{
	b->ops->transpose(b->ctx, x, rows, cols, y);
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
#define BACKEND_MODULE_ABI 4
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
