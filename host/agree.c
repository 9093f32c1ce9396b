/*
 * agree.c - the start-up agreement check: see include/agree.h.
 *
 * A record is "key=value\n" lines in AGREE_RECORD_BYTES bytes:
 *   @host=node1            placement (shown, never compared)
 *   @local_rank=0
 *   @device=cpu (OpenBLAS, 1 thread)
 *   version=0.1.0          the fingerprint (compared)
 *   lr=0.01
 *   train_crc32=...
 * Rank 0 gathers them, prints the placement and compares; ranks that differ
 * and ranks that only stop because of them are told which by rank 0.
 */
#include "agree.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/model.h"

#define AGREE_NOTE_BYTES 512  /* rank 0's word to each rank on a mismatch */
#define AGREE_DIFF_BYTES 1024 /* one rank's differences, as rank 0 prints them */
#define AGREE_LIST_HOSTS 4    /* hosts named in one line before "..." */

/* A bounded text buffer; appends that do not fit end it with "...". */
struct text {
	char *buf;
	size_t len, used;
	int full;
};

static void text_init(struct text *t, char *buf, size_t len)
{
	t->buf = buf;
	t->len = len;
	t->used = 0;
	t->full = 0;
	if (buf && len)
		buf[0] = '\0';
}

static void text_add(struct text *t, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

static void text_add(struct text *t, const char *fmt, ...)
{
	if (!t->buf || t->len < 4 || t->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < t->len - t->used) {
		t->used += (size_t)n;
		return;
	}
	t->full = 1;
	t->used = t->len - 1;
	memcpy(t->buf + t->len - 4, "...", 4);
}

/* A float in the fewest significant digits that read back as the same float. */
static void float_text(float f, char *buf, size_t len)
{
	for (int digits = 1; digits <= 9; digits++) {
		snprintf(buf, len, "%.*g", digits, (double)f);
		if (strtof(buf, NULL) == f)
			return;
	}
}

/* Append "key=value\n" to the record when the whole line fits; values become one line. */
static void rec_put(struct text *rec, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

static void rec_put(struct text *rec, const char *key, const char *fmt, ...)
{
	char value[512], line[640];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	for (char *p = value; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	int n = snprintf(line, sizeof(line), "%s=%s\n", key, value);
	if (n < 0 || (size_t)n >= sizeof(line) || rec->used + (size_t)n + 1 > rec->len)
		return;
	memcpy(rec->buf + rec->used, line, (size_t)n + 1);
	rec->used += (size_t)n;
}

/* The MPI library's name and version: the first line of its version text, up to a comma. */
static void mpi_library(char *buf, size_t len)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int n = 0;
	if (MPI_Get_library_version(v, &n) != MPI_SUCCESS || n <= 0) {
		snprintf(buf, len, "unknown");
		return;
	}
	v[n < (int)sizeof(v) ? n : (int)sizeof(v) - 1] = '\0';
	v[strcspn(v, ",\n")] = '\0';
	snprintf(buf, len, "%s", v);
}

void agree_fingerprint(const struct train_config *c, const struct mnist_set *train,
		       const struct mnist_set *test, const char *backend_name,
		       const char *host, int local_rank, const char *device, char *rec,
		       size_t len)
{
	struct text r;
	char num[64], lib[MPI_MAX_LIBRARY_VERSION_STRING];
	text_init(&r, rec, len);
	if (!rec || len == 0)
		return;

	rec_put(&r, "@host", "%s", host);
	rec_put(&r, "@local_rank", "%d", local_rank);
	rec_put(&r, "@device", "%s", device);

	rec_put(&r, "version", "%s", MNIST_DDP_VERSION);
	mpi_library(lib, sizeof(lib));
	rec_put(&r, "mpi", "%s", lib);
	rec_put(&r, "backend", "%s", backend_name);
	rec_put(&r, "model", "%s", model_kind_name(c->model));

	struct model m;
	model_init(&m, c->model, c->hidden, c->n_hidden);
	char layers[128];
	model_layers_text(&m, layers, sizeof(layers));
	rec_put(&r, "layers", "%s", layers);
	rec_put(&r, "params", "%zu", m.n_params);

	rec_put(&r, "batch_size", "%d", c->batch_size);
	float_text(c->lr, num, sizeof(num));
	rec_put(&r, "lr", "%s", num);
	float_text(c->momentum, num, sizeof(num));
	rec_put(&r, "momentum", "%s", num);
	rec_put(&r, "lr_schedule", "%s", lr_schedule_name(c->lr_schedule));
	rec_put(&r, "warmup_steps", "%ld", c->warmup_steps);
	rec_put(&r, "epochs", "%d", c->epochs);
	rec_put(&r, "seed", "%llu", (unsigned long long)c->seed);
	rec_put(&r, "limit", "%ld", c->limit);
	rec_put(&r, "grad_reduce", "%s", c->grad_reduce == REDUCE_SUM ? "sum" : "mean");
	rec_put(&r, "drop_last", "%d", c->drop_last);

	rec_put(&r, "train_images", "%d", train->count);
	rec_put(&r, "train_crc32", "%08x", (unsigned)train->checksum);
	if (test) {
		rec_put(&r, "test_images", "%d", test->count);
		rec_put(&r, "test_crc32", "%08x", (unsigned)test->checksum);
	} else {
		rec_put(&r, "test_images", "none");
		rec_put(&r, "test_crc32", "none");
	}
}

/* The line of rec starting at *pos: key and value as (pointer, length); advances *pos. */
static int rec_next(const char *rec, size_t *pos, const char **key, size_t *klen,
		    const char **val, size_t *vlen)
{
	while (rec[*pos]) {
		const char *line = rec + *pos;
		size_t n = strcspn(line, "\n");
		*pos += n + (line[n] == '\n');
		const char *eq = memchr(line, '=', n);
		if (!eq || eq == line)
			continue; /* not a key=value line */
		*key = line;
		*klen = (size_t)(eq - line);
		*val = eq + 1;
		*vlen = n - *klen - 1;
		return 1;
	}
	return 0;
}

/* The value of key (klen bytes) in rec, or NULL. */
static const char *rec_find(const char *rec, const char *key, size_t klen, size_t *vlen)
{
	size_t pos = 0, kl;
	const char *k, *v;
	while (rec_next(rec, &pos, &k, &kl, &v, vlen))
		if (kl == klen && !memcmp(k, key, klen))
			return v;
	return NULL;
}

int agree_diff(const char *ref, const char *other, char *diff, size_t difflen, char *keys,
	       size_t keyslen)
{
	struct text dt, kt;
	text_init(&dt, diff, difflen);
	text_init(&kt, keys, keyslen);
	int count = 0;
	size_t pos = 0, klen, vlen, olen;
	const char *key, *val, *oval;

	/* Keys of ref, in its order: missing or different in other. */
	while (rec_next(ref, &pos, &key, &klen, &val, &vlen)) {
		if (key[0] == '@')
			continue;
		oval = rec_find(other, key, klen, &olen);
		if (oval && olen == vlen && !memcmp(oval, val, vlen))
			continue;
		if (oval)
			text_add(&dt, "%s%.*s=%.*s (rank 0: %.*s)", count ? ", " : "", (int)klen, key,
				 (int)olen, oval, (int)vlen, val);
		else
			text_add(&dt, "%s%.*s missing (rank 0: %.*s)", count ? ", " : "", (int)klen,
				 key, (int)vlen, val);
		text_add(&kt, "%s%.*s", count ? ", " : "", (int)klen, key);
		count++;
	}
	/* Keys only other has (a different build). */
	pos = 0;
	while (rec_next(other, &pos, &key, &klen, &oval, &olen)) {
		if (key[0] == '@' || rec_find(ref, key, klen, &vlen))
			continue;
		text_add(&dt, "%s%.*s=%.*s (rank 0: missing)", count ? ", " : "", (int)klen, key,
			 (int)olen, oval);
		text_add(&kt, "%s%.*s", count ? ", " : "", (int)klen, key);
		count++;
	}
	return count;
}

/* "0-3,5,7-8" for an ascending list of ranks. */
static void ranks_text(struct text *t, const int *ranks, int n)
{
	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (j > i)
			text_add(t, "%s%d-%d", i ? "," : "", ranks[i], ranks[j]);
		else
			text_add(t, "%s%d", i ? "," : "", ranks[i]);
		i = j + 1;
	}
}

/* Copy the value of key in rec into buf ("?" when absent). */
static void rec_value(const char *rec, const char *key, char *buf, size_t len)
{
	size_t vlen;
	const char *v = rec_find(rec, key, strlen(key), &vlen);
	if (!v)
		snprintf(buf, len, "?");
	else
		snprintf(buf, len, "%.*s", (int)vlen, v);
}

/* Rank 0: one stderr line per host, hosts in the order of their lowest rank. */
static void print_placement(const char *all, int size)
{
	char host[MPI_MAX_PROCESSOR_NAME], other[MPI_MAX_PROCESSOR_NAME];
	char dev[256], dev0[256], backend[32], local[16];
	if (size <= 0)
		return;
	int *ranks = xcalloc((size_t)size, sizeof(*ranks));
	char *seen = xcalloc((size_t)size, 1);
	int hosts = 0;
	for (int i = 0; i < size; i++)
		if (!seen[i]) {
			hosts++;
			rec_value(all + (size_t)i * AGREE_RECORD_BYTES, "@host", host, sizeof(host));
			for (int j = i; j < size; j++) {
				rec_value(all + (size_t)j * AGREE_RECORD_BYTES, "@host", other, sizeof(other));
				if (!strcmp(host, other))
					seen[j] = 1;
			}
		}
	fprintf(stderr, "mnist-train: placement: %d rank%s on %d host%s\n", size,
		size == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");

	memset(seen, 0, (size_t)size);
	for (int i = 0; i < size; i++) {
		if (seen[i])
			continue;
		const char *rec = all + (size_t)i * AGREE_RECORD_BYTES;
		rec_value(rec, "@host", host, sizeof(host));
		rec_value(rec, "@device", dev0, sizeof(dev0));
		int n = 0, same_device = 1;
		for (int j = i; j < size; j++) {
			const char *rj = all + (size_t)j * AGREE_RECORD_BYTES;
			rec_value(rj, "@host", other, sizeof(other));
			if (strcmp(host, other))
				continue;
			seen[j] = 1;
			ranks[n++] = j;
			rec_value(rj, "@device", dev, sizeof(dev));
			same_device &= !strcmp(dev, dev0);
		}
		char line[2048];
		struct text t;
		text_init(&t, line, sizeof(line));
		rec_value(rec, "backend", backend, sizeof(backend));
		int gpu = !strcmp(backend, "cuda");
		text_add(&t, "%s: rank%s ", host, n == 1 ? "" : "s");
		ranks_text(&t, ranks, n);
		if (same_device && !gpu) {
			text_add(&t, " on %s", dev0);
		} else {
			/* One device per rank: the local rank picks the GPU. */
			for (int k = 0; k < n; k++) {
				const char *rk = all + (size_t)ranks[k] * AGREE_RECORD_BYTES;
				rec_value(rk, "@device", dev, sizeof(dev));
				rec_value(rk, "@local_rank", local, sizeof(local));
				text_add(&t, "%s rank %d on %s%s%s", k ? "," : ";", ranks[k],
					 gpu ? "cuda:" : "", gpu ? local : "", gpu ? " " : "");
				text_add(&t, "%s", dev);
			}
		}
		fprintf(stderr, "mnist-train: placement: %s\n", line);
	}
	free(seen);
	free(ranks);
}

/*
 * Rank 0: compare every record with its own, print the differences grouped
 * by identical diff, fill each rank's note and rank 0's msg. Returns the
 * number of ranks that differ.
 */
static int compare_all(const struct dist *d, const char *all, char *notes, char *msg,
		       size_t msglen)
{
	int size = d->size;
	char *diffs = xcalloc((size_t)size, AGREE_DIFF_BYTES);
	char *keys = xcalloc((size_t)size, AGREE_DIFF_BYTES);
	int *count = xcalloc((size_t)size, sizeof(*count));
	int *group = xcalloc((size_t)size, sizeof(*group));
	int *members = xcalloc((size_t)size, sizeof(*members));
	char *done = xcalloc((size_t)size, 1);
	char all_keys[512], bad_ranks[256];
	struct text kt, bt;
	text_init(&kt, all_keys, sizeof(all_keys));
	text_init(&bt, bad_ranks, sizeof(bad_ranks));

	int differing = 0;
	for (int i = 1; i < size; i++) {
		count[i] = agree_diff(all, all + (size_t)i * AGREE_RECORD_BYTES,
				      diffs + (size_t)i * AGREE_DIFF_BYTES, AGREE_DIFF_BYTES,
				      keys + (size_t)i * AGREE_DIFF_BYTES, AGREE_DIFF_BYTES);
		if (count[i])
			group[differing++] = i;
	}
	if (!differing)
		goto out_free;
	ranks_text(&bt, group, differing);

	/* Union of the differing keys, in order of first appearance. */
	for (int g = 0; g < differing; g++) {
		const char *k = keys + (size_t)group[g] * AGREE_DIFF_BYTES;
		size_t pos = 0;
		while (k[pos]) {
			size_t n = strcspn(k + pos, ",");
			char name[128];
			snprintf(name, sizeof(name), "%.*s", (int)n, k + pos);
			pos += n;
			while (k[pos] == ',' || k[pos] == ' ')
				pos++;
			char padded[512];
			snprintf(padded, sizeof(padded), ", %s, ", all_keys);
			char probe[140];
			snprintf(probe, sizeof(probe), ", %s, ", name);
			if (!strstr(padded, probe))
				text_add(&kt, "%s%s", kt.used ? ", " : "", name);
		}
	}

	/* One line per group of ranks with the same differences. */
	char host0[MPI_MAX_PROCESSOR_NAME];
	rec_value(all, "@host", host0, sizeof(host0));
	for (int g = 0; g < differing; g++) {
		int r = group[g];
		if (done[r])
			continue;
		const char *dr = diffs + (size_t)r * AGREE_DIFF_BYTES;
		int n = 0;
		char hosts[256], host[MPI_MAX_PROCESSOR_NAME];
		struct text ht;
		text_init(&ht, hosts, sizeof(hosts));
		int named = 0;
		for (int h = g; h < differing; h++) {
			int q = group[h];
			if (done[q] || strcmp(dr, diffs + (size_t)q * AGREE_DIFF_BYTES))
				continue;
			done[q] = 1;
			members[n++] = q;
			rec_value(all + (size_t)q * AGREE_RECORD_BYTES, "@host", host, sizeof(host));
			char padded[300], probe[MPI_MAX_PROCESSOR_NAME + 4];
			snprintf(padded, sizeof(padded), ", %s, ", hosts);
			snprintf(probe, sizeof(probe), ", %s, ", host);
			if (strstr(padded, probe))
				continue;
			if (named++ < AGREE_LIST_HOSTS)
				text_add(&ht, "%s%s", ht.used ? ", " : "", host);
			else if (named == AGREE_LIST_HOSTS + 1)
				text_add(&ht, ", ...");
		}
		char line[256];
		struct text lt;
		text_init(&lt, line, sizeof(line));
		ranks_text(&lt, members, n);
		fprintf(stderr, "mnist-train: start-up check: rank%s %s on %s differ%s from rank 0 on %s: %s\n",
			n == 1 ? "" : "s", line, hosts, n == 1 ? "s" : "", host0, dr);
	}

	for (int r = 1; r < size; r++) {
		char *note = notes + (size_t)r * AGREE_NOTE_BYTES;
		if (count[r])
			snprintf(note, AGREE_NOTE_BYTES,
				 "start-up check failed: this rank differs from rank 0 in %s "
				 "(rank 0 prints the values); every rank exits with status 2",
				 keys + (size_t)r * AGREE_DIFF_BYTES);
		else
			snprintf(note, AGREE_NOTE_BYTES,
				 "start-up check failed: stopping because rank%s %s differ%s from rank 0 "
				 "in %s; every rank exits with status 2",
				 differing == 1 ? "" : "s", bad_ranks, differing == 1 ? "s" : "", all_keys);
	}
	snprintf(msg, msglen,
		 "start-up check failed: %d of %d ranks differ from rank 0 in %s (values above); "
		 "every rank exits with status 2. Give every rank the same flags, the same data "
		 "files and the same build.",
		 differing, size, all_keys);

out_free:
	free(done);
	free(members);
	free(group);
	free(count);
	free(keys);
	free(diffs);
	return differing;
}

int agree_check(const struct dist *d, const struct train_config *c,
		const struct mnist_set *train, const struct mnist_set *test,
		const struct backend *be, char *msg, size_t msglen)
{
	char mine[AGREE_RECORD_BYTES];
	char note[AGREE_NOTE_BYTES] = "";
	char *all = NULL, *notes = NULL;
	int differing = 0;

	memset(mine, 0, sizeof(mine));
	agree_fingerprint(c, train, test, backend_name(be), d->host, d->local_rank, be->device,
			  mine, sizeof(mine));
	if (d->rank == 0)
		all = xmalloc((size_t)d->size * AGREE_RECORD_BYTES);
	MPI_CHECK(MPI_Gather(mine, AGREE_RECORD_BYTES, MPI_CHAR, all, AGREE_RECORD_BYTES,
			     MPI_CHAR, 0, d->comm));
	if (d->rank == 0) {
		for (int i = 0; i < d->size; i++)
			all[(size_t)i * AGREE_RECORD_BYTES + AGREE_RECORD_BYTES - 1] = '\0';
		print_placement(all, d->size);
		notes = xcalloc((size_t)d->size, AGREE_NOTE_BYTES);
		differing = compare_all(d, all, notes, msg, msglen);
		fflush(stderr);
	}
	MPI_CHECK(MPI_Bcast(&differing, 1, MPI_INT, 0, d->comm));
	if (differing) {
		MPI_CHECK(MPI_Scatter(notes, AGREE_NOTE_BYTES, MPI_CHAR, note, AGREE_NOTE_BYTES,
				      MPI_CHAR, 0, d->comm));
		note[AGREE_NOTE_BYTES - 1] = '\0';
		if (d->rank != 0)
			snprintf(msg, msglen, "rank %d on %s: %s", d->rank, d->host, note);
	}
	free(notes);
	free(all);
	return differing ? 2 : 0;
}
