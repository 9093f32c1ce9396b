/*
 * nccl.cc - the simulator's NCCL on MPI (rule 8 of cudasim.h).
 *
 * A communicator holds three duplicates of MPI_COMM_WORLD's ranks (ordered
 * by NCCL rank): one for the collectives, one for lazy connection and one on
 * which an aborting rank tells the others. A collective queued on a stream
 * runs, when the stream reaches it, as a small state machine polled by the
 * stream: (1) every rank's description of the collective, gathered with
 * MPI_Iallgather and compared (so that nothing moves unless all ranks issued
 * the same thing, and it completes only once all have reached it); (2) the
 * data, gathered (allreduce) or broadcast, nonblocking; (3) the reduction in
 * NCCL's manner, written to the receive buffer inside a window.
 */
#include <mpi.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "cudasim.h"
#include "nccl.h"

namespace cudasim {

struct comm_state {
	MPI_Comm coll = MPI_COMM_NULL, conn = MPI_COMM_NULL, notify = MPI_COMM_NULL;
	int rank = 0, nranks = 1;
	bool connected = false, aborted = false, destroyed = false;
	uint64_t executed = 0; /* collectives that have started running, in stream order */
	long hang_at = 0;      /* CUDASIM_HANG_AT on CUDASIM_HANG_RANK; 0: none */
	/* On the other ranks, with CUDASIM_HANG_ERROR_AFTER: the hung collective and the delay. */
	long peer_hang_at = 0, peer_hang_rank = -1;
	double peer_error_after = 0.0;
	double reached_peer_hang = 0.0; /* when this rank's collective #peer_hang_at started */
	ncclResult_t async_error = ncclSuccess;
};

enum coll_kind { COLL_ALLREDUCE = 1, COLL_BROADCAST = 2 };

/* What one rank issued as one collective: compared across ranks before data moves. */
struct coll_desc {
	uint64_t seq, count;
	int32_t kind, datatype, redop, root, captured, rank;
};

/* A collective as called (and, in a graph, as replayed). */
struct coll_spec {
	std::shared_ptr<comm_state> comm;
	coll_desc d;
	const void *send;
	void *recv;
};

static std::string last_error;

static ncclResult_t fail(ncclResult_t rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t rc, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	last_error = buf;
	return rc;
}

/*
 * CUDASIM_HANG_ERROR_AFTER: S seconds after this rank reached the collective
 * a peer never completes, its communicator reports ncclRemoteError, as NCCL
 * does when a peer goes away; true once it has. The collective itself still
 * never completes (only ncclCommAbort ends it, as on a GPU).
 */
static bool peer_gone(comm_state &c)
{
	if (c.async_error == ncclRemoteError)
		return true;
	if (c.reached_peer_hang <= 0.0 || c.async_error != ncclSuccess ||
	    now() - c.reached_peer_hang < c.peer_error_after)
		return false;
	c.async_error = ncclRemoteError;
	fail(ncclRemoteError,
	     "rank %ld went away during collective #%ld, %g s ago (CUDASIM_HANG_RANK, "
	     "CUDASIM_HANG_ERROR_AFTER)",
	     c.peer_hang_rank, c.peer_hang_at, now() - c.reached_peer_hang);
	return true;
}

static size_t type_size(int t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: return 1;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	default: return 0; /* ncclFloat16 and the rest are not modelled */
	}
}

static const char *type_name(int t)
{
	static const char *names[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64",
				      "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64"};
	return t >= 0 && t <= ncclFloat64 ? names[t] : "datatype?";
}

static const char *op_name(int op)
{
	static const char *names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
	return op >= 0 && op < ncclNumOps ? names[op] : "op?";
}

static std::string describe_desc(const coll_desc &d)
{
	char buf[256];
	if (d.kind == COLL_ALLREDUCE)
		snprintf(buf, sizeof(buf), "allreduce of %llu x %s, %s, %s", (unsigned long long)d.count,
			 type_name(d.datatype), op_name(d.redop),
			 d.captured ? "graph-captured" : "not captured");
	else
		snprintf(buf, sizeof(buf), "broadcast of %llu x %s from rank %d, %s",
			 (unsigned long long)d.count, type_name(d.datatype), d.root,
			 d.captured ? "graph-captured" : "not captured");
	return buf;
}

static bool same_collective(const coll_desc &a, const coll_desc &b)
{
	return a.kind == b.kind && a.count == b.count && a.datatype == b.datatype &&
	       a.redop == b.redop && a.root == b.root && a.captured == b.captured;
}

/* out[i] = reduction over ranks of in[r][i], in ring order, NCCL's way for op. */
template <class T>
static void reduce(const char *gathered, size_t count, int n, int op, T *out)
{
	const T *in = (const T *)gathered;
	bool floating = (T)0.5 != (T)0;
	/* ncclAvg on floating types: each contribution premultiplied by 1/n (NCCL's PreMulSum). */
	T scale = (T)(1.0 / (double)n);
	for (size_t i = 0; i < count; i++) {
		int start = (int)((i / 1024 + 1) % (size_t)n);
		T acc = 0;
		for (int j = 0; j < n; j++) {
			T v = in[(size_t)((start + j) % n) * count + i];
			if (op == ncclAvg && floating)
				v = v * scale;
			if (j == 0)
				acc = v;
			else if (op == ncclProd)
				acc = acc * v;
			else if (op == ncclMax)
				acc = v > acc ? v : acc;
			else if (op == ncclMin)
				acc = v < acc ? v : acc;
			else
				acc = acc + v;
		}
		if (op == ncclAvg && !floating)
			acc = acc / (T)n; /* integers: sum, then divide (NCCL's SumPostDiv) */
		out[i] = acc;
	}
}

void nccl_reduce(int datatype, const void *gathered_bytes, size_t count, int n, int op, void *out)
{
	const char *gathered = (const char *)gathered_bytes;
	switch (datatype) {
	case ncclInt8: reduce(gathered, count, n, op, (int8_t *)out); break;
	case ncclUint8: reduce(gathered, count, n, op, (uint8_t *)out); break;
	case ncclInt32: reduce(gathered, count, n, op, (int32_t *)out); break;
	case ncclUint32: reduce(gathered, count, n, op, (uint32_t *)out); break;
	case ncclInt64: reduce(gathered, count, n, op, (int64_t *)out); break;
	case ncclUint64: reduce(gathered, count, n, op, (uint64_t *)out); break;
	case ncclFloat32: reduce(gathered, count, n, op, (float *)out); break;
	case ncclFloat64: reduce(gathered, count, n, op, (double *)out); break;
	}
}

static bool test(MPI_Request *req)
{
	int done = 0;
	if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
		fatal("MPI_Test failed under the simulated NCCL");
	return done != 0;
}

/* What MPI reads and writes while a request is pending. */
struct coll_buffers {
	coll_desc mine = {};
	std::vector<coll_desc> all;
	std::vector<char> stage, gathered;
};

/* One run of a collective on its stream (see the file comment). */
class coll_run : public async_work {
public:
	explicit coll_run(std::shared_ptr<const coll_spec> s)
		: spec(std::move(s)), buf(new coll_buffers)
	{
	}

	~coll_run() override
	{
		/* Dropped (ncclCommAbort) with a request pending: its buffers stay MPI's, never freed. */
		if (req != MPI_REQUEST_NULL)
			(void)buf.release();
	}

	bool advance() override
	{
		comm_state &c = *spec->comm;
		if (c.destroyed)
			fatal("%s queued on a communicator that ncclCommDestroy has freed",
			      describe_desc(spec->d).c_str());
		if (c.aborted)
			return true; /* ncclCommAbort drops what was pending */
		switch (phase) {
		case 0:
			buf->mine = spec->d;
			buf->mine.seq = ++c.executed;
			buf->mine.rank = c.rank;
			if (c.peer_hang_at > 0 && (long)buf->mine.seq == c.peer_hang_at)
				c.reached_peer_hang = now();
			if (c.hang_at > 0 && (long)buf->mine.seq == c.hang_at) {
				note("collective #%llu (%s) will never complete on this rank "
				     "(CUDASIM_HANG_RANK, CUDASIM_HANG_AT)",
				     (unsigned long long)buf->mine.seq, describe_desc(buf->mine).c_str());
				phase = 9;
				return false;
			}
			buf->all.resize((size_t)c.nranks);
			MPI_Iallgather(&buf->mine, (int)sizeof(coll_desc), MPI_BYTE, buf->all.data(),
				       (int)sizeof(coll_desc), MPI_BYTE, c.coll, &req);
			phase = 1;
			/* fall through */
		case 1:
			if (!test(&req))
				return false;
			compare();
			start_data();
			phase = 2;
			/* fall through */
		case 2:
			if (!test(&req))
				return false;
			finish();
			phase = 3;
			return true;
		case 9: /* injected hang */
			return false;
		default:
			return true;
		}
	}

	/* The injected hang, or, on a peer, the collective it hangs in once its loss is reported. */
	bool never_completes() const override
	{
		return phase == 9 || (phase == 1 && (long)buf->mine.seq == spec->comm->peer_hang_at &&
				      peer_gone(*spec->comm));
	}

	std::string describe() const override
	{
		char head[96];
		snprintf(head, sizeof(head), "NCCL collective #%llu, ", (unsigned long long)buf->mine.seq);
		if (phase == 9)
			return head + describe_desc(spec->d) + " (injected never to complete)";
		if (phase == 1 && (long)buf->mine.seq == spec->comm->peer_hang_at &&
		    spec->comm->async_error == ncclRemoteError)
			return head + describe_desc(spec->d) + ", which a peer that went away never joins";
		return head + describe_desc(spec->d) +
		       ", which completes only once every rank has reached it";
	}

private:
	void compare()
	{
		const coll_desc &mine = buf->mine;
		for (const coll_desc &o : buf->all)
			if (!same_collective(o, mine) || o.seq != mine.seq)
				fatal("NCCL collective #%llu differs across ranks (every rank must issue the "
				      "same collectives in the same order, graph-captured on all or on none): "
				      "rank %d issued %s; rank %d issued %s",
				      (unsigned long long)mine.seq, mine.rank, describe_desc(mine).c_str(),
				      o.rank, describe_desc(o).c_str());
	}

	void start_data()
	{
		const comm_state &c = *spec->comm;
		const coll_desc &mine = buf->mine;
		bytes = mine.count * type_size(mine.datatype);
		if (bytes > (size_t)INT_MAX)
			fatal("a collective of %zu bytes: more than the simulator moves in one call", bytes);
		buf->stage.resize(bytes);
		if (mine.kind == COLL_ALLREDUCE || c.rank == mine.root) {
			window open;
			memcpy(buf->stage.data(), spec->send, bytes);
		}
		if (mine.kind == COLL_ALLREDUCE) {
			buf->gathered.resize(bytes * (size_t)c.nranks);
			MPI_Iallgather(buf->stage.data(), (int)bytes, MPI_BYTE, buf->gathered.data(),
				       (int)bytes, MPI_BYTE, c.coll, &req);
		} else {
			MPI_Ibcast(buf->stage.data(), (int)bytes, MPI_BYTE, mine.root, c.coll, &req);
		}
	}

	void finish()
	{
		const coll_desc &mine = buf->mine;
		window open;
		if (mine.kind == COLL_ALLREDUCE)
			nccl_reduce(mine.datatype, buf->gathered.data(), mine.count, spec->comm->nranks,
				    mine.redop, spec->recv);
		else
			memcpy(spec->recv, buf->stage.data(), bytes);
	}

	std::shared_ptr<const coll_spec> spec;
	std::unique_ptr<coll_buffers> buf;
	int phase = 0;
	MPI_Request req = MPI_REQUEST_NULL;
	size_t bytes = 0;
};

/* Wait on req, saying once what the host waits for when it takes long. */
static void wait_blocking(MPI_Request *req, const char *what)
{
	double start = now(), limit = (double)env_long("CUDASIM_STUCK_NOTE", 10);
	bool noted = false;
	while (!test(req)) {
		if (!noted && limit > 0 && now() - start > limit) {
			note("blocked for %g s in %s", limit, what);
			noted = true;
		}
		struct timespec nap = {0, 100000};
		nanosleep(&nap, NULL);
	}
}

/* Lazy connection: the first collective call waits on the host for every rank's. */
static void connect(comm_state &c, const char *call)
{
	if (c.connected)
		return;
	MPI_Request req;
	MPI_Ibarrier(c.conn, &req);
	std::string what = std::string(call) +
			   ": the communicator's first collective connects to its peers (lazy "
			   "connection, NCCL 2.22 and later), and some rank has not made its first "
			   "collective call";
	wait_blocking(&req, what.c_str());
	c.connected = true;
}

/*
 * A peer's ncclCommAbort, or a peer gone (CUDASIM_HANG_ERROR_AFTER), seen as
 * the asynchronous error NCCL reports when a peer goes away.
 */
static void poll_notify(comm_state &c)
{
	int flag = 0;
	if (c.aborted || c.async_error != ncclSuccess || c.notify == MPI_COMM_NULL)
		return;
	if (peer_gone(c))
		return;
	MPI_Iprobe(MPI_ANY_SOURCE, 0, c.notify, &flag, MPI_STATUS_IGNORE);
	if (flag) {
		c.async_error = ncclRemoteError;
		fail(ncclRemoteError, "a peer aborted the communicator (ncclCommAbort)");
	}
}

} /* namespace cudasim */

using namespace cudasim;

struct ncclComm {
	std::shared_ptr<comm_state> s;
};

/* Common checks and queueing of one collective. */
static ncclResult_t enqueue(const char *call, coll_kind kind, const void *send, void *recv,
			    size_t count, ncclDataType_t datatype, int redop, int root,
			    ncclComm_t comm, cudaStream_t stream)
{
	if (!comm)
		return fail(ncclInvalidArgument, "%s: comm is NULL", call);
	comm_state &c = *comm->s;
	if (c.aborted || c.destroyed)
		return fail(ncclInvalidUsage, "%s: the communicator was aborted or destroyed", call);
	size_t size = type_size(datatype);
	if (!size)
		return fail(ncclInvalidArgument, "%s: datatype %d is not one the simulator models", call,
			    (int)datatype);
	if (kind == COLL_ALLREDUCE && (redop < 0 || redop >= ncclNumOps))
		return fail(ncclInvalidArgument, "%s: invalid reduction %d", call, redop);
	if (kind == COLL_BROADCAST && (root < 0 || root >= c.nranks))
		return fail(ncclInvalidArgument, "%s: root %d is not a rank of %d", call, root, c.nranks);
	cudaStreamCaptureStatus cap;
	if (capture_status(stream, &cap) != cudaSuccess)
		return fail(ncclInvalidArgument, "%s: invalid stream", call);
	if (count == 0)
		return ncclSuccess;
	size_t bytes = count * size;
	bool needs_send = kind == COLL_ALLREDUCE || c.rank == root;
	if (needs_send && !device_range(send, bytes))
		return fail(ncclInvalidArgument, "%s: sendbuff (%zu x %s) is not device memory: %s", call,
			    count, type_name(datatype), describe(send).c_str());
	if (!device_range(recv, bytes))
		return fail(ncclInvalidArgument, "%s: recvbuff (%zu x %s) is not device memory: %s", call,
			    count, type_name(datatype), describe(recv).c_str());
	connect(c, call);
	auto spec = std::make_shared<coll_spec>();
	spec->comm = comm->s;
	spec->d = {0, (uint64_t)count, kind, (int32_t)datatype, kind == COLL_ALLREDUCE ? redop : -1,
		   kind == COLL_BROADCAST ? root : -1, cap == cudaStreamCaptureStatusActive, c.rank};
	spec->send = send;
	spec->recv = recv;
	op o;
	o.label = std::string(call);
	std::shared_ptr<const coll_spec> fixed = spec;
	o.start = [fixed]() { return std::unique_ptr<async_work>(new coll_run(fixed)); };
	/*
	 * The time model (rule 10): one kernel reading and writing the buffer
	 * (the H100's oneRankReduce at one rank); the links between GPUs and the
	 * wait for the other ranks are not modelled.
	 */
	o.us = bytes_us(2.0 * (double)bytes);
	if (submit(stream, std::move(o)) != cudaSuccess)
		return fail(ncclUnhandledCudaError, "%s: the stream refused the work (%s)", call,
			    cudaGetErrorName(cudaPeekAtLastError()));
	return ncclSuccess;
}

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

/* Needs no device, as NCCL's does not. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	if (!id)
		return fail(ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
	memset(id, 0, sizeof(*id));
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(id->internal, sizeof(id->internal), "cudasim-nccl-id %ld.%09ld pid %ld",
		 (long)ts.tv_sec, (long)ts.tv_nsec, (long)getpid());
	return ncclSuccess;
}

/* Who presented what at ncclCommInitRank. */
struct init_info {
	ncclUniqueId id;
	int32_t rank, nranks;
	char bus[32];
	char host[64];
};

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	int up = 0, world = 0, dev = 0;
	if (!comm)
		return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
	*comm = nullptr;
	MPI_Initialized(&up);
	if (!up)
		return fail(ncclInvalidUsage, "ncclCommInitRank: the simulated NCCL runs on MPI; call "
					      "MPI_Init first");
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (nranks != world || rank < 0 || rank >= nranks)
		return fail(ncclInvalidArgument,
			    "ncclCommInitRank: rank %d of %d: the simulator models communicators over "
			    "every rank of the job (%d ranks) only",
			    rank, nranks, world);
	init_info mine = {};
	cudaError_t rc = cudaGetDevice(&dev);
	if (rc == cudaSuccess)
		rc = cudaDeviceGetPCIBusId(mine.bus, sizeof(mine.bus), dev);
	if (rc != cudaSuccess)
		return fail(ncclUnhandledCudaError, "ncclCommInitRank: no usable CUDA device (%s)",
			    cudaGetErrorName(rc));
	mine.id = id;
	mine.rank = rank;
	mine.nranks = nranks;
	gethostname(mine.host, sizeof(mine.host) - 1);

	/* Collective from here on, like NCCL's: every rank learns what every other one presented. */
	MPI_Comm all_ranks;
	MPI_Comm_dup(MPI_COMM_WORLD, &all_ranks);
	std::vector<init_info> all((size_t)world);
	MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all.data(), (int)sizeof(mine), MPI_BYTE,
		      all_ranks);
	ncclResult_t bad = ncclSuccess;
	std::vector<int> seen((size_t)nranks, -1);
	for (int w = 0; w < world && bad == ncclSuccess; w++) {
		const init_info &o = all[(size_t)w];
		if (memcmp(&o.id, &mine.id, sizeof(o.id)) != 0)
			bad = fail(ncclInvalidUsage, "ncclCommInitRank: ranks presented different unique "
						     "ids (this rank's \"%.60s\", MPI rank %d's \"%.60s\")",
				   mine.id.internal, w, o.id.internal);
		else if (o.nranks != nranks || o.rank < 0 || o.rank >= nranks || seen[(size_t)o.rank] >= 0)
			bad = fail(ncclInvalidUsage, "ncclCommInitRank: ranks must be distinct and agree on "
						     "nranks (MPI rank %d presented rank %d of %d)",
				   w, o.rank, o.nranks);
		else
			seen[(size_t)o.rank] = w;
		for (int v = 0; v < w && bad == ncclSuccess; v++)
			if (!strcmp(all[(size_t)v].bus, o.bus) && !strcmp(all[(size_t)v].host, o.host))
				bad = fail(ncclInvalidUsage, "ncclCommInitRank: duplicate GPU detected: ranks "
							     "%d and %d both use %s on %s",
					   all[(size_t)v].rank, o.rank, o.bus, o.host);
	}
	if (bad != ncclSuccess) {
		MPI_Comm_free(&all_ranks);
		return bad;
	}
	auto s = std::make_shared<comm_state>();
	s->rank = rank;
	s->nranks = nranks;
	MPI_Comm_split(all_ranks, 0, rank, &s->coll);
	MPI_Comm_dup(s->coll, &s->conn);
	MPI_Comm_dup(s->coll, &s->notify);
	MPI_Comm_free(&all_ranks);
	long hang_rank = env_long("CUDASIM_HANG_RANK", -1);
	if (hang_rank == cudasim::rank()) {
		s->hang_at = env_long("CUDASIM_HANG_AT", 1);
	} else if (hang_rank >= 0 && getenv("CUDASIM_HANG_ERROR_AFTER")) {
		s->peer_hang_rank = hang_rank;
		s->peer_hang_at = env_long("CUDASIM_HANG_AT", 1);
		s->peer_error_after = (double)env_long("CUDASIM_HANG_ERROR_AFTER", 0);
	}
	const char *runtime_connect = getenv("NCCL_RUNTIME_CONNECT");
	if (runtime_connect && !strcmp(runtime_connect, "0"))
		connect(*s, "ncclCommInitRank");
	*comm = new ncclComm{s};
	return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
	if (!comm || !async_error)
		return ncclInvalidArgument;
	poll_notify(*comm->s);
	*async_error = comm->s->async_error;
	return ncclSuccess;
}

/* Waits for every queued collective (ncclCommFinalize flushes what was issued). */
ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	if (!comm)
		return fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
	drain_all("ncclCommFinalize");
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	drain_all("ncclCommDestroy");
	comm_state &c = *comm->s;
	MPI_Comm_free(&c.conn);
	MPI_Comm_free(&c.notify);
	MPI_Comm_free(&c.coll);
	c.destroyed = true;
	delete comm;
	return ncclSuccess;
}

/* Drops pending collectives and tells the other ranks, which see ncclRemoteError. */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	comm_state &c = *comm->s;
	c.aborted = true;
	static int token;
	for (int r = 0; r < c.nranks; r++) {
		MPI_Request req;
		if (r == c.rank)
			continue;
		MPI_Isend(&token, 1, MPI_INT, r, 0, c.notify, &req);
		MPI_Request_free(&req);
	}
	delete comm;
	return ncclSuccess;
}

ncclResult_t ncclCommCount(ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = comm->s->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank)
{
	if (!comm || !rank)
		return ncclInvalidArgument;
	*rank = comm->s->rank;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error";
	case ncclInternalError: return "internal error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm;
	return last_error.c_str();
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream)
{
	return enqueue("ncclAllReduce", COLL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1,
		       comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	return enqueue("ncclBroadcast", COLL_BROADCAST, sendbuff, recvbuff, count, datatype, -1, root,
		       comm, stream);
}

} /* extern "C" */
