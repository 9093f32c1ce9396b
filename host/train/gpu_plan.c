/*
 * gpu_plan.c - the backend's plan as the program keeps it: see host/train/gpu_plan.h.
 */
#include "train/gpu_plan.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/plan_json.h"

void gpu_plan_collective(const struct backend *be, const struct train_config *c, int on)
{
	backend_plan_mode(be, (enum plan_policy)c->gpu_plan, on);
}

void gpu_plan_restore(const struct backend *be, const struct dist *d, int resumed,
		      const char *text)
{
	struct plan_info p;
	char why[512];
	const char *whose = resumed ? "the checkpoint's GPU plan" : "the --gpu-plan-from plan";
	if (!text[0] || !backend_has_plan(be))
		return;
	if (plan_json_parse(text, &p, why, sizeof(why)))
		die(2, "%s: %s", whose, why); /* checked on reading */
	for (int i = 0; i < p.n_ops; i++)
		snprintf(p.ops[i].source, sizeof(p.ops[i].source), "%s",
			 resumed ? "checkpoint" : "gpu-plan-from");
	if (backend_plan_set(be, &p, why, sizeof(why)) && d->rank == 0)
		fprintf(stderr, "mnist-train: %s does not fit here (%s): measuring a new plan%s\n", whose,
			why, resumed ? "; the resumed run is not bitwise the one saved" : "");
	plan_json_free(&p);
}

void gpu_plan_keep(const struct backend *be, const struct dist *d, char *out, size_t cap)
{
	struct plan_info p;
	if (!backend_has_plan(be))
		return;
	backend_plan_get(be, &p);
	char *kept = plan_json_dump(&p, 0, NULL);
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
	struct plan_info p;
	if (!backend_has_plan(be) || d->rank != 0)
		return;
	backend_plan_get(be, &p);
	if (metrics) {
		char *record = plan_json_dump(&p, 1, "gpu_plan");
		fprintf(metrics, "%s\n", record);
		fflush(metrics);
		free(record);
	}
	if (verbose)
		plan_print_table(stderr, &p);
}
