/*
 * launch.c - training steps grouped into launches: see host/train/launch.h.
 */
#include "train/launch.h"

#include <string.h>

void launch_init(struct launch *l, const struct step_state *st, const struct sampler *smp,
		 const struct resume_state *rs, int graph_steps, int log_steps, int capture)
{
	memset(l, 0, sizeof(*l));
	l->st = st;
	l->smp = smp;
	l->rs = rs;
	l->graph_steps = graph_steps;
	l->log_steps = log_steps;
	l->capture = capture && backend_can_capture(st->be);
}

/*
 * Whether the host needs the step's end before the next step starts: to read
 * its loss (on this rank or another), to save a checkpoint or to end the
 * epoch. The same on every rank (log_steps; --save-every and --checkpoint-dir
 * agree), so every rank launches the same groups and meets each graph's
 * capture, a collective, with the others.
 */
static int step_needs_host(const struct launch *l, int epoch, int step)
{
	long long done = (long long)epoch * l->smp->steps + step + 1;
	return step == l->smp->steps - 1 || step % l->log_steps == 0 || resume_save_due(l->rs, done);
}

/*
 * The steps one launch runs from `step`: once the step is captured, as many
 * full steps as --graph-steps allows that the host need not see end (the
 * last of them may need it), rounded down to a length that is captured: a
 * power of two or --graph-steps itself, so that a run records few graphs
 * (--log-every 10, --graph-steps 8: groups of 8 and 2). Otherwise one.
 */
static int group_length(const struct launch *l, int epoch, int step)
{
	int most = l->graph_steps, n = 1;
	if (!l->capture || !l->planned)
		return 1;
	while (n < most && step + n < l->smp->steps && !step_needs_host(l, epoch, step + n - 1) &&
	       sampler_batch_rows(l->smp, step + n) == l->st->batch)
		n++;
	if (n == most)
		return n;
	int p = 1;
	while (p * 2 <= n)
		p *= 2;
	return p;
}

/*
 * The graph of n steps, recorded at its first use, or NULL when capture
 * failed: plain launches from then on. Capture only records, nothing runs;
 * it starts on an idle stream, the steps queued before it complete (a rank
 * meets the capture's agreement with no collective of its own pending). The
 * first recording also records one step alone, whose nodes the summary's
 * graph_nodes counts (a graph of n steps may hold more than n steps' nodes).
 */
static void *group_graph(struct launch *l, int n)
{
	const struct backend *be = l->st->be;
	if (l->graphs[n] || !l->capture)
		return l->graphs[n];
	if (n > 1 && !group_graph(l, 1))
		return NULL;
	backend_synchronize(be);
	if (backend_capture_begin(be) == 0) {
		for (int i = 0; i < n; i++)
			step_ops(l->st, l->st->batch);
		l->graphs[n] = backend_capture_end(be);
		if (n == 1 && l->graphs[1])
			l->graph_nodes = (long long)backend_graph_nodes(be, l->graphs[1]);
	}
	if (!l->graphs[n])
		l->capture = 0;
	return l->graphs[n];
}

int launch_steps(struct launch *l, int epoch, int step, int *rows, int *first_full)
{
	const struct backend *be = l->st->be;
	*rows = sampler_batch_rows(l->smp, step);
	int full = *rows == l->st->batch;
	int n = full ? group_length(l, epoch, step) : 1;
	backend_set_position(be, epoch, step);
	void *graph = full && l->planned ? group_graph(l, n) : NULL;
	if (graph)
		backend_replay(be, graph);
	else
		for (int i = 0; i < n; i++)
			step_ops(l->st, *rows);
	*first_full = full && !l->planned;
	if (*first_full)
		l->planned = 1;
	return n;
}

void launch_free(struct launch *l)
{
	for (int n = 1; n <= CONFIG_GRAPH_STEPS_MAX; n++)
		if (l->graphs[n])
			backend_graph_destroy(l->st->be, l->graphs[n]);
	memset(l->graphs, 0, sizeof(l->graphs));
}
