/*
 * gpu_graph.c - a training step captured once as a CUDA graph and replayed
 * must do what the same step does launched op by op (ctest label gpu; one
 * rank, and two, where the graph's allreduce is a real collective).
 *
 *   mpirun -n 2 build/tests/gpu_graph [--self-test] [--expect-no-graph]
 *
 * Two replicas on the CUDA backend from the same parameters: A runs STEPS
 * steps as plain launches; B records one step (gather, forward, backward,
 * allreduce, update, cursor advance) between capture_begin and capture_end,
 * which must run nothing, then replays it STEPS times. Per-step losses, the
 * final parameters and the device-side batch cursor must agree; they are
 * expected bit for bit (same kernels, same cuBLAS calls) and must at least
 * agree to a normalised error of 1e-6.
 *
 * Capture must succeed on every rank or on none: NCCL requires a collective
 * to be graph-captured on all ranks or on none. --expect-no-graph: capture is
 * made to fail on some rank (on the simulator, CUDASIM_CAPTURE_FAIL_RANK), so
 * every rank must go without a graph and run B's steps plainly, still in step
 * with A.
 *
 * --self-test: the host backend cannot capture (its capture entries are NULL);
 * the program then checks that, and compares two plain runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dist.h"
#include "gpu_common.h"
#include "gpu_train.h"

#define STEPS 50
#define BATCH 32
#define TOL 1e-6

int main(int argc, char **argv)
{
	struct gpu_test t;
	struct model m;
	struct gpu_data g;
	struct gpu_run ra, rb;
	const int hidden[1] = {100};
	double loss_a[STEPS], loss_b[STEPS];
	void *graph = NULL;

	gpu_test_init(&t, "gpu_graph", 999, "--expect-no-graph", &argc, &argv);
	gpu_test_start(&t);

	model_init(&m, MODEL_MLP, hidden, 1);
	float *p0 = xmalloc(m.n_params * sizeof(float));
	float *pa = xmalloc(m.n_params * sizeof(float));
	float *pb = xmalloc(m.n_params * sizeof(float));
	model_init_params(&m, t.seed, p0);
	gpu_data_make(&g, t.seed, 1000, STEPS * BATCH, 1);
	gpu_run_create(&ra, &t.dev, &m, &g, p0, BATCH, 0.05f, 0.9f, REDUCE_MEAN);
	gpu_run_create(&rb, &t.dev, &m, &g, p0, BATCH, 0.05f, 0.9f, REDUCE_MEAN);

	int can = backend_can_capture(&t.dev);
	if (t.self_test) {
		gpu_test_check(&t, !can, "the host backend offers no capture (plain runs compared)");
	} else {
		gpu_test_check(&t, can, "the %s backend offers capture", backend_name(&t.dev));
		if (can && backend_capture_begin(&t.dev) == 0) {
			gpu_run_step(&rb);
			graph = backend_capture_end(&t.dev);
		}
		int got = graph != NULL, all = 0, any = 0;
		int want = !gpu_test_option(&t, "--expect-no-graph");
		MPI_CHECK(MPI_Allreduce(&got, &all, 1, MPI_INT, MPI_MIN, t.d.comm));
		MPI_CHECK(MPI_Allreduce(&got, &any, 1, MPI_INT, MPI_MAX, t.d.comm));
		gpu_test_check(&t, all == any,
			       "capture has the same outcome on every rank (this rank: %s)",
			       got ? "a graph" : "no graph");
		gpu_test_check(&t, got == want, "%s", want ? "one step captured into a graph"
							   : "no graph, as the failed capture requires");
		gpu_run_params(&rb, pb);
		gpu_test_check(&t, gpu_count_diff(pb, p0, m.n_params) == 0 && gpu_run_cursor(&rb) == 0,
			       "capturing ran nothing: parameters and cursor as they were");
	}

	for (int s = 0; s < STEPS; s++) {
		gpu_run_step(&ra);
		if (graph)
			backend_replay(&t.dev, graph);
		else
			gpu_run_step(&rb);
		loss_a[s] = gpu_run_loss(&ra);
		loss_b[s] = gpu_run_loss(&rb);
	}
	int same_loss = 0;
	double worst = 0.0;
	for (int s = 0; s < STEPS; s++) {
		double rel = fabs(loss_a[s] - loss_b[s]) / fabs(loss_a[s]);
		same_loss += loss_a[s] == loss_b[s];
		if (!(rel <= worst))
			worst = rel;
	}
	gpu_test_check(&t, worst <= TOL,
		       "losses of %d %s vs plain steps: %d of %d identical, largest relative difference %.3g",
		       STEPS, graph ? "replayed" : "plain", same_loss, STEPS, worst);

	gpu_run_params(&ra, pa);
	gpu_run_params(&rb, pb);
	size_t at = 0;
	double perr = gpu_norm_err(pb, pa, m.n_params, &at);
	gpu_test_check(&t, perr <= TOL,
		       "final parameters: %zu of %zu differ in any bit, normalised error %.3g",
		       gpu_count_diff(pa, pb, m.n_params), m.n_params, perr);
	int32_t ca = gpu_run_cursor(&ra), cb = gpu_run_cursor(&rb);
	gpu_test_check(&t, ca == STEPS * BATCH && cb == STEPS * BATCH,
		       "batch cursor: plain %d, %s %d (expected %d)", ca, graph ? "replayed" : "plain",
		       cb, STEPS * BATCH);

	if (graph)
		backend_graph_destroy(&t.dev, graph);
	gpu_run_destroy(&ra);
	gpu_run_destroy(&rb);
	gpu_data_free(&g);
	free(p0);
	free(pa);
	free(pb);
	return gpu_test_finish(&t);
}
