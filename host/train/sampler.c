/* sampler.c - per-epoch global shuffle and per-rank shards: see host/train/sampler.h. */
#include "train/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/rng.h"

int sampler_create(struct sampler *s, int n, int rank, int size, int batch, int drop_last,
		   uint64_t seed, char *err, size_t errlen)
{
	*s = (struct sampler){.n = n, .rank = rank, .size = size, .batch = batch,
			      .drop_last = drop_last, .seed = seed, .micro = 1};
	if (n <= 0 || size <= 0 || batch <= 0 || rank < 0 || rank >= size) {
		snprintf(err, errlen, "sampler: invalid sizes (n=%d, ranks=%d, batch=%d)", n, size, batch);
		return -1;
	}
	if (drop_last) {
		s->shard_len = n / size;
		s->steps = s->shard_len / batch;
		s->shard_len = s->steps * batch;
	} else {
		s->shard_len = (n + size - 1) / size;
		s->steps = (s->shard_len + batch - 1) / batch;
	}
	if (s->steps == 0) {
		snprintf(err, errlen,
			 "--drop-last: %d examples over %d ranks leave no full batch of %d per rank",
			 n, size, batch);
		return -1;
	}
	/* Touched here, so that the first epoch's shuffle does not pay the page faults. */
	s->perm = xmalloc((size_t)n * sizeof(*s->perm));
	memset(s->perm, 0, (size_t)n * sizeof(*s->perm));
	return 0;
}

int sampler_create_micro(struct sampler *s, int n, int rank, int size, int micro_batch,
			 int global_batch, int drop_last, uint64_t seed, char *err, size_t errlen)
{
	*s = (struct sampler){.n = n, .rank = rank, .size = size, .batch = micro_batch,
			      .drop_last = drop_last, .seed = seed, .global = global_batch};
	int k = micro_batch > 0 ? global_batch / micro_batch : 0;
	if (n <= 0 || size <= 0 || micro_batch <= 0 || rank < 0 || rank >= size || k < size ||
	    k * micro_batch != global_batch) {
		snprintf(err, errlen, "sampler: invalid sizes (n=%d, ranks=%d, micro-batch=%d, global "
				      "batch=%d)", n, size, micro_batch, global_batch);
		return -1;
	}
	s->micro = (k - rank + size - 1) / size;
	s->steps = drop_last ? n / global_batch : (n + global_batch - 1) / global_batch;
	if (s->steps == 0) {
		snprintf(err, errlen,
			 "--drop-last: %d examples leave no full step of --global-batch %d", n,
			 global_batch);
		return -1;
	}
	s->shard_len = s->steps * s->micro * micro_batch;
	s->perm = xmalloc((size_t)n * sizeof(*s->perm));
	memset(s->perm, 0, (size_t)n * sizeof(*s->perm));
	return 0;
}

void sampler_destroy(struct sampler *s)
{
	free(s->perm);
	s->perm = NULL;
}

void sampler_permutation(uint64_t seed, int epoch, int n, int32_t *perm)
{
	struct rng r = rng_make(seed, 0x5a3d1e00ull + (uint64_t)epoch);
	for (int i = 0; i < n; i++)
		perm[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)rng_below(&r, (uint64_t)i + 1);
		int32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

/* Micro-batch mode: the rank's micro-batches, step by step (sampler.h). */
static void sampler_epoch_micro(const struct sampler *s, int32_t *out)
{
	int k = s->global / s->batch, j = 0;
	for (int step = 0; step < s->steps; step++)
		for (int mb = s->rank; mb < k; mb += s->size)
			for (int i = 0; i < s->batch; i++) {
				long pos = (long)step * s->global + (long)mb * s->batch + i;
				out[j++] = s->perm[pos % s->n]; /* the last step wraps around */
			}
}

void sampler_epoch(struct sampler *s, int epoch, int32_t *out)
{
	sampler_permutation(s->seed, epoch, s->n, s->perm);
	if (s->global) {
		sampler_epoch_micro(s, out);
		return;
	}
	for (int j = 0; j < s->shard_len; j++) {
		long pos = (long)s->rank + (long)s->size * j;
		/* Padding positions wrap to the start of the permutation. */
		out[j] = s->perm[pos < s->n ? pos : pos % s->n];
	}
}

int sampler_batch_rows(const struct sampler *s, int step)
{
	if (s->global)
		return s->batch; /* every step is whole: the last one wraps around */
	int left = s->shard_len - step * s->batch;
	return left < s->batch ? left : s->batch;
}

int sampler_step_start(const struct sampler *s, int step)
{
	return step * s->batch * (s->global ? s->micro : 1);
}

long long sampler_step_images(const struct sampler *s, int rows)
{
	return s->global ? (long long)s->global : (long long)rows * s->size;
}
