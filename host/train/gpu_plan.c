/*
 * gpu_plan.c - the backend's plan as the program keeps it: see host/train/gpu_plan.h.
 */
#include "train/gpu_plan.h"

#include <stdlib.h>
#include <string.h>

#include "io/report.h"

void gpu_plan_collective(const struct backend *be, const struct train_config *c, int on)
{
	backend_set(be, BACKEND_PLAN_POLICY, c->gpu_plan);
	backend_set(be, BACKEND_PLAN_COLLECTIVE, on);
}

enum status gpu_plan_restore(const struct backend *be, const struct dist *d, int resumed,
			     const char *text, const char *from, char *err, size_t errlen)
{
	char why[512];
	const char *whose = resumed ? "the checkpoint's GPU plan" : "the --gpu-plan-from plan";
	if (!text || !backend_has_plan(be))
		return STATUS_OK;
	switch (backend_plan_follow(be, text, resumed ? "checkpoint" : "gpu-plan-from", why,
				    sizeof(why))) {
	case 0:
		return STATUS_OK;
	case 1:
		if (d->rank == 0)
			fprintf(stderr, "mnist-train: %s does not fit here (%s): measuring a new plan%s\n",
				whose, why, resumed ? "; the resumed run is not bitwise the one saved" : "");
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
