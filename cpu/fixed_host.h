/*
 * fixed_host.h - the host backend's fixed-point ops of --exact (docs/exact.md):
 * a micro-batch's gradients added into 64-bit integers, and the sums turned
 * back into floats, over include/elem.h's fixed_encode_elem and
 * fixed_decode_elem, with an AVX-512 path chosen at run time (host_isa())
 * whose results are those bodies' to the bit.
 */
#ifndef MNIST_DDP_FIXED_HOST_H
#define MNIST_DDP_FIXED_HOST_H

#include <stddef.h>
#include <stdint.h>

/*
 * acc[i] (= first ? 0 : acc[i]) + fixed_encode_elem(g[i], limit) for i < n; the
 * elements out of range (or not finite) add 0 and are counted into acc[n].
 */
void fixed_host_accumulate(int64_t *restrict acc, const float *restrict g, size_t n, double limit,
			   int first);
/* g[i] = fixed_decode_elem(acc[i]) for i < n. */
void fixed_host_decode(float *restrict g, const int64_t *restrict acc, size_t n);

#endif /* MNIST_DDP_FIXED_HOST_H */
