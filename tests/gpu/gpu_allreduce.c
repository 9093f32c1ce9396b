/*
 * gpu_allreduce.c - the CUDA backend's collectives across ranks: NCCL
 * allreduce (ncclAvg and ncclSum) and broadcast (ctest label gpu; started by
 * mpirun on 2 ranks, one GPU each).
 *
 *   mpirun -n 2 build/tests/gpu_allreduce [--self-test]
 *
 * Rank r fills its buffer with (r + 1) * (i % 97 + 1): small integers whose
 * sum over N ranks, N (N + 1) / 2 * (i % 97 + 1), is exact in float32, and so
 * is the mean when N is a power of two. Every element is checked, and the
 * count of wrong ones must be 0; when N is not a power of two the mean is
 * held to gpu_mean_tolerance(), which grows with N. Broadcast from the last
 * rank must leave its pattern everywhere. Expected values are computed from
 * (rank, size) alone. Rank 0 prints one row per case, with nccl-tests'
 * columns: time, algorithm and bus bandwidth, #wrong. An allreduce captured
 * into a graph must run nothing when captured and the whole collective at
 * each replay. A last round runs with a collective deadline set
 * (->set_timeout), which must not fire on collectives that complete.
 * --quick (the simulator): the largest size left out, one timed iteration.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "gpu_common.h"

/* Timed iterations per case (1 with --quick). */
static int timed_iters = 5;

static float pattern(int rank, size_t i)
{
	return (float)((rank + 1) * (int)(i % 97 + 1));
}

/* Elements of got that are not the expected value of the op (summed over all ranks). */
static long long count_wrong(const struct gpu_test *t, const float *got, size_t n,
			     enum reduce_op op)
{
	int p = t->d.size;
	double ranks_sum = (double)p * (p + 1) / 2.0;
	long long wrong = 0;
	for (size_t i = 0; i < n; i++) {
		double sum = ranks_sum * (double)(i % 97 + 1);
		double want = op == REDUCE_SUM ? sum : sum / p;
		double tol = op == REDUCE_MEAN ? gpu_mean_tolerance(p, want) : 0.0;
		wrong += !(fabs((double)got[i] - want) <= tol);
	}
	return wrong;
}

static void allreduce_case(struct gpu_test *t, size_t n, enum reduce_op op, float *h)
{
	const struct backend *be = &t->dev;
	for (size_t i = 0; i < n; i++)
		h[i] = pattern(t->d.rank, i);
	float *d = gpu_upload_new(be, h, n * sizeof(float));
	backend_allreduce(be, d, n, op);
	gpu_download(be, h, d, n * sizeof(float));
	long long wrong = count_wrong(t, h, n, op), all_wrong = 0;
	MPI_CHECK(MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, t->d.comm));

	/* Timing on the same buffer: the values no longer matter. */
	backend_synchronize(be);
	MPI_CHECK(MPI_Barrier(t->d.comm));
	double t0 = MPI_Wtime();
	for (int it = 0; it < timed_iters; it++)
		backend_allreduce(be, d, n, REDUCE_SUM);
	backend_synchronize(be);
	double us = (MPI_Wtime() - t0) / timed_iters * 1e6;
	double algbw = (double)n * sizeof(float) / (us * 1e-6) / 1e9;
	double busbw = algbw * 2.0 * (t->d.size - 1) / t->d.size;
	if (t->d.rank == 0)
		printf("%12zu %12zu %8s %10.1f %8.3f %8.3f %8lld\n", n * sizeof(float), n,
		       op == REDUCE_SUM ? "sum" : "avg", us, algbw, busbw, all_wrong);
	gpu_test_check(t, wrong == 0, "allreduce %s of %zu floats: %lld wrong on this rank",
		       op == REDUCE_SUM ? "sum" : "mean", n, wrong);
	backend_free(be, d);
}

/* An allreduce (sum) captured into a graph, then replayed twice. */
static void captured_case(struct gpu_test *t, size_t n, float *h)
{
	const struct backend *be = &t->dev;
	size_t bytes = n * sizeof(float);
	void *graph = NULL;
	if (!backend_can_capture(be)) {
		if (t->d.rank == 0)
			printf("# the %s backend offers no capture: no captured allreduce\n", backend_name(be));
		return;
	}
	for (size_t i = 0; i < n; i++)
		h[i] = pattern(t->d.rank, i);
	float *d = gpu_upload_new(be, h, bytes);
	if (backend_capture_begin(be) == 0) {
		backend_allreduce(be, d, n, REDUCE_SUM);
		graph = backend_capture_end(be);
	}
	gpu_test_check(t, graph != NULL, "allreduce of %zu floats captured into a graph", n);
	if (graph) {
		long long ran = 0, wrong = 0;
		gpu_download(be, h, d, bytes);
		for (size_t i = 0; i < n; i++)
			ran += h[i] != pattern(t->d.rank, i);
		backend_replay(be, graph);
		backend_replay(be, graph);
		gpu_download(be, h, d, bytes);
		/* Two sums over p ranks: p times the sum of the patterns. */
		double p = t->d.size;
		for (size_t i = 0; i < n; i++)
			wrong += h[i] != (float)(p * p * (p + 1) / 2.0 * (double)(i % 97 + 1));
		gpu_test_check(t, ran == 0 && wrong == 0,
			       "captured allreduce: %lld floats changed by the capture, %lld wrong after "
			       "two replays on this rank",
			       ran, wrong);
		backend_graph_destroy(be, graph);
	}
	backend_free(be, d);
}

static void broadcast_case(struct gpu_test *t, size_t n, float *h)
{
	const struct backend *be = &t->dev;
	int root = t->d.size - 1;
	for (size_t i = 0; i < n; i++)
		h[i] = t->d.rank == root ? pattern(root, i) : -1.0f;
	float *d = gpu_upload_new(be, h, n * sizeof(float));
	backend_broadcast(be, d, n, root);
	gpu_download(be, h, d, n * sizeof(float));
	long long wrong = 0;
	for (size_t i = 0; i < n; i++)
		wrong += h[i] != pattern(root, i);
	gpu_test_check(t, wrong == 0, "broadcast of %zu floats from rank %d: %lld wrong on this rank",
		       n, root, wrong);
	backend_free(be, d);
}

int main(int argc, char **argv)
{
	struct gpu_test t;
	const size_t sizes[] = {1, 2, 7, 1024, 101770, 1000003, (size_t)4 << 20};
	size_t n_sizes = sizeof(sizes) / sizeof(sizes[0]);

	gpu_test_init(&t, "gpu_allreduce", 1, NULL, &argc, &argv);
	gpu_test_start(&t);
	if (t.quick) {
		n_sizes--;
		timed_iters = 1;
	}
	if (t.d.size < 2 && t.d.rank == 0)
		printf("# note: one rank only; start with mpirun -n 2 or more to test communication\n");
	float *h = xmalloc(sizes[n_sizes - 1] * sizeof(float));
	if (t.d.rank == 0)
		printf("#%11s %12s %8s %10s %8s %8s %8s\n", "size(B)", "count", "redop", "time(us)",
		       "algbw", "busbw", "#wrong");
	for (size_t s = 0; s < n_sizes; s++) {
		allreduce_case(&t, sizes[s], REDUCE_SUM, h);
		allreduce_case(&t, sizes[s], REDUCE_MEAN, h);
	}
	for (size_t s = 0; s < n_sizes; s++)
		broadcast_case(&t, sizes[s], h);
	captured_case(&t, 101770, h);

	/* The same with a collective deadline set: the timed waits, not reached. */
	if (t.d.rank == 0)
		printf("# with a 60 s collective deadline (set_timeout)\n");
	backend_set_timeout(&t.dev, 60.0);
	backend_set_position(&t.dev, 0, 1);
	allreduce_case(&t, 101770, REDUCE_MEAN, h);
	broadcast_case(&t, 101770, h);
	backend_set_timeout(&t.dev, 0.0);
	free(h);
	return gpu_test_finish(&t);
}
