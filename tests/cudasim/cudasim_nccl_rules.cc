/*
 * cudasim_nccl_rules.cc - the simulator's NCCL rules (rule 8 of cudasim.h)
 * across ranks, under mpirun, one mode per run:
 *
 *   mpirun -n 2 cudasim_nccl_rules MODE
 *
 *   rules          what a correct program gets: sums and means in elements of
 *                  their datatype (int64 sums exact beyond a double's 2^53),
 *                  identical on every rank; broadcast; device
 *                  buffers required; one id per communicator and one GPU per
 *                  rank; lazy connection (the first collective call waits on
 *                  the host for every rank's, later ones do not);
 *                  ncclCommFinalize runs what is queued. Prints "PASS rules".
 *   datatype       rank 1 reduces as ncclFloat64 what the others reduce as
 *                  ncclInt64 (same count, same bytes): stopped the same way.
 *   count-in-bytes rank 1 passes its count in bytes (4x the others'):
 *                  the cross-rank check stops the job naming both sides.
 *   capture        rank 0 replays a graph holding the allreduce while rank 1
 *                  issues it plainly: stopped the same way (capture must be
 *                  uniform over the ranks).
 *   hang           with CUDASIM_HANG_RANK=1 the collective never completes:
 *                  both ranks see cudaErrorNotReady for a second; then rank 1
 *                  aborts its communicator and rank 0 sees ncclRemoteError
 *                  from ncclCommGetAsyncError. Prints "PASS hang".
 *   hang-error     with CUDASIM_HANG_RANK=1 and CUDASIM_HANG_ERROR_AFTER=2: rank 0
 *                  sees ncclSuccess from ncclCommGetAsyncError for the first
 *                  1.5 s it waits on the hung collective, then ncclRemoteError
 *                  by 4 s, the collective still pending; rank 1, the hung
 *                  one, sees no error. Prints "PASS hang-error".
 *   hang-sync      with CUDASIM_HANG_RANK=1, a cudaStreamSynchronize behind
 *   hang-free      the hung collective (hang-free: a cudaFree of another
 *                  buffer, which waits for the whole device): rank 1 is
 *                  stopped at once with "... blocks forever" (a GPU would
 *                  hang there); ctest matches that line.
 * Anything unexpected prints "FAIL ..." and exits 1.
 */
#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "cuda_runtime.h"
#include "nccl.h"

static int rank, size;

static void expect(bool ok, const char *what)
{
	if (ok)
		return;
	printf("FAIL rank %d: %s\n", rank, what);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
}

static ncclComm_t new_comm(ncclResult_t *rc)
{
	ncclUniqueId id;
	ncclComm_t comm = NULL;
	if (rank == 0)
		ncclGetUniqueId(&id);
	MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
	*rc = ncclCommInitRank(&comm, size, id, rank);
	return comm;
}

template <class T> static T *dev(size_t n)
{
	void *p = NULL;
	expect(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess, "cudaMalloc");
	return (T *)p;
}

template <class T> static void put(T *d, const std::vector<T> &h, cudaStream_t s)
{
	expect(cudaMemcpyAsync(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s) == cudaSuccess,
	       "upload");
}

template <class T> static std::vector<T> get(const T *d, size_t n, cudaStream_t s)
{
	std::vector<T> h(n);
	expect(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s) == cudaSuccess,
	       "download");
	return h;
}

/* Whether buf (bytes) is the same on every rank. */
static bool same_everywhere(const void *buf, size_t bytes)
{
	std::vector<char> first(bytes);
	memcpy(first.data(), buf, bytes);
	MPI_Bcast(first.data(), (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
	int same = memcmp(first.data(), buf, bytes) == 0, all = 0;
	MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	return all != 0;
}

static void mode_rules(cudaStream_t s)
{
	ncclResult_t rc;

	/* Two ranks on one GPU: NCCL refuses ("duplicate GPU"). */
	setenv("CUDA_VISIBLE_DEVICES", "0", 1);
	expect(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
	ncclComm_t dup = new_comm(&rc);
	expect(rc == ncclInvalidUsage && !dup, "two ranks on one GPU were not refused");
	unsetenv("CUDA_VISIBLE_DEVICES");
	expect(cudaSetDevice(rank) == cudaSuccess, "cudaSetDevice");

	/* Every rank its own id: refused on every rank. */
	ncclUniqueId own;
	ncclComm_t bad = NULL;
	ncclGetUniqueId(&own);
	expect(ncclCommInitRank(&bad, size, own, rank) == ncclInvalidUsage && !bad,
	       "ranks with different unique ids formed a communicator");

	ncclComm_t comm = new_comm(&rc);
	expect(rc == ncclSuccess, "ncclCommInitRank");

	/* Lazy connection: the first call waits for every rank's first call. */
	const size_t n = 3000;
	float *f = dev<float>(n);
	std::vector<float> h(n);
	for (size_t i = 0; i < n; i++)
		h[i] = (float)(rank + 1) * 0.1f * (float)(i % 13 + 1);
	put(f, h, s);
	if (rank == 1)
		nap(1.0);
	double t0 = MPI_Wtime();
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "ncclAllReduce");
	double first_call = MPI_Wtime() - t0;
	if (rank == 0)
		expect(first_call > 0.8, "the first collective call returned before the peer's first call");
	std::vector<float> sum = get(f, n, s);
	expect(same_everywhere(sum.data(), n * sizeof(float)), "sums differ across ranks");
	put(f, h, s);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1)
		nap(1.0);
	t0 = MPI_Wtime();
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclAvg, comm, s) == ncclSuccess, "ncclAllReduce");
	double later_call = MPI_Wtime() - t0;
	expect(later_call < 0.5, "a later collective call blocked on the host");
	std::vector<float> avg = get(f, n, s);
	expect(same_everywhere(avg.data(), n * sizeof(float)), "means differ across ranks");
	for (size_t i = 0; i < n; i++)
		expect(fabsf(avg[i] - sum[i] / (float)size) <= 1e-6f * fabsf(sum[i]),
		       "the mean of the sums is not the sums divided by the rank count");

	/* Counts are elements of the datatype: int32 sums, exact; then a broadcast. */
	int32_t *iv = dev<int32_t>(7);
	std::vector<int32_t> ih(7);
	for (int i = 0; i < 7; i++)
		ih[(size_t)i] = (rank + 1) * 1000 + i;
	put(iv, ih, s);
	expect(ncclAllReduce(iv, iv, 7, ncclInt32, ncclSum, comm, s) == ncclSuccess, "int32 allreduce");
	std::vector<int32_t> isum = get(iv, 7, s);
	for (int i = 0; i < 7; i++)
		expect(isum[(size_t)i] == 1000 * size * (size + 1) / 2 + size * i, "int32 sum");
	/*
	 * int64 sums (--exact's fixed point), exact where a double would round:
	 * terms of 2^60 / size and more, negative ones, and 1s beside them.
	 */
	int64_t *lv = dev<int64_t>(5);
	std::vector<int64_t> lh(5);
	for (int i = 0; i < 5; i++)
		lh[(size_t)i] = (i % 2 ? -1 : 1) * ((((int64_t)1 << 60) / size) + rank * 3 + 1);
	put(lv, lh, s);
	expect(ncclAllReduce(lv, lv, 5, ncclInt64, ncclSum, comm, s) == ncclSuccess, "int64 allreduce");
	std::vector<int64_t> lsum = get(lv, 5, s);
	for (int i = 0; i < 5; i++) {
		int64_t want = (((int64_t)1 << 60) / size) * size + 3 * size * (size - 1) / 2 + size;
		expect(lsum[(size_t)i] == (i % 2 ? -want : want), "int64 sum not exact");
	}
	expect(ncclBroadcast(f, f, n, ncclFloat, size - 1, comm, s) == ncclSuccess, "ncclBroadcast");
	std::vector<float> b = get(f, n, s);
	expect(same_everywhere(b.data(), n * sizeof(float)), "broadcast left ranks different");

	/* Buffers must be device memory. */
	expect(ncclAllReduce(h.data(), f, n, ncclFloat, ncclSum, comm, s) == ncclInvalidArgument,
	       "a host sendbuff was accepted");

	/* Finalize runs what is queued; destroy frees. */
	put(f, h, s);
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclMax, comm, s) == ncclSuccess, "ncclAllReduce");
	expect(ncclCommFinalize(comm) == ncclSuccess, "ncclCommFinalize");
	expect(cudaStreamQuery(s) == cudaSuccess, "ncclCommFinalize left the collective queued");
	expect(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
	if (rank == 0)
		printf("PASS rules: %d ranks, first collective call %.2f s (waited for the peer), "
		       "a later one %.3f s\n",
		       size, first_call, later_call);
}

/* Rank 1 reduces int64 as float64, the same count and size: the cross-rank check must catch it. */
static void mode_datatype(cudaStream_t s, ncclComm_t comm)
{
	const size_t n = 64;
	int64_t *q = dev<int64_t>(n);
	expect(cudaMemsetAsync(q, 0, n * sizeof(int64_t), s) == cudaSuccess, "memset");
	expect(ncclAllReduce(q, q, n, rank == 1 ? ncclFloat64 : ncclInt64, ncclSum, comm, s) ==
		       ncclSuccess,
	       "ncclAllReduce");
	cudaStreamSynchronize(s);
	printf("FAIL rank %d: mismatched datatypes were not caught\n", rank);
}

/* Rank 1 passes its count in bytes: a mistake the cross-rank check must catch. */
static void mode_count_in_bytes(cudaStream_t s, ncclComm_t comm)
{
	const size_t n = 256;
	float *f = dev<float>(4 * n);
	expect(cudaMemsetAsync(f, 0, 4 * n * sizeof(float), s) == cudaSuccess, "memset");
	size_t count = rank == 1 ? n * sizeof(float) : n;
	expect(ncclAllReduce(f, f, count, ncclFloat, ncclSum, comm, s) == ncclSuccess, "ncclAllReduce");
	cudaStreamSynchronize(s);
	printf("FAIL rank %d: mismatched counts were not caught\n", rank);
}

/* Rank 0 replays a captured allreduce, rank 1 issues it plainly. */
static void mode_capture(cudaStream_t s, ncclComm_t comm)
{
	const size_t n = 64;
	float *f = dev<float>(n);
	expect(cudaMemsetAsync(f, 0, n * sizeof(float), s) == cudaSuccess, "memset");
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "warm-up");
	cudaStreamSynchronize(s);
	if (rank == 0) {
		cudaGraph_t g;
		cudaGraphExec_t x;
		expect(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
		expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "captured");
		expect(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
		expect(cudaGraphInstantiate(&x, g, 0) == cudaSuccess, "instantiate");
		expect(cudaGraphLaunch(x, s) == cudaSuccess, "launch");
	} else {
		expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "plain");
	}
	cudaStreamSynchronize(s);
	printf("FAIL rank %d: capture that differs across ranks was not caught\n", rank);
}

static void mode_hang(cudaStream_t s, ncclComm_t comm)
{
	const size_t n = 16;
	float *f = dev<float>(n);
	cudaEvent_t e;
	ncclResult_t async = ncclSuccess;
	expect(cudaMemsetAsync(f, 0, n * sizeof(float), s) == cudaSuccess, "memset");
	expect(cudaEventCreate(&e) == cudaSuccess, "event");
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "ncclAllReduce");
	expect(cudaEventRecord(e, s) == cudaSuccess, "record");
	double t0 = MPI_Wtime();
	while (MPI_Wtime() - t0 < 1.0) {
		expect(cudaEventQuery(e) == cudaErrorNotReady, "a collective that cannot complete completed");
		nap(0.01);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1) {
		expect(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort");
	} else {
		t0 = MPI_Wtime();
		while (async == ncclSuccess && MPI_Wtime() - t0 < 5.0) {
			expect(ncclCommGetAsyncError(comm, &async) == ncclSuccess, "ncclCommGetAsyncError");
			nap(0.01);
		}
		expect(async == ncclRemoteError, "the peer's abort did not show as ncclRemoteError");
		expect(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort");
		expect(cudaEventQuery(e) == cudaSuccess, "the aborted collective is still pending");
		printf("PASS hang: cudaErrorNotReady for 1 s, then ncclRemoteError after the peer's abort\n");
	}
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	/* The hung rank's collective request can never complete: no MPI_Finalize. */
	_exit(0);
}

/* A peer that went away: its loss shows as ncclRemoteError, S seconds after the wait began. */
static void mode_hang_error(cudaStream_t s, ncclComm_t comm)
{
	const size_t n = 16;
	float *f = dev<float>(n);
	cudaEvent_t e;
	ncclResult_t async = ncclSuccess;
	expect(cudaMemsetAsync(f, 0, n * sizeof(float), s) == cudaSuccess, "memset");
	expect(cudaEventCreate(&e) == cudaSuccess, "event");
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "ncclAllReduce");
	expect(cudaEventRecord(e, s) == cudaSuccess, "record");
	double t0 = MPI_Wtime(), seen = -1.0;
	while (MPI_Wtime() - t0 < 4.0) {
		expect(cudaEventQuery(e) == cudaErrorNotReady, "a collective that cannot complete completed");
		expect(ncclCommGetAsyncError(comm, &async) == ncclSuccess, "ncclCommGetAsyncError");
		if (async != ncclSuccess) {
			seen = MPI_Wtime() - t0;
			break;
		}
		nap(0.01);
	}
	if (rank == 1) {
		expect(async == ncclSuccess, "the hung rank itself saw an asynchronous error");
	} else {
		expect(async == ncclRemoteError, "no ncclRemoteError within 4 s of a peer going away");
		expect(seen >= 1.5, "ncclRemoteError before CUDASIM_HANG_ERROR_AFTER had passed");
		expect(cudaEventQuery(e) == cudaErrorNotReady, "the collective completed after all");
		printf("PASS hang-error: ncclRemoteError %.1f s into the wait (CUDASIM_HANG_ERROR_AFTER=2); "
		       "the collective still pending\n",
		       seen);
	}
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	/* Both ranks' collective requests can never complete: no MPI_Finalize. */
	_exit(0);
}

/* A blocking wait behind the injected hang: the simulator ends rank 1 with a message. */
static void mode_hang_blocking(cudaStream_t s, ncclComm_t comm, bool by_free)
{
	const size_t n = 16;
	float *f = dev<float>(n), *other = dev<float>(n);
	expect(cudaMemsetAsync(f, 0, n * sizeof(float), s) == cudaSuccess, "memset");
	expect(ncclAllReduce(f, f, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, "ncclAllReduce");
	if (by_free)
		cudaFree(other);
	else
		cudaStreamSynchronize(s);
	printf("FAIL rank %d: %s returned behind a collective that never completes\n", rank,
	       by_free ? "cudaFree" : "cudaStreamSynchronize");
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const char *mode = argc > 1 ? argv[1] : "";
	cudaStream_t s;
	expect(size >= 2, "run under mpirun -n 2 or more");
	expect(cudaSetDevice(rank) == cudaSuccess, "cudaSetDevice");
	expect(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
	if (!strcmp(mode, "rules")) {
		mode_rules(s);
	} else {
		ncclResult_t rc;
		ncclComm_t comm = new_comm(&rc);
		expect(rc == ncclSuccess, "ncclCommInitRank");
		if (!strcmp(mode, "count-in-bytes"))
			mode_count_in_bytes(s, comm);
		else if (!strcmp(mode, "datatype"))
			mode_datatype(s, comm);
		else if (!strcmp(mode, "capture"))
			mode_capture(s, comm);
		else if (!strcmp(mode, "hang"))
			mode_hang(s, comm);
		else if (!strcmp(mode, "hang-error"))
			mode_hang_error(s, comm);
		else if (!strcmp(mode, "hang-sync") || !strcmp(mode, "hang-free"))
			mode_hang_blocking(s, comm, !strcmp(mode, "hang-free"));
		else
			expect(false, "unknown mode (rules, count-in-bytes, datatype, capture, hang, hang-error, hang-sync, hang-free)");
		fflush(stdout);
		return 1; /* the modes above end the job themselves */
	}
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
