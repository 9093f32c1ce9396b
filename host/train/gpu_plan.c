/*
 * gpu_plan.c - the backend's plan as the program keeps it: see host/train/gpu_plan.h.
 */
#include "train/gpu_plan.h"

#include <stdlib.h>
#include <string.h>

#include "io/report.h"

/*
 * --exact: never a fresh measurement. A measured plan depends on timing, so
 * two runs of one job could run an op different ways, with different sums;
 * the heuristic's first way (and a given plan's) is the same on every run.
 */
static int gpu_plan_policy(const struct train_config *c)
{
	return c->exact ? PLAN_HEURISTIC : c->gpu_plan;
}

void gpu_plan_collective(const struct backend *be, const struct train_config *c, int on)
{
	backend_set(be, BACKEND_PLAN_POLICY, gpu_plan_policy(c));
	backend_set(be, BACKEND_PLAN_COLLECTIVE, on);
}

enum status gpu_plan_restore(const struct backend *be, const struct dist *d,
			     const struct train_config *c, int resumed, const char *text,
			     const char *from, char *err, size_t errlen)
{
	char why[512];
	const char *whose = resumed ? "the checkpoint's GPU plan" : "the --gpu-plan-from plan";
	if (!backend_has_plan(be))
		return STATUS_OK;
	if (c->exact && d->rank == 0 && text)
		fprintf(stderr, "mnist-train: --exact: the GPU ops run the ways %s names, the others "
				"the heuristic's (--gpu-plan heuristic), never ways measured now (a "
				"measured plan depends on timing)\n",
			whose);
	else if (c->exact && d->rank == 0)
		fprintf(stderr, "mnist-train: --exact: the GPU ops run the heuristic's ways (--gpu-plan "
				"heuristic; --gpu-plan-from FILE follows a plan), never ways measured now "
				"(a measured plan depends on timing)\n");
	if (!text)
		return STATUS_OK;
	switch (backend_plan_follow(be, text, resumed ? "checkpoint" : "gpu-plan-from", why,
				    sizeof(why))) {
	case 0:
		return STATUS_OK;
	case 1:
		if (d->rank == 0)
			fprintf(stderr, "mnist-train: %s does not fit here (%s): %s a new plan%s\n",
				whose, why, gpu_plan_policy(c) == PLAN_HEURISTIC ? "taking" : "measuring",
				resumed ? "; the resumed run is not bitwise the one saved" : "");
		return STATUS_OK;
	default:
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: %s", from, why);
	}
}

void gpu_plan_keep(const struct backend *be, const struct dist *d, char *out, size_t cap)
{
	char *kept = backend_plan_text(be, PLAN_KEPT);
	if (!kept)
		return;
	if (strlen(kept) < cap) {
		snprintf(out, cap, "%s", kept);
	} else {
		out[0] = '\0';
		if (d->rank == 0)
			fprintf(stderr,
				"mnist-train: warning: the GPU plan (%zu bytes) does not fit a "
				"checkpoint's %zu: a resumed run will plan anew\n",
				strlen(kept), cap);
	}
	free(kept);
}

void gpu_plan_publish(const struct backend *be, const struct dist *d, FILE *metrics, int verbose)
{
	if (!backend_has_plan(be) || d->rank != 0)
		return;
	if (metrics) {
		char *record = backend_plan_text(be, PLAN_RECORD);
		report_metrics_record(metrics, "gpu_plan", record);
		free(record);
	}
	if (verbose) {
		char *table = backend_plan_text(be, PLAN_TABLE);
		fputs(table, stderr);
		fflush(stderr);
		free(table);
	}
}
