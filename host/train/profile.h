/*
 * profile.h - where a step's time goes (--profile): a step run op by op
 * through a backend that wraps the real one, each op bracketed by the real
 * backend's events (CUDA events on a GPU, the clock on the host), PROFILE_REPS
 * times, each op's time and each gap between ops the median of the runs, the
 * step their sum; and, where the backend can capture, each op captured alone
 * to count the kernels (graph nodes) it launches.
 */
#ifndef MNIST_DDP_PROFILE_H
#define MNIST_DDP_PROFILE_H

#include <stdio.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct profile_row {
	char layer[16];  /* the model's layer name ("fc1", "conv2"), or "" */
	char phase[24];  /* "forward", "weight grad", "input grad", "loss", "optimizer", ... */
	char op[24];     /* the backend op: "gemm", "conv_forward", "allreduce", ... */
	char shape[64];
	int kernels;     /* graph nodes of the op alone; -1 where the backend cannot say */
	double us;       /* its median over the timed runs */
};

struct profile {
	struct profile_row *rows;
	int n, cap;
	double step_us; /* the step, its first op's start to its last op's end: the ops'
			   and the gaps between them, each a median, added up */
	double ops_us;  /* the ops' times (each a median) added up */
};

/* Runs of the step timed op by op: each op's figure is its median over them. */
#define PROFILE_REPS 5

/*
 * Run step(arg, wrapped) once for the kernels (captured op by op, nothing run;
 * skipped where be cannot capture) and PROFILE_REPS times for the times. Every rank
 * must call it (the step's collectives and the backend's capture agreement
 * are collective). The step's effects are the caller's to undo.
 */
void profile_run(const struct backend *be, void (*step)(void *arg, const struct backend *wrapped),
		 void *arg, struct profile *out);

/* The table, with each op's share of the step and the ops' sum against it. */
void profile_print(FILE *f, const struct profile *p, const char *title);

/* --metrics: {"event": "op_times", "step_us": ..., "ops_us": ..., "ops": [...]} */
void profile_metrics(FILE *f, const struct profile *p);

void profile_free(struct profile *p);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_PROFILE_H */
