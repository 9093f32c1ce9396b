/*
 * plan_record.h - the CUDA backend's plan as a record (C, for cuda/plan.cu,
 * cuda/plan_json.c and the tests that give a plan by hand): for each problem
 * met (a GEMM's shapes, transposes, epilogue and alignments; a
 * convolution's; a step head's), the way it runs, chosen among candidates
 * (docs/gpu.md, "Plans"). Names are the backend's own, stable for one GPU
 * model and library version: a plan saved in a checkpoint is given back by
 * name. The program sees it only as the text of cuda/plan_json.c.
 */
#ifndef MNIST_DDP_PLAN_RECORD_H
#define MNIST_DDP_PLAN_RECORD_H

#define PLAN_NAME_LEN 96
#define PLAN_KEY_LEN 160
#define PLAN_MAX_CANDIDATES 64

#ifdef __cplusplus
extern "C" {
#endif

struct plan_candidate {
	char name[PLAN_NAME_LEN];
	double us;       /* measured microseconds per run; < 0: not timed */
	double first_us; /* its first run, one launch on the stream, the host's submission
			    between the events; < 0: not run */
};

struct plan_op {
	char key[PLAN_KEY_LEN];  /* the problem, as the backend names it */
	char op[16];             /* "gemm", "conv_forward", "conv_input_grad", "head" */
	char shape[64];          /* for people: "nt 6x25x200704 bias_grad" */
	char chosen[PLAN_NAME_LEN];
	char source[16];         /* "measured", "heuristic"; a given plan: "checkpoint", "gpu-plan-from" */
	int n_candidates;        /* what was considered (0 for an entry given back) */
	struct plan_candidate cand[PLAN_MAX_CANDIDATES];
};

struct plan_info {
	char device[128];  /* the GPU's name */
	char library[64];  /* the math library and its version: "cublasLt 130100" */
	char launch[160];  /* how kernels are launched ("programmatic dependent launch"); not kept */
	int n_ops;
	struct plan_op *ops;
	double measure_ms; /* wall time rank 0 spent timing candidates so far; < 0: not known */
	double warm_ms;    /* of it apart: each timed op's first way's first run; < 0: not known */
};

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_PLAN_RECORD_H */
