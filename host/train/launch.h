/*
 * launch.h - training steps grouped into launches (host/train/launch.c):
 * where the backend can capture, a run of full steps that the host need not
 * see end is replayed from one captured graph (--graph-steps), each length
 * recorded once; otherwise a step is launched op by op. The first full step
 * always runs uncaptured, so that the backend can plan its ops.
 */
#ifndef MNIST_DDP_LAUNCH_H
#define MNIST_DDP_LAUNCH_H

#include "backend.h"
#include "config.h"
#include "train/resume.h"
#include "train/sampler.h"
#include "train/step.h"

struct launch {
	const struct step_state *st;
	const struct sampler *smp;
	const struct resume_state *rs; /* when a checkpoint is due: the host must see that step end */
	int graph_steps;               /* --graph-steps: the most steps a launch runs */
	int log_steps;                 /* the steps some rank reports at are its multiples */
	int capture;                   /* whether to try */
	int planned;                   /* a full step ran uncaptured: the backend's plan is made */
	long long graph_nodes;         /* of one captured step, once recorded; 0: none */
	/* graphs[n]: n steps captured as one graph, once recorded. */
	void *graphs[CONFIG_GRAPH_STEPS_MAX + 1];
};

/* Ready to launch st's steps; capture: whether to try (--no-graph: 0). */
void launch_init(struct launch *l, const struct step_state *st, const struct sampler *smp,
		 const struct resume_state *rs, int graph_steps, int log_steps, int capture);

/*
 * One launch's steps from `step` of `epoch`: a group of full steps replayed
 * from its graph, else one step launched op by op. Returns the steps run;
 * *rows: the rows of the last; *first_full: 1 when this was the run's first
 * full step (its plan made: the caller may publish it).
 */
int launch_steps(struct launch *l, int epoch, int step, int *rows, int *first_full);

/* Release the graphs. */
void launch_free(struct launch *l);

#endif /* MNIST_DDP_LAUNCH_H */
