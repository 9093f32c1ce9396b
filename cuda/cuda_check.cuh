/*
 * cuda_check.cuh - check macros for CUDA, cuBLAS and NCCL calls.
 *
 * In the spirit of MPI_CHECK (include/check.h): a failing call is fatal. The
 * macro formats the library's error as "error N (NAME): text" and hands it to
 * check_fail, which prints rank, host, the statement, function, file and line,
 * then MPI_Aborts the job. Before that, the NCCL communicator registered with
 * cuda_check_set_comm is aborted (ncclCommAbort), so that no peer is left in a
 * collective that can never complete.
 *
 * Recoverable paths (backend_cuda_probe, backend_cuda_create) do not use the
 * macros; they format the same text with the *_error_text functions, and the
 * probe turns start-up errors into its verdict with cuda_probe_*.
 */
#ifndef MNIST_DDP_CUDA_CHECK_CUH
#define MNIST_DDP_CUDA_CHECK_CUH

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "backend.h"
#include "backend_module.h"
#include "check.h"

extern "C" {

/* The communicator to abort on a fatal error; NULL forgets it. */
void cuda_check_set_comm(ncclComm_t comm);

/* Abort the registered communicator (once), then check_fail(stmt, detail, ...). */
[[noreturn]] void cuda_check_fail(const char *stmt, const char *detail, const char *func,
				  const char *file, int line);

/* "error 35 (cudaErrorInsufficientDriver): CUDA driver version is insufficient ..." */
void cuda_error_text(cudaError_t rc, char *buf, size_t len);
/* "error 3 (CUBLAS_STATUS_ALLOC_FAILED): resource allocation failed" */
void cublas_error_text(cublasStatus_t rc, char *buf, size_t len);
/* "error 2 (ncclSystemError): unhandled system error (...last NCCL message...)" */
void nccl_error_text(ncclResult_t rc, char *buf, size_t len);


} /* extern "C" */

#define CUDA_CHECK_MSG_LEN 512

/*
 * The one shape of every check: a result of type `type` that is not `ok` is
 * formatted by `text` and fatal, `what` naming the call that returned it.
 */
#define CUDA_LIBRARY_CHECK_(type, ok, text, result, what)                                  \
	do {                                                                              \
		type cuda_check_rc_ = (result);                                           \
		if (cuda_check_rc_ != (ok)) {                                             \
			char cuda_check_msg_[CUDA_CHECK_MSG_LEN];                         \
			text(cuda_check_rc_, cuda_check_msg_, sizeof(cuda_check_msg_));   \
			cuda_check_fail((what), cuda_check_msg_, __func__, __FILE__, __LINE__); \
		}                                                                         \
	} while (0)

/* A cudaError_t already in hand; `what` names the call that returned it. */
#define CUDA_CHECK_RESULT(rc, what) \
	CUDA_LIBRARY_CHECK_(cudaError_t, cudaSuccess, cuda_error_text, (rc), (what))

#define CUDA_CHECK(stmt) CUDA_CHECK_RESULT((stmt), #stmt)

/* After a kernel launch: a bad configuration or missing kernel image shows here. */
#define CUDA_CHECK_LAUNCH(kernel_name) CUDA_CHECK_RESULT(cudaGetLastError(), "launch of " kernel_name)

#define CUBLAS_CHECK(stmt) \
	CUDA_LIBRARY_CHECK_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublas_error_text, (stmt), #stmt)

#define NCCL_CHECK(stmt) CUDA_LIBRARY_CHECK_(ncclResult_t, ncclSuccess, nccl_error_text, (stmt), #stmt)

#endif /* MNIST_DDP_CUDA_CHECK_CUH */
