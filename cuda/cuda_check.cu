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

void cuda_probe_set(struct cuda_probe *p, enum cuda_verdict v, const char *reason, const char *fmt,
		    ...)
{
	va_list ap;
	p->verdict = v;
	snprintf(p->reason, sizeof(p->reason), "%s", reason);
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	(void)cudaGetLastError();
}

void cuda_probe_count_error(struct cuda_probe *p, cudaError_t rc)
{
	char text[CUDA_CHECK_MSG_LEN];
	int driver = 0, runtime = 0;
	cuda_error_text(rc, text, sizeof(text));
	if (rc == cudaErrorInsufficientDriver) {
		cudaDriverGetVersion(&driver); /* 0 when no driver is installed */
		cudaRuntimeGetVersion(&runtime);
		if (driver == 0)
			cuda_probe_set(p, CUDA_ABSENT, "no-driver",
				       "no CUDA driver is installed (cudaGetDeviceCount: %s; "
				       "cudaDriverGetVersion gives 0)",
				       text);
		else
			cuda_probe_set(p, CUDA_UNUSABLE, "driver-too-old",
				       "the driver supports CUDA %d.%d, this build's runtime needs CUDA "
				       "%d.%d or newer (for CUDA 13, driver R580 or later; docs/gpu.md): "
				       "cudaGetDeviceCount: %s",
				       driver / 1000, driver % 1000 / 10, runtime / 1000,
				       runtime % 1000 / 10, text);
	} else if (rc == cudaErrorNoDevice) {
		cuda_probe_set(p, CUDA_ABSENT, "no-device",
			       "no CUDA device is visible (cudaGetDeviceCount: %s)", text);
	} else if (rc == cudaErrorSystemNotReady) {
		cuda_probe_set(p, CUDA_UNUSABLE, "system-not-ready",
			       "cudaGetDeviceCount: %s (on NVSwitch systems such as HGX, "
			       "nvidia-fabricmanager must be running)",
			       text);
	} else {
		cuda_probe_set(p, CUDA_UNUSABLE, "cuda-init-failed", "cudaGetDeviceCount: %s", text);
	}
}
