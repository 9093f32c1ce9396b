/*
 * backend_cuda.cu - the CUDA backend: the kernels of cuda/kernels.cu, cuBLAS
 * GEMM and an NCCL communicator behind include/backend.h.
 *
 * One rank per GPU: when every GPU of the node is visible to every rank, the
 * rank's local rank (its index among the ranks on its node) is its device;
 * when a rank sees one GPU (srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES set
 * per rank), that one. Fewer visible GPUs than ranks, or two ranks of a node
 * on one GPU, are refused. Every op is queued on one non-blocking compute
 * stream, in call order: the kernels, cuBLAS (set to that stream, with a
 * fixed workspace so that a captured GEMM allocates nothing) and NCCL.
 * ->download and ->synchronize wait for the stream; ->upload waits for its
 * copy, so the host buffer may be reused at once. A step recorded between
 * ->capture_begin and ->capture_end becomes a CUDA graph that ->replay
 * launches on the same stream; whether the capture worked is agreed by all
 * ranks, since NCCL requires a collective to be captured on all or none.
 *
 * NCCL bootstrap: rank 0 calls ncclGetUniqueId, MPI_Bcast carries its bytes
 * over the job's communicator, every rank calls ncclCommInitRank, then one
 * warm-up allreduce on every rank: NCCL 2.22 and later connect a communicator
 * at its first collective, which needs every rank, so connection set-up
 * happens here, not in a captured step nor in a collective that a hung peer
 * never joins. The gradient allreduce is one ncclAllReduce (ncclAvg for
 * REDUCE_MEAN, ncclSum for REDUCE_SUM) on the compute stream; --exact's is
 * one ncclAllReduce of int64 (ncclInt64, ncclSum) of the fixed-point sums.
 *
 * Collective deadline (->set_timeout, ->set_position): NCCL collectives are
 * queued, not waited for, so the deadline applies where the host waits for
 * the stream (->download, ->synchronize, ->upload, ->free, ->destroy) while a
 * queued allreduce or broadcast (also one inside a replayed graph) has not
 * been seen to complete. Past it the rank prints which collective of which
 * step hangs, aborts its communicator and ends the job. The GPU's own kernels
 * cannot hang, so waits with no collective pending are plain stream
 * synchronizations. Copies between the device and pageable host memory return
 * only once they are done, so they come after that wait, never before it.
 *
 * Errors: backend_cuda_probe (cuda/probe.cu) gives a verdict (include/backend.h): absent (no
 * driver, no device), or present but unusable, with a reason and what was
 * seen. backend_cuda_create reports what failed in `why`. It is collective
 * over the job: every rank returns the same outcome, so a rank whose device
 * is fine never waits in NCCL for one whose device failed. Once created,
 * every CUDA, cuBLAS and NCCL call is checked and fatal (cuda/cuda_check.cuh):
 * the communicator is aborted, the message names rank and host, and MPI_Abort
 * ends the job.
 *
 * This file holds the ops and their table; the start (device, stream,
 * cuBLAS, the NCCL bootstrap and warm-up below) and its undoing on failure
 * are cuda/backend_cuda_start.cu's, the plan's and switches' entries
 * cuda/backend_cuda_plan.cu's, the captured steps' and the step's time
 * cuda/backend_cuda_graph.cu's, the context they use cuda/backend_cuda_ctx.cuh's.
 *
 * Built by cmake/cuda.cmake into the module libmnist-cuda.so (its entry point:
 * cuda/backend_module.cu) when MNIST_DDP_CUDA finds the toolkit, cuBLAS and
 * NCCL.
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_module.h"
#include "backend_cuda.h"
#include "check.h"
#include "clock.h"
#include "cuda_check.cuh"
#include "dist.h"
#include "gemm_lt.cuh"
#include "gemm_map.h"
#include "backend_cuda_ctx.cuh"
#include "kernels.h"

/* A pending NCCL error (a peer failed, a network error) is fatal here too. */
static void check_nccl_async(const struct cuda_ctx *c)
{
	ncclResult_t state = ncclSuccess;
	NCCL_CHECK(ncclCommGetAsyncError(c->nccl, &state));
	if (state != ncclSuccess) {
		char text[CUDA_CHECK_MSG_LEN];
		nccl_error_text(state, text, sizeof(text));
		cuda_check_fail("NCCL communicator (asynchronous error)", text, __func__, __FILE__,
				__LINE__);
	}
}

void cuda_note_collective(struct cuda_ctx *c, const char *what)
{
	c->pending.what = what;
	c->pending.epoch = c->epoch;
	c->pending.step = c->step;
}

/* The deadline passed: say which collective hangs, stop NCCL, end the job. */
[[noreturn]] static void deadline_expired(struct cuda_ctx *c)
{
	if (c->pending.epoch < 0)
		fprintf(stderr, "rank %d on %s: %s at start-up not complete after %g s\n", check_rank(),
			check_host(), c->pending.what, c->timeout);
	else
		fprintf(stderr, "rank %d on %s: %s at epoch %d step %d not complete after %g s\n",
			check_rank(), check_host(), c->pending.what, c->pending.epoch, c->pending.step,
			c->timeout);
	fflush(stderr);
	cuda_check_set_comm(NULL);
	ncclCommAbort(c->nccl);
	/* A moment for the other ranks still running to say the same. */
	struct timespec grace = {1, 0};
	nanosleep(&grace, NULL);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/*
 * Wait for all queued work. With a deadline and a collective pending, poll an
 * event instead of blocking: spin for the first 2 ms (a normal step), then
 * yield, and past 50 ms nap 0.2 ms between polls.
 */
void cuda_wait(struct cuda_ctx *c)
{
	cuda_join(c);
	if (c->timeout > 0.0 && c->pending.what) {
		double start = clock_seconds(), waited;
		CUDA_CHECK(cudaEventRecord(c->waited, c->stream));
		for (;;) {
			cudaError_t rc = cudaEventQuery(c->waited);
			if (rc == cudaSuccess)
				break;
			if (rc != cudaErrorNotReady)
				CUDA_CHECK_RESULT(rc, "cudaEventQuery(c->waited)");
			check_nccl_async(c);
			waited = clock_seconds() - start;
			if (waited >= c->timeout)
				deadline_expired(c);
			if (waited > 0.05) {
				struct timespec nap = {0, 200000};
				nanosleep(&nap, NULL);
			} else if (waited > 0.002) {
				sched_yield();
			}
		}
	} else {
		CUDA_CHECK(cudaStreamSynchronize(c->stream));
	}
	c->pending.what = NULL;
	if (c->nccl)
		check_nccl_async(c);
	cuda_step_times_read(c);
}

/* ---- memory ----------------------------------------------------------------- */

static void *cuda_alloc(void *ctx, size_t bytes)
{
	struct cuda_ctx *c = ctx_of(ctx);
	void *p = NULL;
	cudaError_t rc = cudaMalloc(&p, bytes ? bytes : 1);
	if (rc == cudaErrorMemoryAllocation) {
		(void)cudaGetLastError(); /* not sticky: keep it from a later launch check */
		return NULL;
	}
	CUDA_CHECK_RESULT(rc, "cudaMalloc(&p, bytes)");
	CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c->stream));
	return p;
}

/* cudaFree waits for the device: with a collective pending, under the deadline first. */
static void cuda_free(void *ctx, void *p)
{
	struct cuda_ctx *c = ctx_of(ctx);
	if (c->pending.what)
		cuda_wait(c);
	CUDA_CHECK(cudaFree(p));
}

/*
 * A copy between the device and pageable host memory returns only once it
 * has completed (CUDA's "API synchronization behavior"), so it waits for all
 * earlier work on the stream: behind a collective whose peer hangs it would
 * block in the driver, out of the deadline's reach. Hence: wait for the
 * stream under the deadline, then copy on an idle stream.
 */
static void cuda_copy(struct cuda_ctx *c, void *dst, const void *src, size_t bytes,
		      enum cudaMemcpyKind kind)
{
	cuda_wait(c);
	if (bytes == 0)
		return;
	CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, c->stream));
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

static void cuda_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
	if (bytes > 0)
		cuda_copy(ctx_of(ctx), dst, src, bytes, cudaMemcpyHostToDevice);
}

static void cuda_download(void *ctx, void *dst, const void *src, size_t bytes)
{
	cuda_copy(ctx_of(ctx), dst, src, bytes, cudaMemcpyDeviceToHost);
}

/* ---- math --------------------------------------------------------------------- */

/* The second stream waits for what the first holds so far; a join is then pending. */
static void cuda_fork(struct cuda_ctx *c)
{
	CUDA_CHECK(cudaEventRecord(c->fork, c->stream));
	CUDA_CHECK(cudaStreamWaitEvent(c->side.stream, c->fork, 0));
	c->side_pending = 1;
}

/*
 * A GEMM sent beside runs on the second stream once what the stream has
 * queued so far is done (the fork), its plan made first on the stream (the
 * plan may time candidates there).
 */
static void cuda_gemm_op(void *ctx, const struct gemm_req *r)
{
	struct cuda_ctx *c = ctx_of(ctx);
	if (!r->beside || !c->side_on) {
		cuda_gemm_run(&c->gemm, r);
		return;
	}
	cuda_gemm_plan(&c->gemm, r);
	cuda_fork(c);
	cuda_gemm_run_on(&c->gemm, &c->side, r);
}

/* run(stream, arg) queued beside, as a GEMM sent beside is: on the second stream after a fork. */
static void cuda_run_beside(void *ctx, void (*run)(cudaStream_t stream, void *arg), void *arg)
{
	struct cuda_ctx *c = ctx_of(ctx);
	if (!c->side_on) {
		run(c->stream, arg);
		return;
	}
	cuda_fork(c);
	run(c->side.stream, arg);
}

void cuda_join(struct cuda_ctx *c)
{
	if (!c->side_pending)
		return;
	CUDA_CHECK(cudaEventRecord(c->join, c->side.stream));
	CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->join, 0));
	c->side_pending = 0;
}

static void cuda_join_op(void *ctx)
{
	cuda_join(ctx_of(ctx));
}

static size_t cuda_relu_mask_bytes(void *ctx, int rows, int cols)
{
	(void)ctx;
	return cuda_gemm_relu_mask_bytes(rows, cols);
}

static void cuda_gather(void *ctx, const struct gather_req *g)
{
	kernels_gather(ctx_of(ctx)->stream, NULL, g);
}

static void cuda_advance(void *ctx, int32_t *cursor, int delta)
{
	kernels_advance(ctx_of(ctx)->stream, NULL, cursor, delta);
}

static void cuda_softmax_xent(void *ctx, const struct xent_req *r)
{
	kernels_softmax_xent(ctx_of(ctx)->stream, NULL, r);
}

static void cuda_head_op(void *ctx, const struct head_req *r)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_head_run(&c->gemm, r, cuda_gemm_op, cuda_run_beside, cuda_join_op, ctx);
}

static void cuda_argmax_hits(void *ctx, const float *logits, const int32_t *labels, int rows,
			     int cols, int32_t *hits)
{
	kernels_argmax_hits(ctx_of(ctx)->stream, NULL, logits, labels, rows, cols, hits);
}

static void cuda_sgd_update(void *ctx, float *p, const float *g, float *v, size_t n,
			    const float *lr, const struct step_counters *counters, float momentum,
			    float weight_decay, const struct gather_req *then)
{
	cuda_join(ctx_of(ctx)); /* the model joined already; an update never races a gradient */
	kernels_sgd_update(ctx_of(ctx)->stream, NULL, p, g, v, n, lr, counters, momentum,
			   weight_decay, then);
}

static void cuda_adamw_update(void *ctx, float *p, const float *g, float *m, float *v, size_t n,
			      const float *lr, const struct step_counters *counters,
			      struct adamw_hyper h, const struct gather_req *then)
{
	cuda_join(ctx_of(ctx));
	kernels_adamw_update(ctx_of(ctx)->stream, NULL, p, g, m, v, n, lr, counters, h, then);
}

static void cuda_clip_grad_norm(void *ctx, float *g, size_t n, float max_norm, float *norm)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_join(c);
	kernels_clip_norm(c->stream, NULL, g, n, norm);
	kernels_clip_scale(c->stream, NULL, g, n, norm, max_norm);
}

static void cuda_conv_forward(void *ctx, const struct conv_stage *s, const float *x,
			      const float *w, const float *b, float *y, int32_t *arg, float *cols)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_conv_forward_run(&c->gemm, s, x, w, b, y, arg, cols);
}

static void cuda_pool_backward(void *ctx, const struct conv_stage *s, const float *dy,
			       const float *y, const int32_t *arg, float *dz)
{
	kernels_pool_backward(ctx_of(ctx)->stream, NULL, s, dy, y, arg, dz);
}

static void cuda_conv_backward_data(void *ctx, const struct conv_stage *s, const float *w,
				    const float *dz, const struct conv_stage *below,
				    const float *below_y, const int32_t *below_arg, float *dz_below)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_conv_input_grad_run(&c->gemm, s, w, dz, below, below_y, below_arg, dz_below);
}

/*
 * Micro-batch mode (docs/exact.md): each reads gradients the model may have
 * written on the second stream, so the streams are joined first.
 */
static void cuda_grad_accumulate(void *ctx, float *acc, const float *g, size_t n)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_join(c);
	kernels_grad_accumulate(c->stream, NULL, acc, g, n);
}

static void cuda_fixed_accumulate(void *ctx, int64_t *acc, const float *g, size_t n, double limit,
				  int first)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_join(c);
	kernels_fixed_accumulate(c->stream, NULL, acc, g, n, limit, first);
}

static void cuda_fixed_decode(void *ctx, float *g, int64_t *acc, size_t n)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_join(c);
	kernels_fixed_decode(c->stream, NULL, g, acc, n);
}

/* ---- communication ---------------------------------------------------------- */

/* One rank: the sum, and the mean, of one contribution is itself; NCCL launches nothing. */
static void cuda_allreduce(void *ctx, float *buf, size_t n, enum reduce_op op)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_join(c);
	if (n == 0 || c->dist->size == 1)
		return;
	NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, op == REDUCE_SUM ? ncclSum : ncclAvg,
				 c->nccl, c->stream));
	cuda_note_collective(c, "allreduce");
}

/* --exact's integer sum: exact, so the same bits whatever NCCL's algorithm and the rank count. */
static void cuda_allreduce_i64(void *ctx, int64_t *buf, size_t n)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cuda_join(c);
	if (n == 0 || c->dist->size == 1)
		return;
	NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclInt64, ncclSum, c->nccl, c->stream));
	cuda_note_collective(c, "allreduce");
}

static void cuda_broadcast(void *ctx, float *buf, size_t n, int root)
{
	struct cuda_ctx *c = ctx_of(ctx);
	if (n == 0 || c->dist->size == 1)
		return;
	NCCL_CHECK(ncclBroadcast(buf, buf, n, ncclFloat, root, c->nccl, c->stream));
	cuda_note_collective(c, "broadcast");
}

static void cuda_synchronize(void *ctx)
{
	cuda_wait(ctx_of(ctx));
}

static void cuda_set_timeout(void *ctx, double seconds)
{
	ctx_of(ctx)->timeout = seconds > 0.0 ? seconds : 0.0;
}

static void cuda_set_position(void *ctx, int epoch, int step)
{
	struct cuda_ctx *c = ctx_of(ctx);
	c->epoch = epoch;
	c->step = step;
	/* A step starts (simulator only): stamp it, while there is an event free. */
	if (c->step_us && c->step_n < CUDA_STEP_EVENTS) {
		if (c->step_n > 0)
			c->step_at[c->step_n - 1][2] = c->set_up || plan_count(&c->plan) != c->plans_seen;
		c->set_up = 0;
		c->plans_seen = plan_count(&c->plan);
		if (!c->step_ev[c->step_n])
			CUDA_CHECK(cudaEventCreate(&c->step_ev[c->step_n]));
		CUDA_CHECK(cudaEventRecord(c->step_ev[c->step_n], c->stream));
		c->step_at[c->step_n][0] = epoch;
		c->step_at[c->step_n][1] = step;
		c->step_at[c->step_n][2] = 0;
		c->step_n++;
	}
}

/* ---- lifecycle ---------------------------------------------------------------- */

static void cuda_destroy(void *ctx)
{
	struct cuda_ctx *c = ctx_of(ctx);
	if (!c)
		return;
	cuda_wait(c);
	if (c->nccl) {
		cuda_check_set_comm(NULL);
		NCCL_CHECK(ncclCommFinalize(c->nccl));
		NCCL_CHECK(ncclCommDestroy(c->nccl));
		c->nccl = NULL;
	}
	plan_release(&c->plan);
	cuda_gemm_release(&c->gemm);
	cuda_side_release(c);
	CUBLAS_CHECK(cublasLtDestroy(c->gemm.lt));
	c->gemm.lt = NULL;
	CUBLAS_CHECK(cublasDestroy(c->gemm.blas));
	c->gemm.blas = NULL;
	CUDA_CHECK(cudaFree(c->gemm.workspace));
	c->gemm.workspace = NULL;
	CUDA_CHECK(cudaEventDestroy(c->waited));
	c->waited = NULL;
	for (int i = 0; i < CUDA_STEP_EVENTS; i++)
		if (c->step_ev[i])
			CUDA_CHECK(cudaEventDestroy(c->step_ev[i]));
	free(c->step_us);
	CUDA_CHECK(cudaStreamDestroy(c->stream));
	c->stream = NULL;
	free(c);
}

const struct backend_ops cuda_ops = {
	.name = "cuda",
	.alloc = cuda_alloc,
	.free = cuda_free,
	.upload = cuda_upload,
	.download = cuda_download,
	.gemm = cuda_gemm_op,
	.join = cuda_join_op,
	.relu_mask_bytes = cuda_relu_mask_bytes,
	.gather = cuda_gather,
	.advance = cuda_advance,
	.softmax_xent = cuda_softmax_xent,
	.head = cuda_head_op,
	.argmax_hits = cuda_argmax_hits,
	.sgd_update = cuda_sgd_update,
	.adamw_update = cuda_adamw_update,
	.clip_grad_norm = cuda_clip_grad_norm,
	.conv_forward = cuda_conv_forward,
	.pool_backward = cuda_pool_backward,
	.conv_backward_data = cuda_conv_backward_data,
	.grad_accumulate = cuda_grad_accumulate,
	.fixed_accumulate = cuda_fixed_accumulate,
	.fixed_decode = cuda_fixed_decode,
	.allreduce_i64 = cuda_allreduce_i64,
	.allreduce = cuda_allreduce,
	.broadcast = cuda_broadcast,
	.synchronize = cuda_synchronize,
	.capture_begin = cuda_capture_begin,
	.capture_end = cuda_capture_end,
	.replay = cuda_replay,
	.graph_destroy = cuda_graph_destroy,
	.graph_nodes = cuda_graph_nodes,
	.set_timeout = cuda_set_timeout,
	.set_position = cuda_set_position,
	.set = cuda_set,
	.plan_text = cuda_plan_text,
	.plan_follow = cuda_plan_follow,
	.summary = cuda_summary,
	.event_create = cuda_event_create,
	.event_record = cuda_event_record,
	.event_us = cuda_event_us,
	.event_destroy = cuda_event_destroy,
	.destroy = cuda_destroy,
};
