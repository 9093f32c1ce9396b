/*
 * backend_cuda_ctx.cuh - what the CUDA backend's files share: the context of
 * one rank's backend (its device, stream, cuBLAS, NCCL and collective
 * deadline) and the functions each calls of another. cuda/backend_cuda.cu
 * holds the ops behind include/backend.h and their table;
 * cuda/backend_cuda_start.cu starts and stops the backend (device, stream,
 * cuBLAS, the NCCL communicator and its warm-up); cuda/backend_cuda_plan.cu
 * the plan's and the switches' entries; cuda/backend_cuda_graph.cu the
 * captured steps and the step's time.
 */
#ifndef MNIST_DDP_BACKEND_CUDA_CTX_CUH
#define MNIST_DDP_BACKEND_CUDA_CTX_CUH

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "backend.h"
#include "dist.h"
#include "conv_plan.cuh"
#include "head_plan.cuh"
#include "gemm_lt.cuh"

/* cuBLAS workspace: NVIDIA's recommendation for Hopper, ample for older GPUs. */
#define CUDA_BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

/*
 * After ncclCommInitRank returns on this rank, how long to wait for every
 * other rank to report its outcome. A rank whose init failed cannot reach the
 * ranks still inside ncclCommInitRank; past this limit it ends the job.
 */
#define CUDA_NCCL_AGREE_SECONDS 120.0

/* Step-start events kept between waits, and step intervals kept (the simulator's sim_step_us). */
enum { CUDA_STEP_EVENTS = 64, CUDA_STEP_TIMES = 1 << 16 };

/* A collective queued on the stream, for the deadline message. */
struct cuda_pending {
	const char *what; /* "allreduce" or "broadcast"; NULL when none */
	int epoch, step;  /* the position it was queued at; epoch -1: at start-up */
};

struct cuda_ctx {
	const struct dist *dist; /* the job, for agreements */
	int device;            /* CUDA device ordinal (see the file comment) */
	cudaStream_t stream;   /* every op, in order */
	cudaEvent_t waited;    /* recorded on stream by a timed wait */
	struct cuda_gemm gemm; /* cuBLASLt and cuBLAS on stream, their workspace */
	struct cuda_plan plan; /* every op's way per problem: GEMMs, convolutions, heads */
	ncclComm_t nccl;       /* all ranks of the job */
	char name[128];        /* the device's name */
	int pdl_able;          /* the device takes programmatic dependent launches (probed) */
	char pdl_note[160];    /* why it does not, when it does not */
	/*
	 * The GEMMs sent beside (gemm_req.beside: the weight gradients) run on a
	 * second stream, forked from stream after what they read and joined back
	 * before what reads them (cuda/backend_cuda.cu: cuda_join).
	 */
	struct gemm_lane side; /* its stream, its cuBLAS handle, its own workspace */
	cudaEvent_t fork, join;
	int side_able;         /* the fork and join ran, captured too (probed) */
	int side_on;           /* and are used (--no-side-stream: 0) */
	int side_pending;      /* work queued beside, not yet joined */
	char side_note[160];   /* why not, when not able */

	double timeout;        /* seconds a wait on a collective may take; 0: no deadline */
	int epoch, step;       /* from set_position: where the next collectives belong */
	struct cuda_pending pending;        /* latest collective queued, not yet waited for */
	struct cuda_pending before_capture; /* pending when a capture began */

	/*
	 * On the CUDA simulator only (CUDASIM: tests/cudasim/cudasim.h, rule 10):
	 * an event at each launch's first step (set_position), and the intervals
	 * between consecutive ones, read once a wait has completed them (no wait
	 * of their own), each over the steps between the two positions (a graph
	 * launch may run several: --graph-steps), for the summary's sim_step_us.
	 * An interval in which the run set itself up (a plan measured, a graph
	 * recorded) is no step's time: it is kept apart and counts only when no
	 * other was timed. On a GPU none is recorded: its step is timed as it
	 * was, by the host's clock (bench/train).
	 */
	cudaEvent_t step_ev[CUDA_STEP_EVENTS]; /* [0, step_n) recorded since the last wait */
	int step_at[CUDA_STEP_EVENTS][3]; /* each event's epoch, step, and 1: set-up before the next */
	int step_n;
	int set_up;     /* a plan measured or a graph recorded since the last event */
	int plans_seen; /* the plan's entries at the last event */
	/* Intervals (us): [0, CUDA_STEP_TIMES / 2) steps', the rest set-up's; NULL on a GPU. */
	float *step_us;
	size_t step_count, set_up_count;
};

/* Whether step_ev and sim_step_us time steps: the module was built against the simulator. */
#if defined(CUDASIM)
#define CUDA_TIME_STEPS 1
#else
#define CUDA_TIME_STEPS 0
#endif

/* The backend's table (cuda/backend_cuda.cu). */
extern const struct backend_ops cuda_ops;

static inline struct cuda_ctx *ctx_of(void *ctx)
{
	return (struct cuda_ctx *)ctx;
}

/* A collective was queued (or replayed) at the current position (cuda/backend_cuda.cu). */
void cuda_note_collective(struct cuda_ctx *c, const char *what);

/* The table's plan and switch entries (cuda/backend_cuda_plan.cu). */
char *cuda_plan_text(void *ctx, enum plan_text_kind kind);
int cuda_plan_follow(void *ctx, const char *text, const char *source, char *why, size_t whylen);
int cuda_set(void *ctx, enum backend_switch sw, int value);

/* The table's capture, event and summary entries (cuda/backend_cuda_graph.cu). */
int cuda_capture_begin(void *ctx);
void *cuda_capture_end(void *ctx);
void cuda_replay(void *ctx, void *graph);
size_t cuda_graph_nodes(void *ctx, void *graph);
void cuda_graph_destroy(void *ctx, void *graph);
void *cuda_event_create(void *ctx);
void cuda_event_record(void *ctx, void *ev);
double cuda_event_us(void *ctx, void *start, void *end);
void cuda_event_destroy(void *ctx, void *ev);
void cuda_summary(void *ctx, char *buf, size_t len);
/*
 * After a wait (every event recorded is complete), on the simulator: the
 * intervals between the step-start events kept (cuda/backend_cuda_graph.cu).
 */
void cuda_step_times_read(struct cuda_ctx *c);

/*
 * Wait for all queued work; with a collective pending, under the collective
 * deadline (cuda/backend_cuda.cu).
 */
void cuda_wait(struct cuda_ctx *c);

/* The GEMMs sent beside done before what follows on the stream (nothing when none is). */
void cuda_join(struct cuda_ctx *c);

/* Release the second stream, its events, workspace and handle, best effort (backend_cuda_start.cu). */
void cuda_side_release(struct cuda_ctx *c);

/* plan_share_fn: rank 0's plan choice to every rank of the job. */
void cuda_share_choice(void *arg, int *index, char name[PLAN_NAME_LEN]);

/* The plan's drain: cuda_wait of the context arg. */
void cuda_drain_stream(void *arg);

/* Every rank's status in; the lowest failing rank out, -1 when none failed (cuda/backend_cuda_start.cu). */
int cuda_agree(const struct dist *d, int status);

#endif /* MNIST_DDP_BACKEND_CUDA_CTX_CUH */
