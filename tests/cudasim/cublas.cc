/*
 * cublas.cc - the simulator's cuBLAS (rule 7 of cudasim.h): handles, and
 * cublasSgemm / cublasSgemv checked and computed from cuBLAS's column-major
 * definition, queued on the handle's stream.
 *
 * The reference is written from the definition only (element (i, j) of a
 * column-major matrix X with leading dimension ld is X[i + j * ld]; op(X) is
 * X or its transpose), in double, with nothing shared with the project's
 * GEMM mapping (include/gemm_map.h) or its host BLAS: a wrong mapping shows
 * as a wrong result here, as it would on a GPU.
 *
 * Math mode (cuBLAS's cublasMath_t): CUBLAS_DEFAULT_MATH and
 * CUBLAS_PEDANTIC_MATH compute single precision in float32 (cuBLAS 11 and
 * later use no TF32 unless asked); CUBLAS_TF32_TENSOR_OP_MATH lets cublasSgemm
 * run on TF32 tensor cores (compute capability 8.0 and later, as the
 * simulated device is): each element of A and B is rounded to TF32 (8-bit
 * exponent, 10-bit mantissa) to nearest, ties away from zero (PTX's
 * cvt.rna.tf32.f32) before the products, which accumulate in float32 or
 * better (here, as for every GEMM, in double). NVIDIA_TF32_OVERRIDE=0 in the
 * environment turns TF32 off whatever the handle asks, as NVIDIA's libraries
 * document. cublasSgemv has no tensor-core path: float32 in every mode.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublas_v2.h"
#include "cudasim.h"

struct cublasContext {
	cudaStream_t stream = nullptr; /* the legacy stream until cublasSetStream */
	void *workspace = nullptr;
	size_t workspace_bytes = 0;
	cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace cudasim {

static bool valid_op(cublasOperation_t t)
{
	return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C;
}

/* A column-major rows x cols operand at p with leading dimension ld must be device memory. */
static void check_operand(const char *call, const char *name, const float *p, int rows, int cols,
			  int ld)
{
	if (rows <= 0 || cols <= 0)
		return;
	size_t elems = (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
	if (!device_range(p, elems * sizeof(float)))
		fatal("%s: %s (%d x %d, leading dimension %d, %zu floats from its start) is not inside "
		      "one device allocation: %s",
		      call, name, rows, cols, ld, elems, describe(p).c_str());
}

/* A strided vector of n floats at p, increment inc. */
static void check_vector(const char *call, const char *name, const float *p, int n, int inc)
{
	if (n <= 0)
		return;
	size_t step = (size_t)(inc < 0 ? -inc : inc);
	size_t elems = (size_t)(n - 1) * step + 1;
	if (!device_range(p, elems * sizeof(float)))
		fatal("%s: %s (%d elements, increment %d) is not inside one device allocation: %s", call,
		      name, n, inc, describe(p).c_str());
}

/* Element i of a BLAS vector: negative increments start from the far end. */
static size_t vec_index(int i, int n, int inc)
{
	return inc >= 0 ? (size_t)i * (size_t)inc : (size_t)(n - 1 - i) * (size_t)(-inc);
}

/*
 * x as TF32: the 13 low mantissa bits dropped, rounding to nearest with ties
 * away from zero (half of the dropped range added to the magnitude, then
 * truncated; a carry moves into the exponent as it should). Inf and NaN stay.
 */
float tf32_round(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	if ((u & 0x7f800000u) == 0x7f800000u)
		return x;
	u = (u + 0x1000u) & 0xffffe000u;
	memcpy(&x, &u, sizeof(x));
	return x;
}

bool tf32_disabled()
{
	const char *override_env = getenv("NVIDIA_TF32_OVERRIDE");
	return override_env && !strcmp(override_env, "0");
}

/* Whether a GEMM on a handle in this math mode runs on TF32 tensor cores. */
static bool uses_tf32(cublasMath_t mode)
{
	int base = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
	return base == CUBLAS_TF32_TENSOR_OP_MATH && !tf32_disabled();
}

/* An operand element as the GEMM's multipliers see it. */
static double gemm_input(float x, bool tf32)
{
	return tf32 ? (double)tf32_round(x) : (double)x;
}

/* C = alpha op(A) op(B) + beta C, column-major, from the definition; tf32: inputs rounded so. */
static void sgemm_reference(bool ta, bool tb, int m, int n, int k, double alpha, const float *a,
			    int lda, const float *b, int ldb, double beta, float *c, int ldc,
			    bool tf32)
{
	/* op(A) (m x k) and op(B) (k x n), gathered into dense column-major doubles. */
	std::vector<double> A((size_t)m * (size_t)k), B((size_t)k * (size_t)n), acc((size_t)m);
	for (int l = 0; l < k; l++)
		for (int i = 0; i < m; i++)
			A[(size_t)i + (size_t)l * m] = gemm_input(
				ta ? a[(size_t)l + (size_t)i * lda] : a[(size_t)i + (size_t)l * lda], tf32);
	for (int j = 0; j < n; j++)
		for (int l = 0; l < k; l++)
			B[(size_t)l + (size_t)j * k] = gemm_input(
				tb ? b[(size_t)j + (size_t)l * ldb] : b[(size_t)l + (size_t)j * ldb], tf32);
	for (int j = 0; j < n; j++) {
		for (int i = 0; i < m; i++)
			acc[(size_t)i] = 0.0;
		for (int l = 0; l < k; l++) {
			double blj = B[(size_t)l + (size_t)j * k];
			const double *col = &A[(size_t)l * m];
			for (int i = 0; i < m; i++)
				acc[(size_t)i] += col[i] * blj;
		}
		for (int i = 0; i < m; i++) {
			float *cij = &c[(size_t)i + (size_t)j * ldc];
			/* beta == 0: C is output only, whatever it held (NaN included). */
			double old = beta == 0.0 ? 0.0 : beta * (double)*cij;
			*cij = (float)(alpha * acc[(size_t)i] + old);
		}
	}
}

} /* namespace cudasim */

using namespace cudasim;

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
	if (!handle)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (init_error() != cudaSuccess)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*handle = new cublasContext;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	delete handle;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
	cudaStreamCaptureStatus status;
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (capture_status(stream, &status) != cudaSuccess)
		return CUBLAS_STATUS_INVALID_VALUE;
	handle->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*stream = handle->stream;
	return CUBLAS_STATUS_SUCCESS;
}

/* The workspace must be device memory of the size given, aligned to 256 bytes. */
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (bytes && (!device_range(workspace, bytes) || ((uintptr_t)workspace & 255)))
		return CUBLAS_STATUS_INVALID_VALUE;
	handle->workspace = bytes ? workspace : nullptr;
	handle->workspace_bytes = bytes;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	int base = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
	if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_PEDANTIC_MATH &&
	    base != CUBLAS_TF32_TENSOR_OP_MATH)
		return CUBLAS_STATUS_INVALID_VALUE;
	handle->math = mode;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*mode = handle->math;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
			   cublasOperation_t transb, int m, int n, int k, const float *alpha,
			   const float *a, int lda, const float *b, int ldb, const float *beta,
			   float *c, int ldc)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
	/* cuBLAS's own argument checks. */
	if (!valid_op(transa) || !valid_op(transb) || m < 0 || n < 0 || k < 0 ||
	    lda < (ta ? (k > 1 ? k : 1) : (m > 1 ? m : 1)) ||
	    ldb < (tb ? (n > 1 ? n : 1) : (k > 1 ? k : 1)) || ldc < (m > 1 ? m : 1) || !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	/* Host pointer mode: the scalars are read now, and a graph keeps these values. */
	double al = *alpha, be = *beta;
	if (k > 0 && al != 0.0) {
		check_operand("cublasSgemm", "A", a, ta ? k : m, ta ? m : k, lda);
		check_operand("cublasSgemm", "B", b, tb ? n : k, tb ? k : n, ldb);
	}
	check_operand("cublasSgemm", "C", c, m, n, ldc);
	/* The math mode as it is at the call (a graph keeps it). */
	bool tf32 = uses_tf32(handle->math);
	op o;
	o.label = tf32 ? "cublasSgemm (TF32)" : "cublasSgemm";
	o.run = [=]() {
		sgemm_reference(ta, tb, m, n, al == 0.0 ? 0 : k, al, a, lda, b, ldb, be, c, ldc, tf32);
	};
	/* The time model (rule 10): cuBLAS's split-K as on the H100, then its reduction kernel. */
	double parts = cublas_sgemm_parts(m, n, k);
	gemm_cost g = gemm_model(m, n, k, parts);
	o.us = g.us + (parts > 1 ? splitk_reduce_us(m, n, parts) : 0.0);
	o.kernels = parts > 1 ? 2 : 1;
	o.share = gemm_share(g);
	if (m == 1 || n == 1) {
		/* A matrix-vector product: cuBLAS's dot and reduction kernels, as on the H100. */
		parts = 1;
		g.blocks = ceil((double)m * n * k / 4096.0);
		g.k_per_block = ceil(k / ceil(g.blocks / ((double)m * n)));
		o.us = bytes_us(4.0 * ((double)m * k + (double)k * n)) + splitk_reduce_us(m, n, 128);
		o.kernels = 2;
		o.share = gemm_share(g);
	}
	char shape[160];
	snprintf(shape, sizeof(shape), " m=%d n=%d k=%d, %g block%s of k=%g%s", m, n, k, g.blocks,
		 g.blocks == 1 ? "" : "s", g.k_per_block,
		 o.kernels == 2 ? (parts > 1 ? " + split-K reduction" : " as dot + reduction kernels") : "");
	o.detail = o.label + shape;
	o.module = o.label;
	return submit(handle->stream, std::move(o)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
								    : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
			   const float *alpha, const float *a, int lda, const float *x, int incx,
			   const float *beta, float *y, int incy)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!valid_op(trans) || m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0 ||
	    !alpha || !beta)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	bool t = trans != CUBLAS_OP_N;
	int xn = t ? m : n, yn = t ? n : m;
	double al = *alpha, be = *beta;
	if (al != 0.0) {
		check_operand("cublasSgemv", "A", a, m, n, lda);
		check_vector("cublasSgemv", "x", x, xn, incx);
	}
	check_vector("cublasSgemv", "y", y, yn, incy);
	op o;
	o.label = "cublasSgemv";
	o.module = o.label;
	o.run = [=]() {
		for (int i = 0; i < yn; i++) {
			double acc = 0.0;
			for (int l = 0; al != 0.0 && l < xn; l++) {
				double aij = t ? a[(size_t)l + (size_t)i * lda] : a[(size_t)i + (size_t)l * lda];
				acc += aij * x[vec_index(l, xn, incx)];
			}
			float *yi = &y[vec_index(i, yn, incy)];
			*yi = (float)(al * acc + (be == 0.0 ? 0.0 : be * (double)*yi));
		}
	};
	/* The time model (rule 10): a dot kernel over blocks and a reduction kernel, as on the H100. */
	o.us = bytes_us(4.0 * m * n) + splitk_reduce_us(yn, 1, 128);
	o.kernels = 2;
	return submit(handle->stream, std::move(o)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
								    : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* Names are the API's; the texts are the simulator's own words. */
const char *cublasGetStatusName(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS: return "success";
	case CUBLAS_STATUS_NOT_INITIALIZED: return "the library or handle is not initialized";
	case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed";
	case CUBLAS_STATUS_INVALID_VALUE: return "an argument is out of range";
	case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a feature the call needs";
	case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to run";
	case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
	case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
	}
	return "unknown status";
}

} /* extern "C" */
