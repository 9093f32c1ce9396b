/*
 * timing.cc - the simulator's time model (rule 10 of cudasim.h): a modelled
 * H100 duration for every kernel, library call, copy and collective, a
 * modelled clock per stream and one for the host, and the report of the
 * modelled step (CUDASIM_TIME_REPORT).
 *
 * Every figure is the simulator's own, set from the project's two H100 runs
 * (shared/gpu-runs/2026-11-25-h100 and 2026-11-26-h100: Nsight Compute per
 * kernel, step medians) and the H100 SXM's published rates; docs/benchmarks.md
 * puts the model's step beside each measured one. It predicts, it does not
 * measure: what ran on the simulator is never reported as run on a GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cudasim.h"

namespace cudasim {

/* Loop trips and grid-stride steps of the thread being run (loop_hook.h counts them). */
unsigned long long trips = 0, strides = 0;

namespace h100 {
/* The machine (NVIDIA's H100 SXM5 datasheet): SMs, FP32 (SIMT, no tensor cores) and HBM3. */
const double sms = 132.0;
const double fp32_flops_per_us = 60e6;   /* ~60 TFLOP/s fp32 non-tensor */
const double hbm_bytes_per_us = 3.35e6;  /* ~3.35 TB/s */
const double threads_per_sm = 2048.0;
const double blocks_per_sm = 32.0;
/* Launch costs (the H100 runs: a trivial kernel ~2-3 us under ncu, seed's 12-kernel step 31 us). */
const double kernel_in_graph_us = 1.8;   /* per kernel node of a replayed graph */
const double kernel_on_stream_us = 2.5;  /* per kernel launched on a stream */
const double host_launch_us = 2.5;       /* host side of a kernel or library launch */
const double host_graph_launch_us = 2.5; /* host side of cudaGraphLaunch */
const double graph_latency_us = 2.5;     /* from cudaGraphLaunch to its first node */
const double stream_latency_us = 1.0;    /* from a launch to the kernel's start, idle stream */
const double host_sync_us = 2.0;         /* a blocking wait returning after the work's end */
const double host_event_us = 0.3;        /* cudaEventRecord */
/* Serial work of one thread: an item of a grid-stride loop, a trip of a loop inside one. */
const double item_us = 0.2;      /* loads from HBM and a store, latency mostly hidden */
const double inner_us = 0.003;   /* a load that hits the cache, a multiply-add (~5 cycles) */
const double item_bytes = 24.0;  /* what an item moves to or from HBM, strided access included */
const double trips_per_us = 3.7e6; /* all SMs: 4 schedulers x 32 lanes x 1.755 GHz / 8 instructions */
const double trip_us = 0.003;    /* a serial reduction's term (the split-K and bias-gradient kernels) */
/* A GEMM block: a 32 x 32 tile of D, 64 threads, 16 FMAs per thread per k. */
const double gemm_tile = 32.0;
const double gemm_threads = 64.0;
const double gemm_blocks_per_sm = 4.0;
const double fma_us = 0.0013; /* one FMA of one thread inside a SIMT GEMM (~2.3 cycles) */
/* Host-side copies to or from pageable memory. */
const double pageable_copy_us = 8.0;
const double pageable_bytes_per_us = 20e3;
} /* namespace h100 */

double bytes_us(double bytes)
{
	return bytes / h100::hbm_bytes_per_us;
}

double launch_overhead_us(bool graph)
{
	return graph ? h100::kernel_in_graph_us : h100::kernel_on_stream_us;
}

/* A cost in microseconds from the environment variable `name`, else `otherwise`. */
static double env_us(const char *name, double otherwise)
{
	const char *env = getenv(name);
	if (!env || !*env)
		return otherwise;
	char *end = NULL;
	double us = strtod(env, &end);
	if (*end || !(us >= 0.0))
		cudasim::fatal("%s=%s: expected microseconds, a number >= 0", name, env);
	return us;
}

void lazy_load(const std::string &module)
{
	static std::set<std::string> loaded;
	static const double cost = env_us("CUDASIM_LAZY_LOAD_US", 0.0);
	if (cost > 0.0 && !module.empty() && loaded.insert(module).second) {
		host_spend(cost);
		static bool told = false;
		if (!told)
			atexit([]() {
				fprintf(stderr, "cudasim: lazy loading: %zu kernels loaded at their first launch\n",
					loaded.size());
			});
		told = true;
	}
}

double thread_us(unsigned long long items, unsigned long long loop_trips)
{
	unsigned long long inner = loop_trips > items ? loop_trips - items : 0;
	return (double)items * h100::item_us + (double)inner * h100::inner_us;
}

double kernel_us(unsigned block, const std::vector<double> &block_us, unsigned long long total_items,
		 unsigned long long total_trips)
{
	double per_sm = std::min(h100::blocks_per_sm, std::max(1.0, h100::threads_per_sm / block));
	size_t wave = (size_t)(h100::sms * per_sm);
	double serial = 0.0;
	for (size_t b = 0; b < block_us.size(); b += wave) {
		double worst = 0.0;
		for (size_t i = b; i < block_us.size() && i < b + wave; i++)
			worst = std::max(worst, block_us[i]);
		serial += worst;
	}
	double flow = std::max(bytes_us((double)total_items * h100::item_bytes),
			       (double)total_trips / h100::trips_per_us);
	return std::max(serial, flow);
}

double sm_share(double blocks, double per_sm)
{
	return std::min(1.0, blocks / (h100::sms * per_sm));
}

double kernel_share(unsigned grid, unsigned block)
{
	return sm_share(grid, std::min(h100::blocks_per_sm, std::max(1.0, h100::threads_per_sm / block)));
}

gemm_cost gemm_model(double m, double n, double k, double parts)
{
	gemm_cost g;
	double tiles = ceil(m / h100::gemm_tile) * ceil(n / h100::gemm_tile);
	g.blocks = tiles * parts;
	g.k_per_block = ceil(k / parts);
	double per_thread_fma = h100::gemm_tile * h100::gemm_tile / h100::gemm_threads;
	double block_us = g.k_per_block * per_thread_fma * h100::fma_us;
	double waves = ceil(g.blocks / (h100::sms * h100::gemm_blocks_per_sm));
	double flops = 2.0 * m * n * k / h100::fp32_flops_per_us;
	double bytes = bytes_us(4.0 * (m * k + k * n + m * n * parts));
	g.us = std::max(waves * block_us, std::max(flops, bytes));
	return g;
}

double gemm_share(const gemm_cost &g)
{
	return sm_share(g.blocks, h100::gemm_blocks_per_sm);
}

double splitk_reduce_us(double m, double n, double parts)
{
	/* One thread per element of D, summing the parts. */
	double threads = m * n, wave = h100::sms * h100::threads_per_sm;
	double serial = ceil(threads / wave) * parts * h100::trip_us;
	return std::max(serial, bytes_us(4.0 * m * n * (parts + 1.0)));
}

double bgrad_us(double outputs, double len)
{
	/* cuBLASLt's separate bias-gradient kernel: 64 threads share each output's sum. */
	double serial = ceil(len / 64.0) * h100::trip_us;
	return std::max(serial, bytes_us(4.0 * outputs * len));
}

double cublas_sgemm_parts(double m, double n, double k)
{
	/*
	 * cuBLAS on the H100 (ncu, 2026-11-25): where k is long against m x n it
	 * splits k over about one block per SM (grids z = 98, 115, 131 over 1-2
	 * tiles) and adds cublasLt::splitKreduce_kernel.
	 */
	if (k * k <= 4.0 * m * n || k < 16)
		return 1.0;
	double tiles = ceil(m / h100::gemm_tile) * ceil(n / h100::gemm_tile);
	double fill = floor(h100::sms / tiles);
	return std::max(1.0, std::min(ceil(k / 8.0), fill));
}

/* ---- the host's clock ------------------------------------------------------------ */

static double host_clock = 0.0;

double host_now()
{
	return host_clock;
}

void host_spend(double us)
{
	host_clock += us;
}

void host_waited(double device_time)
{
	host_clock = std::max(host_clock, device_time) + h100::host_sync_us;
}

void host_observed(double device_time)
{
	host_clock = std::max(host_clock, device_time);
}

double host_launch_cost_us()
{
	static const double cost = env_us("CUDASIM_HOST_LAUNCH_US", h100::host_launch_us);
	return cost;
}

double host_event_cost_us()
{
	return h100::host_event_us;
}

double host_graph_launch_cost_us()
{
	return h100::host_graph_launch_us;
}

double graph_latency_us()
{
	return h100::graph_latency_us;
}

double stream_latency_us()
{
	return h100::stream_latency_us;
}

void host_pageable_copy(size_t bytes)
{
	host_clock += h100::pageable_copy_us + (double)bytes / h100::pageable_bytes_per_us;
}

/* ---- the report -------------------------------------------------------------------- */

namespace {
struct report_state {
	const void *exec = nullptr;      /* the graph launched last */
	double last_launch = -1.0;       /* host time of its launch */
	std::vector<double> steps;       /* intervals between consecutive launches of one graph */
	uint64_t replay = 0;             /* the replay whose ops are listed */
	std::vector<std::pair<std::string, double>> ops;
	bool registered = false;
};
report_state *rs()
{
	static report_state *s = new report_state; /* never destroyed: read at exit */
	return s;
}

void report_at_exit()
{
	const char *want = getenv("CUDASIM_TIME_REPORT");
	if (!want || !*want || strcmp(want, "0") == 0 || rank() != 0)
		return;
	report_state *s = rs();
	std::vector<double> v = s->steps;
	if (v.empty())
		return;
	std::sort(v.begin(), v.end());
	double med = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
	FILE *f = stderr;
	bool file = strcmp(want, "1") != 0;
	if (file && !(f = fopen(want, "w")))
		fatal("CUDASIM_TIME_REPORT=%s: cannot open it for writing", want);
	double sum = 0.0;
	for (const auto &o : s->ops)
		sum += o.second;
	fprintf(f, "cudasim time: step_us=%.1f (median interval between graph launches, %zu of them)\n",
		med, v.size());
	fprintf(f, "cudasim time: one replay's ops: %zu, device time %.1f us\n", s->ops.size(), sum);
	/* The ops of the last replay, longest first, the same label summed. */
	std::map<std::string, std::pair<double, int>> by;
	for (const auto &o : s->ops) {
		by[o.first].first += o.second;
		by[o.first].second += 1;
	}
	std::vector<std::pair<double, std::string>> order;
	for (const auto &b : by)
		order.emplace_back(b.second.first, b.first);
	std::sort(order.rbegin(), order.rend());
	for (const auto &o : order)
		fprintf(f, "cudasim time: %9.1f us %5.1f%%  x%d  %s\n", o.first,
			sum > 0 ? 100.0 * o.first / sum : 0.0, by[o.second].second, o.second.c_str());
	if (file)
		fclose(f);
}
} /* namespace */

void note_graph_launch(const void *exec, double host_time)
{
	report_state *s = rs();
	if (!s->registered) {
		atexit(report_at_exit);
		s->registered = true;
	}
	if (s->exec == exec && s->last_launch >= 0.0)
		s->steps.push_back(host_time - s->last_launch);
	s->exec = exec;
	s->last_launch = host_time;
}

void note_op_time(uint64_t replay, const std::string &what, double us)
{
	report_state *s = rs();
	if (!replay)
		return;
	if (replay != s->replay) {
		s->replay = replay;
		s->ops.clear();
	}
	s->ops.emplace_back(what, us);
}

} /* namespace cudasim */
