/*
 * stream.cc - the simulator's streams, events, graph capture and kernel
 * launches (rules 2, 4, 5 and 6 of cudasim.h).
 *
 * A stream is a queue of operations, run in order and only when the host
 * waits for them or polls them. An operation is either synchronous work (a
 * kernel's loops, a copy, a GEMM), run inside a window so that it may touch
 * device memory, or a collective, which completes only once the other ranks
 * have reached it and is advanced by polling. While a stream captures, what
 * is submitted to it is recorded instead; a graph launch submits the recorded
 * operations again, each collective afresh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../cuda_host/block_fibers.h"
#include "cudasim.h"

uint3 blockIdx, threadIdx;
dim3 blockDim, gridDim;

/* The modelled time an event's record was reached (rule 10). */
struct event_stamp {
	double t = 0.0;
	bool done = false;
};

/*
 * A capture sequence (rule 6): the graph it records, shared by the stream
 * that began it and every stream that joined it by waiting for an event
 * recorded in it.
 */
struct capture_seq {
	uint64_t id = 0;
	CUstream_st *origin = nullptr;
	std::vector<cudasim::op> ops;
	std::vector<std::vector<size_t>> deps; /* each node's dependencies: indices into ops */
	std::vector<unsigned> lane; /* 0: recorded on the origin stream, k: on the k-th joined */
	std::vector<CUstream_st *> joined;
};

/*
 * One replay of a graph whose nodes are queued on a stream: what each node
 * costs, recorded as it runs, and its times, once all have run (rule 10).
 */
struct replay_state {
	std::vector<std::vector<size_t>> deps;
	std::vector<double> ready;      /* when the launch let it start */
	std::vector<double> overhead;   /* its launch overhead */
	std::vector<double> work;       /* its work alone on the GPU */
	std::vector<double> share;      /* the fraction of the SMs its work occupies */
	std::vector<char> pdl;          /* launched by programmatic dependent launch */
	std::vector<char> kernel;       /* a kernel of the program */
	std::vector<std::string> what;  /* for the time report; empty: no kernel */
	std::vector<double> began, end; /* when its work began and ended */
	size_t done = 0;                /* nodes run so far */
	double base = -1.0;             /* the stream's clock when its first node came up */
};

struct CUstream_st {
	unsigned int flags = 0;
	/* Queued, not yet complete; the front may be a collective in progress. */
	struct entry {
		cudasim::op o;
		std::unique_ptr<cudasim::async_work> work;
		double ready = 0.0;  /* modelled time the device may start it (rule 10) */
		bool graph = false;  /* a node of a replayed graph */
		uint64_t replay = 0; /* which replay, for the time report */
		std::shared_ptr<replay_state> rs; /* the replay's nodes (graph entries) */
		size_t node = 0;                  /* and which one this is */
		/* cudaStreamWaitEvent: the stream and point waited for, and the record's stamp. */
		CUstream_st *wait_on = nullptr;
		uint64_t wait_seq = 0;
		std::shared_ptr<event_stamp> wait_stamp;
	};
	double clock = 0.0; /* modelled time its last completed op ended (rule 10) */
	/* When the last completed op's work began, if it was a kernel of the program; else -1. */
	double kernel_began = -1.0;
	uint64_t kernel_replay = 0; /* and the graph replay it belonged to (0: none) */
	std::deque<entry> queue;
	uint64_t submitted = 0, completed = 0;
	cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
	cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
	std::shared_ptr<capture_seq> cap; /* the capture it records into (began or joined) */
	std::vector<size_t> frontier;     /* the nodes its next captured node depends on */
};

struct CUevent_st {
	bool timing = true;            /* not created with cudaEventDisableTiming */
	std::shared_ptr<event_stamp> stamp; /* of its last record outside a capture; NULL: none */
	CUstream_st *stream = nullptr; /* where it was last recorded */
	uint64_t seq = 0;              /* complete once stream->completed reaches it */
	uint64_t capture_id = 0;       /* non-zero: recorded into that capture */
	std::vector<size_t> nodes;     /* and the capture's nodes it stands for */
};

/* A node of a graph: one recorded operation. */
struct CUgraphNode_st {
	size_t index;
};

struct CUgraph_st {
	std::vector<cudasim::op> ops;
	std::vector<std::vector<size_t>> deps; /* each node's dependencies */
	std::vector<unsigned> lane;            /* the stream each was recorded on (capture_seq) */
	std::vector<std::unique_ptr<CUgraphNode_st>> nodes; /* one per op, in recording order */
};

struct CUgraphExec_st {
	std::vector<cudasim::op> ops;
	std::vector<std::vector<size_t>> deps;
	std::vector<unsigned> lane;
};

namespace cudasim {

static CUstream_st legacy_stream;
static std::set<CUstream_st *> streams = {&legacy_stream};
static std::set<CUevent_st *> events;
static uint64_t next_capture_id = 1;
static uint64_t next_replay = 1;
double run_us = 0.0;
double run_share = 1.0;

static CUstream_st *lookup(cudaStream_t h)
{
	if (h == nullptr || h == cudaStreamLegacy)
		return &legacy_stream;
	return streams.count(h) ? h : nullptr;
}

/* Whether a capture in a strict mode is under way (they all belong to this one thread). */
static bool capture_active()
{
	for (CUstream_st *s : streams)
		if (s->capture != cudaStreamCaptureStatusNone && s->mode != cudaStreamCaptureModeRelaxed)
			return true;
	return false;
}

static cudaError_t invalidate_captures()
{
	for (CUstream_st *s : streams)
		if (s->capture == cudaStreamCaptureStatusActive && s->mode != cudaStreamCaptureModeRelaxed)
			s->capture = cudaStreamCaptureStatusInvalidated;
	return set_error(cudaErrorStreamCaptureUnsupported);
}

cudaError_t refuse_during_capture()
{
	return capture_active() ? invalidate_captures() : cudaSuccess;
}

cudaError_t submit(cudaStream_t h, op o)
{
	CUstream_st *s = lookup(h);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	if (s->capture == cudaStreamCaptureStatusInvalidated)
		return set_error(cudaErrorStreamCaptureInvalidated);
	lazy_load(o.module); /* a launch loads its module, captured or not */
	if (s->capture == cudaStreamCaptureStatusActive) {
		/* A node depending on what the stream's captured work so far ends in. */
		capture_seq &c = *s->cap;
		unsigned lane = 0;
		for (size_t i = 0; i < c.joined.size(); i++)
			if (c.joined[i] == s)
				lane = (unsigned)i + 1;
		c.deps.push_back(s->frontier);
		c.lane.push_back(lane);
		c.ops.push_back(std::move(o));
		s->frontier.assign(1, c.ops.size() - 1);
		return cudaSuccess;
	}
	/* The host pays for the launch; the device may start it a little later (rule 10). */
	host_spend(host_launch_cost_us() * (o.kernels > 0 ? o.kernels : 1));
	double ready = host_now() + stream_latency_us();
	s->queue.push_back(CUstream_st::entry{std::move(o), nullptr, ready, false, 0});
	s->submitted++;
	return cudaSuccess;
}

cudaError_t capture_status(cudaStream_t h, cudaStreamCaptureStatus *status)
{
	CUstream_st *s = lookup(h);
	if (!s)
		return cudaErrorInvalidResourceHandle;
	*status = s->capture;
	return cudaSuccess;
}

/*
 * The times of a replay's nodes, once every node has run (rule 10): a node's
 * launch starts when the nodes it depends on have ended (its first nodes when
 * the launch reached the device and the stream was free), or, launched by
 * programmatic dependent launch after its one dependency, a kernel of the
 * program, when that kernel's work began; its work starts after its launch
 * overhead, and not before its dependencies' ends. Nodes whose work overlaps
 * share the SMs: while the shares of those running add up to more than 1,
 * each progresses at 1 / that sum of its speed alone. The replay's end; each
 * node's time (launch to end) goes to the time report.
 */
static double schedule(replay_state &r, uint64_t replay)
{
	size_t n = r.deps.size();
	std::vector<std::vector<size_t>> next(n);
	std::vector<size_t> left(n);
	for (size_t i = 0; i < n; i++) {
		left[i] = r.deps[i].size();
		for (size_t d : r.deps[i])
			next[d].push_back(i);
	}
	enum { WAITING, PLANNED, RUNNING, DONE };
	std::vector<int> state(n, WAITING);
	std::vector<double> launch(n, 0.0), start(n, 0.0), remaining(n, 0.0);
	auto plan = [&](size_t i) {
		const std::vector<size_t> &d = r.deps[i];
		double l = std::max(r.ready[i], r.base);
		for (size_t j : d)
			l = std::max(l, r.end[j]);
		double w = l + r.overhead[i];
		if (r.pdl[i] && d.size() == 1 && r.kernel[d[0]]) { /* a programmatic edge */
			l = std::max(r.ready[i], r.began[d[0]]);
			w = std::max(l + r.overhead[i], r.end[d[0]]);
		}
		launch[i] = l;
		start[i] = w;
		state[i] = PLANNED;
	};
	for (size_t i = 0; i < n; i++)
		if (!left[i])
			plan(i);
	double now = r.base, last = r.base;
	for (size_t finished = 0; finished < n;) {
		double demand = 0.0;
		for (size_t i = 0; i < n; i++)
			if (state[i] == RUNNING)
				demand += r.share[i];
		double rate = demand > 1.0 ? 1.0 / demand : 1.0;
		double t = std::numeric_limits<double>::infinity();
		for (size_t i = 0; i < n; i++) {
			if (state[i] == PLANNED)
				t = std::min(t, std::max(start[i], now));
			else if (state[i] == RUNNING)
				t = std::min(t, now + remaining[i] / rate);
		}
		if (!(t < std::numeric_limits<double>::infinity()))
			fatal("time model: a replay's nodes wait for each other (a cycle)");
		for (size_t i = 0; i < n; i++)
			if (state[i] == RUNNING)
				remaining[i] -= (t - now) * rate;
		now = t;
		for (size_t i = 0; i < n; i++) {
			if (state[i] != RUNNING || remaining[i] > 1e-9 * (1.0 + r.work[i]))
				continue;
			state[i] = DONE;
			r.end[i] = now;
			last = std::max(last, now);
			finished++;
			if (!r.what[i].empty())
				note_op_time(replay, r.what[i], now - launch[i]);
			for (size_t m : next[i])
				if (!--left[m])
					plan(m);
		}
		for (size_t i = 0; i < n; i++)
			if (state[i] == PLANNED && start[i] <= now) {
				state[i] = RUNNING;
				r.began[i] = now;
				remaining[i] = r.work[i];
			}
	}
	return last;
}

/*
 * Run s's work in order until operation `upto` (a submit count) is complete,
 * or until the front is a collective that cannot complete yet. Synchronous
 * work runs inside one window; collectives open their own when they move
 * data, so polling one that waits costs no remapping.
 */
static bool advance(CUstream_st *s, uint64_t upto)
{
	std::optional<window> open;
	while (s->completed < upto && !s->queue.empty()) {
		CUstream_st::entry &e = s->queue.front();
		if (e.wait_on) {
			/* cudaStreamWaitEvent: the other stream's work up to the record first. */
			if (!advance(e.wait_on, e.wait_seq))
				return false;
			double at = e.wait_stamp && e.wait_stamp->done ? e.wait_stamp->t : 0.0;
			s->clock = std::max(std::max(s->clock, e.ready), at);
			s->kernel_began = -1.0;
			s->queue.pop_front();
			s->completed++;
			continue;
		}
		run_us = e.o.us;
		run_share = e.o.share;
		if (e.o.start) {
			if (!e.work)
				e.work = e.o.start();
			if (!e.work->advance())
				return false;
		} else if (e.o.run) {
			if (!open)
				open.emplace();
			e.o.run();
		}
		/*
		 * The time model (rule 10): in order, not before the host launched it;
		 * a programmatic dependent launch after a kernel of the program pays
		 * its launch overhead from when that kernel's work began.
		 */
		double overhead = e.o.kernels * launch_overhead_us(e.graph);
		bool ours = e.o.label.compare(0, 7, "kernel ") == 0;
		if (e.rs) {
			/* A graph's node: its costs now, every node's times once the replay has run. */
			replay_state &r = *e.rs;
			size_t i = e.node;
			if (r.base < 0.0)
				r.base = s->clock;
			r.ready[i] = e.ready;
			r.overhead[i] = overhead;
			r.work[i] = run_us;
			r.share[i] = std::min(1.0, std::max(0.0, run_share));
			r.pdl[i] = e.o.pdl;
			r.kernel[i] = ours;
			if (e.o.kernels > 0)
				r.what[i] = e.o.detail.empty() ? e.o.label : e.o.detail;
			if (++r.done == r.deps.size())
				s->clock = std::max(s->clock, schedule(r, e.replay));
			s->kernel_began = -1.0;
			s->kernel_replay = e.replay;
			s->queue.pop_front();
			s->completed++;
			continue;
		}
		double start = std::max(s->clock, e.ready), began = start + overhead;
		if (e.o.pdl && s->kernel_began >= 0.0 && s->kernel_replay == e.replay)
			began = std::max(std::max(e.ready, s->kernel_began) + overhead, s->clock);
		s->clock = began + run_us;
		s->kernel_began = ours ? began : -1.0;
		if (e.o.stamp)
			e.o.stamp(start);
		double took = began + run_us - start; /* its overhead, the hidden part left out, and its work */
		s->kernel_replay = e.replay;
		if (e.o.kernels > 0)
			note_op_time(e.replay, e.o.detail.empty() ? e.o.label : e.o.detail, took);
		s->queue.pop_front();
		s->completed++;
	}
	return s->completed >= upto;
}

/*
 * advance() until done, blocking the host; says once what it waits for when
 * that takes long, and ends the process at once behind a collective injected
 * never to complete (rule 2): a GPU would block here forever.
 */
static void wait_for(CUstream_st *s, uint64_t upto, const char *api)
{
	double start = now(), limit = (double)env_long("CUDASIM_STUCK_NOTE", 10);
	bool noted = false;
	int polls = 0;
	while (!advance(s, upto)) {
		const CUstream_st::entry &front = s->queue.front();
		if (front.work && front.work->never_completes())
			fatal("%s blocks forever: the stream waits for %s; on a GPU the host would hang "
			      "here, out of reach of any deadline (wait for a collective that may hang by "
			      "polling, as cudaEventQuery does)",
			      api, front.work->describe().c_str());
		if (!noted && limit > 0 && now() - start > limit) {
			const CUstream_st::entry &e = s->queue.front();
			note("blocked for %g s in %s: the stream waits for %s", limit, api,
			     e.work ? e.work->describe().c_str() : e.o.label.c_str());
			noted = true;
		}
		if (++polls > 100) {
			struct timespec nap = {0, 100000};
			nanosleep(&nap, NULL);
		}
	}
	host_waited(s->clock); /* the host returns once the work is done (rule 10) */
}

/*
 * A poll (cudaEventQuery, cudaStreamQuery) that finds its stream held by a
 * collective another rank has not reached yet gives the CPU up for 50 us
 * before it answers cudaErrorNotReady. That rank is another process on the
 * same cores, running its share of the simulated work: a caller that polls in
 * a tight loop (cuda_wait spins its first 2 ms, then yields, which returns at
 * once on a core of its own) would burn a core for as long as the peer took,
 * where a GPU's collective progresses on its own (not modelled). The answer
 * is the same; only the wall clock moves on, by far less than any deadline.
 */
static void not_ready_nap()
{
	struct timespec nap = {0, 50000};
	nanosleep(&nap, NULL);
}

cudaError_t drain(cudaStream_t h, const char *api)
{
	CUstream_st *s = lookup(h);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	wait_for(s, s->submitted, api);
	return cudaSuccess;
}

void drain_all(const char *api)
{
	for (CUstream_st *s : streams)
		wait_for(s, s->submitted, api);
}

/* ---- kernels ----------------------------------------------------------------------- */

static void check_kernel_pointers(const char *kernel, const launch_ptrs &ptrs)
{
	for (int i = 0; i < ptrs.n; i++)
		if (ptrs.p[i] && classify(ptrs.p[i]) != MEM_DEVICE)
			fatal("launch of %s: pointer argument %d is %s, not device memory (an illegal "
			      "address on a GPU)",
			      kernel, i + 1, describe(ptrs.p[i]).c_str());
}

/* A cooperative block's threads: each one's loop trips and items, kept across its switches. */
struct coop_counts {
	std::vector<unsigned long long> trips, strides;
};

static void coop_in(void *arg, unsigned int t)
{
	coop_counts *c = (coop_counts *)arg;
	trips = c->trips[t];
	strides = c->strides[t];
}

static void coop_out(void *arg, unsigned int t)
{
	coop_counts *c = (coop_counts *)arg;
	c->trips[t] = trips;
	c->strides[t] = strides;
}

static void coop_thread(const void *arg)
{
	(*(const std::function<void()> *)arg)();
}

/* Which threads of the running launch called cudaGridDependencySynchronize. */
static std::vector<char> grid_waited;

void grid_dependency_wait()
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t < grid_waited.size())
		grid_waited[t] = 1;
}

void barrier()
{
	++trips;
	block_fibers_sync();
}

/*
 * A launch CUDA refuses runs nothing and reports through the thread's last
 * error, as a <<<>>> launch does (it returns nothing): no usable device, a
 * geometry outside CUDA's limits (cudaErrorInvalidConfiguration), no kernel
 * image for the device (cudaErrorNoKernelImageForDevice), or a stream whose
 * capture was invalidated. The program's own check of cudaGetLastError is what
 * must stop it. A pointer argument that is not device memory is fatal: on a
 * GPU the kernel would fault on it (an illegal address, and a dead context).
 */
cudaError_t launch(cudaStream_t stream, const char *kernel, unsigned int grid, unsigned int block,
		   const launch_ptrs &ptrs, std::function<void()> body, bool coop, bool pdl)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (grid == 0 || grid > 0x7fffffffu || block == 0 || block > 1024)
		return set_error(cudaErrorInvalidConfiguration);
	if (fault("no-kernel-image"))
		return set_error(cudaErrorNoKernelImageForDevice);
	check_kernel_pointers(kernel, ptrs);
	op o;
	o.label = std::string("kernel ") + kernel;
	o.module = o.label;
	o.pdl = pdl;
	o.run = [kernel, grid, block, ptrs, body, coop, pdl]() {
		/* Checked again when it runs: a replayed graph may outlive its buffers. */
		check_kernel_pointers(kernel, ptrs);
		gridDim = {grid, 1, 1};
		blockDim = {block, 1, 1};
		blockIdx = {0, 0, 0};
		threadIdx = {0, 0, 0};
		/* Each thread's loop trips, counted by the hook (rule 10): its serial work. */
		std::vector<double> worst(grid, 0.0);
		unsigned long long items = 0, loops = 0;
		grid_waited.assign(pdl ? (size_t)grid * block : 0, 0);
		coop_counts counts;
		block_fiber_hooks hooks = {coop_in, coop_out, &counts};
		for (blockIdx.x = 0; blockIdx.x < grid; blockIdx.x++) {
			if (coop) {
				counts.trips.assign(block, 0);
				counts.strides.assign(block, 0);
				block_fibers_run(kernel, blockIdx.x, block, &threadIdx.x, coop_thread,
						 &body, &hooks, 1);
			}
			for (threadIdx.x = 0; threadIdx.x < block; threadIdx.x++) {
				if (coop) {
					coop_in(&counts, threadIdx.x);
				} else {
					trips = strides = 0;
					body();
				}
				items += strides;
				loops += trips;
				worst[blockIdx.x] = std::max(worst[blockIdx.x], thread_us(strides, trips));
			}
		}
		run_us = kernel_us(block, worst, items, loops);
		run_share = kernel_share(grid, block);
		/*
		 * Launched to start while the kernel before it ends, a thread that
		 * never waits for that kernel could read what it has not yet written.
		 */
		size_t missed = (size_t)std::count(grid_waited.begin(), grid_waited.end(), 0);
		if (missed)
			fatal("launch of %s with programmatic dependent launch: %zu of its %zu "
			      "threads never called cudaGridDependencySynchronize (on a GPU they "
			      "could read what the kernel before it had not yet written)",
			      kernel, missed, grid_waited.size());
	};
	return submit(stream, std::move(o)); /* an unknown stream or an invalidated capture: set */
}

} /* namespace cudasim */

using namespace cudasim;

extern "C" {

/* ---- streams ---------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (!stream || (flags & ~cudaStreamNonBlocking))
		return set_error(cudaErrorInvalidValue);
	CUstream_st *s = new CUstream_st;
	s->flags = flags;
	streams.insert(s);
	*stream = s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
	return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

/* CUDA lets queued work finish after the handle is gone; here it runs first. */
cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	CUstream_st *s = lookup(stream);
	if (!s || s == &legacy_stream)
		return set_error(cudaErrorInvalidResourceHandle);
	if (s->capture != cudaStreamCaptureStatusNone)
		return set_error(cudaErrorStreamCaptureUnsupported);
	wait_for(s, s->submitted, "cudaStreamDestroy");
	for (CUevent_st *e : events)
		if (e->stream == s)
			e->stream = nullptr;
	streams.erase(s);
	delete s;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	CUstream_st *s = lookup(stream);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	if (s->capture != cudaStreamCaptureStatusNone)
		return invalidate_captures();
	wait_for(s, s->submitted, "cudaStreamSynchronize");
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	CUstream_st *s = lookup(stream);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	if (s->capture != cudaStreamCaptureStatusNone)
		return invalidate_captures();
	if (advance(s, s->submitted))
		return cudaSuccess;
	not_ready_nap();
	return cudaErrorNotReady;
}

cudaError_t cudaDeviceSynchronize(void)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (capture_active())
		return invalidate_captures();
	drain_all("cudaDeviceSynchronize");
	return cudaSuccess;
}

/* ---- events ------------------------------------------------------------------------ */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (!event || (flags & ~cudaEventDisableTiming))
		return set_error(cudaErrorInvalidValue);
	CUevent_st *e = new CUevent_st;
	e->timing = !(flags & cudaEventDisableTiming);
	events.insert(e);
	*event = e;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	if (!events.count(event))
		return set_error(cudaErrorInvalidResourceHandle);
	events.erase(event);
	delete event;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	CUstream_st *s = lookup(stream);
	if (!events.count(event) || !s)
		return set_error(cudaErrorInvalidResourceHandle);
	if (s->capture == cudaStreamCaptureStatusInvalidated)
		return set_error(cudaErrorStreamCaptureInvalidated);
	event->stream = s;
	if (s->capture == cudaStreamCaptureStatusActive) {
		/* Not a node: the nodes the stream's captured work ends in, for a wait to depend on. */
		event->capture_id = s->cap->id;
		event->nodes = s->frontier;
		event->seq = 0;
		event->stamp = nullptr;
	} else {
		/* A marker in the stream: stamped with the modelled time it is reached (rule 10). */
		host_spend(host_event_cost_us());
		auto st = std::make_shared<event_stamp>();
		op o;
		o.label = "cudaEventRecord";
		o.kernels = 0;
		o.stamp = [st](double t) {
			st->t = t;
			st->done = true;
		};
		s->queue.push_back(CUstream_st::entry{std::move(o), nullptr, host_now(), false, 0});
		s->submitted++;
		event->stamp = st;
		event->capture_id = 0;
		event->nodes.clear();
		event->seq = s->submitted;
	}
	return cudaSuccess;
}

/* The open capture an event was last recorded into; NULL when none is open. */
static std::shared_ptr<capture_seq> open_capture_of(const CUevent_st *e)
{
	if (!e->capture_id)
		return nullptr;
	for (CUstream_st *s : streams)
		if (s->cap && s->cap->id == e->capture_id && s->capture != cudaStreamCaptureStatusNone)
			return s->cap;
	return nullptr;
}

/* An event recorded into a capture that is still open may not be waited for or queried. */
static bool captured_event(const CUevent_st *e)
{
	return open_capture_of(e) != nullptr;
}

/*
 * Work submitted to stream after this call waits for the work the event's
 * last record stands for (the runtime API reference), on the device. The
 * programming guide's capture rules: waiting for an event recorded in an open
 * capture makes a stream that is not capturing join that capture, its next
 * node depending on the event's nodes (a fork; cudaStreamEndCapture then
 * requires it joined back into the stream that began the capture), and adds
 * those nodes to a capturing stream's dependencies (a join); waiting for one
 * recorded in another capture merges two captures (cudaErrorStreamCaptureMerge),
 * and a capturing stream waiting for an event recorded outside any capture
 * would depend on work outside the graph (cudaErrorStreamCaptureIsolation):
 * both invalidate the captures. Flags other than cudaEventWaitDefault are not
 * modelled (cudaErrorInvalidValue).
 */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	CUstream_st *s = lookup(stream);
	if (!s || !events.count(event))
		return set_error(cudaErrorInvalidResourceHandle);
	if (flags != cudaEventWaitDefault)
		return set_error(cudaErrorInvalidValue);
	if (s->capture == cudaStreamCaptureStatusInvalidated)
		return set_error(cudaErrorStreamCaptureInvalidated);
	std::shared_ptr<capture_seq> c = open_capture_of(event);
	if (c) {
		if (s->capture == cudaStreamCaptureStatusActive && s->cap != c) {
			invalidate_captures();
			return set_error(cudaErrorStreamCaptureMerge);
		}
		if (s->capture == cudaStreamCaptureStatusNone) {
			if (s == &legacy_stream)
				return set_error(cudaErrorStreamCaptureImplicit);
			s->capture = cudaStreamCaptureStatusActive;
			s->mode = c->origin->mode;
			s->cap = c;
			s->frontier.clear();
			c->joined.push_back(s);
		}
		for (size_t n : event->nodes)
			if (std::find(s->frontier.begin(), s->frontier.end(), n) == s->frontier.end())
				s->frontier.push_back(n);
		return cudaSuccess;
	}
	if (s->capture == cudaStreamCaptureStatusActive) {
		invalidate_captures();
		return set_error(cudaErrorStreamCaptureIsolation);
	}
	if (!event->stream || event->capture_id || event->stream == s)
		return cudaSuccess; /* nothing recorded to wait for, or in order already */
	CUstream_st::entry e;
	e.o.label = "cudaStreamWaitEvent";
	e.o.kernels = 0;
	e.ready = host_now();
	e.wait_on = event->stream;
	e.wait_seq = event->seq;
	e.wait_stamp = event->stamp;
	s->queue.push_back(std::move(e));
	s->submitted++;
	return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	if (!events.count(event))
		return set_error(cudaErrorInvalidResourceHandle);
	if (captured_event(event))
		return invalidate_captures();
	if (!event->stream || event->capture_id)
		return cudaSuccess;
	if (!advance(event->stream, event->seq)) {
		not_ready_nap();
		return cudaErrorNotReady;
	}
	if (event->stamp && event->stamp->done)
		host_observed(event->stamp->t); /* the host polled until then (rule 10) */
	return cudaSuccess;
}

/*
 * Modelled milliseconds between two completed records (rule 10). As CUDA
 * documents: cudaErrorInvalidResourceHandle for an event never recorded or
 * created with cudaEventDisableTiming, cudaErrorNotReady while either has not
 * completed (here: not yet run; this call runs nothing).
 */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	if (!ms)
		return set_error(cudaErrorInvalidValue);
	if (!events.count(start) || !events.count(end) || !start->timing || !end->timing ||
	    !start->stamp || !end->stamp)
		return set_error(cudaErrorInvalidResourceHandle);
	if (!start->stamp->done || !end->stamp->done)
		return cudaErrorNotReady;
	*ms = (float)((end->stamp->t - start->stamp->t) / 1000.0);
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	if (!events.count(event))
		return set_error(cudaErrorInvalidResourceHandle);
	if (captured_event(event))
		return invalidate_captures();
	if (event->stream && !event->capture_id)
		wait_for(event->stream, event->seq, "cudaEventSynchronize");
	return cudaSuccess;
}

/* ---- graph capture ------------------------------------------------------------------- */

/* CUDASIM_CAPTURE_FAIL_RANK / _AT: whether capture fails here, at this step. */
static bool capture_fault(const char *at)
{
	long r = env_long("CUDASIM_CAPTURE_FAIL_RANK", -1);
	if (r < 0 || r != rank())
		return false;
	const char *where = getenv("CUDASIM_CAPTURE_FAIL_AT");
	return std::string(where && *where ? where : "end") == at;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	CUstream_st *s = lookup(stream);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	if (s == &legacy_stream || mode > cudaStreamCaptureModeRelaxed)
		return set_error(cudaErrorInvalidValue);
	if (s->capture != cudaStreamCaptureStatusNone)
		return set_error(cudaErrorIllegalState);
	if (capture_fault("begin"))
		return set_error(cudaErrorNotSupported);
	s->capture = cudaStreamCaptureStatusActive;
	s->mode = mode;
	s->cap = std::make_shared<capture_seq>();
	s->cap->id = next_capture_id++;
	s->cap->origin = s;
	s->frontier.clear();
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
	CUstream_st *s = lookup(stream);
	if (!s)
		return set_error(cudaErrorInvalidResourceHandle);
	if (!graph)
		return set_error(cudaErrorInvalidValue);
	*graph = nullptr;
	if (s->capture == cudaStreamCaptureStatusNone)
		return set_error(cudaErrorIllegalState);
	std::shared_ptr<capture_seq> c = s->cap;
	if (c->origin != s)
		return set_error(cudaErrorStreamCaptureUnmatched);
	bool ok = s->capture == cudaStreamCaptureStatusActive && !capture_fault("end");
	/* Every node no other depends on must be one the origin stream's work ends in. */
	std::vector<char> has_next(c->ops.size(), 0);
	for (const std::vector<size_t> &d : c->deps)
		for (size_t n : d)
			has_next[n] = 1;
	bool unjoined = false;
	for (size_t n = 0; n < c->ops.size(); n++)
		if (!has_next[n] && std::find(s->frontier.begin(), s->frontier.end(), n) == s->frontier.end())
			unjoined = true;
	/* The capture ends on every stream that joined it. */
	for (CUstream_st *t : streams)
		if (t->cap == c) {
			t->capture = cudaStreamCaptureStatusNone;
			t->cap.reset();
			t->frontier.clear();
		}
	if (!ok)
		return set_error(cudaErrorStreamCaptureInvalidated);
	if (unjoined)
		return set_error(cudaErrorStreamCaptureUnjoined);
	CUgraph_st *g = new CUgraph_st;
	g->ops = std::move(c->ops);
	g->deps = std::move(c->deps);
	g->lane = std::move(c->lane);
	for (size_t i = 0; i < g->ops.size(); i++)
		g->nodes.emplace_back(new CUgraphNode_st{i});
	*graph = g;
	return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
	if (!status)
		return set_error(cudaErrorInvalidValue);
	return set_error(capture_status(stream, status));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
	if (!exec || !graph || flags)
		return set_error(cudaErrorInvalidValue);
	*exec = nullptr;
	if (capture_fault("instantiate"))
		return set_error(cudaErrorNotSupported);
	CUgraphExec_st *x = new CUgraphExec_st;
	x->ops = graph->ops;
	x->deps = graph->deps;
	x->lane = graph->lane;
	*exec = x;
	if (getenv("CUDASIM_GRAPH_REPORT")) {
		/* Which nodes are the program's own kernels, which the libraries' calls. */
		size_t kernels = 0;
		for (const op &o : graph->ops)
			kernels += o.label.compare(0, 7, "kernel ") == 0;
		fprintf(stderr, "cudasim: graph instantiated: %zu nodes, %zu kernels of the program, %zu "
				"library calls, copies or collectives\n",
			graph->ops.size(), kernels, graph->ops.size() - kernels);
	}
	return cudaSuccess;
}

} /* extern "C" */

/*
 * The order a replay runs a graph's nodes in, one after another: any order
 * its dependencies allow is one a GPU may take, so none is favoured.
 * CUDASIM_GRAPH_ORDER: "late" runs a node recorded on a stream that joined
 * the capture only when no node of the origin stream's can run (a branch as
 * late as its join allows: what it reads may have been overwritten since),
 * "early" such a node as soon as it can run (before what it should have
 * waited for, if its fork is missing), "capture" in recording order;
 * "alternate" (the default) late on even replays, early on odd ones.
 */
static std::vector<size_t> replay_order(const CUgraphExec_st *x, uint64_t replay)
{
	const char *env = getenv("CUDASIM_GRAPH_ORDER");
	std::string how = env && *env ? env : "alternate";
	if (how == "alternate")
		how = replay % 2 ? "early" : "late";
	size_t n = x->ops.size();
	std::vector<size_t> order;
	if (how == "capture") {
		for (size_t i = 0; i < n; i++)
			order.push_back(i);
		return order;
	}
	if (how != "late" && how != "early")
		fatal("CUDASIM_GRAPH_ORDER=%s: expected late, early, capture or alternate", how.c_str());
	std::vector<size_t> waiting(n, 0);
	std::vector<std::vector<size_t>> next(n);
	for (size_t i = 0; i < n; i++) {
		waiting[i] = x->deps[i].size();
		for (size_t d : x->deps[i])
			next[d].push_back(i);
	}
	std::vector<char> done(n, 0);
	while (order.size() < n) {
		size_t pick = n;
		for (size_t i = 0; i < n; i++) {
			if (done[i] || waiting[i])
				continue;
			if (pick == n || (how == "late" ? x->lane[i] < x->lane[pick] : x->lane[i] > x->lane[pick]))
				pick = i;
		}
		done[pick] = 1;
		order.push_back(pick);
		for (size_t m : next[pick])
			waiting[m]--;
	}
	return order;
}

extern "C" {

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
	if (!exec)
		return set_error(cudaErrorInvalidValue);
	CUstream_st *s = lookup(stream);
	if (!s || s->capture != cudaStreamCaptureStatusNone) {
		for (const op &o : exec->ops) {
			cudaError_t rc = submit(stream, o);
			if (rc != cudaSuccess)
				return rc;
		}
		return cudaSuccess;
	}
	/* One launch on the host; the nodes start once it reaches the device (rule 10). */
	note_graph_launch(exec, host_now());
	host_spend(host_graph_launch_cost_us());
	double ready = host_now() + graph_latency_us();
	uint64_t replay = next_replay++;
	auto rs = std::make_shared<replay_state>();
	size_t n = exec->ops.size();
	rs->deps = exec->deps;
	rs->ready.assign(n, 0.0);
	rs->overhead.assign(n, 0.0);
	rs->work.assign(n, 0.0);
	rs->share.assign(n, 1.0);
	rs->pdl.assign(n, 0);
	rs->kernel.assign(n, 0);
	rs->what.assign(n, std::string());
	rs->began.assign(n, 0.0);
	rs->end.assign(n, 0.0);
	for (size_t i : replay_order(exec, replay)) {
		CUstream_st::entry e{exec->ops[i], nullptr, ready, true, replay};
		e.rs = rs;
		e.node = i;
		s->queue.push_back(std::move(e));
		s->submitted++;
	}
	return cudaSuccess;
}

/*
 * The graph's nodes, one per operation recorded (a kernel, a copy, a memset,
 * a library call's kernels, a collective). nodes NULL: their number in
 * *numNodes; else up to *numNodes handles, the rest of the array NULL, and
 * the number written in *numNodes (the runtime API reference's contract).
 */
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
	if (!graph || !numNodes)
		return set_error(cudaErrorInvalidValue);
	size_t have = graph->nodes.size();
	if (!nodes) {
		*numNodes = have;
		return cudaSuccess;
	}
	size_t room = *numNodes;
	for (size_t i = 0; i < room; i++)
		nodes[i] = i < have ? graph->nodes[i].get() : nullptr;
	*numNodes = room < have ? room : have;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
	delete graph;
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
	delete exec;
	return cudaSuccess;
}

} /* extern "C" */
