/*
 * cublaslt_link.cu - a module that calls cuBLASLt the way the CUDA backend is to (a matmul
 * descriptor with a bias-and-ReLU epilogue, cublasLtMatmul), built against mnist::cublasLt
 * (cmake/cuda_libraries.cmake) exactly as libmnist-cuda.so is linked (mnist_cuda_module()).
 * Never loaded or run: tests/build/test_cublaslt_link.sh checks that it compiled (cublasLt.h
 * from the include directory found), needs libcublasLt and that the loader takes that
 * library from the file the configure chose.
 */
#include <cublasLt.h>

extern "C" __attribute__((visibility("default"))) int backend_module_entry(void);

extern "C" int backend_module_entry(void)
{
	cublasLtHandle_t lt = nullptr;
	cublasLtMatmulDesc_t desc = nullptr;
	cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
	int bad = cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS;
	bad |= cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS;
	bad |= cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
	                                      sizeof epilogue) != CUBLAS_STATUS_SUCCESS;
	bad |= cublasLtMatmul(lt, desc, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
	                      nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr) != CUBLAS_STATUS_SUCCESS;
	cublasLtMatmulDescDestroy(desc);
	cublasLtDestroy(lt);
	return bad;
}
