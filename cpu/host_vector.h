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

#define HOST_BLOCK 16

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && \
	!defined(__SANITIZE_ADDRESS__)
#define HOST_VECTOR_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HOST_VECTOR_CLONES
#endif

#endif /* MNIST_DDP_HOST_VECTOR_H */
