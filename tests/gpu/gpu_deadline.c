/*
 * gpu_deadline.c - the collective deadline on the CUDA backend: a rank whose
 * peer never completes a collective must say which collective of which step
 * hangs and end the job, instead of waiting forever (ctest label gpu; 2 ranks,
 * one GPU each; 1 rank for the deadline with nothing hung).
 *
 *   mpirun -n 2 build/tests/gpu_deadline [--self-test] [--no-warm-up] [--upload] [--both]
 *                                        [--replay] [--free]
 *   mpirun -n 1 build/tests/gpu_deadline [--self-test]
 *
 * First every rank takes part in one allreduce: NCCL 2.22 and later connect
 * a communicator at its first collective, which needs every rank, so a first
 * collective that a peer never joins would block its caller on the host, out
 * of the deadline's reach. (The backend warms its communicator up at
 * start-up as well; --no-warm-up leaves that as the only warm-up.)
 *
 * Then rank 0 sets a 2 s deadline and the position (epoch 3, step 7), queues
 * an allreduce and waits for it through a download (--upload: through an
 * upload, which from pageable memory synchronizes the stream too); rank 1
 * never calls it and sleeps. --both: rank 1 issues the allreduce as well,
 * with the same deadline, and the collective is kept from completing by
 * other means (on the simulator, CUDASIM_HANG_RANK); every rank that waits
 * must then report it.
 *
 * --replay: every rank captures a graph holding the allreduce (capture is
 * collective) and replays it once, waited for, untimed; then the hanging
 * allreduce is that graph replayed again, not a plain call: a replayed
 * collective must count as pending as a plain one does. --free: the wait is
 * the free of another buffer (cudaFree waits for the whole device).
 *
 * On 1 rank nothing can hang: with the 2 s deadline armed, a plain allreduce,
 * one replayed from a graph, a free, an upload and a download with a
 * collective pending, and a synchronization with none, must each complete
 * with the right values and without the deadline firing. Prints "PASS ...".
 *
 * A rank must print "allreduce at epoch 3 step 7 not complete after 2 s" and
 * abort the job; ctest matches that line (the job's exit status is
 * MPI_Abort's). Where no device is usable the program prints "SKIP ..." and
 * exits 77.
 */
#include <stdio.h>
#include <time.h>

#include "check.h"
#include "gpu_common.h"

#define N 1024

/* A graph holding one allreduce (REDUCE_MEAN) of d, or NULL where the backend cannot capture. */
static void *capture_allreduce(struct gpu_test *t, float *d)
{
	if (!backend_can_capture(&t->dev) || backend_capture_begin(&t->dev) != 0)
		return NULL;
	backend_allreduce(&t->dev, d, N, REDUCE_MEAN);
	return backend_capture_end(&t->dev);
}

/* 1 when h holds want everywhere. */
static int all_equal(const float *h, float want)
{
	for (size_t i = 0; i < N; i++)
		if (h[i] != want)
			return 0;
	return 1;
}

/* One rank: the deadline armed, every collective completes, every wait returns. */
static int alone(struct gpu_test *t, float *d, float *h)
{
	float *other = gpu_upload_new(&t->dev, h, N * sizeof(float));
	backend_set_timeout(&t->dev, 2.0);
	backend_set_position(&t->dev, 3, 7);

	backend_allreduce(&t->dev, d, N, REDUCE_SUM);
	gpu_download(&t->dev, h, d, N * sizeof(float));
	gpu_test_check(t, all_equal(h, 1.0f), "a plain allreduce under the deadline, waited for by a download");

	void *graph = capture_allreduce(t, d);
	gpu_test_check(t, graph || t->self_test, "an allreduce captured into a graph");
	for (int i = 0; i < 3 && graph; i++)
		backend_replay(&t->dev, graph);
	gpu_download(&t->dev, h, d, N * sizeof(float));
	gpu_test_check(t, all_equal(h, 1.0f), "three replays of the captured allreduce, waited for by a download");

	backend_allreduce(&t->dev, d, N, REDUCE_MEAN);
	backend_free(&t->dev, other);
	backend_allreduce(&t->dev, d, N, REDUCE_MEAN);
	for (size_t i = 0; i < N; i++)
		h[i] = 2.0f;
	backend_upload(&t->dev, d, h, N * sizeof(float));
	gpu_download(&t->dev, h, d, N * sizeof(float));
	gpu_test_check(t, all_equal(h, 2.0f), "a free and an upload with an allreduce pending");

	backend_synchronize(&t->dev);
	backend_synchronize(&t->dev);
	gpu_test_check(t, 1, "synchronizations with nothing pending returned");
	if (graph)
		backend_graph_destroy(&t->dev, graph);
	backend_free(&t->dev, d);
	return gpu_test_finish(t);
}

int main(int argc, char **argv)
{
	struct gpu_test t;
	const size_t n = N;
	float h[N];
	void *graph = NULL;

	gpu_test_init(&t, "gpu_deadline", 1, "--no-warm-up --upload --both --replay --free", &argc,
		      &argv);
	gpu_test_start(&t);
	for (size_t i = 0; i < n; i++)
		h[i] = 1.0f;
	float *d = gpu_upload_new(&t.dev, h, n * sizeof(float));
	if (t.d.size == 1)
		return alone(&t, d, h);
	if (!gpu_test_option(&t, "--no-warm-up")) {
		backend_allreduce(&t.dev, d, n, REDUCE_SUM);
		gpu_download(&t.dev, h, d, n * sizeof(float));
	}
	if (gpu_test_option(&t, "--replay")) {
		graph = capture_allreduce(&t, d);
		if (!graph)
			die(1, "gpu_deadline --replay: the %s backend captured no graph", backend_name(&t.dev));
		backend_replay(&t.dev, graph);
		gpu_download(&t.dev, h, d, n * sizeof(float));
	}
	MPI_CHECK(MPI_Barrier(t.d.comm));
	if (t.d.rank == 0 || gpu_test_option(&t, "--both")) {
		float *other = gpu_upload_new(&t.dev, h, n * sizeof(float));
		backend_set_timeout(&t.dev, 2.0);
		backend_set_position(&t.dev, 3, 7);
		if (graph)
			backend_replay(&t.dev, graph);
		else
			backend_allreduce(&t.dev, d, n, REDUCE_MEAN);
		if (gpu_test_option(&t, "--free"))
			backend_free(&t.dev, other);
		else if (gpu_test_option(&t, "--upload"))
			backend_upload(&t.dev, d, h, n * sizeof(float));
		else
			gpu_download(&t.dev, h, d, n * sizeof(float));
		printf("FAIL gpu_deadline: rank %d: the allreduce completed although it cannot\n",
		       t.d.rank);
	} else {
		struct timespec pause = {60, 0};
		nanosleep(&pause, NULL);
		printf("FAIL gpu_deadline: rank %d was not ended by the deadline\n", t.d.rank);
	}
	fflush(stdout);
	return 1;
}
