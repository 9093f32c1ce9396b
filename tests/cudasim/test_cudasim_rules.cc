/*
 * test_cudasim_rules.cc - each rule of the CUDA simulator (cudasim.h), one
 * process, no MPI: a correct use gives what CUDA documents, and a wrong
 * program breaks the way a GPU would break it, or is stopped with a message.
 *
 *   ctest --test-dir build -R test_cudasim_rules --output-on-failure
 *
 * Written against the stand-in headers as any CUDA program is; kernels are
 * launched through the raw launch the stand-in provides for the project's
 * KERNEL_LAUNCH (KERNEL_LAUNCH_ON), each followed by a check of
 * cudaGetLastError as the project's is. Criterion forks a process per test,
 * so the settings each test puts in the environment stay its own.
 */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "cudasim.h"
#include "gemm_map.h"
#include "gpu_common.h"
#include "nccl.h"
#include "ref.h"
#include "../cuda_host/reverse_kernel.h"

struct geom {
	unsigned int grid, block;
};

/* A launch and its check, as cuda/kernels.cu's KERNEL_LAUNCH does them. */
#define LAUNCH(kernel, g, stream, ...)                                                    \
	do {                                                                              \
		KERNEL_LAUNCH_ON(kernel, g, stream, __VA_ARGS__);                         \
		cr_assert_eq(cudaGetLastError(), cudaSuccess, "launch of %s", #kernel);  \
	} while (0)

static int kernel_runs; /* bumped by count_kernel, to see when work runs */

static __global__ void fill_kernel(float *x, size_t n, float v)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] = v;
}

static __global__ void count_kernel(float *x)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		kernel_runs++;
		x[0] += 1.0f;
	}
}

static void fill(cudaStream_t s, float *x, size_t n, float v, struct geom g = {4, 64})
{
	LAUNCH(fill_kernel, g, s, x, n, v);
}

static void count(cudaStream_t s, float *x)
{
	struct geom g = {1, 1};
	LAUNCH(count_kernel, g, s, x);
}

static float *dalloc(size_t n)
{
	void *p = NULL;
	cr_assert_eq(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
	return (float *)p;
}

static cudaStream_t new_stream(void)
{
	cudaStream_t s;
	cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	return s;
}

/* ---- 1. device memory ------------------------------------------------------------ */

Test(memory, host_code_reading_device_memory_is_stopped, .signal = SIGABRT)
{
	float *d = dalloc(16);
	volatile float v = d[3]; /* what a GPU program may never do */
	(void)v;
}

Test(memory, kernel_given_host_memory_is_stopped, .signal = SIGABRT)
{
	std::vector<float> host(64);
	fill(new_stream(), host.data(), host.size(), 1.0f);
}

Test(memory, kernel_running_past_its_allocation_is_stopped, .signal = SIGABRT)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(1024); /* 4096 bytes: ends at a page end, the guard page after it */
	fill(s, d, 1025, 1.0f);
	cudaStreamSynchronize(s);
}

Test(memory, new_allocations_hold_garbage_not_zeros)
{
	float *d = dalloc(8), h[8];
	cr_assert_eq(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
	for (int i = 0; i < 8; i++)
		cr_assert(isnan(h[i]), "element %d of a new allocation is %g, not garbage", i, (double)h[i]);
}

Test(memory, copies_are_checked_against_their_kind_and_bounds)
{
	float *d = dalloc(8), h[8] = {0};
	cr_assert_eq(cudaMemcpy(d, d, sizeof(h), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
	cr_assert_eq(cudaMemcpy(h, d, 2 * sizeof(h), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
	cr_assert_eq(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice), cudaSuccess);
	cr_assert_eq(cudaGetLastError(), cudaErrorInvalidValue, "the last error is the last failure");
	cr_assert_eq(cudaGetLastError(), cudaSuccess, "and reading it clears it");
}

Test(memory, a_kernel_on_freed_memory_is_stopped, .signal = SIGABRT)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(64);
	cr_assert_eq(cudaFree(d), cudaSuccess);
	fill(s, d, 64, 1.0f);
}

/* ---- 2-4. streams, copies, events ---------------------------------------------------- */

Test(stream, work_runs_only_when_the_host_waits_for_it)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(1);
	kernel_runs = 0;
	count(s, d);
	count(s, d);
	cr_assert_eq(kernel_runs, 0, "queued work ran before anything waited for it");
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(kernel_runs, 2);
}

Test(stream, a_download_into_pinned_memory_read_before_the_wait_is_stale)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(4), *h = NULL;
	cr_assert_eq(cudaMallocHost((void **)&h, 4 * sizeof(float)), cudaSuccess);
	h[0] = -1.0f;
	fill(s, d, 4, 7.0f);
	cr_assert_eq(cudaMemcpyAsync(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(h[0], -1.0f, "an asynchronous download was read before the wait: it must be stale");
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(h[0], 7.0f);
	cr_assert_eq(cudaFreeHost(h), cudaSuccess);
}

Test(stream, a_download_into_pageable_memory_returns_complete)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(4), h[4] = {0};
	fill(s, d, 4, 7.0f);
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(h[3], 7.0f, "device to pageable memory returns only once the copy is done");
}

Test(stream, an_upload_from_pageable_memory_waits_for_the_stream_first)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(1), h = 5.0f, back = 0.0f;
	kernel_runs = 0;
	count(s, d);
	cr_assert_eq(cudaMemcpyAsync(d, &h, sizeof(h), cudaMemcpyHostToDevice, s), cudaSuccess);
	cr_assert_eq(kernel_runs, 1, "the stream was synchronized before the staged copy");
	h = 9.0f; /* staged already: the copy keeps 5 */
	cr_assert_eq(cudaMemcpyAsync(&back, d, sizeof(back), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(back, 5.0f);
}

Test(stream, another_streams_work_is_not_waited_for)
{
	cudaStream_t a = new_stream(), b = new_stream();
	float *d = dalloc(4), h[4] = {0};
	fill(b, d, 4, 1.0f);
	cr_assert_eq(cudaStreamSynchronize(b), cudaSuccess);
	fill(a, d, 4, 2.0f);
	/* Downloading on b does not order after a's kernel: a missing event wait shows as stale data. */
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, b), cudaSuccess);
	cr_assert_eq(h[0], 1.0f, "b's copy saw a's work without waiting for it");
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, b), cudaSuccess);
	cr_assert_eq(h[0], 2.0f);
}

Test(event, an_event_completes_at_its_record_point_and_no_later)
{
	cudaStream_t s = new_stream();
	cudaEvent_t e, never;
	float *d = dalloc(1);
	cr_assert_eq(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
	cr_assert_eq(cudaEventCreate(&never), cudaSuccess);
	cr_assert_eq(cudaEventQuery(never), cudaSuccess, "an event never recorded is complete");
	kernel_runs = 0;
	count(s, d);
	cr_assert_eq(cudaEventRecord(e, s), cudaSuccess);
	count(s, d);
	cr_assert_eq(cudaEventSynchronize(e), cudaSuccess);
	cr_assert_eq(kernel_runs, 1, "waiting for the event ran work recorded after it");
	cr_assert_eq(cudaEventQuery(e), cudaSuccess);
	cr_assert_eq(cudaStreamQuery(s), cudaSuccess, "a query runs what it can");
	cr_assert_eq(kernel_runs, 2);
}

/* ---- 5. kernels ------------------------------------------------------------------------ */

/* A launch CUDA refuses runs nothing and says why through cudaGetLastError, once. */
static void refused_launch(struct geom g, cudaError_t want)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(1), h = 0.0f;
	kernel_runs = 0;
	cr_assert_eq(cudaMemsetAsync(d, 0, sizeof(float), s), cudaSuccess);
	KERNEL_LAUNCH_ON(count_kernel, g, s, d);
	cr_assert_eq(cudaPeekAtLastError(), want, "grid %u, block %u: %s", g.grid, g.block,
		     cudaGetErrorName(cudaPeekAtLastError()));
	cr_assert_eq(cudaGetLastError(), want);
	cr_assert_eq(cudaGetLastError(), cudaSuccess, "a launch error is not sticky");
	cr_assert_eq(cudaMemcpyAsync(&h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert(kernel_runs == 0 && h == 0.0f, "the refused launch ran");
}

Test(kernel, launches_outside_cudas_geometry_limits_are_refused)
{
	refused_launch({1, 2048}, cudaErrorInvalidConfiguration);
	refused_launch({1, 0}, cudaErrorInvalidConfiguration);
	refused_launch({0, 64}, cudaErrorInvalidConfiguration);
	refused_launch({0x80000000u, 64}, cudaErrorInvalidConfiguration);
	float *d = dalloc(1);
	struct geom most = {1, 1024};
	kernel_runs = 0;
	LAUNCH(count_kernel, most, cudaStreamLegacy, d);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(kernel_runs, 1, "a block of 1024 threads is within the limits");
}

Test(kernel, a_launch_without_a_kernel_image_for_the_device_is_refused)
{
	setenv("CUDASIM_FAULT", "no-kernel-image", 1);
	refused_launch({1, 1}, cudaErrorNoKernelImageForDevice);
}

/*
 * Rule 5, programmatic dependent launch: a kernel launched to start while the
 * one before it ends must wait for it in every thread
 * (cudaGridDependencySynchronize) before it reads what that one wrote.
 */
static __global__ void add_after_wait_kernel(float *x, unsigned int skip_thread)
{
	if (threadIdx.x != skip_thread)
		cudaGridDependencySynchronize();
	cudaTriggerProgrammaticLaunchCompletion();
	if (threadIdx.x == 0)
		x[blockIdx.x] += 1.0f;
}

static void pdl_launches(unsigned int skip_thread)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(3), h[3];
	struct geom g = {3, 32};
	cr_assert_eq(cudaMemsetAsync(d, 0, sizeof(h), s), cudaSuccess);
	for (int i = 0; i < 2; i++) {
		KERNEL_LAUNCH_PDL_ON(add_after_wait_kernel, g, s, 1, d, skip_thread);
		cr_assert_eq(cudaGetLastError(), cudaSuccess);
	}
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	for (int b = 0; b < 3; b++)
		cr_assert_eq(h[b], 2.0f, "block %d: %g", b, h[b]);
}

Test(kernel, a_programmatic_dependent_launch_whose_threads_all_wait_runs)
{
	pdl_launches(32); /* no thread skips the wait */
}

Test(kernel, a_programmatic_dependent_launch_with_a_thread_that_never_waits_is_stopped,
     .signal = SIGABRT)
{
	pdl_launches(5);
}

Test(kernel, a_plain_launch_needs_no_wait)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(1), h = 0.0f;
	struct geom g = {1, 32};
	cr_assert_eq(cudaMemsetAsync(d, 0, sizeof(h), s), cudaSuccess);
	LAUNCH(add_after_wait_kernel, g, s, d, 7u);
	cr_assert_eq(cudaMemcpyAsync(&h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(h, 1.0f);
}

/* Rule 5, cooperative kernels: reverse_kernel (tests/cuda_host/reverse_kernel.h). */

/* The reversed array, run on a stream and read back. */
static std::vector<float> reversed(struct geom g, int n, int divergent, int barrier)
{
	cudaStream_t s = new_stream();
	std::vector<float> h(n);
	for (int i = 0; i < n; i++)
		h[i] = 1000.0f + i;
	float *in = dalloc(n), *out = dalloc(n);
	cr_assert_eq(cudaMemcpy(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
	struct reverse_args a = {in, out, n, divergent, barrier};
	KERNEL_LAUNCH_COOP_ON(reverse_kernel, g, s, a);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
	return h;
}

Test(kernel, a_barrier_holds_for_every_thread_of_the_block)
{
	const struct geom geoms[] = {{1, 1}, {3, 7}, {2, 256}, {1, 1024}};
	for (const struct geom &g : geoms) {
		int n = (int)(g.grid * g.block) - (g.block > 1 ? 1 : 0);
		std::vector<float> h = reversed(g, n, 0, 1);
		for (int i = 0; i < n; i++) {
			unsigned int b = (unsigned int)i / g.block, t = (unsigned int)i % g.block;
			int j = (int)(b * g.block + (g.block - 1 - t));
			float want = j < n ? 1000.0f + j : -1.0f;
			cr_assert_eq(h[i], want, "grid %u block %u: out[%d] = %g, expected %g", g.grid,
				     g.block, i, h[i], want);
		}
	}
}

Test(kernel, a_missing_barrier_shows)
{
	std::vector<float> h = reversed({1, 64}, 64, 0, 0);
	int wrong = 0;
	for (int i = 0; i < 64; i++)
		wrong += h[i] != 1000.0f + (63 - i);
	cr_assert_gt(wrong, 0, "a kernel without its barrier gave the barrier's result");
}

Test(kernel, a_barrier_some_threads_never_reach_is_stopped, .signal = SIGABRT)
{
	reversed({1, 8}, 8, 1, 1);
}

Test(kernel, a_barrier_in_a_plain_launch_is_stopped, .signal = SIGABRT)
{
	float *d = dalloc(4);
	struct reverse_args a = {d, d, 4, 0, 1};
	struct geom g = {1, 4};
	KERNEL_LAUNCH_ON(reverse_kernel, g, cudaStreamLegacy, a);
	cudaDeviceSynchronize();
}

Test(kernel, arguments_are_taken_at_launch)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(8), h[8];
	float v = 3.0f;
	struct geom g = {2, 3}; /* 6 threads for 8 items: the grid-stride loop wraps */
	LAUNCH(fill_kernel, g, s, d, (size_t)8, v);
	v = 4.0f;
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(h[i], 3.0f, "element %d", i);
}

/* ---- 6. graph capture ------------------------------------------------------------------- */

static void capture_must_be_invalidated(cudaStream_t s)
{
	cudaGraph_t g = (cudaGraph_t)0x1;
	cr_assert_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
	cr_assert_null(g, "an invalidated capture gives a NULL graph");
}

Test(capture, synchronizing_the_capturing_stream_fails_and_invalidates)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(4);
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
	cr_assert_eq(cudaMemsetAsync(d, 0, 4, s), cudaErrorStreamCaptureInvalidated,
		     "work queued on an invalidated capture");
	capture_must_be_invalidated(s);
}

Test(capture, allocating_during_capture_fails_and_invalidates)
{
	cudaStream_t s = new_stream();
	void *p = NULL;
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	cr_assert_eq(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
	capture_must_be_invalidated(s);
}

Test(capture, a_pageable_copy_or_a_synchronous_copy_during_capture_fails)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(4), h[4] = {0};
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s),
		     cudaErrorStreamCaptureUnsupported);
	capture_must_be_invalidated(s);
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	cr_assert_eq(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice), cudaErrorStreamCaptureUnsupported);
	capture_must_be_invalidated(s);
}

Test(capture, querying_an_event_recorded_in_the_capture_fails)
{
	cudaStream_t s = new_stream();
	cudaEvent_t e;
	cr_assert_eq(cudaEventCreate(&e), cudaSuccess);
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	cr_assert_eq(cudaEventRecord(e, s), cudaSuccess);
	cr_assert_eq(cudaEventQuery(e), cudaErrorStreamCaptureUnsupported);
	capture_must_be_invalidated(s);
}

Test(capture, a_graph_replays_what_it_baked_in_and_capture_runs_nothing)
{
	cudaStream_t s = new_stream();
	float *a = dalloc(4), *b = dalloc(4), h[4];
	float v = 3.0f;
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	fill(s, a, 4, 0.0f);
	fill(s, b, 4, 0.0f);
	kernel_runs = 0;
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	float *target = a;
	fill(s, target, 4, v);
	count(s, target);
	cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
	cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(kernel_runs, 0, "capture ran the work it recorded");
	v = 5.0f;      /* too late: the graph holds 3 */
	target = b;    /* and a */
	cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
	cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
	cr_assert_eq(cudaMemcpyAsync(h, a, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(kernel_runs, 2);
	cr_assert(h[0] == 4.0f && h[1] == 3.0f, "a after two replays: %g %g", (double)h[0], (double)h[1]);
	cr_assert_eq(cudaMemcpyAsync(h, b, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert(h[0] == 0.0f, "the replay wrote b, which it never captured");
	cudaGraphExecDestroy(x);
	cudaGraphDestroy(g);
}

/* One node per operation recorded; the array filled as the runtime API reference describes. */
Test(capture, a_graph_has_one_node_per_recorded_operation)
{
	cudaStream_t s = new_stream();
	float *d = dalloc(4);
	cudaGraph_t g = NULL;
	cudaEvent_t e;
	cr_assert_eq(cudaEventCreate(&e), cudaSuccess);
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	cr_assert_eq(cudaMemsetAsync(d, 0, 4 * sizeof(float), s), cudaSuccess);
	fill(s, d, 4, 1.0f);
	cr_assert_eq(cudaEventRecord(e, s), cudaSuccess); /* a point in the capture, not a node */
	count(s, d);
	cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
	size_t n = 0;
	cr_assert_eq(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
	cr_assert_eq(n, 3, "memset, fill, count: %zu nodes", n);
	cudaGraphNode_t nodes[5];
	n = 2;
	cr_assert_eq(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
	cr_assert(n == 2 && nodes[0] && nodes[1] && nodes[0] != nodes[1], "room for 2: %zu", n);
	n = 5;
	cr_assert_eq(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
	cr_assert(n == 3 && nodes[2] && !nodes[3] && !nodes[4], "room for 5: %zu written, the rest NULL", n);
	cr_assert_eq(cudaGraphGetNodes(g, nodes, NULL), cudaErrorInvalidValue);
	cr_assert_eq(cudaGetLastError(), cudaErrorInvalidValue);
	cudaGraphDestroy(g);
}

/* ---- 2 and 6 across streams: cudaStreamWaitEvent ---------------------------------------- */

static __global__ void copy_kernel(float *dst, const float *src, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dst[i] = src[i];
}

static void copy(cudaStream_t s, float *dst, const float *src, size_t n)
{
	struct geom g = {1, 32};
	LAUNCH(copy_kernel, g, s, dst, src, n);
}

static float first_of(cudaStream_t s, const float *d)
{
	float h[4];
	cr_assert_eq(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s), cudaSuccess);
	return h[0];
}

Test(streams, a_wait_runs_the_other_streams_work_up_to_the_record_first)
{
	cudaStream_t a = new_stream(), b = new_stream();
	float *x = dalloc(4), *y = dalloc(4), *z = dalloc(4);
	cudaEvent_t e;
	cr_assert_eq(cudaEventCreate(&e), cudaSuccess);
	fill(a, x, 4, 7.0f);
	cr_assert_eq(cudaEventRecord(e, a), cudaSuccess);
	cr_assert_eq(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
	copy(b, y, x, 4);
	cr_assert_eq(first_of(b, y), 7.0f, "b's copy after a's fill, through the event");
	/* Without the wait b's work runs alone: x's new value is not there yet. */
	fill(a, z, 4, 5.0f);
	copy(b, y, z, 4);
	cr_assert(isnan(first_of(b, y)), "b read a's result without waiting for it");
	cr_assert_eq(cudaStreamWaitEvent(b, e, 1u), cudaErrorInvalidValue);
}

/* A fork (a stream waits for an event recorded in the capture) and a join: one graph. */
static void capture_fork_join(cudaStream_t s, cudaStream_t t, float *x, float *y, float *w,
			      int overwrite)
{
	cudaEvent_t fork, join;
	cr_assert_eq(cudaEventCreate(&fork), cudaSuccess);
	cr_assert_eq(cudaEventCreate(&join), cudaSuccess);
	fill(s, x, 4, 7.0f);
	cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
	cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess);
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
	cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
	cr_assert_eq(st, cudaStreamCaptureStatusActive, "the stream that waited joined the capture");
	copy(t, y, x, 4);       /* the branch */
	fill(s, x, 4, overwrite ? 9.0f : 7.0f); /* beside it: overwriting what it reads is a race */
	cr_assert_eq(cudaEventRecord(join, t), cudaSuccess);
	cr_assert_eq(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
	copy(s, w, y, 4);       /* after both */
}

static cudaGraphExec_t fork_join_graph(cudaStream_t s, cudaStream_t t, float *x, float *y,
				       float *w, int overwrite)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t ex = NULL;
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	capture_fork_join(s, t, x, y, w, overwrite);
	cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
	cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
	cr_assert_eq(st, cudaStreamCaptureStatusNone, "the capture ended on the joined stream too");
	size_t n = 0;
	cr_assert_eq(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
	cr_assert_eq(n, 4, "fill, copy, fill, copy: %zu nodes", n);
	cr_assert_eq(cudaGraphInstantiate(&ex, g, 0), cudaSuccess);
	cudaGraphDestroy(g);
	return ex;
}

Test(capture, a_fork_and_its_join_make_one_graph_right_in_every_order)
{
	cudaStream_t s = new_stream(), t = new_stream();
	float *x = dalloc(4), *y = dalloc(4), *w = dalloc(4);
	cudaGraphExec_t ex = fork_join_graph(s, t, x, y, w, 0);
	const char *orders[] = {"late", "early", "capture"};
	for (int i = 0; i < 3; i++) {
		setenv("CUDASIM_GRAPH_ORDER", orders[i], 1);
		fill(s, w, 4, 0.0f);
		cr_assert_eq(cudaGraphLaunch(ex, s), cudaSuccess);
		cr_assert_eq(first_of(s, w), 7.0f, "order %s", orders[i]);
	}
	cudaGraphExecDestroy(ex);
}

/* A branch that reads what the origin overwrites beside it: the replay orders show the race. */
Test(capture, replays_run_a_branch_as_late_or_as_early_as_its_dependencies_allow)
{
	cudaStream_t s = new_stream(), t = new_stream();
	float *x = dalloc(4), *y = dalloc(4), *w = dalloc(4);
	cudaGraphExec_t ex = fork_join_graph(s, t, x, y, w, 1);
	setenv("CUDASIM_GRAPH_ORDER", "late", 1);
	cr_assert_eq(cudaGraphLaunch(ex, s), cudaSuccess);
	cr_assert_eq(first_of(s, w), 9.0f, "late: the branch ran after the overwrite");
	setenv("CUDASIM_GRAPH_ORDER", "early", 1);
	cr_assert_eq(cudaGraphLaunch(ex, s), cudaSuccess);
	cr_assert_eq(first_of(s, w), 7.0f, "early: the branch ran at its fork");
	unsetenv("CUDASIM_GRAPH_ORDER"); /* alternate: the two in turn */
	float seen[2];
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(cudaGraphLaunch(ex, s), cudaSuccess);
		seen[i] = first_of(s, w);
	}
	cr_assert(seen[0] != seen[1], "alternating replays read %g and %g", (double)seen[0],
		  (double)seen[1]);
	cudaGraphExecDestroy(ex);
}

Test(capture, a_fork_not_joined_back_fails_the_capture)
{
	cudaStream_t s = new_stream(), t = new_stream();
	float *x = dalloc(4), *y = dalloc(4);
	cudaEvent_t fork;
	cr_assert_eq(cudaEventCreate(&fork), cudaSuccess);
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	fill(s, x, 4, 7.0f);
	cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
	cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess);
	copy(t, y, x, 4);
	cudaGraph_t g = (cudaGraph_t)0x1;
	cr_assert_eq(cudaStreamEndCapture(t, &g), cudaErrorStreamCaptureUnmatched,
		     "the capture ends where it began");
	cr_assert_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureUnjoined);
	cr_assert_null(g);
	cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
	cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
	cr_assert_eq(st, cudaStreamCaptureStatusNone);
}

Test(capture, a_capturing_stream_cannot_wait_for_work_outside_the_capture)
{
	cudaStream_t s = new_stream(), t = new_stream();
	float *x = dalloc(4);
	cudaEvent_t outside;
	cr_assert_eq(cudaEventCreate(&outside), cudaSuccess);
	fill(t, x, 4, 1.0f);
	cr_assert_eq(cudaEventRecord(outside, t), cudaSuccess);
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
	cr_assert_eq(cudaStreamWaitEvent(s, outside, 0), cudaErrorStreamCaptureIsolation);
	capture_must_be_invalidated(s);
}

Test(capture, ending_a_capture_that_never_began_is_an_error)
{
	cudaGraph_t g;
	cr_assert_eq(cudaStreamEndCapture(new_stream(), &g), cudaErrorIllegalState);
}

/* ---- 7. cuBLAS ----------------------------------------------------------------------------- */

static cublasHandle_t blas_on(cudaStream_t s)
{
	cublasHandle_t h;
	cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
	return h;
}

static float *upload(cudaStream_t s, const float *h, size_t n)
{
	float *d = dalloc(n);
	cr_assert_eq(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
	return d;
}

/*
 * Row-major requests through the project's mapping (gemm_map.h) into
 * cublasSgemm, against the textbook row-major reference of tests/ref.c: the
 * mapping is held to cuBLAS's column-major contract, not to itself.
 */
Test(cublas, row_major_requests_mapped_by_gemm_map_give_the_row_major_product)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h = blas_on(s);
	uint64_t seed = ref_seed(11);
	struct rng r = rng_make(seed, 1);
	const int m = 5, n = 7, k = 3, pad = 2;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
			std::vector<float> A((size_t)(ta ? k : m) * lda), B((size_t)(tb ? n : k) * ldb),
				C((size_t)m * ldc), got(C.size());
			ref_fill_uniform(&r, A.data(), A.size(), -1, 1);
			ref_fill_uniform(&r, B.data(), B.size(), -1, 1);
			ref_fill_uniform(&r, C.data(), C.size(), -1, 1);
			std::vector<double> want(C.begin(), C.end());
			ref_gemm(ta, tb, m, n, k, 1.5, A.data(), lda, B.data(), ldb, 0.5, want.data(), ldc);
			float *dA = upload(s, A.data(), A.size()), *dB = upload(s, B.data(), B.size()),
			      *dC = upload(s, C.data(), C.size());
			struct gemm_req req = {ta, tb, m, n, k, 1.5f, dA, lda, dB, ldb, 0.5f, dC, ldc};
			struct gemm_colmajor g = gemm_map(&req);
			cr_assert_eq(cublasSgemm(h, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
						 g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha,
						 g.a, g.lda, g.b, g.ldb, &g.beta, g.c, g.ldc),
				     CUBLAS_STATUS_SUCCESS);
			cr_assert_eq(cudaMemcpyAsync(got.data(), dC, got.size() * sizeof(float),
						     cudaMemcpyDeviceToHost, s),
				     cudaSuccess);
			struct ref_cmp cmp = ref_compare_f("gemm through gemm_map", got.data(), want.data(),
							   got.size(), 1e-6, 1e-6, seed);
			cr_assert_eq(cmp.bad, 0, "trans_a %d trans_b %d: %zu wrong (seed %llu)", ta, tb,
				     cmp.bad, (unsigned long long)seed);
		}
}

Test(cublas, short_leading_dimensions_and_negative_sizes_are_refused)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h = blas_on(s);
	float *d = dalloc(64), one = 1.0f;
	/* Column-major 4 x 3 A needs lda >= 4. */
	cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, &one, d, 3, d, 3, &one, d, 4),
		     CUBLAS_STATUS_INVALID_VALUE);
	cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 3, &one, d, 4, d, 3, &one, d, 4),
		     CUBLAS_STATUS_INVALID_VALUE);
	cr_assert_eq(cublasSgemv(h, CUBLAS_OP_N, 4, 3, &one, d, 4, d, 0, &one, d, 1),
		     CUBLAS_STATUS_INVALID_VALUE);
	cr_assert_eq(cublasSetWorkspace(h, &one, sizeof(one)), CUBLAS_STATUS_INVALID_VALUE,
		     "a workspace in host memory");
}

Test(cublas, beta_zero_ignores_what_c_held)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h = blas_on(s);
	float a[4] = {1, 2, 3, 4}, b[2] = {1, 1}, c[2], one = 1.0f, zero = 0.0f;
	float *dA = upload(s, a, 4), *dB = upload(s, b, 2), *dC = dalloc(2); /* C: garbage, NaN */
	cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 2, &one, dA, 2, dB, 2, &zero, dC, 2),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(c, dC, sizeof(c), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert(c[0] == 4.0f && c[1] == 6.0f, "C = A b = (4, 6), got (%g, %g)", (double)c[0], (double)c[1]);
}

Test(cublas, sgemv_follows_strides_and_transposition)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h = blas_on(s);
	/* A column-major 2 x 3: columns (1,2) (3,4) (5,6). */
	float a[6] = {1, 2, 3, 4, 5, 6}, x[6] = {1, -9, 1, -9, 1, -9}, y[3], two = 2.0f, zero = 0.0f;
	float *dA = upload(s, a, 6), *dx = upload(s, x, 6), *dy = dalloc(3);
	/* y = 2 A x with x = (1, 1, 1) read at stride 2: (18, 24). */
	cr_assert_eq(cublasSgemv(h, CUBLAS_OP_N, 2, 3, &two, dA, 2, dx, 2, &zero, dy, 1), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(y, dy, 2 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert(y[0] == 18.0f && y[1] == 24.0f, "A x: (%g, %g)", (double)y[0], (double)y[1]);
	/* y = 2 A^T x with x = (1, 1): (6, 14, 22). */
	cr_assert_eq(cublasSgemv(h, CUBLAS_OP_T, 2, 3, &two, dA, 2, dx, 2, &zero, dy, 1), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(y, dy, sizeof(y), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert(y[0] == 6.0f && y[1] == 14.0f && y[2] == 22.0f, "A^T x: (%g, %g, %g)", (double)y[0],
		  (double)y[1], (double)y[2]);
}

Test(cublas, the_math_mode_is_the_one_set_and_unknown_ones_are_refused)
{
	cublasHandle_t h = blas_on(new_stream());
	cublasMath_t mode = CUBLAS_TF32_TENSOR_OP_MATH;
	cr_assert_eq(cublasGetMathMode(h, &mode), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(mode, CUBLAS_DEFAULT_MATH, "a new handle computes in float32");
	cr_assert_eq(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasGetMathMode(h, &mode), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(mode, CUBLAS_TF32_TENSOR_OP_MATH);
	cr_assert_eq(cublasSetMathMode(h, (cublasMath_t)7), CUBLAS_STATUS_INVALID_VALUE);
}

/* TF32 keeps 10 mantissa bits: 1 + 2^-10 is its step at 1, 2^-11 half of it. */
Test(cublas, tf32_rounds_to_nearest_ties_away_from_zero)
{
	const float step = ldexpf(1.0f, -10);
	cr_assert_eq(cudasim::tf32_round(1.0f + step), 1.0f + step, "representable: unchanged");
	cr_assert_eq(cudasim::tf32_round(1.0f + ldexpf(1.0f, -12)), 1.0f, "below half a step: down");
	cr_assert_eq(cudasim::tf32_round(1.0f + ldexpf(3.0f, -12)), 1.0f + step, "above half: up");
	cr_assert_eq(cudasim::tf32_round(1.0f + ldexpf(1.0f, -11)), 1.0f + step, "a tie: away from zero");
	cr_assert_eq(cudasim::tf32_round(-1.0f - ldexpf(1.0f, -11)), -1.0f - step, "negative tie");
	cr_assert_eq(cudasim::tf32_round(nextafterf(2.0f, 0.0f)), 2.0f, "a carry into the exponent");
	cr_assert(isinf(cudasim::tf32_round(INFINITY)) && isnan(cudasim::tf32_round(NAN)));
}

/* c = a * b, 1 x 1 x 1, on a handle in `mode`. */
static float product_in(cublasMath_t mode, float a, float b)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h = blas_on(s);
	float one = 1.0f, zero = 0.0f, c = 0.0f;
	float *dA = upload(s, &a, 1), *dB = upload(s, &b, 1), *dC = dalloc(1);
	cr_assert_eq(cublasSetMathMode(h, mode), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, 1, dB, 1, &zero, dC, 1),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(&c, dC, sizeof(c), cudaMemcpyDeviceToHost, s), cudaSuccess);
	return c;
}

Test(cublas, tf32_math_rounds_gemm_inputs_and_the_float32_modes_do_not)
{
	const float a = 1.0f + ldexpf(1.0f, -12), b = 3.0f; /* a is 1 in TF32 */
	cr_assert_eq(product_in(CUBLAS_DEFAULT_MATH, a, b), a * b, "default math is float32");
	cr_assert_eq(product_in(CUBLAS_PEDANTIC_MATH, a, b), a * b, "pedantic math is float32");
	cr_assert_eq(product_in(CUBLAS_TF32_TENSOR_OP_MATH, a, b), 3.0f, "TF32: a rounded to 1 first");
	cr_assert_eq(product_in((cublasMath_t)(CUBLAS_TF32_TENSOR_OP_MATH |
					       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
				a, b),
		     3.0f, "TF32 with reduced-precision reductions disallowed: still TF32 inputs");
}

Test(cublas, nvidia_tf32_override_0_turns_tf32_off)
{
	const float a = 1.0f + ldexpf(1.0f, -12), b = 3.0f;
	setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
	cr_assert_eq(product_in(CUBLAS_TF32_TENSOR_OP_MATH, a, b), a * b);
}

/* A larger TF32 GEMM is the float32 reference on rounded inputs, and the GEMV stays float32. */
Test(cublas, a_tf32_gemm_is_the_reference_on_rounded_inputs_and_sgemv_is_float32)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h = blas_on(s);
	uint64_t seed = ref_seed(12);
	struct rng r = rng_make(seed, 2);
	const int m = 6, n = 5, k = 33;
	std::vector<float> A((size_t)m * k), B((size_t)k * n), At(A.size()), Bt(B.size()), got((size_t)m * n);
	ref_fill_uniform(&r, A.data(), A.size(), -1, 1);
	ref_fill_uniform(&r, B.data(), B.size(), -1, 1);
	for (size_t i = 0; i < A.size(); i++)
		At[i] = cudasim::tf32_round(A[i]);
	for (size_t i = 0; i < B.size(); i++)
		Bt[i] = cudasim::tf32_round(B[i]);
	/* Row-major A (m, k) is column-major A^T: C^T = B^T A^T, column-major (n, m). */
	std::vector<double> want((size_t)m * n, 0.0), exact((size_t)m * n, 0.0);
	ref_gemm(0, 0, m, n, k, 1.0, At.data(), k, Bt.data(), n, 0.0, want.data(), n);
	ref_gemm(0, 0, m, n, k, 1.0, A.data(), k, B.data(), n, 0.0, exact.data(), n);
	float *dA = upload(s, A.data(), A.size()), *dB = upload(s, B.data(), B.size()), *dC = dalloc(got.size());
	float one = 1.0f, zero = 0.0f;
	cr_assert_eq(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, dB, n, dA, k, &zero, dC, n),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(got.data(), dC, got.size() * sizeof(float), cudaMemcpyDeviceToHost, s),
		     cudaSuccess);
	struct ref_cmp cmp = ref_compare_f("TF32 gemm", got.data(), want.data(), got.size(), 1e-6, 1e-6, seed);
	cr_assert_eq(cmp.bad, 0, "the TF32 GEMM is not the product of the rounded inputs (seed %llu)",
		     (unsigned long long)seed);
	size_t off = 0;
	for (size_t i = 0; i < got.size(); i++)
		off += fabs((double)got[i] - exact[i]) > 1e-6 + 1e-6 * fabs(exact[i]);
	cr_assert_gt(off, 0, "TF32 made no difference that float32 parity would see");
	/* y = A x, x = ones: the GEMV ignores the math mode. */
	std::vector<float> ones((size_t)k, 1.0f), y((size_t)m);
	float *dx = upload(s, ones.data(), ones.size()), *dy = dalloc(y.size());
	cr_assert_eq(cublasSgemv(h, CUBLAS_OP_T, k, m, &one, dA, k, dx, 1, &zero, dy, 1), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost, s),
		     cudaSuccess);
	for (int i = 0; i < m; i++) {
		double sum = 0.0;
		for (int l = 0; l < k; l++)
			sum += A[(size_t)i * k + l];
		cr_assert_eq(y[(size_t)i], (float)sum, "row %d: GEMV rounded its inputs", i);
	}
}

Test(cublas, without_cublasSetStream_a_gemm_runs_on_the_legacy_stream)
{
	cudaStream_t s = new_stream();
	cublasHandle_t h;
	cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS); /* no cublasSetStream: a common slip */
	float a = 2.0f, b = 3.0f, c = 0.0f, one = 1.0f, zero = 0.0f;
	float *dA = upload(s, &a, 1), *dB = upload(s, &b, 1), *dC = dalloc(1);
	cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, 1, dB, 1, &zero, dC, 1),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaMemcpyAsync(&c, dC, sizeof(c), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert(isnan(c), "the download on s saw a product queued on another stream: %g", (double)c);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(cudaMemcpyAsync(&c, dC, sizeof(c), cudaMemcpyDeviceToHost, s), cudaSuccess);
	cr_assert_eq(c, 6.0f);
}

/* ---- 8. the mean NCCL computes, against the GPU suite's tolerance (defect 6) ---------------- */

/*
 * NCCL averages floats as a sum of contributions each premultiplied by
 * 1/ranks, so the mean of gpu_allreduce's pattern is off by rounding errors
 * that grow with the rank count. gpu_mean_tolerance must admit them for every
 * rank count up to 32 (the simulator's reduction is NCCL's order and manner).
 */
Test(nccl, the_gpu_suites_mean_tolerance_admits_ncclavg_up_to_32_ranks)
{
	const size_t count = 1024 * 32; /* every ring starting point with every pattern value */
	for (int n = 2; n <= 32; n++) {
		std::vector<float> in((size_t)n * count), out(count);
		for (int r = 0; r < n; r++)
			for (size_t i = 0; i < count; i++)
				in[(size_t)r * count + i] = (float)((r + 1) * (int)(i % 97 + 1));
		cudasim::nccl_reduce(ncclFloat, in.data(), count, n, ncclAvg, out.data());
		double worst = 0.0;
		size_t bad = 0;
		for (size_t i = 0; i < count; i++) {
			double want = (n + 1) / 2.0 * (double)(i % 97 + 1);
			double err = fabs((double)out[i] - want);
			bad += !(err <= gpu_mean_tolerance(n, want));
			if (err / want / FLT_EPSILON > worst)
				worst = err / want / FLT_EPSILON;
		}
		cr_assert_eq(bad, 0, "%d ranks: %zu means outside gpu_mean_tolerance, the worst %.2f FLT_EPSILON "
				     "off",
			     n, bad, worst);
	}
}

/* ---- 9. devices and faults ------------------------------------------------------------------ */

Test(device, without_a_driver_the_count_fails_with_35_and_the_version_is_0)
{
	setenv("CUDASIM_DRIVER_VERSION", "0", 1);
	int count = -7, version = -7;
	cr_assert_eq(cudaGetDeviceCount(&count), cudaErrorInsufficientDriver);
	cr_assert_eq(count, -7, "the count is left as it was");
	cr_assert_eq(cudaDriverGetVersion(&version), cudaSuccess);
	cr_assert_eq(version, 0);
}

Test(device, a_driver_too_old_fails_with_35_and_says_its_version)
{
	setenv("CUDASIM_DRIVER_VERSION", "12040", 1);
	int count = 0, version = 0;
	cr_assert_eq(cudaGetDeviceCount(&count), cudaErrorInsufficientDriver);
	cr_assert_eq(cudaDriverGetVersion(&version), cudaSuccess);
	cr_assert_eq(version, 12040);
}

Test(device, cuda_visible_devices_is_read_as_cuda_reads_it)
{
	char a[32], b[32];
	int count = 0;
	setenv("CUDASIM_DEVICES", "4", 1);
	setenv("CUDA_VISIBLE_DEVICES", "2,0,9,1", 1); /* 9 is no device: the list ends there */
	cr_assert_eq(cudaGetDeviceCount(&count), cudaSuccess);
	cr_assert_eq(count, 2);
	cr_assert_eq(cudaDeviceGetPCIBusId(a, sizeof(a), 0), cudaSuccess);
	setenv("CUDA_VISIBLE_DEVICES", "2", 1);
	cr_assert_eq(cudaDeviceGetPCIBusId(b, sizeof(b), 0), cudaSuccess);
	cr_assert_str_eq(a, b, "device 0 is physical GPU 2 both times");
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	cr_assert_eq(cudaGetDeviceCount(&count), cudaErrorNoDevice);
}

Test(device, faults_show_where_cuda_reports_them)
{
	struct cudaFuncAttributes attr;
	setenv("CUDASIM_FAULT", "no-kernel-image", 1);
	cr_assert_eq(cudaFuncGetAttributes(&attr, fill_kernel), cudaErrorNoKernelImageForDevice);
	setenv("CUDASIM_FAULT", "devices-unavailable", 1);
	cr_assert_eq(cudaSetDevice(0), cudaErrorDevicesUnavailable);
	setenv("CUDASIM_FAULT", "system-not-ready", 1);
	int count = 0;
	cr_assert_eq(cudaGetDeviceCount(&count), cudaErrorSystemNotReady);
	unsetenv("CUDASIM_FAULT");
	cr_assert_eq(cudaGetDeviceCount(&count), cudaSuccess);
	cr_assert_eq(count, 8, "the simulated node has 8 GPUs by default");
}

Test(device, the_device_says_it_is_simulated)
{
	struct cudaDeviceProp prop;
	cr_assert_eq(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
	cr_assert(strstr(prop.name, "cudasim") && strstr(prop.name, "not a GPU"), "name: %s", prop.name);
}
