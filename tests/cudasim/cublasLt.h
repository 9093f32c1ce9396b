/*
 * cublasLt.h (tests/cudasim/) - the part of cuBLASLt that cuda/ uses, as the
 * simulator provides it (cublaslt.cc): a handle, matmul descriptors with
 * their transposes, epilogue, bias and auxiliary (ReLU bit-mask) buffers,
 * column-major float32 layouts, heuristic preferences and the heuristic that
 * picks algorithms (split-K or not), and cublasLtMatmul queued on a stream,
 * computed by the simulator's own naive reference. Never on the include path
 * of the product: mnist-train's module links the real cuBLASLt.
 *
 * Names, types, struct sizes and enum values are those of CUDA 13's
 * cublasLt.h, so code written against it compiles here unchanged; only the
 * subset below is declared, and attributes outside it are refused
 * (CUBLAS_STATUS_INVALID_VALUE). What is modelled and what is not: rule 7 of
 * cudasim.h.
 */
#ifndef MNIST_DDP_CUDASIM_CUBLASLT_H
#define MNIST_DDP_CUDASIM_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "cublas_v2.h"
#include "cuda_runtime.h"

typedef struct cublasLtContext *cublasLtHandle_t;

/* Semi-opaque descriptors, of the real sizes. */
typedef struct {
	uint64_t data[8];
} cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;

typedef struct {
	uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
	uint64_t data[32];
} cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;

typedef struct {
	uint64_t data[8];
} cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;

typedef enum {
	CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST,
	CUBLASLT_POINTER_MODE_DEVICE = CUBLAS_POINTER_MODE_DEVICE,
	CUBLASLT_POINTER_MODE_DEVICE_VECTOR = 2,
	CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 3,
	CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST = 4,
} cublasLtPointerMode_t;

/* Matmul descriptor attributes: the ones the simulator takes (the rest are refused). */
typedef enum {
	CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,          /* int32_t, cublasComputeType_t */
	CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,            /* int32_t, cudaDataType_t */
	CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,          /* int32_t, cublasLtPointerMode_t */
	CUBLASLT_MATMUL_DESC_TRANSA = 3,                /* int32_t, cublasOperation_t */
	CUBLASLT_MATMUL_DESC_TRANSB = 4,                /* int32_t, cublasOperation_t */
	CUBLASLT_MATMUL_DESC_TRANSC = 5,                /* int32_t, CUBLAS_OP_N only */
	CUBLASLT_MATMUL_DESC_EPILOGUE = 7,              /* uint32_t, cublasLtEpilogue_t */
	CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,          /* void *: bias, or bias gradient */
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11, /* void *: the ReLU bit-mask */
	CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,      /* int64_t, in elements (bits for ReLU) */
	CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,       /* int32_t, cudaDataType_t; -1: D's type */
} cublasLtMatmulDescAttributes_t;

typedef enum {
	CUBLASLT_REDUCTION_SCHEME_NONE = 0,
	CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
	CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
	CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
	CUBLASLT_REDUCTION_SCHEME_MASK = 0x7,
} cublasLtReductionScheme_t;

typedef enum {
	CUBLASLT_EPILOGUE_DEFAULT = 1,
	CUBLASLT_EPILOGUE_RELU = 2,
	CUBLASLT_EPILOGUE_RELU_AUX = (CUBLASLT_EPILOGUE_RELU | 128),
	CUBLASLT_EPILOGUE_BIAS = 4,
	CUBLASLT_EPILOGUE_RELU_BIAS = (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS),
	CUBLASLT_EPILOGUE_RELU_AUX_BIAS = (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS),
	CUBLASLT_EPILOGUE_DRELU = 8 | 128,
	CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
	CUBLASLT_EPILOGUE_GELU = 32,
	CUBLASLT_EPILOGUE_GELU_AUX = (CUBLASLT_EPILOGUE_GELU | 128),
	CUBLASLT_EPILOGUE_GELU_BIAS = (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS),
	CUBLASLT_EPILOGUE_GELU_AUX_BIAS = (CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS),
	CUBLASLT_EPILOGUE_DGELU = 64 | 128,
	CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
	CUBLASLT_EPILOGUE_BGRADA = 256,
	CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;

typedef enum {
	CUBLASLT_SEARCH_BEST_FIT = 0,
	CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID = 1,
} cublasLtMatmulSearch_t;

/* Heuristic preferences: the ones the simulator takes. */
typedef enum {
	CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,          /* uint32_t, CUBLASLT_SEARCH_BEST_FIT only */
	CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  /* uint64_t, default 0 */
	CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3, /* uint32_t, default all */
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, /* uint32_t, default 256 */
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

typedef struct {
	cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} cublasLtMatmulHeuristicResult_t;

typedef enum {
	CUBLASLT_ALGO_CONFIG_ID = 0,               /* int32_t */
	CUBLASLT_ALGO_CONFIG_TILE_ID = 1,          /* uint32_t */
	CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2,       /* int32_t */
	CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3, /* uint32_t, cublasLtReductionScheme_t */
	CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4,    /* uint32_t */
	CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION = 5,    /* uint32_t */
	CUBLASLT_ALGO_CONFIG_STAGES_ID = 6,        /* uint32_t */
	CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID = 7,   /* uint16_t */
	CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8, /* uint16_t */
} cublasLtMatmulAlgoConfigAttributes_t;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle);
size_t cublasLtGetVersion(void);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
const char *cublasLtGetStatusName(cublasStatus_t status);
const char *cublasLtGetStatusString(cublasStatus_t status);

/* A column-major rows x cols matrix of `type` with leading dimension ld (>= rows). */
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
					  uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
					cublasComputeType_t computeType, cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
					      cublasLtMatmulDescAttributes_t attr, const void *buf,
					      size_t sizeInBytes);
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
					      cublasLtMatmulDescAttributes_t attr, void *buf,
					      size_t sizeInBytes, size_t *sizeWritten);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
						    cublasLtMatmulPreferenceAttributes_t attr,
						    const void *buf, size_t sizeInBytes);

/* Up to requestedAlgoCount algorithms for the problem, best first (rule 7 of cudasim.h). */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
					      cublasLtMatmulDesc_t operationDesc,
					      cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
					      cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
					      cublasLtMatmulPreference_t preference,
					      int requestedAlgoCount,
					      cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
					      int *returnAlgoCount);

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
						    cublasLtMatmulAlgoConfigAttributes_t attr,
						    void *buf, size_t sizeInBytes,
						    size_t *sizeWritten);

/* D = epilogue(alpha op(A) op(B) + beta C), column-major, queued on stream. */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
			      const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
			      const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
			      const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
			      cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
			      void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream);

} /* extern "C" */

#endif /* MNIST_DDP_CUDASIM_CUBLASLT_H */
