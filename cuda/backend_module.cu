/*
 * backend_module.cu - the entry point of the CUDA backend's module
 * (libmnist-cuda.so): the one symbol it exports, returning its table
 * (struct backend_module, include/backend.h) to host/backend_load.c.
 */
#include "backend.h"
#include "backend_module.h"
#include "backend_cuda.h"

#ifndef MNIST_DDP_INTERFACE_ID
#error "MNIST_DDP_INTERFACE_ID must be defined (cmake/cuda.cmake)"
#endif

static const struct backend_module cuda_module = {
	.abi = BACKEND_MODULE_ABI,
	.interface = MNIST_DDP_INTERFACE_ID,
	.probe = backend_cuda_probe,
	.create = backend_cuda_create,
};

extern "C" const struct backend_module *backend_module_entry(void)
{
	return &cuda_module;
}
