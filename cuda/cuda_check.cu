/*
 * cuda_check.cu - error text and the fatal path for cuda/cuda_check.cuh, and
 * what an error at start-up means for the probe's verdict.
 */
#include "cuda_check.cuh"

#include <stdarg.h>
#include <stdio.h>

static ncclComm_t cuda_check_comm_;

void cuda_check_set_comm(ncclComm_t comm)
{
	cuda_check_comm_ = comm;
}

void cuda_check_fail(const char *stmt, const char *detail, const char *func, const char *file,
		     int line)
{
	ncclComm_t comm = cuda_check_comm_;
	/* Forget it first: a failure inside the abort must not recurse. */
	cuda_check_comm_ = NULL;
	if (comm)
		ncclCommAbort(comm);
	check_fail(stmt, detail, func, file, line, 1);
}

void cuda_error_text(cudaError_t rc, char *buf, size_t len)
{
	snprintf(buf, len, "error %d (%s): %s", (int)rc, cudaGetErrorName(rc),
		 cudaGetErrorString(rc));
}

void cublas_error_text(cublasStatus_t rc, char *buf, size_t len)
{
	snprintf(buf, len, "error %d (%s): %s", (int)rc, cublasGetStatusName(rc),
		 cublasGetStatusString(rc));
}

static const char *nccl_result_name(ncclResult_t rc)
{
	switch (rc) {
	case ncclSuccess:
		return "ncclSuccess";
	case ncclUnhandledCudaError:
		return "ncclUnhandledCudaError";
	case ncclSystemError:
		return "ncclSystemError";
	case ncclInternalError:
		return "ncclInternalError";
	case ncclInvalidArgument:
		return "ncclInvalidArgument";
	case ncclInvalidUsage:
		return "ncclInvalidUsage";
	case ncclRemoteError:
		return "ncclRemoteError";
	case ncclInProgress:
		return "ncclInProgress";
	default:
		return "ncclResult?";
	}
}

void nccl_error_text(ncclResult_t rc, char *buf, size_t len)
{
	const char *last = ncclGetLastError(NULL);
	if (last && last[0])
		snprintf(buf, len, "error %d (%s): %s (%s)", (int)rc, nccl_result_name(rc),
			 ncclGetErrorString(rc), last);
	else
		snprintf(buf, len, "error %d (%s): %s", (int)rc, nccl_result_name(rc),
			 ncclGetErrorString(rc));
}
