/*
 * host_internal.h - what the host backend's files share: the context, its
 * scratch buffers (cpu/scratch_host.c) and the GEMM (cpu/gemm_host.c), used by
 * the ops table (cpu/backend_host.c) and the convolution stages
 * (cpu/conv_host.c) alike, so neither of those two calls into the other's
 * file but for the convolution entries. Not part of the backend interface
 * (include/backend.h).
 */
#ifndef MNIST_DDP_HOST_INTERNAL_H
#define MNIST_DDP_HOST_INTERNAL_H

#include <stddef.h>

#include <mpi.h>

#include "gemm_map.h"

struct deadline;

/*
 * Scratch buffers the fused ops keep between their steps (a convolution's
 * output before its pool, a transposed gradient, ...): one per use, grown
 * on demand and kept for the next step.
 */
enum host_scratch_slot {
	HOST_SCRATCH_CONV,   /* a stage's convolution output, or its input's gradient */
	HOST_SCRATCH_COLS,   /* an im2col matrix or its gradient */
	HOST_SCRATCH_POOLED, /* a pooled output or gradient in the other layout */
	HOST_SCRATCH_GATE,   /* a pooled output, transposed */
	HOST_SCRATCH_ONES,   /* all 1: the bias gradients' GEMM */
	HOST_SCRATCH_SLOTS,
};

struct host_ctx {
	MPI_Comm comm;
	int size;
	struct deadline *watch; /* the job's collective deadline (struct dist), or NULL */
	void *scratch[HOST_SCRATCH_SLOTS];
	size_t scratch_bytes[HOST_SCRATCH_SLOTS];
	size_t ones; /* floats of HOST_SCRATCH_ONES set to 1 */
};

/* The slot's buffer, at least `bytes` long (its content is kept only while it is not grown). */
float *host_scratch(struct host_ctx *h, enum host_scratch_slot slot, size_t bytes);

/* The backend's GEMM (epilogue included): cpu/gemm_host.c. */
void host_gemm(void *ctx, const struct gemm_req *r);

#endif /* MNIST_DDP_HOST_INTERNAL_H */
