/*
 * launch_check.cc - the product's launch check, on the simulator: a launcher
 * of cuda/kernels.cu (compiled unchanged against the simulator, as in the
 * simulated module) given a launch CUDA refuses must end the job through the
 * product's own KERNEL_LAUNCH check (CUDA_CHECK_LAUNCH: cudaGetLastError,
 * then cuda_check_fail and MPI_Abort, exit status 1), with its message
 * "launch of bias_act_kernel failed: error 9 (cudaErrorInvalidConfiguration) ...".
 * The simulator itself only refuses the launch and sets the last error, as a
 * GPU does; were the check missing from the macro, the launcher would return
 * with nothing done, and this program says so and exits 3.
 *
 *   mpirun -n 1 launch_check good|grid-0|block-2048|image
 *
 * good: the backend's own geometry, which must run (exit 0, "PASS"); grid-0
 * and block-2048: geometries outside CUDA's limits; image: the backend's
 * geometry, run with CUDASIM_FAULT=no-kernel-image by its test.
 */
#include <mpi.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "check.h"
#include "cuda_runtime.h"
#include "kernels.h"

static int usage()
{
	fprintf(stderr, "usage: launch_check good|grid-0|block-2048|image\n");
	return 2;
}

int main(int argc, char **argv)
{
	char host[64] = "";
	int rank = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	gethostname(host, sizeof(host) - 1);
	check_set_identity(rank, host);
	if (argc != 2)
		return usage();
	const char *mode = argv[1];
	const size_t n = 1000;
	struct kernel_geom g = kernel_geom_for(n);
	if (!strcmp(mode, "grid-0"))
		g.grid = 0;
	else if (!strcmp(mode, "block-2048"))
		g.block = 2048;
	else if (strcmp(mode, "good") != 0 && strcmp(mode, "image") != 0)
		return usage();

	cudaStream_t s = NULL;
	float *d = NULL;
	std::vector<float> h(n, 1.0f);
	if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess ||
	    cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess ||
	    cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
		printf("FAIL launch_check: the simulated device could not be set up\n");
		return 1;
	}
	kernels_bias_act(s, &g, d, d, 1, (int)n, 0); /* 1 + 1: each value doubled */
	if (cudaStreamSynchronize(s) != cudaSuccess ||
	    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
		printf("FAIL launch_check: the stream or the download failed\n");
		return 1;
	}
	size_t doubled = 0;
	for (float v : h)
		doubled += v == 2.0f;
	if (!strcmp(mode, "good")) {
		int ok = doubled == n;
		printf("%s launch_check: kernels_bias_act with grid %u, block %u doubled %zu of %zu\n",
		       ok ? "PASS" : "FAIL", g.grid, g.block, doubled, n);
		MPI_Finalize();
		return ok ? 0 : 1;
	}
	printf("FAIL launch_check: kernels_bias_act with grid %u, block %u (%s) returned: the launch "
	       "check did not stop the job (%zu of %zu doubled)\n",
	       g.grid, g.block, mode, doubled, n);
	MPI_Finalize();
	return 3;
}
