/*
 * kernel_launch.cuh - what the files of kernels share (cuda/kernels.cu,
 * cuda/kernels_conv.cu): KERNEL_LAUNCH and KERNEL_LAUNCH_COOP, every launch
 * checked (kernels.cu's file comment says how each build runs them), the
 * launch geometry, and a grid-stride loop's first item and stride.
 */
#ifndef MNIST_DDP_KERNEL_LAUNCH_CUH
#define MNIST_DDP_KERNEL_LAUNCH_CUH

#include "kernels.h"

/* The C harness (tests/cuda_host) brings a CUDA_CHECK_LAUNCH of its own. */
#if defined(__CUDACC__) || defined(CUDASIM)
#include "cuda_check.cuh"
#endif

#if defined(__CUDACC__)
#define KERNEL_LAUNCH_ON(kernel, geom, stream, ...) \
	kernel<<<(geom).grid, (geom).block, 0, (stream)>>>(__VA_ARGS__)
#define KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg) \
	kernel<<<(geom).grid, (geom).block, 0, (stream)>>>(arg)
/* What a stand-in runs a cooperative kernel's thread through; nothing on a GPU. */
#define KERNEL_COOP_THUNK(kernel, type)
#endif

#define KERNEL_LAUNCH(kernel, geom, stream, ...)                                          \
	do {                                                                              \
		KERNEL_LAUNCH_ON(kernel, geom, stream, __VA_ARGS__);                      \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

/* A kernel whose block's threads share memory and wait at __syncthreads. */
#define KERNEL_LAUNCH_COOP(kernel, geom, stream, arg)                                    \
	do {                                                                              \
		KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg);                         \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

/* The geometry to launch with: the caller's, or the backend's for n items. */
static inline struct kernel_geom pick_geom(const struct kernel_geom *geom, size_t n)
{
	return geom ? *geom : kernel_geom_for(n);
}

/* rows * cols as a work size; 0 when either is not positive. */
static __host__ __device__ inline size_t work_2d(int rows, int cols)
{
	return rows > 0 && cols > 0 ? (size_t)rows * (size_t)cols : 0;
}

/* This thread's first item and the distance to its next one. */
static __device__ inline size_t grid_first(void)
{
	return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ inline size_t grid_stride(void)
{
	return (size_t)gridDim.x * blockDim.x;
}

#endif /* MNIST_DDP_KERNEL_LAUNCH_CUH */
