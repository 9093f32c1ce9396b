/*
 * cuda_runtime.h (tests/cudasim/) - the CUDA runtime API as the simulator
 * provides it: the part of it that cuda/ uses, for compiling the unchanged
 * .cu files of cuda/ with the host C++ compiler in the tests. Never on the
 * include path of the product: mnist-train links the real CUDA runtime.
 *
 * What the simulator models, rule by rule, and what it does not: cudasim.h.
 *
 * Names, types, enum values and error codes follow NVIDIA's runtime API
 * reference, so messages read the same ("error 35 (cudaErrorInsufficientDriver)").
 * CUDART_VERSION says which runtime this stands in for; CUDASIM marks it as
 * the simulator.
 *
 * Kernels: __global__, __device__ and __host__ vanish; blockIdx, threadIdx,
 * blockDim and gridDim are globals the simulator sets. The project launches
 * every kernel through one macro, KERNEL_LAUNCH (cuda/kernels.cu): the raw
 * launch, KERNEL_LAUNCH_ON, then its own check of cudaGetLastError. Here
 * KERNEL_LAUNCH_ON is what <<<grid, block, 0, stream>>> is under nvcc: it
 * takes the kernel's arguments by value (what a graph captures) and queues
 * the kernel on the stream, to run later as loops over blocks and threads; a
 * launch CUDA refuses is not queued and leaves its error for cudaGetLastError.
 */
#ifndef MNIST_DDP_CUDASIM_CUDA_RUNTIME_H
#define MNIST_DDP_CUDASIM_CUDA_RUNTIME_H

#if !defined(__cplusplus) || defined(__CUDACC__)
#error "tests/cudasim/cuda_runtime.h stands in for CUDA under the host C++ compiler only"
#endif

#include <stddef.h>

#include <functional>
#include <tuple>
#include <type_traits>

#define CUDART_VERSION 13000
#define CUDASIM 1

#define __global__
#define __device__
#define __host__
/* One copy per kernel: the running block's (tests/cuda_host/block_fibers.h). */
#define __shared__ static
#define __syncthreads() cudasim::barrier()

/*
 * CUDA's integer atomicAdd (the old value back). One host thread runs every
 * kernel thread, one at a time (cudasim.h: no real concurrency), so a plain
 * read-modify-write is atomic; an integer sum is the same in any order, so
 * nothing about the order needs modelling. Integer only: a float atomic's
 * order would decide bits.
 */
inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long val)
{
	unsigned long long old = *address;
	*address = old + val;
	return old;
}

enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInitializationError = 3,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidDevicePointer = 17,
	cudaErrorInvalidMemcpyDirection = 21,
	cudaErrorInsufficientDriver = 35,
	cudaErrorDevicesUnavailable = 46,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorNoKernelImageForDevice = 209,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorIllegalState = 401,
	cudaErrorNotReady = 600,
	cudaErrorIllegalAddress = 700,
	cudaErrorLaunchFailure = 719,
	cudaErrorNotPermitted = 800,
	cudaErrorNotSupported = 801,
	cudaErrorSystemNotReady = 802,
	cudaErrorSystemDriverMismatch = 803,
	cudaErrorCompatNotSupportedOnDevice = 804,
	cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901,
	cudaErrorStreamCaptureMerge = 902,
	cudaErrorStreamCaptureUnmatched = 903,
	cudaErrorStreamCaptureUnjoined = 904,
	cudaErrorStreamCaptureIsolation = 905,
	cudaErrorStreamCaptureImplicit = 906,
	cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

enum cudaStreamCaptureMode {
	cudaStreamCaptureModeGlobal = 0,
	cudaStreamCaptureModeThreadLocal = 1,
	cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
	cudaStreamCaptureStatusNone = 0,
	cudaStreamCaptureStatusActive = 1,
	cudaStreamCaptureStatusInvalidated = 2,
};

/* Element types of library calls (the runtime's library_types.h): the ones cuBLAS names here. */
enum cudaDataType_t {
	CUDA_R_32F = 0,
	CUDA_R_64F = 1,
	CUDA_R_16F = 2,
	CUDA_R_8I = 3,
	CUDA_R_32I = 10,
	CUDA_R_16BF = 14,
};
typedef enum cudaDataType_t cudaDataType;

#define cudaStreamDefault 0x00u
#define cudaStreamNonBlocking 0x01u
#define cudaEventDefault 0x00u
#define cudaEventDisableTiming 0x02u
#define cudaEventWaitDefault 0x00u
#define cudaHostAllocDefault 0x00u

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

/* The legacy default stream, as a handle (0 means it too). */
#define cudaStreamLegacy ((cudaStream_t)0x1)

struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	int major, minor;
	int multiProcessorCount;
	int pciBusID, pciDeviceID, pciDomainID;
};

struct cudaFuncAttributes {
	int maxThreadsPerBlock;
	int numRegs;
	int ptxVersion, binaryVersion;
};

struct uint3 {
	unsigned int x, y, z;
};
struct dim3 {
	unsigned int x, y, z;
};

extern "C" {

/* Devices and versions. */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device);
cudaError_t cudaDeviceSynchronize(void);

/* Errors. */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);

/* Memory. */
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t stream);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);

/* Streams and events. */
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);

/* Graphs. */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
				 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

} /* extern "C" */

/* ---- kernels ------------------------------------------------------------------ */

extern uint3 blockIdx, threadIdx;
extern dim3 blockDim, gridDim;

namespace cudasim {

/* The pointer arguments of one launch, checked against device memory. */
struct launch_ptrs {
	enum { max = 16 };
	const void *p[max];
	int n;
};

inline void collect(launch_ptrs &) {}

template <class T, class... Rest> void collect(launch_ptrs &l, T v, Rest... rest)
{
	if constexpr (std::is_pointer_v<T>) {
		if (l.n < launch_ptrs::max)
			l.p[l.n++] = (const void *)v;
	}
	collect(l, rest...);
}

/*
 * Check one launch and queue body, to run once per (block, thread); a launch
 * CUDA refuses is not queued, and its error is the thread's last error.
 */
cudaError_t launch(cudaStream_t stream, const char *kernel, unsigned int grid, unsigned int block,
		   const launch_ptrs &ptrs, std::function<void()> body, bool coop = false,
		   bool pdl = false);

/*
 * __syncthreads in a kernel launched by KERNEL_LAUNCH_COOP_ON: the thread
 * waits for its block (tests/cuda_host/block_fibers.h), its wait counted as a
 * loop trip of its serial work (rule 10).
 */
void barrier();

/*
 * Programmatic dependent launch (rule 5): in a kernel, the wait for the
 * kernel before it in the stream, counted per thread for the launch's check,
 * and the trigger that lets the kernel after start, a hint with nothing to do
 * here (kernels run one after another).
 */
void grid_dependency_wait();

/* cudaFuncGetAttributes for any kernel: whether its image runs on the device. */
cudaError_t func_attributes(struct cudaFuncAttributes *attr, const void *kernel);

} /* namespace cudasim */

/* Device functions of compute capability 9.0 (the programming guide's names). */
inline void cudaGridDependencySynchronize(void)
{
	cudasim::grid_dependency_wait();
}
inline void cudaTriggerProgrammaticLaunchCompletion(void) {}

template <class T> inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, T *kernel)
{
	return cudasim::func_attributes(attr, (const void *)kernel);
}

/*
 * The raw launch of the project's launch macro (cuda/kernels.cu), as nvcc's
 * kernel<<<grid, block, 0, stream>>>(args) behaves: a launch CUDA refuses
 * (geometry, no kernel image, no device, an invalidated capture) runs nothing
 * and leaves its error for cudaGetLastError, which the product's
 * CUDA_CHECK_LAUNCH reads next.
 */
/*
 * The arguments are evaluated here, at the launch, into a tuple the queued
 * work keeps: an argument such as *req (a struct the caller passes by value
 * from its own stack) is read now, as <<<>>> reads it, never when the kernel
 * runs.
 */
#define KERNEL_LAUNCH_PDL_ON(kernel, geom, stream, pdl, ...)                              \
	do {                                                                              \
		cudasim::launch_ptrs cudasim_ptrs_ = {};                                  \
		cudasim::collect(cudasim_ptrs_, __VA_ARGS__);                             \
		auto cudasim_args_ = std::make_tuple(__VA_ARGS__);                        \
		(void)cudasim::launch((stream), #kernel, (geom).grid, (geom).block,       \
				      cudasim_ptrs_,                                      \
				      [cudasim_args_]() { std::apply(kernel, cudasim_args_); }, \
				      false, (pdl) != 0);                                 \
	} while (0)
#define KERNEL_LAUNCH_ON(kernel, geom, stream, ...) \
	KERNEL_LAUNCH_PDL_ON(kernel, geom, stream, 0, __VA_ARGS__)

/*
 * A kernel whose block's threads cooperate (cuda/kernels.cu's
 * KERNEL_LAUNCH_COOP; one argument, a struct by value): queued as above, each
 * block's threads then run as fibers so that __syncthreads holds, in
 * descending order between barriers (the unit tests' stand-in runs them
 * ascending, so a read that a missing barrier leaves unordered differs
 * between the two).
 */
#define KERNEL_COOP_THUNK(kernel, type)
#define KERNEL_LAUNCH_COOP_PDL_ON(kernel, geom, stream, pdl, arg)                         \
	do {                                                                              \
		cudasim::launch_ptrs cudasim_ptrs_ = {};                                  \
		auto cudasim_arg_ = (arg);                                                \
		(void)cudasim::launch((stream), #kernel, (geom).grid, (geom).block,       \
				      cudasim_ptrs_, [cudasim_arg_]() { kernel(cudasim_arg_); }, \
				      true, (pdl) != 0);                                  \
	} while (0)
#define KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg) \
	KERNEL_LAUNCH_COOP_PDL_ON(kernel, geom, stream, 0, arg)

#endif /* MNIST_DDP_CUDASIM_CUDA_RUNTIME_H */
