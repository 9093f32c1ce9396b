/*
 * cuda_runtime.h (tests/cuda_host/) - the CUDA built-ins, for compiling cuda/kernels.cu with the
 * host C compiler in the unit tests.
 *
 * The kernel test puts tests/cuda_host/ first on its include path, so
 * cuda/kernels.h's #include <cuda_runtime.h> finds this header. The qualifiers vanish, blockIdx/threadIdx/blockDim/
 * gridDim become globals, and KERNEL_LAUNCH (on the GPU: a <<<grid, block,
 * 0, stream>>> launch plus a cudaGetLastError check) runs the kernel once per
 * (block, thread) as nested loops, in order. Kernels that are correct grid-
 * stride loops without shared memory or barriers give the same result in any
 * order, so this runs the kernels' own index arithmetic, bounds checks and
 * launch geometry on the CPU.
 *
 * A launch with a geometry CUDA would refuse (zero or more than 2^31-1
 * blocks, zero or more than 1024 threads per block) aborts the test, as the
 * launch would fail on a GPU. fake_cuda_stats counts what ran.
 *
 * The globals live in tests/cuda_host/fake_cuda.c.
 */
#ifndef MNIST_DDP_FAKE_CUDA_H
#define MNIST_DDP_FAKE_CUDA_H

#if defined(__CUDACC__)
#error "tests/cuda_host/cuda_runtime.h stands in for CUDA under the host compiler only"
#endif

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define __global__
#define __device__
#define __host__

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

/* Validate the geometry as CUDA would, record it, set gridDim and blockDim. */
void fake_cuda_begin(unsigned int grid, unsigned int block, const char *kernel);

/* Same arguments as the GPU version in cuda/kernels.cu. */
#define KERNEL_LAUNCH(kernel, geom, stream, ...)                                          \
	do {                                                                              \
		(void)(stream);                                                           \
		fake_cuda_begin((geom).grid, (geom).block, #kernel);                      \
		for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)                \
			for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++)    \
				kernel(__VA_ARGS__);                                      \
		fake_cuda_stats.threads += (unsigned long long)gridDim.x * blockDim.x;   \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_FAKE_CUDA_H */
