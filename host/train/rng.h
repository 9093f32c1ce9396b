/*
 * rng.h - small deterministic random numbers (splitmix64), the same on every
 * rank and every machine, so that shuffles and initial weights are a function
 * of the seed alone.
 */
#ifndef MNIST_DDP_RNG_H
#define MNIST_DDP_RNG_H

#include <math.h>
#include <stdint.h>

struct rng {
	uint64_t state;
};

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A generator for one purpose (stream) of one seed, e.g. (seed, epoch). */
static inline struct rng rng_make(uint64_t seed, uint64_t stream)
{
	struct rng r = {seed ^ (stream * 0xd1b54a32d192ed03ull)};
	rng_next(&r);
	return r;
}

/*
 * Uniform in [0, n), without modulo bias: x is rejected when it is at or past
 * limit = UINT64_MAX - UINT64_MAX % n. That limit is above UINT64_MAX - n, so
 * an x at or below that needs no check, and the division that computes the
 * limit is only done for the rare x above it (same values, one division less).
 */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	uint64_t x = rng_next(r);
	if (x > UINT64_MAX - n) {
		uint64_t limit = UINT64_MAX - UINT64_MAX % n;
		while (x >= limit)
			x = rng_next(r);
	}
	return x % n;
}

/* Uniform double in [0, 1). */
static inline double rng_uniform(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller, one value per call). */
static inline double rng_normal(struct rng *r)
{
	double u1 = 1.0 - rng_uniform(r); /* (0, 1] */
	double u2 = rng_uniform(r);
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif /* MNIST_DDP_RNG_H */
