/*
 * fastdiv.h - n / d and n % d for 0 <= n < 2^31 by a multiply and a shift.
 *
 * An integer division by a divisor known only at run time is a long
 * instruction sequence on a GPU (tens of instructions for 32 bits, more for
 * 64), and the convolution kernels split every item's index into four or
 * more coordinates. Granlund and Montgomery's method ("Division by invariant
 * integers using multiplication", 1994, figure 4.1) replaces each division
 * by the high half of a 32-bit product, an add and a shift, with a
 * multiplier the launcher computes once on the host: l = ceil(log2 d),
 * m = floor(2^32 (2^l - d) / d) + 1, then n / d = (mulhi(m, n) + n) >> l,
 * which cannot overflow 32 bits while n < 2^31. The same code runs in every
 * build: __umulhi on the GPU, a 64-bit product elsewhere.
 */
#ifndef MNIST_DDP_FASTDIV_H
#define MNIST_DDP_FASTDIV_H

#include <stdint.h>

#ifndef __CUDACC__
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The largest dividend fastdiv_q is exact for. */
#define FASTDIV_MAX_N 0x7fffffffu

struct fastdiv {
	uint32_t d, mul, shift;
};

/* The divisor d >= 1 (0 is taken as 1), up to 2^32 - 1. */
static inline struct fastdiv fastdiv_make(uint32_t d)
{
	struct fastdiv f;
	uint32_t l = 0;
	if (d == 0)
		d = 1;
	while (l < 32 && ((uint64_t)1 << l) < d)
		l++;
	f.d = d;
	f.shift = l;
	f.mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
	return f;
}

/* n / f->d, for n <= FASTDIV_MAX_N. */
static __host__ __device__ inline uint32_t fastdiv_q(const struct fastdiv *f, uint32_t n)
{
#if defined(__CUDA_ARCH__)
	uint32_t hi = __umulhi(n, f->mul);
#else
	uint32_t hi = (uint32_t)(((uint64_t)n * f->mul) >> 32);
#endif
	return (uint32_t)(((uint64_t)hi + n) >> f->shift); /* shift 32 for d > 2^31: 64 bits */
}

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_FASTDIV_H */
