/*
 * plan.cuh - the CUDA backend's plan (cuda/plan.cu): for every op that has
 * ways to run it (a GEMM: cuda/gemm_lt.cu; a convolution's forward and input
 * gradient: cuda/conv_plan.cu; a training step's head: cuda/head_plan.cu),
 * one entry per problem met, in the order met, holding the way chosen for it
 * and a report of what was weighed. One cache (an op's problems found by
 * their key), one choice (a given plan's way by name, rank 0's fastest
 * shared with every rank, or the first), one timing loop, one record.
 *
 * An op lists its candidates, fastest guess first, in a report (struct
 * plan_op: the key as text, the shape for people, each candidate's name);
 * plan_choose says which runs it; plan_add files the op's own state for that
 * way under the op's key, where plan_find finds it the next time.
 */
#ifndef MNIST_DDP_PLAN_CUH
#define MNIST_DDP_PLAN_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "backend.h"
#include "plan_record.h"

/* The ops that plan. */
enum plan_kind {
	PLAN_GEMM = 0,
	PLAN_CONV_FORWARD,
	PLAN_CONV_INPUT_GRAD,
	PLAN_HEAD,
};

/* A given plan's way for one problem (any op's, found by key). */
struct plan_preset {
	char key[PLAN_KEY_LEN];
	char name[PLAN_NAME_LEN];
	char source[16]; /* whose plan: "checkpoint" (--resume) or "gpu-plan-from" */
};

/*
 * Rank 0's choice to every rank, in a collective stretch: *index and name
 * are rank 0's on return (the caller checks its own candidate of that index
 * has that name). NULL: one rank, nothing to share.
 */
typedef void (*plan_share_fn)(void *arg, int *index, char name[PLAN_NAME_LEN]);

struct plan_entry;

/* One backend's plan. */
struct cuda_plan {
	cudaStream_t stream;     /* where candidates run and are timed */
	enum plan_policy policy; /* for problems met from now on */
	int collective;          /* every rank meets them now, in the same order */
	int rank;                /* this rank: 0 measures in a collective stretch */
	plan_share_fn share;
	/* Wait for the stream's queued work, under the backend's collective deadline. */
	void (*drain)(void *arg);
	void *arg;               /* share's and drain's */
	struct plan_preset *presets; /* a given plan (--resume, --gpu-plan-from): key -> way */
	int n_presets;
	int preset_missed;       /* presets whose way this build or GPU does not offer */
	cudaEvent_t time_start, time_stop;
	double measure_secs;     /* wall time spent timing candidates, on this rank */
	double warm_secs;        /* of it apart: each timed op's first way's first run */
	double first_us;         /* plan_time's last candidate's first run, us; < 0: none */
	struct plan_entry *entries; /* every problem met, in the order met */
	int n_entries, cap_entries;
	struct plan_op *report;  /* plan_get's copy of the entries' reports */
};

/* Release an op's state for its way (descriptors, buffers); the stream has drained. */
typedef void (*plan_release_fn)(void *state);

/* The state filed for op's problem `key` (key_bytes compared whole), or NULL when not met yet. */
void *plan_find(const struct cuda_plan *p, int op, const void *key, size_t key_bytes);

/*
 * File the choice for op's problem: a copy of key, the report (rep->chosen
 * set from its candidate `chosen`), and state (state_bytes copied into memory
 * of the plan's own, released by release, which may be NULL, when the plan is
 * forgotten). The copy of the state, which stays where it is until then.
 */
void *plan_add(struct cuda_plan *p, int op, const void *key, size_t key_bytes,
	       struct plan_op *rep, int chosen, const void *state, size_t state_bytes,
	       plan_release_fn release);

/* The state of every entry of op, in the order met: *i from 0; NULL after the last. */
void *plan_next(const struct cuda_plan *p, int op, int *i);

/* Problems planned so far, every op's. */
int plan_count(const struct cuda_plan *p);

/* Queue one run of a candidate on p->stream. */
typedef void (*plan_run_fn)(void *arg);
/*
 * Microseconds per run of candidate `way`, given the best so far (< 0: none,
 * PLAN_FIRST_RUN: one run alone); < 0: cannot run.
 */
typedef double (*plan_time_fn)(void *arg, int way, double best);

/* `best` for a run of the op's first way before its timing (plan_choose). */
#define PLAN_FIRST_RUN (-2.0)

/*
 * Microseconds per run of `run` on the device: one run on the stream, then,
 * unless it took over a few times `best`, a few runs captured in a graph and
 * replayed, as the step runs them. With best PLAN_FIRST_RUN, the one run only.
 */
double plan_time(struct cuda_plan *p, plan_run_fn run, void *arg, double best);

/*
 * Which of an op's ways runs it. rep holds the op's key, op, shape and its
 * candidates' names (n_candidates, the first the heuristic's choice); on
 * return their measured times and the source: a given plan's preset of that
 * name (untimed), else in a collective stretch under PLAN_MEASURE rank 0's
 * fastest by `time`, else the first; in a collective stretch rank 0's
 * choice is every rank's (p->share).
 */
int plan_choose(struct cuda_plan *p, struct plan_op *rep, int capturing, plan_time_fn time,
		void *arg);

/* Whether p's stream is capturing: nothing can be timed or allocated. */
int plan_capturing(const struct cuda_plan *p);

/*
 * Run the problems a given plan names its way (presets, found by key), or
 * none (in NULL); every entry so far is forgotten first. The caller has
 * checked that the plan is for this GPU and library.
 */
void plan_set(struct cuda_plan *p, const struct plan_info *in);

/* The entries' reports, in the order met, in out->ops (p's, valid until the next call), and the times. */
void plan_get(struct cuda_plan *p, struct plan_info *out);

/* Forget every entry (the stream drained first, then each released). */
void plan_forget(struct cuda_plan *p);

/* Forget, and free what planning holds (presets, events, report). */
void plan_release(struct cuda_plan *p);

#endif /* MNIST_DDP_PLAN_CUH */
