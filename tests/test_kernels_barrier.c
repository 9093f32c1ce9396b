/*
 * test_kernels_barrier.c - the unit tests' runner of cooperative kernels
 * (tests/cuda_host/block_fibers.h): __syncthreads holds on the CPU, and the
 * barrier mistakes CUDA leaves undefined end the test instead of passing.
 *
 * The kernel, reverse_kernel (tests/cuda_host/reverse_kernel.h), reverses
 * each block's slice of an array through shared memory. Threads run in
 * ascending order between barriers, so without the barrier thread 0 would
 * read the slot of a thread that has not run yet.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>

#include "cuda_runtime.h" /* the stand-in: tests/cuda_host/ */
#include "kernels.h"
#include "reverse_kernel.h" /* tests/cuda_host/ */

static void run_reverse(unsigned int grid, unsigned int block, struct reverse_args a)
{
	struct kernel_geom g = {grid, block};
	KERNEL_LAUNCH_COOP_ON(reverse_kernel, g, NULL, a);
	fake_cuda_check_launch("reverse_kernel");
}

Test(kernels_barrier, shared_memory_seen_after_barrier)
{
	const unsigned int geoms[][2] = {{1, 1}, {1, 32}, {3, 7}, {2, 256}, {1, 1024}};
	for (size_t gi = 0; gi < sizeof(geoms) / sizeof(geoms[0]); gi++) {
		unsigned int grid = geoms[gi][0], block = geoms[gi][1];
		int n = (int)(grid * block) - (block > 1 ? 1 : 0); /* the last block partial */
		float *in = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)n * sizeof(float));
		cr_assert(in && out);
		for (int i = 0; i < n; i++) {
			in[i] = 1000.0f + (float)i;
			out[i] = -5.0f;
		}
		run_reverse(grid, block, (struct reverse_args){in, out, n, 0, 1});
		for (int i = 0; i < n; i++) {
			unsigned int b = (unsigned int)i / block, t = (unsigned int)i % block;
			int j = (int)(b * block + (block - 1 - t));
			float want = j < n ? in[j] : -1.0f;
			cr_assert_eq(out[i], want, "grid %u block %u: out[%d] = %g, expected %g", grid,
				     block, i, out[i], want);
		}
		free(in);
		free(out);
	}
}

/* The same kernel without its barrier reads slots not yet written: the runner must show it. */
Test(kernels_barrier, missing_barrier_shows)
{
	enum { N = 64 };
	float in[N], out[N];
	for (int i = 0; i < N; i++)
		in[i] = 1000.0f + (float)i;
	run_reverse(1, N, (struct reverse_args){in, out, N, 0, 0});
	int wrong = 0;
	for (int i = 0; i < N; i++)
		wrong += out[i] != in[N - 1 - i];
	cr_assert_gt(wrong, 0, "a kernel without its barrier gave the barrier's result");
}

/* CUDA: a barrier in conditional code only where the condition is the block's. */
Test(kernels_barrier, divergent_barrier_aborts, .signal = SIGABRT)
{
	float in[8] = {0}, out[8];
	run_reverse(1, 8, (struct reverse_args){in, out, 8, 1, 1});
}

/* A plain launch (nested loops, no fibers) of a kernel that waits at a barrier. */
Test(kernels_barrier, barrier_in_plain_launch_aborts, .signal = SIGABRT)
{
	float in[4] = {0}, out[4];
	struct reverse_args a = {in, out, 4, 0, 1};
	struct kernel_geom g = {1, 4};
	KERNEL_LAUNCH_ON(reverse_kernel, g, NULL, a);
}
