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
 *
 * Micro-batch mode (--micro-batch M, --global-batch G, --exact;
 * sampler_create_micro): step s of an epoch takes the global positions
 * s*G .. s*G+G-1 of the permutation (the last step wraps around to its
 * start, or is dropped with drop_last), so the steps per epoch are ceil(n/G)
 * (floor with drop_last) whatever the rank count. Micro-batch j of the step
 * is positions s*G + j*M .. +M-1; rank r of R takes j = r, r+R, r+2R, ...
 * < G/M, in that order. A rank's index of an epoch is its micro-batches'
 * examples, step by step; ranks may hold different numbers of micro-batches
 * a step when R does not divide G/M.
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
	int batch;     /* rows of one pass: per rank, or the micro-batch M */
	int drop_last;
	int global;    /* micro-batch mode: G, the rows of a step over all ranks; 0: off */
	int micro;     /* passes a step on this rank: 1, or its micro-batches (>= 1) */
	uint64_t seed;
	int shard_len; /* examples this rank visits per epoch, padding included */
	int steps;     /* steps per epoch, the same on every rank */
	int32_t *perm; /* (n) the current epoch's global permutation */
};

/* 0 on success; -1 when the configuration leaves no step (err says why). */
int sampler_create(struct sampler *s, int n, int rank, int size, int batch, int drop_last,
		   uint64_t seed, char *err, size_t errlen);
/*
 * Micro-batch mode: G rows a step over all ranks in micro-batches of M (M
 * divides G, size <= G / M: the caller has checked). 0, or -1 when no step
 * is left (err says why).
 */
int sampler_create_micro(struct sampler *s, int n, int rank, int size, int micro_batch,
			 int global_batch, int drop_last, uint64_t seed, char *err, size_t errlen);
void sampler_destroy(struct sampler *s);

/* The global permutation of `epoch` into perm (n). */
void sampler_permutation(uint64_t seed, int epoch, int n, int32_t *perm);

/* Fill out (shard_len) with this rank's examples of `epoch`, in visiting order. */
void sampler_epoch(struct sampler *s, int epoch, int32_t *out);

/* Examples in batch `step` (0-based) of an epoch: batch, or less for the last one. */
int sampler_batch_rows(const struct sampler *s, int step);

/* Where step `step` starts in the rank's index of the epoch. */
int sampler_step_start(const struct sampler *s, int step);

/* Images a step trains on over all ranks, padding included (rows: its last pass's). */
long long sampler_step_images(const struct sampler *s, int rows);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_SAMPLER_H */
