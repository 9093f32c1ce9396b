/*
 * sampler.h - which training examples each rank sees, step by step.
 *
 * Each epoch has one global permutation of the n examples, computed from
 * (seed, epoch) and therefore identical on every rank. Rank r takes global
 * positions r, r + N, r + 2N, ... (N ranks). By default every shard is padded
 * to ceil(n / N) by wrapping around to the start of the permutation, as
 * MindSpore's and PyTorch's distributed samplers pad, so every rank runs the
 * same number of steps and no rank waits forever in a collective. With
 * drop_last the tail that does not divide evenly, and a partial last batch,
 * are dropped instead. A partial last batch has the same size on every rank.
 */
#ifndef MNIST_DDP_SAMPLER_H
#define MNIST_DDP_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sampler {
	int n;         /* examples in the data set */
	int rank, size;
	int batch;     /* per rank */
	int drop_last;
	uint64_t seed;
	int shard_len; /* examples this rank visits per epoch, padding included */
	int steps;     /* steps per epoch, the same on every rank */
	int32_t *perm; /* (n) the current epoch's global permutation */
};

/* 0 on success; -1 when the configuration leaves no step (err says why). */
int sampler_create(struct sampler *s, int n, int rank, int size, int batch, int drop_last,
		   uint64_t seed, char *err, size_t errlen);
void sampler_destroy(struct sampler *s);

/* The global permutation of `epoch` into perm (n). */
void sampler_permutation(uint64_t seed, int epoch, int n, int32_t *perm);

/* Fill out (shard_len) with this rank's examples of `epoch`, in visiting order. */
void sampler_epoch(struct sampler *s, int epoch, int32_t *out);

/* Examples in batch `step` (0-based) of an epoch: batch, or less for the last one. */
int sampler_batch_rows(const struct sampler *s, int step);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_SAMPLER_H */
