/*
 * backend_cuda_start.cu - the CUDA backend's start and its undoing on a
 * failure: this rank's device (from the probe), stream, cuBLAS and cuBLASLt
 * with their workspace, then, over the job, the NCCL unique id from rank 0
 * (MPI_Bcast), ncclCommInitRank and one warm-up allreduce (cuda/backend_cuda.cu's
 * file comment says why). Every step ends in an agreement of all ranks, so
 * backend_cuda_create returns the same outcome on every rank and no rank is
 * left waiting for one that failed.
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_module.h"
#include "backend_cuda.h"
#include "backend_cuda_ctx.cuh"
#include "check.h"
#include "cuda_check.cuh"
#include "dist.h"
#include "gemm_lt.cuh"
#include "kernels.h"

void cuda_side_release(struct cuda_ctx *c)
{
	if (c->side.blas)
		cublasDestroy(c->side.blas);
	if (c->side.workspace)
		cudaFree(c->side.workspace);
	if (c->side.stream)
		cudaStreamDestroy(c->side.stream);
	if (c->fork)
		cudaEventDestroy(c->fork);
	if (c->join)
		cudaEventDestroy(c->join);
	memset(&c->side, 0, sizeof(c->side));
	c->fork = c->join = NULL;
	c->side_able = c->side_on = c->side_pending = 0;
}

/* Release what setup_local acquired, best effort: this runs on failure paths too. */
static void teardown_local(struct cuda_ctx *c)
{
	cuda_side_release(c);
	plan_release(&c->plan);
	cuda_gemm_release(&c->gemm);
	if (c->gemm.lt)
		cublasLtDestroy(c->gemm.lt);
	if (c->gemm.blas)
		cublasDestroy(c->gemm.blas);
	if (c->gemm.workspace)
		cudaFree(c->gemm.workspace);
	if (c->waited)
		cudaEventDestroy(c->waited);
	for (int i = 0; i < CUDA_STEP_EVENTS; i++)
		if (c->step_ev[i])
			cudaEventDestroy(c->step_ev[i]);
	free(c->step_us);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	(void)cudaGetLastError();
	free(c);
}

/* "what: error N (NAME): text" into why; clears the error. Returns 1. */
static int fail_cuda(char *why, size_t whylen, const char *what, cudaError_t rc)
{
	char text[CUDA_CHECK_MSG_LEN];
	cuda_error_text(rc, text, sizeof(text));
	snprintf(why, whylen, "%s: %s", what, text);
	(void)cudaGetLastError();
	return 1;
}

/* Two programmatic dependent launches adding 1 to *cursor; the first error, or success. */
static cudaError_t pdl_pair(void *arg)
{
	const struct cuda_ctx *c = (const struct cuda_ctx *)arg;
	int32_t *cursor = (int32_t *)c->side.workspace; /* the probes' counters */
	cudaError_t rc = kernels_advance_try(c->stream, cursor, 1, 1);
	return rc == cudaSuccess ? kernels_advance_try(c->stream, cursor, 1, 1) : rc;
}

/*
 * One fork and join as the weight gradients make them (cuda_gemm_op,
 * cuda_join), with the launches the step uses (programmatic dependent launch
 * where probe_pdl kept it): counter 0 += 1 on the stream,
 * then counter 1 += 1 on the second stream beside counter 0 += 1, then,
 * after both, counter 0 += 1. The first error, or success.
 */
static cudaError_t side_pass(void *arg)
{
	const struct cuda_ctx *c = (const struct cuda_ctx *)arg;
	int32_t *cursor = (int32_t *)c->side.workspace;
	int pdl = kernels_pdl;
	cudaError_t rc = kernels_advance_try(c->stream, cursor, 1, pdl);
	if (rc == cudaSuccess)
		rc = cudaEventRecord(c->fork, c->stream);
	if (rc == cudaSuccess)
		rc = cudaStreamWaitEvent(c->side.stream, c->fork, 0);
	if (rc == cudaSuccess)
		rc = kernels_advance_try(c->side.stream, cursor + 1, 1, pdl);
	if (rc == cudaSuccess)
		rc = kernels_advance_try(c->stream, cursor, 1, pdl);
	if (rc == cudaSuccess)
		rc = cudaEventRecord(c->join, c->side.stream);
	if (rc == cudaSuccess)
		rc = cudaStreamWaitEvent(c->stream, c->join, 0);
	if (rc == cudaSuccess)
		rc = kernels_advance_try(c->stream, cursor, 1, pdl);
	return rc;
}

/*
 * Whether this device and driver run `pass`: once on c's stream, then
 * captured in a graph, instantiated and replayed; waits for the stream.
 * cudaSuccess, or the first error (cleared).
 */
static cudaError_t try_twice(struct cuda_ctx *c, cudaError_t (*pass)(void *))
{
	cudaStream_t stream = c->stream;
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	cudaError_t rc = pass(c);
	if (rc == cudaSuccess)
		rc = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
	if (rc == cudaSuccess) {
		cudaError_t launched = pass(c);
		rc = cudaStreamEndCapture(stream, &graph);
		if (launched != cudaSuccess)
			rc = launched;
	}
	if (rc == cudaSuccess)
		rc = cudaGraphInstantiate(&exec, graph, 0);
	if (rc == cudaSuccess)
		rc = cudaGraphLaunch(exec, stream);
	if (rc == cudaSuccess)
		rc = cudaStreamSynchronize(stream);
	if (exec)
		(void)cudaGraphExecDestroy(exec);
	if (graph)
		(void)cudaGraphDestroy(graph);
	(void)cudaGetLastError();
	return rc;
}

/*
 * try_twice(c, pass) from zeroed counters (at the start of the second
 * stream's workspace, unused yet), then the counters into moved[2]; the
 * first error, cleared, or cudaSuccess.
 */
static cudaError_t try_counted(struct cuda_ctx *c, cudaError_t (*pass)(void *), int32_t moved[2])
{
	int32_t *cursor = (int32_t *)c->side.workspace;
	cudaError_t rc = cudaMemsetAsync(cursor, 0, 2 * sizeof(*cursor), c->stream);
	if (rc == cudaSuccess)
		rc = try_twice(c, pass);
	if (rc == cudaSuccess)
		rc = cudaMemcpy(moved, cursor, 2 * sizeof(*cursor), cudaMemcpyDeviceToHost);
	(void)cudaGetLastError();
	return rc;
}

/*
 * Programmatic dependent launch (cuda/kernel_launch.cuh) where compute
 * capability 9.0 or later has it and the driver takes it, launched and
 * captured; plain launches otherwise, saying why in pdl_note. On by default:
 * --no-pdl turns it off (set_pdl).
 */
static void probe_pdl(struct cuda_ctx *c, const struct cudaDeviceProp *prop)
{
	char text[CUDA_CHECK_MSG_LEN];
	int32_t moved[2] = {0, 0};

	c->pdl_able = 0;
	if (prop->major < 9) {
		snprintf(c->pdl_note, sizeof(c->pdl_note),
			 "plain launches: compute capability %d.%d has no programmatic dependent "
			 "launch",
			 prop->major, prop->minor);
	} else {
		cudaError_t rc = try_counted(c, pdl_pair, moved);
		if (rc != cudaSuccess) {
			cuda_error_text(rc, text, sizeof(text));
			snprintf(c->pdl_note, sizeof(c->pdl_note),
				 "plain launches: a programmatic dependent launch failed: %s", text);
		} else if (moved[0] != 4) {
			snprintf(c->pdl_note, sizeof(c->pdl_note),
				 "plain launches: 4 programmatic dependent launches added %d, not 4",
				 (int)moved[0]);
		} else {
			c->pdl_able = 1;
		}
	}
	kernels_set_pdl(c->pdl_able);
}

/*
 * The second stream for the GEMMs sent beside, where a fork and a join run
 * on the stream and captured, with the launches the step uses (after
 * probe_pdl); one stream otherwise, saying why in side_note. On by default:
 * --no-side-stream turns it off (set_side_stream).
 */
static void probe_side(struct cuda_ctx *c)
{
	char text[CUDA_CHECK_MSG_LEN];
	int32_t moved[2] = {0, 0};
	cudaError_t rc = try_counted(c, side_pass, moved);
	c->side_able = 0;
	if (rc != cudaSuccess) {
		cuda_error_text(rc, text, sizeof(text));
		snprintf(c->side_note, sizeof(c->side_note),
			 "one stream: a fork to a second stream and its join failed: %s", text);
	} else if (moved[0] != 6 || moved[1] != 2) {
		snprintf(c->side_note, sizeof(c->side_note),
			 "one stream: a fork and join added %d and %d, not 6 and 2", (int)moved[0],
			 (int)moved[1]);
	} else {
		c->side_able = 1;
	}
	c->side_on = c->side_able;
}

/* The second stream, its events, workspace and cuBLAS handle. 0, or 1 with why filled. */
static int setup_side(struct cuda_ctx *c, char *why, size_t whylen)
{
	cudaError_t rc = cudaStreamCreateWithFlags(&c->side.stream, cudaStreamNonBlocking);
	if (rc == cudaSuccess)
		rc = cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming);
	if (rc == cudaSuccess)
		rc = cudaEventCreateWithFlags(&c->join, cudaEventDisableTiming);
	if (rc == cudaSuccess)
		rc = cudaMalloc(&c->side.workspace, CUDA_BLAS_WORKSPACE_BYTES);
	if (rc != cudaSuccess)
		return fail_cuda(why, whylen, "the second stream's set-up", rc);
	cublasStatus_t brc = cublasCreate(&c->side.blas);
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasSetStream(c->side.blas, c->side.stream);
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasSetWorkspace(c->side.blas, c->side.workspace, CUDA_BLAS_WORKSPACE_BYTES);
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasSetMathMode(c->side.blas, CUBLAS_DEFAULT_MATH);
	if (brc != CUBLAS_STATUS_SUCCESS) {
		char text[CUDA_CHECK_MSG_LEN];
		cublas_error_text(brc, text, sizeof(text));
		snprintf(why, whylen, "cuBLAS setup (second stream): %s", text);
		return 1;
	}
	return 0;
}

/* This rank's part on its probed device: stream, cuBLAS. 0 on success, else why is filled. */
static int setup_local(struct cuda_ctx *c, const struct dist *d, int device, char *why,
		       size_t whylen)
{
	struct cudaDeviceProp prop;
	cudaError_t rc;
	cublasStatus_t brc;
	char text[CUDA_CHECK_MSG_LEN];

	c->dist = d;
	c->device = device;
	rc = cudaGetDeviceProperties(&prop, c->device);
	if (rc != cudaSuccess)
		return fail_cuda(why, whylen, "cudaGetDeviceProperties", rc);
	snprintf(c->name, sizeof(c->name), "%s", prop.name);
	rc = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
	if (rc != cudaSuccess)
		return fail_cuda(why, whylen, "cudaStreamCreateWithFlags", rc);
	rc = cudaEventCreateWithFlags(&c->waited, cudaEventDisableTiming);
	if (rc != cudaSuccess)
		return fail_cuda(why, whylen, "cudaEventCreateWithFlags", rc);
	/* Only on the simulator does step_us exist, and with it the step events. */
	if (CUDA_TIME_STEPS) {
		c->step_us = (float *)malloc(CUDA_STEP_TIMES * sizeof(float));
		if (!c->step_us)
			return fail_cuda(why, whylen, "malloc (step times)", cudaErrorMemoryAllocation);
	}
	rc = cudaMalloc(&c->gemm.workspace, CUDA_BLAS_WORKSPACE_BYTES);
	if (rc != cudaSuccess)
		return fail_cuda(why, whylen, "cudaMalloc (cuBLAS workspace)", rc);
	c->gemm.workspace_bytes = CUDA_BLAS_WORKSPACE_BYTES;
	c->gemm.stream = c->stream;
	c->gemm.plan = &c->plan;
	c->plan.stream = c->stream;
	c->plan.rank = d->rank;
	c->plan.share = d->size > 1 ? cuda_share_choice : NULL;
	c->plan.drain = cuda_drain_stream;
	c->plan.arg = c;
	brc = cublasCreate(&c->gemm.blas);
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasSetStream(c->gemm.blas, c->stream);
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasSetWorkspace(c->gemm.blas, c->gemm.workspace, CUDA_BLAS_WORKSPACE_BYTES);
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasSetMathMode(c->gemm.blas, CUBLAS_DEFAULT_MATH); /* float32, no TF32 */
	if (brc == CUBLAS_STATUS_SUCCESS)
		brc = cublasLtCreate(&c->gemm.lt);
	if (brc != CUBLAS_STATUS_SUCCESS) {
		cublas_error_text(brc, text, sizeof(text));
		snprintf(why, whylen, "cuBLAS setup: %s", text);
		return 1;
	}
	if (setup_side(c, why, whylen))
		return 1;
	probe_pdl(c, &prop);
	probe_side(c);
	return 0;
}

int cuda_agree(const struct dist *d, int status)
{
	int mine = status ? d->rank : d->size, first = 0;
	MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, d->comm));
	return first < d->size ? first : -1;
}

/*
 * agree(), for after ncclCommInitRank: a rank stuck inside it (because a peer
 * failed) cannot answer, so past the time limit this rank ends the job.
 */
static int agree_timed(const struct dist *d, int status, const char *why, ncclComm_t comm)
{
	int mine = status ? d->rank : d->size, first = 0, done = 0;
	MPI_Request req;
	double start = MPI_Wtime();
	struct timespec pause = {0, 1000000};

	MPI_CHECK(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, d->comm, &req));
	for (;;) {
		MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
		if (done)
			break;
		if (MPI_Wtime() - start > CUDA_NCCL_AGREE_SECONDS) {
			if (comm)
				ncclCommAbort(comm);
			die(1, "NCCL setup: not every rank finished ncclCommInitRank within %.0f s "
			       "(this rank: %s); ending the job",
			    CUDA_NCCL_AGREE_SECONDS, status ? why : "ok");
		}
		nanosleep(&pause, NULL);
	}
	return first < d->size ? first : -1;
}

/*
 * One allreduce on every rank, waited for: NCCL 2.22 and later connect a
 * communicator at its first collective, and that needs every rank. Done here,
 * where every rank has just joined, connection set-up is never part of a
 * captured step nor of a collective that a hung peer never joins (which would
 * block its caller in NCCL on the host, out of the deadline's reach). A peer
 * lost from here on ends the job after CUDA_NCCL_AGREE_SECONDS.
 */
static void warm_up(struct cuda_ctx *c)
{
	float *one = NULL;
	CUDA_CHECK(cudaMalloc((void **)&one, sizeof(*one)));
	CUDA_CHECK(cudaMemsetAsync(one, 0, sizeof(*one), c->stream));
	NCCL_CHECK(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, c->nccl, c->stream));
	c->pending.what = "NCCL warm-up allreduce";
	c->pending.epoch = -1;
	c->timeout = CUDA_NCCL_AGREE_SECONDS;
	cuda_wait(c);
	c->timeout = 0.0;
	CUDA_CHECK(cudaFree(one));
}

int backend_cuda_create(const struct dist *d, struct backend *out, char *why, size_t whylen)
{
	struct cuda_ctx *c;
	struct {
		int status;
		ncclUniqueId id;
	} boot;
	ncclResult_t nrc;
	char text[CUDA_CHECK_MSG_LEN];
	struct cuda_probe probe;
	int status, bad, device;

	/* 1. This rank's device (the probe is collective over the node), stream and cuBLAS. */
	cuda_probe_device(d, &probe, &device);
	c = (struct cuda_ctx *)calloc(1, sizeof(*c));
	if (!c) {
		snprintf(why, whylen, "out of memory");
		status = 1;
	} else if (probe.verdict != CUDA_USABLE) {
		snprintf(why, whylen, "%s [%s]", probe.why, probe.reason);
		status = 1;
	} else {
		status = setup_local(c, d, device, why, whylen);
	}
	bad = cuda_agree(d, status);
	if (bad >= 0) {
		if (!status)
			snprintf(why, whylen, "rank %d could not start the CUDA backend", bad);
		goto out_teardown;
	}

	/* 2. The NCCL id, from rank 0 to all. */
	memset(&boot, 0, sizeof(boot));
	if (d->rank == 0) {
		nrc = ncclGetUniqueId(&boot.id);
		if (nrc != ncclSuccess) {
			nccl_error_text(nrc, text, sizeof(text));
			snprintf(why, whylen, "ncclGetUniqueId: %s", text);
			boot.status = 1;
		}
	}
	MPI_CHECK(MPI_Bcast(&boot, (int)sizeof(boot), MPI_BYTE, 0, d->comm));
	if (boot.status) {
		if (d->rank != 0)
			snprintf(why, whylen, "rank 0 could not create the NCCL id");
		goto out_teardown;
	}

	/* 3. The communicator over all ranks. */
	nrc = ncclCommInitRank(&c->nccl, d->size, boot.id, d->rank);
	status = nrc != ncclSuccess;
	if (status) {
		nccl_error_text(nrc, text, sizeof(text));
		snprintf(why, whylen, "ncclCommInitRank (rank %d of %d, device %d): %s", d->rank,
			 d->size, c->device, text);
	}
	bad = agree_timed(d, status, why, c->nccl);
	if (bad >= 0) {
		if (!status)
			snprintf(why, whylen, "rank %d could not join the NCCL communicator", bad);
		goto out_abort_nccl;
	}

	cuda_check_set_comm(c->nccl);
	warm_up(c);
	out->ops = &cuda_ops;
	out->ctx = c;
	/* The ordinal this rank uses, as CUDA numbers its visible devices, and the GPU's name. */
	snprintf(out->device, sizeof(out->device), "cuda:%d %.100s", c->device, c->name);
	return 0;

out_abort_nccl:
	if (c->nccl)
		ncclCommAbort(c->nccl);
	c->nccl = NULL;
out_teardown:
	if (c)
		teardown_local(c);
	return 1;
}
