/*
 * gpu_deadline.c - the collective deadline on the CUDA backend: a rank whose
 * peer never completes a collective must say which collective of which step
 * hangs and end the job, instead of waiting forever (ctest label gpu; 2 ranks,
 * one GPU each).
 *
 *   mpirun -n 2 build/tests/gpu_deadline [--self-test] [--no-warm-up] [--upload] [--both]
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
 * A rank must print "allreduce at epoch 3 step 7 not complete after 2 s" and
 * abort the job; ctest matches that line (the job's exit status is
 * MPI_Abort's). Where no device is usable the program prints "SKIP ..." and
 * exits 77.
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

	gpu_test_init(&t, "gpu_deadline", 1, "--no-warm-up --upload --both", &argc, &argv);
	gpu_test_start(&t);
	if (t.d.size < 2)
		die(1, "gpu_deadline needs 2 ranks or more (mpirun -n 2)");
	for (size_t i = 0; i < n; i++)
		h[i] = 1.0f;
	float *d = gpu_upload_new(&t.dev, h, n * sizeof(float));
	if (!gpu_test_option(&t, "--no-warm-up")) {
		backend_allreduce(&t.dev, d, n, REDUCE_SUM);
		gpu_download(&t.dev, h, d, n * sizeof(float));
	}
	MPI_CHECK(MPI_Barrier(t.d.comm));
	if (t.d.rank == 0 || gpu_test_option(&t, "--both")) {
		backend_set_timeout(&t.dev, 2.0);
		backend_set_position(&t.dev, 3, 7);
		backend_allreduce(&t.dev, d, n, REDUCE_MEAN);
		if (gpu_test_option(&t, "--upload"))
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
