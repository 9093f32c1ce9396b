/* fake_cuda.c - the globals behind the stand-in tests/cuda_host/cuda_runtime.h. */
#include "cuda_runtime.h"

#include <stdio.h>
#include <stdlib.h>

struct fake_uint3 blockIdx, threadIdx;
dim3 blockDim, gridDim;
struct fake_cuda_stats fake_cuda_stats;

/* The latest refused launch, until fake_cuda_check_launch reads it (cudaGetLastError's part). */
static struct {
	const char *kernel;
	unsigned int grid, block;
} refused;

int fake_cuda_begin(unsigned int grid, unsigned int block, const char *kernel)
{
	if (grid == 0 || grid > 0x7fffffffu || block == 0 || block > 1024) {
		refused.kernel = kernel;
		refused.grid = grid;
		refused.block = block;
		return 0;
	}
	gridDim.x = grid;
	gridDim.y = gridDim.z = 1;
	blockDim.x = block;
	blockDim.y = blockDim.z = 1;
	blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;
	fake_cuda_stats.launches++;
	fake_cuda_stats.grid = grid;
	fake_cuda_stats.block = block;
	return 1;
}

void fake_cuda_check_launch(const char *kernel)
{
	if (!refused.kernel)
		return;
	fprintf(stderr, "fake_cuda: launch of %s with grid %u, block %u: invalid configuration\n",
		kernel, refused.grid, refused.block);
	abort();
}
