/*
 * plan.cu - the CUDA backend's plan: see cuda/plan.cuh. Its entries, a
 * candidate timed on the device where the step runs it, and the choice among
 * an op's candidates: a given plan's preset, rank 0's fastest shared with
 * every rank, or the first.
 */
#include "plan.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "cuda_check.cuh"

/* Timed runs of a candidate after its first. */
#define PLAN_TIME_REPS 3
/*
 * A first run over this many times the best so far, and this many
 * microseconds more, is not timed further (slower()).
 */
#define PLAN_SLOW_FACTOR 4.0
#define PLAN_SLOW_SLACK_US 100.0

/*
 * Microseconds per run where the step runs it, in a replayed graph:
 * PLAN_TIME_REPS runs captured in one graph, launched once to settle, once
 * timed between events. Timed as launches on the stream, each library call's
 * and kernel's submission from the host (about 3 us on the H100, 2026-11-27)
 * lay between the events, and the plans favoured ways of fewer calls over
 * ways of less work on the device. -1 when the stream cannot capture it.
 */
static double time_graph(struct cuda_plan *g, plan_run_fn run, void *arg)
{
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	if (cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
		(void)cudaGetLastError();
		return -1.0;
	}
	for (int i = 0; i < PLAN_TIME_REPS; i++)
		run(arg);
	cudaError_t rc = cudaStreamEndCapture(g->stream, &graph);
	if (rc == cudaSuccess)
		rc = cudaGraphInstantiate(&exec, graph, 0);
	if (graph)
		CUDA_CHECK(cudaGraphDestroy(graph));
	if (rc != cudaSuccess) {
		(void)cudaGetLastError();
		return -1.0;
	}
	float ms = 0.0f;
	CUDA_CHECK(cudaGraphLaunch(exec, g->stream));
	CUDA_CHECK(cudaEventRecord(g->time_start, g->stream));
	CUDA_CHECK(cudaGraphLaunch(exec, g->stream));
	CUDA_CHECK(cudaEventRecord(g->time_stop, g->stream));
	CUDA_CHECK(cudaEventSynchronize(g->time_stop));
	CUDA_CHECK(cudaEventElapsedTime(&ms, g->time_start, g->time_stop));
	CUDA_CHECK(cudaGraphExecDestroy(exec));
	return (double)ms * 1e3 / PLAN_TIME_REPS;
}

/* Microseconds per run, reps runs launched on the stream between events. */
static double stream_us(struct cuda_plan *g, plan_run_fn run, void *arg, int reps)
{
	float ms = 0.0f;
	CUDA_CHECK(cudaEventRecord(g->time_start, g->stream));
	for (int i = 0; i < reps; i++)
		run(arg);
	CUDA_CHECK(cudaEventRecord(g->time_stop, g->stream));
	CUDA_CHECK(cudaEventSynchronize(g->time_stop));
	CUDA_CHECK(cudaEventElapsedTime(&ms, g->time_start, g->time_stop));
	return (double)ms * 1e3 / reps;
}

/*
 * Whether a first run of `us` is clearly slower than the best so far, a
 * time replayed from a graph (-1: none yet). The first run is one launch on
 * the stream, so the host's submission of each of the candidate's calls lies
 * between its events, where a graph's replay holds none: on the H100
 * (2026-11-27) candidates timed that way took 12-20 us a run at mlp b32,
 * where a graph node of the kind should take 2-3 (the time model). By a
 * factor alone, four times a best of 3 us, a candidate as fast as the best
 * but of more calls than one would have been passed over for its
 * submission; the slack, meant to be more than any candidate's submissions
 * (the GPU kit's summary gives the gap measured), leaves that to the graph's
 * timing.
 */
static int slower(double us, double best)
{
	return best >= 0.0 && us > PLAN_SLOW_FACTOR * best + PLAN_SLOW_SLACK_US;
}

double plan_time(struct cuda_plan *g, plan_run_fn run, void *arg, double best)
{
	if (!g->time_start) {
		CUDA_CHECK(cudaEventCreate(&g->time_start));
		CUDA_CHECK(cudaEventCreate(&g->time_stop));
	}
	double us = stream_us(g, run, arg, 1);
	if (best == PLAN_FIRST_RUN)
		return us;
	g->first_us = us;
	/*
	 * A first run can hold more than the run: CUDA loads a module's kernels
	 * when one is first launched (lazy loading, the default since CUDA
	 * 12.2), and on the H100 (2026-11-27) candidates whose twins took
	 * 13-75 us took 3.8-4.8 ms at their first run, and were passed over for
	 * it. One more run says which it was.
	 */
	if (slower(us, best))
		us = stream_us(g, run, arg, 1);
	if (!slower(us, best)) {
		double replayed = time_graph(g, run, arg);
		us = replayed >= 0.0 ? replayed : stream_us(g, run, arg, PLAN_TIME_REPS);
	}
	return us;
}

static const struct plan_preset *preset_for(const struct cuda_plan *g, const char *key)
{
	for (int i = 0; i < g->n_presets; i++)
		if (!strcmp(g->presets[i].key, key))
			return &g->presets[i];
	return NULL;
}

int plan_choose(struct cuda_plan *g, struct plan_op *rep, int capturing, plan_time_fn time,
		     void *arg)
{
	const struct plan_preset *preset = preset_for(g, rep->key);
	int n = rep->n_candidates, chosen = -1;

	for (int i = 0; i < n; i++)
		rep->cand[i].us = rep->cand[i].first_us = -1.0;
	if (preset) {
		int resumed = !strcmp(preset->source, "checkpoint");
		for (int i = 0; i < n && chosen < 0; i++)
			if (!strcmp(rep->cand[i].name, preset->name)) {
				snprintf(rep->source, sizeof(rep->source), "%s", preset->source);
				chosen = i;
			}
		if (chosen < 0) {
			g->preset_missed++;
			if (g->rank == 0)
				fprintf(stderr,
					"mnist-train: %s runs %s %s as %s, which this GPU does not "
					"offer; planned anew%s\n",
					resumed ? "the checkpoint's plan" : "the --gpu-plan-from plan",
					rep->op, rep->shape, preset->name,
					resumed ? " (the resumed run is not bitwise the one saved)" : "");
		}
	}
	if (chosen < 0) {
		chosen = 0;
		/*
		 * Measured only in a collective stretch, and there by rank 0 alone.
		 * Every rank first waits for its queued work (under the collective
		 * deadline): a collective queued before must complete on every rank,
		 * not only on the one that times, or the timing's waits could block
		 * behind it while its peers wait for the choice.
		 */
		int timed = g->policy == PLAN_MEASURE && g->collective && !capturing && n > 1;
		if (timed)
			g->drain(g->arg);
		if (timed && g->rank == 0) {
			/*
			 * The first way's first run, apart: a run that does not
			 * measure (--gpu-plan heuristic) runs it too, and pays what
			 * comes with it: the library's first launch, the loading of
			 * that way's kernels. On the H100 the first step took 80-235
			 * ms before any plan was timed (c143872) and 115-171 ms after
			 * (b3a229a); measure_ms counts what measuring adds to that.
			 */
			double w0 = clock_seconds();
			(void)time(arg, 0, PLAN_FIRST_RUN);
			g->warm_secs += clock_seconds() - w0;
			double best = -1.0, t0 = clock_seconds();
			for (int i = 0; i < n; i++) {
				g->first_us = -1.0;
				double us = time(arg, i, best);
				rep->cand[i].us = us;
				rep->cand[i].first_us = g->first_us;
				if (us >= 0.0 && (best < 0.0 || us < best)) {
					best = us;
					chosen = i;
				}
			}
			g->measure_secs += clock_seconds() - t0;
		}
		snprintf(rep->source, sizeof(rep->source), "%s", timed ? "measured" : "heuristic");
	}
	/* In a collective stretch rank 0's choice is every rank's, a given plan's included. */
	if (g->collective && g->share) {
		char name[PLAN_NAME_LEN];
		snprintf(name, sizeof(name), "%s", rep->cand[chosen].name);
		g->share(g->arg, &chosen, name);
		if (chosen < 0 || chosen >= n || strcmp(rep->cand[chosen].name, name))
			die(1, "CUDA %s %s: rank 0 chose %s, which this rank's GPU or cuBLAS does "
			       "not offer as its candidate %d (every rank needs the same GPU model and "
			       "library)",
			    rep->op, rep->shape, name, chosen);
	}
	return chosen;
}

int plan_capturing(const struct cuda_plan *g)
{
	cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
	CUDA_CHECK(cudaStreamIsCapturing(g->stream, &status));
	return status != cudaStreamCaptureStatusNone;
}

/* ---- the entries -------------------------------------------------------------------- */

struct plan_entry {
	int op;                  /* enum plan_kind */
	void *key;               /* key_bytes, compared whole */
	size_t key_bytes;
	void *state;             /* the op's, for its way */
	plan_release_fn release;
	struct plan_op report;
};

void *plan_find(const struct cuda_plan *p, int op, const void *key, size_t key_bytes)
{
	for (int i = 0; i < p->n_entries; i++) {
		const struct plan_entry *e = &p->entries[i];
		if (e->op == op && e->key_bytes == key_bytes && !memcmp(e->key, key, key_bytes))
			return e->state;
	}
	return NULL;
}

void *plan_add(struct cuda_plan *p, int op, const void *key, size_t key_bytes,
	       struct plan_op *rep, int chosen, const void *state, size_t state_bytes,
	       plan_release_fn release)
{
	if (p->n_entries == p->cap_entries) {
		p->cap_entries = p->cap_entries ? 2 * p->cap_entries : 16;
		p->entries = (struct plan_entry *)xrealloc(
			p->entries, (size_t)p->cap_entries * sizeof(*p->entries));
	}
	struct plan_entry *e = &p->entries[p->n_entries++];
	e->op = op;
	e->key = xmalloc(key_bytes);
	memcpy(e->key, key, key_bytes);
	e->key_bytes = key_bytes;
	e->state = xmalloc(state_bytes ? state_bytes : 1);
	memcpy(e->state, state, state_bytes);
	e->release = release;
	snprintf(rep->chosen, sizeof(rep->chosen), "%s", rep->cand[chosen].name);
	e->report = *rep;
	return e->state;
}

void *plan_next(const struct cuda_plan *p, int op, int *i)
{
	for (; *i < p->n_entries; (*i)++)
		if (p->entries[*i].op == op)
			return p->entries[(*i)++].state;
	return NULL;
}

int plan_count(const struct cuda_plan *p)
{
	return p->n_entries;
}

void plan_set(struct cuda_plan *p, const struct plan_info *in)
{
	plan_forget(p);
	free(p->presets);
	p->presets = NULL;
	p->n_presets = 0;
	if (!in)
		return;
	p->presets = (struct plan_preset *)xmalloc((size_t)(in->n_ops ? in->n_ops : 1) *
						   sizeof(struct plan_preset));
	for (int i = 0; i < in->n_ops; i++) {
		struct plan_preset *q = &p->presets[p->n_presets++];
		snprintf(q->key, sizeof(q->key), "%s", in->ops[i].key);
		snprintf(q->name, sizeof(q->name), "%s", in->ops[i].chosen);
		snprintf(q->source, sizeof(q->source), "%s", in->ops[i].source);
	}
}

void plan_get(struct cuda_plan *p, struct plan_info *out)
{
	free(p->report);
	p->report = (struct plan_op *)xmalloc((size_t)(p->n_entries ? p->n_entries : 1) *
					      sizeof(struct plan_op));
	for (int i = 0; i < p->n_entries; i++)
		p->report[i] = p->entries[i].report;
	out->n_ops = p->n_entries;
	out->ops = p->report;
	out->measure_ms = p->measure_secs * 1e3;
	out->warm_ms = p->warm_secs * 1e3;
}

void plan_forget(struct cuda_plan *p)
{
	if (p->n_entries && p->drain)
		p->drain(p->arg); /* the timed runs and the ways may still use what is released */
	for (int i = p->n_entries - 1; i >= 0; i--) {
		struct plan_entry *e = &p->entries[i];
		if (e->release)
			e->release(e->state);
		free(e->state);
		free(e->key);
	}
	free(p->entries);
	p->entries = NULL;
	p->n_entries = p->cap_entries = 0;
}

void plan_release(struct cuda_plan *p)
{
	plan_forget(p);
	free(p->presets);
	free(p->report);
	p->presets = NULL;
	p->report = NULL;
	p->n_presets = 0;
	if (p->time_start)
		cudaEventDestroy(p->time_start);
	if (p->time_stop)
		cudaEventDestroy(p->time_stop);
	p->time_start = p->time_stop = NULL;
}
