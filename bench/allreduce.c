/*
 * allreduce.c - allreduce bandwidth table in the style of nccl-tests.
 *
 *   cmake -S . -B build && cmake --build build -j
 *   mpirun -n 2 build/bench/allreduce               (4 B .. 64 MB, factor 2)
 *   mpirun -n 2 build/bench/allreduce -b 1K -e 1M -n 100
 *
 * Rank 0 prints one table per path: MPI_Allreduce on host buffers, and, when
 * built with CUDA (MNIST_DDP_HAVE_CUDA) and every rank can run the CUDA
 * backend as mnist-train decides it (its job probe: one GPU per rank, ...),
 * ncclAllReduce on device buffers; otherwise one line says why not (two ranks
 * on one GPU: "skipped (rank 1: local ranks 0 and 1 ... [shared-gpu])"). Each row: size, count, float/sum, then
 * out-of-place and in-place time (us), algbw = size / time and
 * busbw = algbw * 2(n-1)/n (GB/s), and #wrong, the elements that differ from
 * the exact sum. Inputs are small integers computed from (seed, rank, index),
 * so every rank knows the exact expected sum without extra communication.
 *
 * A third table, --step-op (on by default), times the trainer's own gradient
 * reduction (the host backend's allreduce op with REDUCE_SUM, as the step calls
 * it, and with REDUCE_MEAN) against a bare MPI_Allreduce of the same count, side
 * by side, for the parameter counts of the seed, linear and mlp (512,256) models.
 * Built with CUDA, a fourth does the same on the device: the CUDA backend's
 * allreduce op, from the build's own module (libmnist-cuda.so) as the step calls
 * it, against a bare ncclAllReduce of the same count (seed, lenet, mlp).
 *
 * Exit status: 0 all correct, 1 when any element anywhere was wrong, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "backend.h"
#include "backend_module.h"
#include "check.h"
#include "config.h"
#include "dist.h"
#include "io/report.h"

#ifdef MNIST_DDP_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

struct bench_opts {
	size_t min_bytes, max_bytes;
	int factor;
	int iters;  /* 0: automatic per size */
	int warmup;
	uint64_t seed;
	int step_op;
	int host, cuda;
};

/* The input element i of `rank`: an integer in [0, 15], exact in any summation order. */
static float pattern(uint64_t seed, int rank, size_t i)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 0xbf58476d1ce4e5b9ull +
		     (uint64_t)i * 0x94d049bb133111ebull;
	z ^= z >> 31;
	z *= 0xd6e8feb86659fd93ull;
	z ^= z >> 29;
	return (float)(z & 15u);
}

static void fill(float *buf, size_t n, uint64_t seed, int rank)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(seed, rank, i);
}

/* Elements of buf (n) that differ from the sum over ranks of pattern(), times `scale`. */
static long long count_wrong(const float *buf, size_t n, uint64_t seed, int ranks, float scale)
{
	long long wrong = 0;
	for (size_t i = 0; i < n; i++) {
		float sum = 0.0f;
		for (int r = 0; r < ranks; r++)
			sum += pattern(seed, r, i);
		if (buf[i] != sum * scale)
			wrong++;
	}
	return wrong;
}

static int iters_for(const struct bench_opts *o, size_t bytes)
{
	if (o->iters > 0)
		return o->iters;
	size_t it = ((size_t)1 << 30) / (bytes ? bytes : 1);
	return it < 5 ? 5 : it > 1000 ? 1000 : (int)it;
}

static double busbw_factor(int ranks)
{
	return ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0;
}

static void print_header(const char *title)
{
	printf("#\n# %s\n", title);
	printf("#                                           out-of-place                         in-place\n");
	printf("#       size         count      type   redop       time   algbw   busbw #wrong       time   algbw   busbw #wrong\n");
	printf("#        (B)    (elements)                         (us)  (GB/s)  (GB/s)              (us)  (GB/s)  (GB/s)\n");
}

static void print_row(size_t bytes, size_t count, int ranks, const double us[2],
		      const long long wrong[2])
{
	printf("%12zu  %12zu     float     sum", bytes, count);
	for (int k = 0; k < 2; k++) {
		double algbw = us[k] > 0 ? (double)bytes / (us[k] * 1e3) : 0.0;
		printf("  %9.2f  %6.2f  %6.2f  %5lld", us[k], algbw, algbw * busbw_factor(ranks),
		       wrong[k]);
	}
	printf("\n");
}

/* Seconds per call of the slowest rank over `iters` calls after a barrier. */
static double slowest(const struct dist *d, double seconds)
{
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, d->comm));
	return seconds;
}

/* ---- MPI_Allreduce on host buffers ------------------------------------------ */

static long long bench_mpi(const struct dist *d, const struct bench_opts *o, double *bus_sum,
			   int *rows)
{
	size_t max_count = o->max_bytes / sizeof(float);
	float *send = xmalloc(max_count * sizeof(float));
	float *recv = xmalloc(max_count * sizeof(float));
	long long total_wrong = 0;
	if (d->rank == 0)
		print_header("MPI_Allreduce, host buffers");
	for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= (size_t)o->factor) {
		size_t n = bytes / sizeof(float);
		int iters = iters_for(o, bytes);
		double us[2];
		long long wrong[2];
		fill(send, n, o->seed, d->rank);
		for (int inplace = 0; inplace < 2; inplace++) {
			/* Timed calls run on zeros in place, so sums never grow; the check runs after. */
			const void *src = inplace ? MPI_IN_PLACE : (const void *)send;
			if (inplace)
				memset(recv, 0, n * sizeof(float));
			for (int i = 0; i < o->warmup; i++)
				MPI_CHECK(MPI_Allreduce(src, recv, (int)n, MPI_FLOAT, MPI_SUM, d->comm));
			MPI_CHECK(MPI_Barrier(d->comm));
			double t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				MPI_CHECK(MPI_Allreduce(src, recv, (int)n, MPI_FLOAT, MPI_SUM, d->comm));
			us[inplace] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;

			if (inplace)
				fill(recv, n, o->seed, d->rank);
			MPI_CHECK(MPI_Allreduce(src, recv, (int)n, MPI_FLOAT, MPI_SUM, d->comm));
			wrong[inplace] = count_wrong(recv, n, o->seed, d->size, 1.0f);
		}
		long long w[2];
		MPI_CHECK(MPI_Allreduce(wrong, w, 2, MPI_LONG_LONG, MPI_SUM, d->comm));
		total_wrong += w[0] + w[1];
		if (d->rank == 0) {
			print_row(bytes, n, d->size, us, w);
			*bus_sum += (double)bytes / (us[1] * 1e3) * busbw_factor(d->size);
			(*rows)++;
		}
		fflush(stdout);
	}
	free(send);
	free(recv);
	return total_wrong;
}

/* ---- the trainer's allreduce op against a bare MPI_Allreduce ----------------- */

static long long bench_step_op(const struct dist *d, const struct bench_opts *o)
{
	/* Parameter counts: seed and linear 784*10+10, mlp 784*512+512+512*256+256+256*10+10. */
	static const struct {
		const char *model;
		size_t count;
	} sizes[] = {{"seed/linear", 7850}, {"mlp 512,256", 535818}};
	struct backend be;
	struct train_config defaults;
	backend_host_create(d, 0, &be);
	/* The trainer's default deadline: the step op runs under its watchdog, as in training. */
	config_defaults(&defaults);
	backend_set_timeout(&be, defaults.timeout);
	long long total_wrong = 0;
	if (d->rank == 0) {
		printf("#\n# Gradient reduction of one training step against a bare MPI_Allreduce in place.\n");
		printf("# step op: the host backend's allreduce with REDUCE_SUM, as the trainer calls it (it\n");
		printf("# folds the 1/n of the mean into the loss gradient); mean op: REDUCE_MEAN (sum, then a\n");
		printf("# pass dividing by n). Both with the trainer's default --timeout %g (the collective\n", (double)defaults.timeout);
		printf("# deadline). Medians of %d rounds; each round times all three, interleaved.\n", 9);
		printf("#        model         count   bare (us)  step op (us)   ratio  mean op (us)   ratio #wrong\n");
	}
	size_t max_count = sizes[1].count;
	float *buf = xmalloc(max_count * sizeof(float));
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s].count;
		int iters = iters_for(o, n * sizeof(float));
		enum { ROUNDS = 9 };
		double bare[ROUNDS], op[ROUNDS], mean[ROUNDS];
		memset(buf, 0, n * sizeof(float));
		for (int i = 0; i < o->warmup; i++)
			backend_allreduce(&be, buf, n, REDUCE_MEAN);
		for (int r = 0; r < ROUNDS; r++) {
			MPI_CHECK(MPI_Barrier(d->comm));
			double t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
							d->comm));
			bare[r] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;
			MPI_CHECK(MPI_Barrier(d->comm));
			t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				backend_allreduce(&be, buf, n, REDUCE_SUM);
			op[r] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;
			MPI_CHECK(MPI_Barrier(d->comm));
			t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				backend_allreduce(&be, buf, n, REDUCE_MEAN);
			mean[r] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;
		}
		/* Median by insertion sort of 9 values. */
		for (int i = 1; i < ROUNDS; i++)
			for (int j = i; j > 0; j--) {
				if (bare[j] < bare[j - 1]) {
					double t = bare[j]; bare[j] = bare[j - 1]; bare[j - 1] = t;
				}
				if (op[j] < op[j - 1]) {
					double t = op[j]; op[j] = op[j - 1]; op[j - 1] = t;
				}
				if (mean[j] < mean[j - 1]) {
					double t = mean[j]; mean[j] = mean[j - 1]; mean[j - 1] = t;
				}
			}
		fill(buf, n, o->seed, d->rank);
		backend_allreduce(&be, buf, n, REDUCE_SUM);
		long long wrong = count_wrong(buf, n, o->seed, d->size, 1.0f);
		fill(buf, n, o->seed, d->rank);
		backend_allreduce(&be, buf, n, REDUCE_MEAN);
		/* The mean of small integers over a power-of-two rank count is exact. */
		if ((d->size & (d->size - 1)) == 0)
			wrong += count_wrong(buf, n, o->seed, d->size, 1.0f / (float)d->size);
		MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, d->comm));
		total_wrong += wrong;
		if (d->rank == 0)
			printf("%14s  %12zu  %10.2f  %12.2f  %6.3f  %12.2f  %6.3f  %5lld\n", sizes[s].model,
			       n, bare[ROUNDS / 2], op[ROUNDS / 2], op[ROUNDS / 2] / bare[ROUNDS / 2],
			       mean[ROUNDS / 2], mean[ROUNDS / 2] / bare[ROUNDS / 2], wrong);
		fflush(stdout);
	}
	free(buf);
	backend_destroy(&be);
	return total_wrong;
}

/* ---- ncclAllReduce on device buffers (CUDA builds only) ---------------------- */

#ifdef MNIST_DDP_HAVE_CUDA
#define BENCH_CUDA_CHECK(stmt)                                                           \
	do {                                                                             \
		cudaError_t bench_cuda_rc_ = (stmt);                                     \
		if (bench_cuda_rc_ != cudaSuccess)                                       \
			check_fail(#stmt, cudaGetErrorString(bench_cuda_rc_), __func__,  \
				   __FILE__, __LINE__, 1);                               \
	} while (0)
#define BENCH_NCCL_CHECK(stmt)                                                           \
	do {                                                                             \
		ncclResult_t bench_nccl_rc_ = (stmt);                                    \
		if (bench_nccl_rc_ != ncclSuccess)                                       \
			check_fail(#stmt, ncclGetErrorString(bench_nccl_rc_), __func__,  \
				   __FILE__, __LINE__, 1);                               \
	} while (0)

/*
 * Can every rank run the NCCL tables? The trainer's own decision
 * (backend_cuda_job_probe: the driver, the module, then the module's probe of
 * the devices), so that what mnist-train refuses, two ranks on one GPU
 * (shared-gpu), more ranks than GPUs, a driver too old, is skipped here with
 * the same reason instead of aborting in ncclCommInitRank. Collective; *m is
 * the module when usable. Rank 0 prints the one-line reason otherwise.
 */
static int bench_cuda_usable(const struct dist *d, const struct backend_module **m)
{
	struct cuda_probe mine, worst;
	int bad_rank = -1;
	if (backend_cuda_job_probe(d, MNIST_BENCH_CUDA_MODULE, m, &mine, &worst, &bad_rank) ==
	    CUDA_USABLE)
		return 1;
	if (d->rank == 0)
		printf("#\n# ncclAllReduce: skipped (rank %d: %s [%s])\n", bad_rank, worst.why,
		       worst.reason);
	return 0;
}

static long long bench_nccl(const struct dist *d, const struct bench_opts *o, double *bus_sum,
			    int *rows, ncclComm_t *comm_out)
{
	int count = 0;
	BENCH_CUDA_CHECK(cudaGetDeviceCount(&count));
	/* The probe's device: the local rank's, or the one GPU a rank sees. */
	BENCH_CUDA_CHECK(cudaSetDevice(count == 1 ? 0 : d->local_rank));
	ncclUniqueId id;
	if (d->rank == 0)
		BENCH_NCCL_CHECK(ncclGetUniqueId(&id));
	MPI_CHECK(MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, d->comm));
	ncclComm_t comm;
	BENCH_NCCL_CHECK(ncclCommInitRank(&comm, d->size, id, d->rank));
	*comm_out = comm;
	cudaStream_t stream;
	BENCH_CUDA_CHECK(cudaStreamCreate(&stream));

	size_t max_count = o->max_bytes / sizeof(float);
	float *host = xmalloc(max_count * sizeof(float));
	float *send, *recv;
	BENCH_CUDA_CHECK(cudaMalloc((void **)&send, max_count * sizeof(float)));
	BENCH_CUDA_CHECK(cudaMalloc((void **)&recv, max_count * sizeof(float)));
	long long total_wrong = 0;
	if (d->rank == 0)
		print_header("ncclAllReduce, device buffers");
	for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= (size_t)o->factor) {
		size_t n = bytes / sizeof(float);
		int iters = iters_for(o, bytes);
		double us[2];
		long long wrong[2];
		fill(host, n, o->seed, d->rank);
		BENCH_CUDA_CHECK(cudaMemcpy(send, host, n * sizeof(float), cudaMemcpyHostToDevice));
		for (int inplace = 0; inplace < 2; inplace++) {
			const float *src = inplace ? recv : send;
			if (inplace)
				BENCH_CUDA_CHECK(cudaMemsetAsync(recv, 0, n * sizeof(float), stream));
			for (int i = 0; i < o->warmup; i++)
				BENCH_NCCL_CHECK(ncclAllReduce(src, recv, n, ncclFloat, ncclSum, comm, stream));
			BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
			MPI_CHECK(MPI_Barrier(d->comm));
			double t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				BENCH_NCCL_CHECK(ncclAllReduce(src, recv, n, ncclFloat, ncclSum, comm, stream));
			BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
			us[inplace] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;

			if (inplace)
				BENCH_CUDA_CHECK(cudaMemcpy(recv, host, n * sizeof(float), cudaMemcpyHostToDevice));
			BENCH_NCCL_CHECK(ncclAllReduce(src, recv, n, ncclFloat, ncclSum, comm, stream));
			BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
			float *out = xmalloc(n * sizeof(float) + 1);
			BENCH_CUDA_CHECK(cudaMemcpy(out, recv, n * sizeof(float), cudaMemcpyDeviceToHost));
			wrong[inplace] = count_wrong(out, n, o->seed, d->size, 1.0f);
			free(out);
		}
		long long w[2];
		MPI_CHECK(MPI_Allreduce(wrong, w, 2, MPI_LONG_LONG, MPI_SUM, d->comm));
		total_wrong += w[0] + w[1];
		if (d->rank == 0) {
			print_row(bytes, n, d->size, us, w);
			*bus_sum += (double)bytes / (us[1] * 1e3) * busbw_factor(d->size);
			(*rows)++;
		}
		fflush(stdout);
	}
	BENCH_CUDA_CHECK(cudaFree(send));
	BENCH_CUDA_CHECK(cudaFree(recv));
	BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
	free(host);
	return total_wrong;
}

/* The middle of n values (sorted in place). */
static double median_of(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

/*
 * The CUDA backend's gradient reduction as the training step issues it: the
 * module's allreduce op with REDUCE_SUM (its own stream and communicator, the
 * collective noted for the deadline), waited for by backend_synchronize,
 * against a bare in-place ncclAllReduce of the same count on `comm`, waited
 * for by cudaStreamSynchronize. Both on zeros while timed; the op's sum is
 * then checked on the pattern.
 */
static long long bench_cuda_step_op(const struct dist *d, const struct bench_opts *o,
				    const struct backend_module *m, ncclComm_t comm)
{
	/* Parameter counts: seed and linear 7850; lenet 156+2416+48120+10164+850; mlp 512,256. */
	static const struct {
		const char *model;
		size_t count;
	} sizes[] = {{"seed/linear", 7850}, {"lenet", 61706}, {"mlp 512,256", 535818}};
	enum { ROUNDS = 9 };
	struct train_config defaults;
	struct backend be;
	char why[512];
	if (m->create(d, &be, why, sizeof(why))) { /* the same outcome on every rank */
		if (d->rank == 0)
			printf("#\n# CUDA backend's allreduce op: skipped (%s)\n", why);
		return 0;
	}
	config_defaults(&defaults);
	backend_set_timeout(&be, defaults.timeout);
	size_t max_count = sizes[2].count;
	float *host = xmalloc(max_count * sizeof(float));
	float *op_buf = backend_alloc(&be, max_count * sizeof(float)); /* zero-filled */
	float *bare_buf;
	cudaStream_t stream;
	if (!op_buf)
		die(1, "allreduce: the CUDA backend cannot allocate %zu floats", max_count);
	BENCH_CUDA_CHECK(cudaStreamCreate(&stream));
	BENCH_CUDA_CHECK(cudaMalloc((void **)&bare_buf, max_count * sizeof(float)));
	BENCH_CUDA_CHECK(cudaMemsetAsync(bare_buf, 0, max_count * sizeof(float), stream));
	BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
	if (d->rank == 0) {
		printf("#\n# CUDA backend's gradient allreduce against a bare ncclAllReduce in place, device buffers.\n");
		printf("# step op: the module's allreduce with REDUCE_SUM, as the trainer calls it (its stream and\n");
		printf("# communicator, the collective deadline --timeout %g), waited for by backend_synchronize;\n",
		       (double)defaults.timeout);
		printf("# bare: ncclAllReduce(ncclSum) on this program's communicator, cudaStreamSynchronize.\n");
		printf("# Medians of %d rounds; each round times both, interleaved.\n", ROUNDS);
		printf("#        model         count   bare (us)  step op (us)   ratio #wrong\n");
	}
	long long total_wrong = 0;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s].count;
		int iters = iters_for(o, n * sizeof(float));
		double bare[ROUNDS], op[ROUNDS];
		for (int i = 0; i < o->warmup; i++) {
			backend_allreduce(&be, op_buf, n, REDUCE_SUM);
			BENCH_NCCL_CHECK(ncclAllReduce(bare_buf, bare_buf, n, ncclFloat, ncclSum, comm, stream));
		}
		backend_synchronize(&be);
		BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
		for (int r = 0; r < ROUNDS; r++) {
			MPI_CHECK(MPI_Barrier(d->comm));
			double t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				BENCH_NCCL_CHECK(ncclAllReduce(bare_buf, bare_buf, n, ncclFloat, ncclSum,
							       comm, stream));
			BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
			bare[r] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;
			MPI_CHECK(MPI_Barrier(d->comm));
			t0 = clock_seconds();
			for (int i = 0; i < iters; i++)
				backend_allreduce(&be, op_buf, n, REDUCE_SUM);
			backend_synchronize(&be);
			op[r] = slowest(d, (clock_seconds() - t0) / iters) * 1e6;
		}
		double b = median_of(bare, ROUNDS), t = median_of(op, ROUNDS);
		fill(host, n, o->seed, d->rank);
		backend_upload(&be, op_buf, host, n * sizeof(float));
		backend_allreduce(&be, op_buf, n, REDUCE_SUM);
		backend_download(&be, host, op_buf, n * sizeof(float));
		long long wrong = count_wrong(host, n, o->seed, d->size, 1.0f);
		memset(host, 0, n * sizeof(float)); /* zeros again for the next, larger count */
		backend_upload(&be, op_buf, host, n * sizeof(float));
		MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, d->comm));
		total_wrong += wrong;
		if (d->rank == 0)
			printf("%14s  %12zu  %10.2f  %12.2f  %6.3f  %5lld\n", sizes[s].model, n, b, t, t / b,
			       wrong);
		fflush(stdout);
	}
	BENCH_CUDA_CHECK(cudaFree(bare_buf));
	BENCH_CUDA_CHECK(cudaStreamDestroy(stream));
	backend_free(&be, op_buf);
	backend_destroy(&be);
	free(host);
	return total_wrong;
}
#endif

/* ---- command line ------------------------------------------------------------- */

/* "4", "64K", "1M", "64M" -> bytes; 0 on error. */
static size_t parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return 0;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		v <<= 30, end++;
	if (*end || v > ((size_t)1 << 31))
		return 0;
	return (size_t)v;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: mpirun -n N allreduce [options]\n"
		"  -b, --minbytes SIZE   smallest message (default 4; K, M, G suffixes)\n"
		"  -e, --maxbytes SIZE   largest message (default 64M)\n"
		"  -f, --stepfactor F    size multiplier between rows (default 2)\n"
		"  -n, --iters N         timed calls per size (default: 2^30 / bytes within 5..1000)\n"
		"  -w, --warmup N        untimed calls per size first (default 5)\n"
		"      --seed N          seed of the input values (default 1)\n"
		"      --path P          host, cuda or all (default all: cuda where built and present)\n"
		"      --no-step-op      skip the trainer's allreduce op against bare MPI_Allreduce\n"
		"  -h, --help            this text\n"
		"Exit status: 0 every element right, 1 any element wrong, 2 bad usage.\n");
}

static int parse_args(int argc, char **argv, struct bench_opts *o, char *err, size_t errlen)
{
	static const struct option opts[] = {
		{"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
		{"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
		{"warmup", required_argument, NULL, 'w'},   {"seed", required_argument, NULL, 's'},
		{"path", required_argument, NULL, 'p'},     {"no-step-op", no_argument, NULL, 'x'},
		{"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	*o = (struct bench_opts){.min_bytes = 4, .max_bytes = (size_t)64 << 20, .factor = 2,
				 .warmup = 5, .seed = 1, .step_op = 1, .host = 1, .cuda = 1};
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, ":b:e:f:n:w:h", opts, NULL)) != -1) {
		char *end;
		long v;
		switch (c) {
		case 'b':
		case 'e': {
			size_t s = parse_size(optarg);
			if (s < sizeof(float) || s % sizeof(float)) {
				snprintf(err, errlen, "-%c: '%s' is not a multiple of 4 bytes up to 2G", c, optarg);
				return 2;
			}
			*(c == 'b' ? &o->min_bytes : &o->max_bytes) = s;
			break;
		}
		case 'f':
		case 'n':
		case 'w':
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < (c == 'f' ? 2 : c == 'n' ? 1 : 0) || v > 1000000) {
				snprintf(err, errlen, "-%c: '%s' is not a valid count", c, optarg);
				return 2;
			}
			*(c == 'f' ? &o->factor : c == 'n' ? &o->iters : &o->warmup) = (int)v;
			break;
		case 's':
			o->seed = strtoull(optarg, NULL, 10);
			break;
		case 'p':
			if (!strcmp(optarg, "host"))
				o->cuda = 0;
			else if (!strcmp(optarg, "cuda"))
				o->host = 0;
			else if (strcmp(optarg, "all")) {
				snprintf(err, errlen, "--path: '%s' is not host, cuda or all", optarg);
				return 2;
			}
			break;
		case 'x':
			o->step_op = 0;
			break;
		case 'h':
			return 1;
		default:
			snprintf(err, errlen, "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
			return 2;
		}
	}
	if (o->min_bytes > o->max_bytes) {
		snprintf(err, errlen, "--minbytes is larger than --maxbytes");
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct dist d;
	struct bench_opts o;
	char err[256] = "";
	dist_init(&argc, &argv, &d);
	int rc = parse_args(argc, argv, &o, err, sizeof(err));
	if (rc) {
		if (d.rank == 0) {
			if (rc == 2)
				fprintf(stderr, "allreduce: %s\n", err);
			usage(rc == 2 ? stderr : stdout);
		}
		dist_finalize(&d);
		return rc == 1 ? 0 : 2;
	}
	if (d.rank == 0) {
		printf("# allreduce: %d rank%s on %d node%s, seed %llu, warmup %d, iters %s\n", d.size,
		       d.size == 1 ? "" : "s", d.node_count, d.node_count == 1 ? "" : "s",
		       (unsigned long long)o.seed, o.warmup,
		       o.iters ? "fixed" : "2^30/bytes within 5..1000");
		printf("# time: the slowest rank's mean per call; busbw = algbw * 2(n-1)/n\n");
		printf("# MPI tuning in effect (host/dist/dist.c): %s\n", dist_mpi_tuning());
	}
	/* Rank 0 prints every rank's identity (gathered), so lines never interleave. */
	struct {
		int local_rank, pid;
		char host[MPI_MAX_PROCESSOR_NAME];
	} me = {d.local_rank, (int)getpid(), ""}, *all = NULL;
	memcpy(me.host, d.host, sizeof(me.host));
	if (d.rank == 0)
		all = xmalloc((size_t)d.size * sizeof(*all));
	MPI_CHECK(MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0,
			     d.comm));
	for (int r = 0; d.rank == 0 && r < d.size; r++)
		printf("#  rank %2d  local rank %2d  pid %6d  on %s\n", r, all[r].local_rank,
		       all[r].pid, all[r].host);
	free(all);

	long long wrong = 0;
	if (o.host) {
		double bus = 0.0;
		int rows = 0;
		wrong += bench_mpi(&d, &o, &bus, &rows);
		if (d.rank == 0)
			printf("# Avg bus bandwidth (in place) : %.3f GB/s\n", rows ? bus / rows : 0.0);
		if (o.step_op)
			wrong += bench_step_op(&d, &o);
	}
#ifdef MNIST_DDP_HAVE_CUDA
	const struct backend_module *m = NULL;
	if (o.cuda && bench_cuda_usable(&d, &m)) {
		double bus = 0.0;
		int rows = 0;
		ncclComm_t comm = NULL;
		wrong += bench_nccl(&d, &o, &bus, &rows, &comm);
		if (d.rank == 0 && rows)
			printf("# Avg bus bandwidth (in place) : %.3f GB/s\n", bus / rows);
		if (o.step_op)
			wrong += bench_cuda_step_op(&d, &o, m, comm);
		ncclCommDestroy(comm);
	}
#else
	if (o.cuda && d.rank == 0)
		printf("#\n# ncclAllReduce: skipped (built without CUDA)\n");
#endif
	if (d.rank == 0) {
		printf("#\n# Out of bounds values : %lld %s\n#\n", wrong, wrong ? "FAILED" : "OK");
		fflush(stdout);
	}
	dist_finalize(&d);
	return wrong ? 1 : 0;
}
