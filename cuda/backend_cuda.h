/*
 * backend_cuda.h - what cuda/backend_cuda.cu gives the module's entry point
 * (cuda/backend_module.cu). The host program never calls these directly: it
 * reaches them through the module's table (include/backend.h).
 */
#ifndef MNIST_DDP_BACKEND_CUDA_H
#define MNIST_DDP_BACKEND_CUDA_H

#include <stddef.h>

#include "backend.h"
#include "backend_module.h"

/* This rank's verdict (include/backend.h); collective over the ranks of the node. */
void backend_cuda_probe(const struct dist *d, struct cuda_probe *out);
/*
 * The verdict and the device this rank would use (cuda/probe.cu): device -1
 * unless usable. Collective over the node's ranks: the last step compares the
 * GPUs they would use, since two ranks on one GPU is what a launch that gives
 * every rank the same visible device produces.
 */
void cuda_probe_device(const struct dist *d, struct cuda_probe *p, int *device);
/* Collective: 0 on every rank, or non-zero on every rank with `why` filled. */
int backend_cuda_create(const struct dist *d, struct backend *out, char *why, size_t whylen);

#endif /* MNIST_DDP_BACKEND_CUDA_H */
