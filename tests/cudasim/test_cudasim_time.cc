/*
 * test_cudasim_time.cc - the simulator's time model (cudasim.h, rule 10): each
 * thread's serial work measured as it runs, launch overheads in and out of a
 * graph, event stamps and cudaEventElapsedTime's contract. Part of
 * test_cudasim_rules (Criterion); its kernels are counted by loop_hook.h, as
 * sim_kernels.cc counts cuda/kernels.cu's.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stddef.h>

#include "cuda_runtime.h"
#include "cudasim.h"

#include "loop_hook.h"

namespace {

struct geom {
	unsigned int grid, block;
};

/* One thread sums n terms, one after another. */
__global__ void serial_sum_kernel(const float *x, size_t n, float *out)
{
	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	float s = 0.0f;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	out[0] = s;
}

/* serial_sum_kernel after the wait a programmatic dependent launch needs (rule 5). */
__global__ void serial_sum_after_wait_kernel(const float *x, size_t n, float *out)
{
	cudaGridDependencySynchronize();
	serial_sum_kernel(x, n, out);
}

/* Every thread a share of n items, grid-stride. */
__global__ void spread_kernel(float *x, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		x[i] = 1.0f;
}

cudaStream_t stream()
{
	cudaStream_t s;
	cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
	return s;
}

float *dalloc(size_t n)
{
	void *p = NULL;
	cr_assert_eq(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
	return (float *)p;
}

cudaEvent_t event()
{
	cudaEvent_t e;
	cr_assert_eq(cudaEventCreate(&e), cudaSuccess);
	return e;
}

/* Modelled microseconds between a and b, once their stream has run. */
float elapsed_us(cudaEvent_t a, cudaEvent_t b)
{
	float ms = -1.0f;
	cr_assert_eq(cudaEventSynchronize(b), cudaSuccess);
	cr_assert_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
	return ms * 1000.0f;
}

} /* namespace */

/* The same 1e5 items: one thread walking them all takes far longer than a grid sharing them. */
Test(time, a_threads_serial_work_is_measured_not_its_kernels_name)
{
	const size_t n = 100000;
	cudaStream_t s = stream();
	float *x = dalloc(n), *out = dalloc(1);
	cudaEvent_t a = event(), b = event(), c = event();
	cr_assert_eq(cudaMemsetAsync(x, 0, n * sizeof(float), s), cudaSuccess);
	geom one = {1, 1}, wide = {(unsigned)((n + 255) / 256), 256};
	cr_assert_eq(cudaEventRecord(a, s), cudaSuccess);
	KERNEL_LAUNCH_ON(serial_sum_kernel, one, s, (const float *)x, n, out);
	cr_assert_eq(cudaEventRecord(b, s), cudaSuccess);
	KERNEL_LAUNCH_ON(spread_kernel, wide, s, x, n);
	cr_assert_eq(cudaEventRecord(c, s), cudaSuccess);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	float serial = elapsed_us(a, b), spread = elapsed_us(b, c);
	/* 1e5 trips of 3 ns in one thread; 391 blocks of one item each, in one wave. */
	cr_assert(serial > 250.0f && serial < 400.0f, "one thread, 1e5 trips: %g us", serial);
	cr_assert(spread > 1.0f && spread < 10.0f, "1e5 items over a grid: %g us", spread);
}

/* A replayed graph pays less per kernel than launches on a stream, and one host launch. */
Test(time, a_graph_replay_costs_less_than_its_launches_one_by_one)
{
	const int kernels = 20;
	cudaStream_t s = stream(), cap = stream();
	float *x = dalloc(256);
	geom g = {1, 256};
	cudaEvent_t a = event(), b = event(), c = event();
	cr_assert_eq(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal), cudaSuccess);
	for (int i = 0; i < kernels; i++)
		KERNEL_LAUNCH_ON(spread_kernel, g, cap, x, (size_t)256);
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	cr_assert_eq(cudaStreamEndCapture(cap, &graph), cudaSuccess);
	cr_assert_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(a, s), cudaSuccess);
	for (int i = 0; i < kernels; i++)
		KERNEL_LAUNCH_ON(spread_kernel, g, s, x, (size_t)256);
	cr_assert_eq(cudaEventRecord(b, s), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(cudaGraphLaunch(exec, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(c, s), cudaSuccess);
	float plain = elapsed_us(a, b), replay = elapsed_us(b, c);
	cr_assert(replay < plain, "graph %g us, launches %g us", replay, plain);
	/* Launched one by one the host is the limit: 2.5 us per launch at least. */
	cr_assert(plain >= 2.5f * kernels, "%d launches in %g us", kernels, plain);
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
}

/* cudaEventElapsedTime as CUDA documents it, and the host's clock behind a wait. */
Test(time, elapsed_time_needs_two_completed_timing_events)
{
	cudaStream_t s = stream();
	float *x = dalloc(256), ms = 0.0f;
	cudaEvent_t a = event(), b = event(), never = event(), untimed;
	cr_assert_eq(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
	geom g = {1, 256};
	cr_assert_eq(cudaEventRecord(a, s), cudaSuccess);
	KERNEL_LAUNCH_ON(spread_kernel, g, s, x, (size_t)256);
	cr_assert_eq(cudaEventRecord(b, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(untimed, s), cudaSuccess);
	cr_assert_eq(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady, "before the stream ran");
	cr_assert_eq(cudaEventElapsedTime(&ms, a, never), cudaErrorInvalidResourceHandle,
		     "an event never recorded");
	cr_assert_eq(cudaEventElapsedTime(NULL, a, b), cudaErrorInvalidValue);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle,
		     "created with cudaEventDisableTiming");
	cr_assert_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
	cr_assert(ms > 0.0f && ms < 0.01f, "one small kernel: %g ms", ms);
	cr_assert_eq(cudaEventElapsedTime(&ms, b, a), cudaSuccess);
	cr_assert(ms < 0.0f, "the other way round: negative (%g ms)", ms);
	/* The host's modelled clock is past the work it waited for. */
	double before = cudasim::host_now();
	KERNEL_LAUNCH_ON(spread_kernel, g, s, x, (size_t)256);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert(cudasim::host_now() > before, "a wait moves the host's clock on");
}

/*
 * Programmatic dependent launch: each kernel's launch overhead hidden behind
 * the kernel before it, as far as that one lasts; its work never overlaps.
 * Graphs of 10 kernels of 1,000 serial trips (3 us) each, replayed.
 */
static float replay_us(int pdl, int memset_between)
{
	const size_t n = 1000;
	cudaStream_t s = stream(), cap = stream();
	float *x = dalloc(n), *out = dalloc(1);
	geom one = {1, 1};
	cr_assert_eq(cudaMemsetAsync(x, 0, n * sizeof(float), s), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
	cr_assert_eq(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal), cudaSuccess);
	for (int i = 0; i < 10; i++) {
		if (memset_between)
			cr_assert_eq(cudaMemsetAsync(out, 0, sizeof(float), cap), cudaSuccess);
		KERNEL_LAUNCH_PDL_ON(serial_sum_after_wait_kernel, one, cap, pdl, (const float *)x, n,
				     out);
	}
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	cr_assert_eq(cudaStreamEndCapture(cap, &graph), cudaSuccess);
	cr_assert_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
	cudaEvent_t a = event(), b = event();
	cr_assert_eq(cudaGraphLaunch(exec, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(a, s), cudaSuccess);
	cr_assert_eq(cudaGraphLaunch(exec, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(b, s), cudaSuccess);
	float us = elapsed_us(a, b);
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	return us;
}

Test(time, a_programmatic_dependent_launch_hides_its_overhead_behind_the_kernel_before)
{
	float plain = replay_us(0, 0), pdl = replay_us(1, 0);
	/* 9 of the 10 overheads (1.8 us each in a graph) hidden; the 10 x 3 us of work stays. */
	cr_assert(plain - pdl > 0.8f * 9 * 1.8f && plain - pdl < 1.2f * 9 * 1.8f,
		  "plain %g us, programmatic %g us", plain, pdl);
	cr_assert(pdl > 10 * 3.0f * 0.9f, "the work overlapped: %g us for 10 x 3 us", pdl);
	/* After a memset (not a kernel of the program) nothing is hidden. */
	float plain_m = replay_us(0, 1), pdl_m = replay_us(1, 1);
	cr_assert(fabsf(plain_m - pdl_m) < 0.01f * plain_m, "with memsets between: plain %g us, "
		  "programmatic %g us", plain_m, pdl_m);
}

/* A graph of one op on each of two streams. */
static cudaGraphExec_t two_op_graph(cudaStream_t s, cudaStream_t t, bool forked,
				    const std::function<void(cudaStream_t, int)> &op)
{
	cudaEvent_t fork = event(), join = event();
	cudaGraph_t g;
	cudaGraphExec_t x;
	cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
	if (forked) {
		cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
		cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess);
	}
	op(forked ? t : s, 0);
	op(s, 1);
	if (forked) {
		cr_assert_eq(cudaEventRecord(join, t), cudaSuccess);
		cr_assert_eq(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
	}
	cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
	cudaGraphDestroy(g);
	return x;
}

/* Modelled microseconds of op 0 then op 1 in one graph, and of the two as a fork and join. */
static void one_after_and_side_by_side(const std::function<void(cudaStream_t, int)> &op,
				       float *one_after, float *side_by_side)
{
	cudaStream_t s = stream(), t = stream();
	cudaEvent_t a = event(), b = event(), c = event();
	cudaGraphExec_t serial = two_op_graph(s, t, false, op), forked = two_op_graph(s, t, true, op);
	cr_assert_eq(cudaEventRecord(a, s), cudaSuccess);
	cr_assert_eq(cudaGraphLaunch(serial, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(b, s), cudaSuccess);
	cr_assert_eq(cudaGraphLaunch(forked, s), cudaSuccess);
	cr_assert_eq(cudaEventRecord(c, s), cudaSuccess);
	*one_after = elapsed_us(a, b);
	*side_by_side = elapsed_us(b, c);
	cudaGraphExecDestroy(serial);
	cudaGraphExecDestroy(forked);
}

/* Two branches of a graph overlap: the replay takes about the longer one, not their sum. */
Test(time, a_graphs_branches_overlap)
{
	const size_t n = 100000;
	float *x = dalloc(n), *out = dalloc(2);
	cudaStream_t z = stream();
	cr_assert_eq(cudaMemsetAsync(x, 0, n * sizeof(float), z), cudaSuccess);
	cr_assert_eq(cudaStreamSynchronize(z), cudaSuccess);
	geom one = {1, 1};
	float one_after, side_by_side;
	one_after_and_side_by_side(
		[&](cudaStream_t on, int i) {
			KERNEL_LAUNCH_ON(serial_sum_kernel, one, on, (const float *)x, n, out + i);
		},
		&one_after, &side_by_side);
	/* Each 1e5 trips of 3 ns: ~300 us. */
	cr_assert(one_after > 550.0f, "serial: %g us", one_after);
	cr_assert(side_by_side < 0.6f * one_after, "branches %g us against %g us one after the other",
		  side_by_side, one_after);
}

/* Branches that each fill the GPU share its SMs: side by side they take about their sum. */
Test(time, branches_that_fill_the_gpu_share_it)
{
	const size_t n = (size_t)1 << 22;
	float *x[2] = {dalloc(n), dalloc(n)};
	geom full = {4096, 256}; /* 31 waves of blocks over 132 SMs: a share of 1 */
	float one_after, side_by_side;
	one_after_and_side_by_side(
		[&](cudaStream_t on, int i) { KERNEL_LAUNCH_ON(spread_kernel, full, on, x[i], n); },
		&one_after, &side_by_side);
	/* Only a launch overhead can hide: the work is the GPU's either way. */
	cr_assert(side_by_side > 0.85f * one_after, "branches %g us against %g us one after the other",
		  side_by_side, one_after);
}
