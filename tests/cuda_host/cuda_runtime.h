/*
 * cuda_runtime.h (tests/cuda_host/) - the CUDA built-ins, for compiling cuda/kernels.cu with the
 * host C compiler in the unit tests.
 *
 * The kernel test puts tests/cuda_host/ first on its include path, so
 * cuda/kernels.h's #include <cuda_runtime.h> finds this header. The qualifiers vanish, blockIdx/threadIdx/blockDim/
 * gridDim become globals, and the raw launch of cuda/kernels.cu's KERNEL_LAUNCH,
 * KERNEL_LAUNCH_ON (on the GPU: a <<<grid, block, 0, stream>>> launch), runs
 * the kernel once per (block, thread) as nested loops, in order. Kernels that
 * are correct grid-stride loops without shared memory or barriers give the
 * same result in any order, so this runs the kernels' own index arithmetic,
 * bounds checks and launch geometry on the CPU.
 *
 * Kernels whose threads share memory and wait at barriers
 * (KERNEL_LAUNCH_COOP_ON) run each block's threads as fibers instead
 * (block_fibers.h), so that __syncthreads holds.
 *
 * A launch with a geometry CUDA would refuse (zero or more than 2^31-1
 * blocks, zero or more than 1024 threads per block) runs nothing and is
 * remembered, as a GPU leaves it for cudaGetLastError; KERNEL_LAUNCH's check
 * that follows, CUDA_CHECK_LAUNCH (on the GPU: cuda/cuda_check.cuh's, which
 * this C build cannot include), aborts the test on it. fake_cuda_stats counts
 * what ran.
 *
 * The globals live in tests/cuda_host/fake_cuda.c.
 */
#ifndef MNIST_DDP_FAKE_CUDA_H
#define MNIST_DDP_FAKE_CUDA_H

#if defined(__CUDACC__)
#error "tests/cuda_host/cuda_runtime.h stands in for CUDA under the host compiler only"
#endif

#include <stdint.h>

#include "block_fibers.h"

#ifdef __cplusplus
extern "C" {
#endif

#define __global__
#define __device__
#define __host__
/* One copy per kernel: the running block's (block_fibers.h). */
#define __shared__ static
#define __syncthreads() block_fibers_sync()

/*
 * CUDA's integer atomicAdd (the old value back): one thread runs at a time
 * here, so a plain read-modify-write is atomic. Integer only: a float
 * atomic's order would decide bits.
 */
static inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long val)
{
	unsigned long long old = *address;
	*address = old + val;
	return old;
}

struct fake_uint3 {
	unsigned int x, y, z;
};
typedef struct fake_uint3 dim3;

/* A stream handle: never dereferenced on the host. */
typedef struct fake_cuda_stream *cudaStream_t;

extern struct fake_uint3 blockIdx, threadIdx;
extern dim3 blockDim, gridDim;

struct fake_cuda_stats {
	unsigned long launches;      /* KERNEL_LAUNCH calls that ran */
	unsigned long long threads;  /* kernel invocations, all launches */
	unsigned int grid, block;    /* geometry of the latest launch */
};
extern struct fake_cuda_stats fake_cuda_stats;

/*
 * Validate the geometry as CUDA would: 1 with gridDim and blockDim set and the
 * launch counted, or 0 with the refusal remembered for fake_cuda_check_launch.
 */
int fake_cuda_begin(unsigned int grid, unsigned int block, const char *kernel);

/* After each launch: a refused one aborts the test, naming it (what the GPU build's check does). */
void fake_cuda_check_launch(const char *kernel);

/* Same arguments as nvcc's launch in cuda/kernels.cu. */
#define KERNEL_LAUNCH_ON(kernel, geom, stream, ...)                                       \
	do {                                                                              \
		(void)(stream);                                                           \
		if (fake_cuda_begin((geom).grid, (geom).block, #kernel)) {                \
			for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)        \
				for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++) \
					kernel(__VA_ARGS__);                              \
			fake_cuda_stats.threads += (unsigned long long)gridDim.x * blockDim.x; \
		}                                                                         \
	} while (0)

/*
 * A kernel whose block's threads cooperate (cuda/kernels.cu's
 * KERNEL_LAUNCH_COOP): one argument, a struct by value; each block's threads
 * run as fibers so that __syncthreads holds (block_fibers.h), in ascending
 * order between barriers. KERNEL_COOP_THUNK(kernel, type), after the kernel,
 * defines what a fiber calls.
 */
#define KERNEL_COOP_THUNK(kernel, type)                                                   \
	static void kernel##_thunk(const void *arg) { kernel(*(const type *)arg); }

#define KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg)                                   \
	do {                                                                              \
		(void)(stream);                                                           \
		__typeof__(arg) fake_coop_arg_ = (arg);                                   \
		if (fake_cuda_begin((geom).grid, (geom).block, #kernel)) {                \
			for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)        \
				block_fibers_run(#kernel, blockIdx.x, blockDim.x, &threadIdx.x, \
						 kernel##_thunk, &fake_coop_arg_, NULL, 0);       \
			fake_cuda_stats.threads += (unsigned long long)gridDim.x * blockDim.x; \
		}                                                                         \
	} while (0)

#define CUDA_CHECK_LAUNCH(kernel_name) fake_cuda_check_launch(kernel_name)

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_FAKE_CUDA_H */
