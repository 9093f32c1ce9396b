/*
 * gemm_lt.cuh - the CUDA backend's GEMM (cuda/gemm_lt.cu): each problem
 * planned once, the first time it is met, by choosing among the ways to run
 * it (cuBLASLt's algorithms with the request's epilogue fused into the GEMM
 * or done by kernels of ours, cublasSgemm; for a bias gradient not fused, a
 * kernel of ours or cublasSgemv against a vector of ones): timed on the
 * device with CUDA events and the fastest kept, or the heuristic's first
 * choice untimed, or the way a checkpoint's plan names.
 */
#ifndef MNIST_DDP_GEMM_LT_CUH
#define MNIST_DDP_GEMM_LT_CUH

#include <stddef.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend.h"
#include "gemm_map.h"

struct gemm_plan;

/*
 * Where a GEMM's calls go: a stream, a cuBLAS handle bound to it, and the
 * workspace both libraries and our split GEMM use there (workspace_bytes of
 * struct cuda_gemm). Two lanes may run at once; each needs its own workspace.
 */
struct gemm_lane {
	cudaStream_t stream;
	cublasHandle_t blas;
	void *workspace;
};

/* A checkpoint's choice for one problem (any op's: cuda_plan_choose finds it by key). */
struct gemm_preset {
	char key[PLAN_KEY_LEN];
	char name[PLAN_NAME_LEN];
	char source[16]; /* whose plan: "checkpoint" (--resume) or "gpu-plan-from" */
};

/*
 * Rank 0's choice to every rank, in a collective stretch: *index and name
 * are rank 0's on return (the caller checks its own candidate of that index
 * has that name). NULL: one rank, nothing to share.
 */
typedef void (*gemm_share_fn)(void *arg, int *index, char name[PLAN_NAME_LEN]);

/* What the GEMMs of one backend share. */
struct cuda_gemm {
	cudaStream_t stream;
	cublasHandle_t blas;   /* bound to stream, with the workspace */
	cublasLtHandle_t lt;
	void *workspace;       /* device memory both libraries use, in stream order */
	size_t workspace_bytes;
	int tf32;              /* GEMMs on TF32 tensor cores */
	struct gemm_plan *plans; /* one per problem met, in the order met */
	int n_plans, cap_plans;
	const void **masks;    /* ReLU records written by a fused forward epilogue */
	int n_masks, cap_masks;

	enum plan_policy policy; /* for problems met from now on */
	int collective;          /* every rank meets them now, in the same order */
	int rank;                /* this rank: 0 measures in a collective stretch */
	gemm_share_fn share;
	/* Wait for the stream's queued work, under the backend's collective deadline. */
	void (*drain)(void *arg);
	void *share_arg;           /* share's and drain's */
	struct gemm_preset *presets; /* a given plan (--resume, --gpu-plan-from): key -> way */
	int n_presets;
	int preset_missed;       /* presets whose way this GPU does not offer */
	float *ones;             /* (n_ones) 1.0f, for a bias gradient by cublasSgemv */
	size_t n_ones;
	cudaEvent_t time_start, time_stop; /* for timing candidates */
	double measure_secs;     /* wall time spent timing them, on this rank */
	double warm_secs;        /* wall time of each timed op's first way's first run */
	double first_us;         /* cuda_plan_time's last candidate's first run, us; < 0: none */
	struct plan_op *report;  /* plan_get's copy of the plans' reports */
};

/* r on g's stream: the plan for r's problem (made the first time), then its calls. */
void cuda_gemm_run(struct cuda_gemm *g, const struct gemm_req *r);

/* The plan for r's problem, made on g's stream the first time it is met; nothing else runs. */
void cuda_gemm_plan(struct cuda_gemm *g, const struct gemm_req *r);

/* r, planned (cuda_gemm_plan), queued on lane instead of g's stream. */
void cuda_gemm_run_on(struct cuda_gemm *g, const struct gemm_lane *lane, const struct gemm_req *r);

/*
 * Bytes of the ReLU record of a (rows, cols) GEMM output: cuBLASLt's bit
 * mask of the column-major (cols, rows) result, its leading dimension cols
 * rounded up to 128 bits.
 */
size_t cuda_gemm_relu_mask_bytes(int rows, int cols);

/*
 * The plans so far, the GEMMs' then `more` (other ops' plans: the
 * convolutions'), out->ops in g, valid until the next call; device is the
 * caller's.
 */
void cuda_gemm_plan_get(struct cuda_gemm *g, const struct plan_op *more, int n_more,
			struct plan_info *out);

/*
 * Take a plan's ways by name for the problems it lists, every op's (the
 * presets cuda_plan_choose finds by key), or none (in NULL); every GEMM plan
 * so far is forgotten first. The caller has checked that the plan is for
 * this GPU and library.
 */
void cuda_gemm_plan_set(struct cuda_gemm *g, const struct plan_info *in);

/*
 * ---- choosing among an op's ways (cuda/plan_choose.cu), for the GEMMs' plans
 * and the convolutions' (cuda/conv_plan.cu) ----
 */

/* Queue one run of a candidate on g->stream. */
typedef void (*plan_run_fn)(void *arg);
/*
 * Microseconds per run of candidate `way`, given the best so far (< 0: none,
 * PLAN_FIRST_RUN: one run alone); < 0: cannot run.
 */
typedef double (*plan_time_fn)(void *arg, int way, double best);

/* `best` for a run of the op's first way before its timing (cuda_plan_choose). */
#define PLAN_FIRST_RUN (-2.0)

/*
 * Microseconds per run of `run` on the device: one run on the stream, then,
 * unless it took over a few times `best`, a few runs captured in a graph and
 * replayed, as the step runs them. With best PLAN_FIRST_RUN, the one run only.
 */
double cuda_plan_time(struct cuda_gemm *g, plan_run_fn run, void *arg, double best);

/*
 * Which of an op's ways runs it. rep holds the op's key, op, shape and its
 * candidates' names (n_candidates, the first the heuristic's choice); on
 * return their measured times and the source: a checkpoint's preset of that
 * name (untimed), else in a collective stretch under PLAN_MEASURE rank 0's
 * fastest by `time`, else the first; in a collective stretch rank 0's
 * choice is every rank's (g->share).
 */
int cuda_plan_choose(struct cuda_gemm *g, struct plan_op *rep, int capturing, plan_time_fn time,
		     void *arg);

/* Whether g's stream is capturing: nothing can be timed or allocated. */
int cuda_plan_capturing(struct cuda_gemm *g);

/*
 * Whether every GEMM planned so far that reads cols as the im2col matrix of a
 * convolution's input (conv, rows: struct gemm_im2col) reads the input
 * instead (an implicit way), and one does: then nothing reads cols, and a
 * forward pass need not write it. 0 until such a plan is made.
 */
int cuda_gemm_im2col_unread(const struct cuda_gemm *g, const float *cols,
			    const struct conv_shape *conv, int rows);

/* "cublasLt N": the library a plan's names belong to. */
void cuda_gemm_library(char *buf, size_t len);

/* Forget every plan (its descriptors destroyed); the handles stay the caller's. */
void cuda_gemm_forget(struct cuda_gemm *g);

/* Forget the plans and free what planning holds (presets, ones, events, report). */
void cuda_gemm_release(struct cuda_gemm *g);

#endif /* MNIST_DDP_GEMM_LT_CUH */
