/*
 * gpu_deadline.c - the collective deadline on the CUDA backend: a rank whose
 * peer never joins the allreduce must say which collective of which step
 * hangs and end the job, instead of waiting forever (ctest label gpu; 2 ranks,
 * one GPU each).
 *
 *   mpirun -n 2 build/tests/gpu_deadline [--self-test]
 *
 * Rank 0 sets a 2 s deadline and the position (epoch 3, step 7), queues an
 * allreduce and waits for it; rank 1 never calls it and sleeps. Rank 0 must
 * print "allreduce at epoch 3 step 7 not complete after 2 s" and abort the
 * job; ctest matches that line (the job's exit status is MPI_Abort's). Where
 * no device is usable the program prints "SKIP ..." and exits 77.
 */
#include <stdio.h>
#include <time.h>

#include "check.h"
#include "gpu_common.h"

int main(int argc, char **argv)
{
	struct gpu_test t;
	const size_t n = 1024;
	float h[1024];

	gpu_test_init(&t, "gpu_deadline", 1, &argc, &argv);
	gpu_test_start(&t);
	if (t.d.size < 2)
		die(1, "gpu_deadline needs 2 ranks or more (mpirun -n 2)");
	for (size_t i = 0; i < n; i++)
		h[i] = 1.0f;
	float *d = gpu_upload_new(&t.dev, h, n * sizeof(float));
	MPI_CHECK(MPI_Barrier(t.d.comm));
	if (t.d.rank == 0) {
		backend_set_timeout(&t.dev, 2.0);
		backend_set_position(&t.dev, 3, 7);
		t.dev.ops->allreduce(t.dev.ctx, d, n, REDUCE_MEAN);
		gpu_download(&t.dev, h, d, n * sizeof(float));
		printf("FAIL gpu_deadline: the allreduce completed without its peer\n");
	} else {
		struct timespec pause = {60, 0};
		nanosleep(&pause, NULL);
		printf("FAIL gpu_deadline: rank %d was not ended by the deadline\n", t.d.rank);
	}
	fflush(stdout);
	return 1;
}
