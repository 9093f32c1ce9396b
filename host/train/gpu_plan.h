/*
 * gpu_plan.h - the backend's plan as the program keeps it (host/train/gpu_plan.c):
 * how new problems are planned, a given plan (--resume's checkpoint,
 * --gpu-plan-from's file) handed to the backend, the plan kept for a
 * checkpoint, and the plan published (--metrics' gpu_plan record, --verbose's
 * table). A backend without plans (the host's) makes each a no-op.
 */
#ifndef MNIST_DDP_GPU_PLAN_H
#define MNIST_DDP_GPU_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "check.h"
#include "config.h"
#include "dist.h"

/*
 * Whether the backend's new problems are planned by every rank together
 * (rank 0 measures, all take its choice), under --gpu-plan's policy (the
 * heuristic under --exact, whose runs must run each op the same way every
 * time: a measured plan depends on timing): during
 * training, where every rank meets a step's ops in the same order; not while
 * scoring the test set, whose batches differ between ranks.
 */
void gpu_plan_collective(const struct backend *be, const struct train_config *c, int on);

/*
 * Collective: the plan `text` (NULL: none; from: where it came from, for
 * messages) handed to the backend, which alone reads it. --resume's
 * (resumed), so that every op runs as it did before the checkpoint and the
 * resumed run is bitwise the one saved; --gpu-plan-from's, so that runs
 * compared on it differ only in what they change. A plan for another GPU or
 * library, on any rank, is set aside on every rank (the backend decides,
 * collectively): the ops are planned anew, and rank 0 says so. Under
 * --exact rank 0 also says where the ways come from (this plan, else the
 * heuristic; never a measurement). Each op the
 * plan names reports that plan as its source. STATUS_BAD_INPUT, the same on
 * every rank with err naming `from`, when the backend finds no plan in it.
 */
enum status gpu_plan_restore(const struct backend *be, const struct dist *d,
			     const struct train_config *c, int resumed, const char *text,
			     const char *from, char *err, size_t errlen);

/*
 * The plan so far as a checkpoint keeps it (the ways chosen, not the
 * candidates weighed), into out (cap bytes); "" with a warning on rank 0
 * when it does not fit (a resumed run will plan anew).
 */
void gpu_plan_keep(const struct backend *be, const struct dist *d, char *out, size_t cap);

/* Rank 0: the plan made, as the --metrics record {"event": "gpu_plan", ...} and, with verbose, the table. */
void gpu_plan_publish(const struct backend *be, const struct dist *d, FILE *metrics, int verbose);

#endif /* MNIST_DDP_GPU_PLAN_H */
