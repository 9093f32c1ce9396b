/*
 * test_sampler.c - per-epoch shuffling and per-rank shards (host/train/sampler.c).
 *
 *   ctest --test-dir build -R test_sampler --output-on-failure
 *
 * For 1 to 5 ranks and many data set sizes and batch sizes (n not divisible
 * by the ranks or the batch, n smaller than ranks * batch) every rank's
 * sampler is built and its epoch laid out in global order (rank r's j-th
 * example sits at position r + ranks * j). The checks:
 * - padded (default): the first n positions hold every example exactly once;
 *   the padding positions (fewer than `ranks`) repeat the permutation from
 *   its start (wrap-around, position p holds perm[p mod n]); all ranks have the same shard length, steps and
 *   batch rows per step, the last batch being the only short one.
 * - drop_last: no position past n, no example twice, every batch full.
 * - the permutation is a permutation, reproducible from (seed, epoch), and
 *   differs between epochs and between seeds.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/sampler.h"
#include "train/train.h"

static const int sizes_n[] = {1, 2, 3, 4, 5, 7, 10, 31, 32, 33, 63, 64, 65, 100, 101, 997, 1000};
static const int sizes_batch[] = {1, 2, 3, 8, 32};

#define N_SIZES (int)(sizeof(sizes_n) / sizeof(sizes_n[0]))
#define N_BATCHES (int)(sizeof(sizes_batch) / sizeof(sizes_batch[0]))

static void check_is_permutation(const int32_t *perm, int n, const char *what)
{
	char *seen = calloc((size_t)n, 1);
	cr_assert_not_null(seen);
	for (int i = 0; i < n; i++) {
		cr_assert(perm[i] >= 0 && perm[i] < n, "%s: perm[%d] = %d out of range 0..%d", what, i,
			  perm[i], n - 1);
		cr_assert(!seen[perm[i]], "%s: %d appears twice", what, perm[i]);
		seen[perm[i]] = 1;
	}
	free(seen);
}

/*
 * Build every rank's sampler for (n, ranks, batch) and lay the epoch out in
 * global order. Returns 0, or -1 when sampler_create refused rank 0 (then no
 * rank may accept it).
 */
static int check_epoch(int n, int ranks, int batch, int drop_last, uint64_t seed, int epoch)
{
	struct sampler s[5];
	char err[256];
	int rc0 = sampler_create(&s[0], n, 0, ranks, batch, drop_last, seed, err, sizeof(err));
	for (int r = 1; r < ranks; r++) {
		int rc = sampler_create(&s[r], n, r, ranks, batch, drop_last, seed, err, sizeof(err));
		cr_assert_eq(rc, rc0, "n=%d ranks=%d batch=%d drop_last=%d: rank %d says %d, rank 0 %d", n,
			     ranks, batch, drop_last, r, rc, rc0);
	}
	if (rc0 != 0)
		return -1;

	int shard = s[0].shard_len, steps = s[0].steps;
	char what[128];
	snprintf(what, sizeof(what), "n=%d ranks=%d batch=%d drop_last=%d epoch=%d", n, ranks, batch,
		 drop_last, epoch);
	cr_assert(steps > 0, "%s: no steps", what);
	for (int r = 1; r < ranks; r++) {
		cr_assert_eq(s[r].shard_len, shard, "%s: rank %d shard %d, rank 0 %d", what, r,
			     s[r].shard_len, shard);
		cr_assert_eq(s[r].steps, steps, "%s: rank %d steps %d, rank 0 %d", what, r, s[r].steps, steps);
	}

	/* Batch rows: equal on every rank, full except possibly the last, summing to the shard. */
	int total = 0;
	for (int t = 0; t < steps; t++) {
		int rows = sampler_batch_rows(&s[0], t);
		for (int r = 1; r < ranks; r++)
			cr_assert_eq(sampler_batch_rows(&s[r], t), rows, "%s: step %d rows differ on rank %d",
				     what, t, r);
		if (t < steps - 1 || drop_last)
			cr_assert_eq(rows, batch, "%s: step %d has %d rows, want a full %d", what, t, rows, batch);
		else
			cr_assert(rows >= 1 && rows <= batch, "%s: last step has %d rows", what, rows);
		total += rows;
	}
	cr_assert_eq(total, shard, "%s: batches cover %d examples, shard has %d", what, total, shard);

	int32_t *perm = calloc((size_t)n, sizeof(int32_t));
	int32_t *global = malloc((size_t)ranks * shard * sizeof(int32_t) + 1);
	int32_t *out = malloc((size_t)shard * sizeof(int32_t) + 1);
	int *count = calloc((size_t)n, sizeof(int));
	cr_assert(perm && global && out && count);
	sampler_permutation(seed, epoch, n, perm);
	check_is_permutation(perm, n, what);
	for (int r = 0; r < ranks; r++) {
		sampler_epoch(&s[r], epoch, out);
		for (int j = 0; j < shard; j++) {
			cr_assert(out[j] >= 0 && out[j] < n, "%s: rank %d entry %d = %d out of range", what, r,
				  j, out[j]);
			global[r + ranks * j] = out[j];
		}
	}
	int slots = ranks * shard;
	if (drop_last) {
		/* Shards take whole batches from the front: nothing past n, nothing twice. */
		cr_assert(slots <= n, "%s: %d slots for %d examples", what, slots, n);
		cr_assert(n - slots < ranks * batch + ranks, "%s: dropped %d of %d examples", what, n - slots, n);
		for (int p = 0; p < slots; p++) {
			cr_assert_eq(global[p], perm[p], "%s: position %d holds %d, permutation has %d", what, p,
				     global[p], perm[p]);
			cr_assert_eq(count[global[p]]++, 0, "%s: example %d used twice", what, global[p]);
		}
	} else {
		cr_assert(slots >= n && slots - n < ranks, "%s: %d slots for %d examples", what, slots, n);
		cr_assert_eq(shard, (n + ranks - 1) / ranks, "%s: shard %d, want ceil(n / ranks)", what, shard);
		for (int p = 0; p < n; p++) {
			cr_assert_eq(global[p], perm[p], "%s: position %d holds %d, permutation has %d", what, p,
				     global[p], perm[p]);
			cr_assert_eq(count[global[p]]++, 0, "%s: example %d appears twice before padding",
				     what, global[p]);
		}
		for (int e = 0; e < n; e++)
			cr_assert_eq(count[e], 1, "%s: example %d not covered before padding", what, e);
		for (int p = n; p < slots; p++)
			cr_assert_eq(global[p], perm[p % n], "%s: padding position %d holds %d, want the "
				     "wrap-around %d", what, p, global[p], perm[p % n]);
	}
	free(perm);
	free(global);
	free(out);
	free(count);
	for (int r = 0; r < ranks; r++)
		sampler_destroy(&s[r]);
	return 0;
}

Test(sampler, padded_shards_cover_every_example_once)
{
	for (int ranks = 1; ranks <= 5; ranks++)
		for (int i = 0; i < N_SIZES; i++)
			for (int b = 0; b < N_BATCHES; b++)
				for (int epoch = 0; epoch < 2; epoch++)
					cr_assert_eq(check_epoch(sizes_n[i], ranks, sizes_batch[b], 0, 7, epoch), 0,
						     "n=%d ranks=%d batch=%d: padded sampler refused", sizes_n[i],
						     ranks, sizes_batch[b]);
}

Test(sampler, fewer_examples_than_ranks_times_batch)
{
	/* 3 examples, 5 ranks, batch 4: one step of one row; ranks 3 and 4 repeat perm[0], perm[1]. */
	cr_assert_eq(check_epoch(3, 5, 4, 0, 1, 0), 0);
	struct sampler s;
	char err[256];
	cr_assert_eq(sampler_create(&s, 3, 4, 5, 4, 0, 1, err, sizeof(err)), 0, "%s", err);
	cr_assert(s.steps == 1 && s.shard_len == 1 && sampler_batch_rows(&s, 0) == 1,
		  "steps %d shard %d rows %d", s.steps, s.shard_len, sampler_batch_rows(&s, 0));
	sampler_destroy(&s);
}

Test(sampler, drop_last_has_no_padding_and_full_batches)
{
	int ran = 0;
	for (int ranks = 1; ranks <= 5; ranks++)
		for (int i = 0; i < N_SIZES; i++)
			for (int b = 0; b < N_BATCHES; b++) {
				int n = sizes_n[i], batch = sizes_batch[b];
				int rc = check_epoch(n, ranks, batch, 1, 9, 3);
				int expect_ok = n / ranks >= batch;
				cr_assert_eq(rc == 0, expect_ok, "n=%d ranks=%d batch=%d drop_last: rc %d", n, ranks,
					     batch, rc);
				ran += rc == 0;
			}
	cr_assert(ran > 100, "only %d drop_last configurations ran", ran);
}

Test(sampler, drop_last_without_a_full_batch_is_an_error)
{
	struct sampler s;
	char err[256] = "";
	/* 10 examples over 4 ranks: 2 per rank, no batch of 3. */
	cr_assert_eq(sampler_create(&s, 10, 0, 4, 3, 1, 1, err, sizeof(err)), -1);
	cr_assert(strlen(err) > 0, "no message");
	cr_assert(strstr(err, "drop-last") != NULL, "message does not name --drop-last: %s", err);
	/* The same without drop_last pads instead. */
	cr_assert_eq(sampler_create(&s, 10, 0, 4, 3, 0, 1, err, sizeof(err)), 0, "%s", err);
	cr_assert(s.steps == 1 && s.shard_len == 3);
	sampler_destroy(&s);
	/* Nonsense sizes are errors too. */
	const int bad[][4] = {{0, 0, 1, 1}, {10, 0, 0, 1}, {10, 0, 1, 0}, {10, 2, 2, 1}, {10, -1, 2, 1}};
	for (int i = 0; i < 5; i++) {
		err[0] = '\0';
		cr_assert_eq(sampler_create(&s, bad[i][0], bad[i][1], bad[i][2], bad[i][3], 0, 1, err,
					    sizeof(err)),
			     -1, "n=%d rank=%d ranks=%d batch=%d accepted", bad[i][0], bad[i][1], bad[i][2],
			     bad[i][3]);
		cr_assert(strlen(err) > 0, "case %d: no message", i);
	}
}

Test(sampler, permutation_reproducible_and_varied)
{
	enum { N = 1000 };
	static int32_t a[N], b[N], c[N], d[N];
	sampler_permutation(5, 0, N, a);
	sampler_permutation(5, 0, N, b);
	sampler_permutation(5, 1, N, c);
	sampler_permutation(6, 0, N, d);
	check_is_permutation(a, N, "seed 5 epoch 0");
	check_is_permutation(c, N, "seed 5 epoch 1");
	check_is_permutation(d, N, "seed 6 epoch 0");
	cr_assert(memcmp(a, b, sizeof(a)) == 0, "(seed 5, epoch 0) twice gave different permutations");
	int same_epoch = 0, same_seed = 0, fixed = 0;
	for (int i = 0; i < N; i++) {
		same_epoch += a[i] == c[i];
		same_seed += a[i] == d[i];
		fixed += a[i] == i;
	}
	/* A random permutation agrees with another in about 1 place; allow a few. */
	cr_assert(same_epoch < 10, "epochs 0 and 1 agree in %d of %d places", same_epoch, N);
	cr_assert(same_seed < 10, "seeds 5 and 6 agree in %d of %d places", same_seed, N);
	cr_assert(fixed < 10, "epoch 0 leaves %d of %d examples in place: not shuffled", fixed, N);

	/* A sampler's epochs follow the same function of (seed, epoch), whatever came before. */
	struct sampler s;
	char err[256];
	cr_assert_eq(sampler_create(&s, N, 0, 1, 10, 0, 5, err, sizeof(err)), 0, "%s", err);
	int32_t *out = malloc((size_t)s.shard_len * sizeof(int32_t));
	cr_assert_not_null(out);
	sampler_epoch(&s, 1, out);
	sampler_epoch(&s, 0, out);
	cr_assert(memcmp(out, a, sizeof(a)) == 0, "sampler epoch 0 after epoch 1 differs from (5, 0)");
	sampler_epoch(&s, 1, out);
	cr_assert(memcmp(out, c, sizeof(c)) == 0, "sampler epoch 1 differs from (5, 1)");
	free(out);
	sampler_destroy(&s);

	/* Tiny sets still shuffle across epochs (n = 2 has two orders; some epoch must swap). */
	int swapped = 0;
	for (int e = 0; e < 32; e++) {
		int32_t t[2];
		sampler_permutation(1, e, 2, t);
		swapped |= t[0] == 1;
	}
	cr_assert(swapped, "32 epochs of n = 2 never changed the order");
}

/* The test set: every example scored by exactly one rank, whatever the rank count. */
Test(sampler, test_shards_cover_every_test_example_once)
{
	const int counts[] = {1, 2, 3, 7, 9999, 10000, 10001};
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (int size = 1; size <= 16; size++) {
			long long sum = 0;
			for (int r = 0; r < size; r++) {
				int shard = train_test_shard(counts[c], r, size);
				/* rank r scores r, r + size, ...: the last one below count */
				int want = counts[c] > r ? (counts[c] - 1 - r) / size + 1 : 0;
				cr_assert_eq(shard, want, "count %d, rank %d of %d: shard %d, want %d",
					     counts[c], r, size, shard, want);
				sum += shard;
			}
			cr_assert_eq(sum, counts[c], "count %d over %d ranks: %lld scored", counts[c],
				     size, sum);
		}
}

/*
 * Micro-batch mode (sampler_create_micro): for G = K * M and every rank count
 * R from 1 to K (dividing K or not), each step's micro-batches, gathered from
 * the ranks (rank r's i-th micro-batch of a step is j = r + i * R), are
 * exactly the global positions s*G .. s*G+G-1 of the permutation (mod n: the
 * last step wraps around) in order; the steps per epoch do not depend on R;
 * with drop_last, no position at or past n.
 */
static void check_micro(int n, int m, int k, int drop_last)
{
	int g = m * k, steps1 = -1;
	int32_t *perm = malloc((size_t)n * sizeof(*perm));
	cr_assert_not_null(perm);
	sampler_permutation(7, 3, n, perm);
	for (int ranks = 1; ranks <= k && ranks <= 8; ranks++) {
		struct sampler s[8];
		int32_t *out[8];
		char err[256];
		for (int r = 0; r < ranks; r++) {
			int rc = sampler_create_micro(&s[r], n, r, ranks, m, g, drop_last, 7, err,
						      sizeof(err));
			cr_assert_eq(rc, 0, "n=%d M=%d K=%d R=%d: %s", n, m, k, ranks, err);
			cr_assert_eq(s[r].micro, (k - r + ranks - 1) / ranks);
			cr_assert_eq(sampler_batch_rows(&s[r], 0), m);
			out[r] = malloc((size_t)s[r].shard_len * sizeof(int32_t));
			sampler_epoch(&s[r], 3, out[r]);
		}
		if (steps1 < 0)
			steps1 = s[0].steps;
		cr_assert_eq(s[0].steps, steps1, "n=%d G=%d: %d steps at %d ranks, %d at 1", n, g,
			     s[0].steps, ranks, steps1);
		cr_assert_eq(steps1, drop_last ? n / g : (n + g - 1) / g);
		for (int st = 0; st < s[0].steps; st++)
			for (int j = 0; j < k; j++) {
				int r = j % ranks, i = j / ranks;
				int start = sampler_step_start(&s[r], st) + i * m;
				for (int e = 0; e < m; e++) {
					long pos = (long)st * g + (long)j * m + e;
					cr_assert(!drop_last || pos < n);
					cr_assert_eq(out[r][start + e], perm[pos % n],
						     "n=%d M=%d K=%d R=%d step %d micro-batch %d row %d", n, m,
						     k, ranks, st, j, e);
				}
			}
		for (int r = 0; r < ranks; r++) {
			free(out[r]);
			sampler_destroy(&s[r]);
		}
	}
	free(perm);
}

Test(sampler, micro_batches_are_the_same_at_every_rank_count)
{
	static const int ns[] = {96, 100, 960, 997};
	for (int i = 0; i < 4; i++)
		for (int d = 0; d < 2; d++) {
			check_micro(ns[i], 8, 12, d);
			check_micro(ns[i], 3, 5, d);
			check_micro(ns[i], 32, 1, d);
		}
}

Test(sampler, micro_drop_last_without_a_full_step_is_an_error)
{
	struct sampler s;
	char err[256] = "";
	cr_assert_eq(sampler_create_micro(&s, 40, 0, 2, 8, 64, 1, 1, err, sizeof(err)), -1);
	cr_assert(strstr(err, "--global-batch 64"), "%s", err);
	cr_assert_eq(sampler_create_micro(&s, 40, 0, 2, 8, 64, 0, 1, err, sizeof(err)), 0);
	cr_assert_eq(s.steps, 1);
	sampler_destroy(&s);
}
