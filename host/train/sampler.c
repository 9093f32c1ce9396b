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
			      .drop_last = drop_last, .seed = seed};
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

void sampler_epoch(struct sampler *s, int epoch, int32_t *out)
{
	sampler_permutation(s->seed, epoch, s->n, s->perm);
	for (int j = 0; j < s->shard_len; j++) {
		long pos = (long)s->rank + (long)s->size * j;
		/* Padding positions wrap to the start of the permutation. */
		out[j] = s->perm[pos < s->n ? pos : pos % s->n];
	}
}

int sampler_batch_rows(const struct sampler *s, int step)
{
	int left = s->shard_len - step * s->batch;
	return left < s->batch ? left : s->batch;
}
