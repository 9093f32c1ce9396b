/*
 * backend_module.cu - the entry point of the CUDA backend's module
 * (libmnist-cuda.so): the one symbol it exports, returning its table
 * (struct backend_module, include/backend.h) to host/backend_load.c.
 */
#include "backend.h"
#include "backend_cuda.h"

#if !defined(MNIST_DDP_INTERFACE_ID) || !defined(MNIST_DDP_VERSION)
#error "MNIST_DDP_INTERFACE_ID and MNIST_DDP_VERSION must be defined (cmake/cuda.cmake)"
#endif

static const struct backend_module cuda_module = {
	.abi = BACKEND_MODULE_ABI,
	.interface = MNIST_DDP_INTERFACE_ID,
	.version = MNIST_DDP_VERSION,
	.name = "cuda",
	.probe = backend_cuda_probe,
	.create = backend_cuda_create,
};

extern "C" const struct backend_module *backend_module_entry(void)
{
	return &cuda_module;
}
