/*
 * backend_cuda_graph.cu - the CUDA backend's captured steps and their time
 * (include/backend.h): a step recorded as a CUDA graph and replayed, its
 * capture agreed by every rank (NCCL: a collective is captured on all ranks
 * or none); events for --profile; and on the simulator the modelled step's
 * time between the step-start events ->set_position records (the summary's
 * sim_step_us).
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_ctx.cuh"
#include "check.h"
#include "cuda_check.cuh"

/* A captured step: the executable graph, its node count and the collective it holds (or NULL). */
struct cuda_graph {
	cudaGraphExec_t exec;
	size_t nodes;
	const char *collective;
};

/*
 * After a wait (every event recorded is complete): the intervals between the
 * step-start events, each kept once per step it spans (its time shared
 * among them), those holding set-up or no step (from an epoch's end on) apart,
 * the last event kept as the start of the next interval.
 */
void cuda_step_times_read(struct cuda_ctx *c)
{
	if (c->step_n < 2)
		return;
	const size_t kept = CUDA_STEP_TIMES / 2;
	for (int i = 1; i < c->step_n && c->step_us; i++) {
		float ms = 0.0f;
		CUDA_CHECK(cudaEventElapsedTime(&ms, c->step_ev[i - 1], c->step_ev[i]));
		const int *from = c->step_at[i - 1], *to = c->step_at[i];
		int steps = from[0] == to[0] && to[1] > from[1] ? to[1] - from[1] : 0;
		if (from[2] || steps == 0) { /* set-up, or between epochs: no step's time */
			if (c->set_up_count < kept)
				c->step_us[kept + c->set_up_count++] = ms * 1000.0f;
			continue;
		}
		for (int k = 0; k < steps && c->step_count < kept; k++)
			c->step_us[c->step_count++] = ms * 1000.0f / (float)steps;
	}
	int n = c->step_n - 1;
	cudaEvent_t last = c->step_ev[n];
	c->step_ev[n] = c->step_ev[0];
	c->step_ev[0] = last;
	memcpy(c->step_at[0], c->step_at[n], sizeof(c->step_at[0]));
	c->step_n = 1;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static double median_of(float *v, size_t n)
{
	qsort(v, n, sizeof(float), cmp_float);
	size_t h = n / 2;
	return n % 2 ? v[h] : 0.5 * ((double)v[h - 1] + v[h]);
}

/*
 * On the simulator (CUDA_TIME_STEPS), the summary's sim_step_us: the median
 * interval between step starts on the modelled clock (the set-up's when no
 * step was timed alone; nan when none was timed). On a GPU nothing: its step
 * is timed by the host's clock (bench/train).
 */
void cuda_summary(void *ctx, char *buf, size_t len)
{
	struct cuda_ctx *c = ctx_of(ctx);
	buf[0] = '\0';
	if (!c->step_us)
		return;
	if (c->step_count)
		snprintf(buf, len, " sim_step_us=%.1f", median_of(c->step_us, c->step_count));
	else if (c->set_up_count)
		snprintf(buf, len, " sim_step_us=%.1f",
			 median_of(c->step_us + CUDA_STEP_TIMES / 2, c->set_up_count));
	else
		snprintf(buf, len, " sim_step_us=nan");
}

void *cuda_event_create(void *ctx)
{
	(void)ctx;
	cudaEvent_t ev = NULL;
	CUDA_CHECK(cudaEventCreate(&ev));
	return ev;
}

void cuda_event_record(void *ctx, void *ev)
{
	CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, ctx_of(ctx)->stream));
}

/* Waits for the stream under the collective deadline first: an event may follow an allreduce. */
double cuda_event_us(void *ctx, void *start, void *end)
{
	float ms = 0.0f;
	cuda_wait(ctx_of(ctx));
	CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)end));
	return 1e3 * (double)ms;
}

void cuda_event_destroy(void *ctx, void *ev)
{
	(void)ctx;
	CUDA_CHECK(cudaEventDestroy((cudaEvent_t)ev));
}

static void warn_capture(const char *what, cudaError_t rc)
{
	char text[CUDA_CHECK_MSG_LEN];
	cuda_error_text(rc, text, sizeof(text));
	fprintf(stderr, "rank %d on %s: CUDA graph %s failed: %s; running ops uncaptured\n",
		check_rank(), check_host(), what, text);
	(void)cudaGetLastError();
}


/*
 * 1 when ok holds on every rank. A graph holding a collective must be used by
 * every rank or by none (NCCL: capture is a collective property), so a
 * capture that failed anywhere is dropped everywhere.
 */
static int capture_agreed(const struct cuda_ctx *c, int ok)
{
	int bad = cuda_agree(c->dist, !ok);
	if (bad >= 0 && ok && c->dist->rank == 0)
		fprintf(stderr, "rank 0 on %s: CUDA graph capture failed on rank %d; every rank runs its "
				"steps uncaptured\n",
			check_host(), bad);
	return bad < 0;
}

/* 0 when recording started on every rank; the ops that follow are recorded, not run. */
int cuda_capture_begin(void *ctx)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cudaError_t rc = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
	c->set_up = 1;
	if (rc != cudaSuccess)
		warn_capture("capture", rc);
	if (!capture_agreed(c, rc == cudaSuccess)) {
		if (rc == cudaSuccess) {
			/* This rank began: end the capture and drop what it holds (nothing yet). */
			cudaGraph_t graph = NULL;
			if (cudaStreamEndCapture(c->stream, &graph) == cudaSuccess && graph)
				cudaGraphDestroy(graph);
			(void)cudaGetLastError();
		}
		return 1;
	}
	/* Collectives queued while capturing are recorded, not run: keep them apart. */
	c->before_capture = c->pending;
	c->pending.what = NULL;
	return 0;
}

/*
 * The recorded ops as an executable graph on every rank, or NULL on every
 * rank (they have not run either way).
 */
void *cuda_capture_end(void *ctx)
{
	struct cuda_ctx *c = ctx_of(ctx);
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	struct cuda_graph *g = (struct cuda_graph *)malloc(sizeof(*g));
	cuda_join(c); /* a fork not joined back fails the capture */
	cudaError_t rc = cudaStreamEndCapture(c->stream, &graph);
	const char *collective = c->pending.what; /* one recorded in the capture, or NULL */

	c->pending = c->before_capture;
	size_t nodes = 0;
	if (rc != cudaSuccess || !graph) {
		warn_capture("capture", rc);
	} else {
		/* What one step launches: the figure the summary reports. */
		rc = cudaGraphGetNodes(graph, NULL, &nodes);
		if (rc == cudaSuccess)
			rc = cudaGraphInstantiate(&exec, graph, 0);
		if (rc != cudaSuccess) {
			warn_capture("instantiation", rc);
			exec = NULL;
		}
	}
	if (graph)
		cudaGraphDestroy(graph);
	if (!capture_agreed(c, g && exec)) {
		if (exec)
			CUDA_CHECK(cudaGraphExecDestroy(exec));
		free(g);
		return NULL;
	}
	g->exec = exec;
	g->nodes = nodes;
	g->collective = collective;
	return g;
}

void cuda_replay(void *ctx, void *graph)
{
	struct cuda_ctx *c = ctx_of(ctx);
	struct cuda_graph *g = (struct cuda_graph *)graph;
	CUDA_CHECK(cudaGraphLaunch(g->exec, c->stream));
	if (g->collective)
		cuda_note_collective(c, g->collective);
}

size_t cuda_graph_nodes(void *ctx, void *graph)
{
	(void)ctx;
	return graph ? ((const struct cuda_graph *)graph)->nodes : 0;
}

void cuda_graph_destroy(void *ctx, void *graph)
{
	struct cuda_graph *g = (struct cuda_graph *)graph;
	(void)ctx;
	if (!g)
		return;
	CUDA_CHECK(cudaGraphExecDestroy(g->exec));
	free(g);
}
