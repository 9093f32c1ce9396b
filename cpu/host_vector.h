/*
 * host_vector.h - how the host backend's loops are built for the vector units.
 *
 * Hot loops run in blocks of HOST_BLOCK floats (one AVX-512 register) with a
 * fixed-count inner loop over restrict pointers, which gcc -O2 vectorizes
 * without runtime alias checks. HOST_VECTOR_CLONES builds a function for
 * x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline ISA, chosen once
 * at load time. Without gcc 12's arch= clones (another compiler, or the
 * sanitizer build) functions are built once, for the baseline.
 */
#ifndef MNIST_DDP_HOST_VECTOR_H
#define MNIST_DDP_HOST_VECTOR_H

#include <stddef.h>

#include "elem.h"

#define HOST_BLOCK 16

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && \
	!defined(__SANITIZE_ADDRESS__)
#define HOST_VECTOR_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HOST_VECTOR_CLONES
#endif

/* dy (n) = relu_backward_elem(dy, y): the ReLU's gradient in the GEMM epilogue and the loss. */
static inline void relu_backward_run(float *restrict dy, const float *restrict y, size_t n)
{
	size_t i = 0;
	for (; i + HOST_BLOCK <= n; i += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			dy[i + k] = relu_backward_elem(dy[i + k], y[i + k]);
	for (; i < n; i++)
		dy[i] = relu_backward_elem(dy[i], y[i]);
}

#endif /* MNIST_DDP_HOST_VECTOR_H */
