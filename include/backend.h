/*
 * backend.h - the compute and communication interface the trainer runs on.
 *
 * A backend is a table of function pointers plus a private context. The host
 * backend (host/backend_host.c: OpenBLAS + MPI_Allreduce) and the CUDA
 * backend (cuda/backend_cuda.cu: kernels + cuBLAS + NCCL) implement it; the
 * training loop, model, sampler, logging and checkpoints see only this file.
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
	/* For i < n: sgd_update_elem(&p[i], g[i], &v[i], lr, momentum). */
	void (*sgd_update)(void *ctx, float *p, const float *g, float *v, size_t n, float lr,
			   float momentum);

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
};

/* Wrappers that hide the context argument and the optional entries. */
static inline void *backend_alloc(const struct backend *b, size_t bytes)
{
	return b->ops->alloc(b->ctx, bytes);
}
static inline void backend_free(const struct backend *b, void *p)
{
	if (p)
		b->ops->free(b->ctx, p);
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

/* Host backend: OpenBLAS GEMM with `threads` threads (0: leave as is), MPI_Allreduce. */
int backend_host_create(const struct dist *d, int threads, struct backend *out);

/*
 * CUDA backend (cuda/backend_cuda.cu), present when built with CUDA.
 * backend_cuda_probe: 1 when a usable device exists for this local rank; else 0
 * and `why` says which CUDA error was seen. backend_cuda_create returns 0, or
 * non-zero with `why` filled.
 */
int backend_cuda_available(void); /* 1 when compiled in */
int backend_cuda_probe(const struct dist *d, char *why, size_t whylen);
int backend_cuda_create(const struct dist *d, struct backend *out, char *why, size_t whylen);

/*
 * Choose and create the backend for `choice` (0 auto, 1 host, 2 cuda: enum
 * backend_choice in config.h). Collective: every rank calls it, and all ranks
 * agree on the outcome before any returns, so none is left waiting.
 * auto: cuda when every rank has a usable device, else host; `why` says which
 * and why. cuda: returns 1 on every rank when any rank has no usable device,
 * `why` saying what this rank saw (its own CUDA error, or which rank failed).
 */
int backend_select(int choice, const struct dist *d, int threads, struct backend *out,
		   char *why, size_t whylen);
void backend_destroy(struct backend *b);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_BACKEND_H */
