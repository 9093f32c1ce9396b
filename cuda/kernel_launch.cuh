/*
 * kernel_launch.cuh - what the files of kernels share (cuda/kernels.cu,
 * cuda/kernels_conv.cu, cuda/kernels_gemm.cu, cuda/kernels_head.cu,
 * cuda/kernels_dense.cu):
 * KERNEL_LAUNCH and KERNEL_LAUNCH_COOP and the cooperative kernels' sizes,
 * every launch checked (kernels.cu's file comment says how each build runs
 * them), the programmatic dependent launch and the wait that begins every
 * kernel, the launch geometry, and a grid-stride loop's first item and
 * stride.
 */
#ifndef MNIST_DDP_KERNEL_LAUNCH_CUH
#define MNIST_DDP_KERNEL_LAUNCH_CUH

#include "kernels.h"

/* The C harness (tests/cuda_host) brings a CUDA_CHECK_LAUNCH of its own. */
#if defined(__CUDACC__) || defined(CUDASIM)
#include "cuda_check.cuh"
#endif

/*
 * Programmatic dependent launch (docs/gpu.md "A kernel starts while the one
 * before it ends"): on a GPU of compute capability 9.0 or later, with
 * kernels_pdl set (kernels_set_pdl), each kernel is launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization, so that the GPU may
 * start it while the kernel before it in the stream
 * finishes. Every kernel therefore begins with KERNEL_WAIT_PREVIOUS: its
 * threads wait there until the kernel before has completed and its writes are
 * visible (cudaGridDependencySynchronize), before they read or write any
 * memory, and then allow the kernel after to start
 * (cudaTriggerProgrammaticLaunchCompletion); what is overlapped is the launch,
 * never the work. A kernel before that is not ours (cuBLAS, NCCL) lets ours
 * start as its blocks end. Launched without the attribute, a kernel starts
 * only after the one before has completed, and its wait returns at once.
 * The dependents are let start only once every block of this kernel has
 * begun, so the blocks that wait never keep this kernel's from running.
 */
#if defined(__CUDACC__)
#include <utility>

template <typename... Params, typename... Args>
static inline void kernel_launch_pdl(void (*kernel)(Params...), struct kernel_geom geom,
				     cudaStream_t stream, int pdl, Args &&...args)
{
	cudaLaunchAttribute attr[1];
	attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	attr[0].val.programmaticStreamSerializationAllowed = 1;
	cudaLaunchConfig_t config = {};
	config.gridDim = dim3(geom.grid);
	config.blockDim = dim3(geom.block);
	config.dynamicSmemBytes = 0;
	config.stream = stream;
	config.attrs = attr;
	config.numAttrs = pdl ? 1 : 0;
	/* An error stays the thread's last error, which CUDA_CHECK_LAUNCH reads next. */
	(void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

#define KERNEL_LAUNCH_PDL_ON(kernel, geom, stream, pdl, ...) \
	kernel_launch_pdl(kernel, (geom), (stream), (pdl), __VA_ARGS__)
#define KERNEL_LAUNCH_COOP_PDL_ON(kernel, geom, stream, pdl, arg) \
	kernel_launch_pdl(kernel, (geom), (stream), (pdl), arg)
/* What a stand-in runs a cooperative kernel's thread through; nothing on a GPU. */
#define KERNEL_COOP_THUNK(kernel, type)

/* griddepcontrol (PTX ISA 7.8, sm_90): the device code of an sm_80 build has neither. */
static __device__ __forceinline__ void kernel_wait_previous(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define KERNEL_WAIT_PREVIOUS() kernel_wait_previous()
#elif defined(CUDASIM)
/* The simulator's launch takes the attribute (tests/cudasim/cuda_runtime.h, rule 5). */
#define KERNEL_WAIT_PREVIOUS()                                                            \
	do {                                                                              \
		cudaGridDependencySynchronize();                                          \
		cudaTriggerProgrammaticLaunchCompletion();                                \
	} while (0)
#else
/* The unit tests' runner (tests/cuda_host) runs launches one after another: nothing to overlap. */
#define KERNEL_LAUNCH_PDL_ON(kernel, geom, stream, pdl, ...)                              \
	do {                                                                              \
		(void)(pdl);                                                              \
		KERNEL_LAUNCH_ON(kernel, geom, stream, __VA_ARGS__);                      \
	} while (0)
#define KERNEL_LAUNCH_COOP_PDL_ON(kernel, geom, stream, pdl, arg)                         \
	do {                                                                              \
		(void)(pdl);                                                              \
		KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg);                         \
	} while (0)
#define KERNEL_WAIT_PREVIOUS() ((void)0)
#endif

#define KERNEL_LAUNCH(kernel, geom, stream, ...)                                          \
	do {                                                                              \
		KERNEL_LAUNCH_PDL_ON(kernel, geom, stream, kernels_pdl, __VA_ARGS__);     \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

/*
 * The cooperative kernels' sizes: a warp's lanes (the threads sharing one
 * row of the loss, or a transposed bias gradient's neighbouring sums; a block
 * narrower than a warp gives them all of it), and CUDA's most threads per
 * block (their shared arrays' size).
 */
#define COOP_LANES 32u
#define COOP_MAX_THREADS 1024

/* A kernel whose block's threads share memory and wait at __syncthreads. */
#define KERNEL_LAUNCH_COOP(kernel, geom, stream, arg)                                    \
	do {                                                                              \
		KERNEL_LAUNCH_COOP_PDL_ON(kernel, geom, stream, kernels_pdl, arg);        \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

/*
 * Unroll the loop that follows in full (nvcc, whose own limit may stop short
 * and leave an array the loop indexes in local memory); nothing elsewhere.
 */
#if defined(__CUDACC__)
#define KERNEL_UNROLL _Pragma("unroll")
#else
#define KERNEL_UNROLL
#endif

/* A shared array's alignment to 16 bytes, for loads of four floats at once. */
#if defined(__CUDACC__)
#define KERNEL_ALIGN16 __align__(16)
#else
#define KERNEL_ALIGN16 __attribute__((aligned(16)))
#endif

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
