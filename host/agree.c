/*
 * agree.c - the start-up agreement: see host/agree.h.
 *
 * A fingerprint is "key=value\n" lines (values with '\\' and newlines
 * escaped):
 *   version=0.1.0
 *   mpi=Open MPI v4.1.4
 *   backend=host
 *   model=seed          every SETTING_AGREE row of the settings table
 *   ...
 *   train_crc32=...
 * Collectives, all through dist.h: rank 0's fingerprint is broadcast, the
 * ranks agree on whether any differs, every rank's record (placement and
 * differences) is gathered on rank 0, and on a mismatch rank 0 broadcasts
 * which ranks differ in what, for the other ranks' messages.
 */
#include "agree.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGREE_NOTE_BYTES 512 /* rank 0's word to the ranks on a mismatch */
#define AGREE_LIST_HOSTS 4   /* hosts named in one line before "..." */

/* What each rank sends rank 0: characters only, so it is laid out alike in every build. */
struct agree_record {
	char host[256];
	char device[256];
	char local_rank[16];
	char keys[256];  /* the keys that differ from rank 0's, "" when none */
	char diff[1264]; /* key=value (rank 0: value), ... */
};
_Static_assert(sizeof(struct agree_record) == 2048, "the record is part of the wire format");

/* A bounded text buffer; an append that does not fit ends it with "...". */
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

/* Append item to a ", "-separated list unless it is there already; 1 when added. */
static int list_add(struct text *t, const char *item, size_t n)
{
	for (const char *p = t->buf; p && *p;) {
		size_t k = strcspn(p, ",");
		if (k == n && !memcmp(p, item, n))
			return 0;
		p += k;
		while (*p == ',' || *p == ' ')
			p++;
	}
	text_add(t, "%s%.*s", t->used ? ", " : "", (int)n, item);
	return 1;
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

/* ---- the fingerprint -------------------------------------------------------- */

/* "key=value\n", the value's backslashes and newlines escaped. */
static void put(struct text *t, const char *key, const char *value)
{
	text_add(t, "%s=", key);
	for (const char *v = value; *v; v++)
		if (*v == '\\' || *v == '\n')
			text_add(t, "\\%c", *v == '\n' ? 'n' : '\\');
		else
			text_add(t, "%c", *v);
	text_add(t, "\n");
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

int agree_fingerprint(const struct train_config *c, const struct mnist_set *train,
		      const struct mnist_set *test, const char *backend_name, char *fp, size_t len)
{
	struct text t;
	char value[CONFIG_PATH_MAX + 64], key[64];
	text_init(&t, fp, len);
	put(&t, "version", MNIST_DDP_VERSION);
	mpi_library(value, 256);
	put(&t, "mpi", value);
	put(&t, "backend", backend_name);
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		if (!(s->where & SETTING_AGREE))
			continue;
		config_key(s, key, sizeof(key));
		config_format(s, c, value, sizeof(value));
		put(&t, key, value);
	}
	snprintf(value, sizeof(value), "%d", train->count);
	put(&t, "train_images", value);
	snprintf(value, sizeof(value), "%08x", (unsigned)train->checksum);
	put(&t, "train_crc32", value);
	snprintf(value, sizeof(value), "%d", test ? test->count : 0);
	put(&t, "test_images", test ? value : "none");
	snprintf(value, sizeof(value), "%08x", test ? (unsigned)test->checksum : 0u);
	put(&t, "test_crc32", test ? value : "none");
	return t.full || !fp ? -1 : (int)t.used;
}

/* The line of fp starting at *pos: key and value as (pointer, length); advances *pos. */
static int fp_next(const char *fp, size_t *pos, const char **key, size_t *klen, const char **val,
		   size_t *vlen)
{
	while (fp[*pos]) {
		const char *line = fp + *pos;
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

/* The value of key (klen bytes) in fp, or NULL. */
static const char *fp_find(const char *fp, const char *key, size_t klen, size_t *vlen)
{
	size_t pos = 0, kl;
	const char *k, *v;
	while (fp_next(fp, &pos, &k, &kl, &v, vlen))
		if (kl == klen && !memcmp(k, key, klen))
			return v;
	return NULL;
}

/* A value in a difference: "" when empty, "missing" when the key is absent (v NULL). */
static void show_value(struct text *t, const char *v, size_t n)
{
	if (!v)
		text_add(t, "missing");
	else if (!n)
		text_add(t, "\"\"");
	else
		text_add(t, "%.*s", (int)n, v);
}

/* One difference: "key=value (rank 0: value)", or "key missing (rank 0: value)". */
static void diff_add(struct text *dt, struct text *kt, const char *key, size_t klen,
		     const char *mine, size_t mlen, const char *ref, size_t rlen)
{
	text_add(dt, "%s%.*s%s", dt->used ? ", " : "", (int)klen, key, mine ? "=" : " ");
	show_value(dt, mine, mlen);
	text_add(dt, " (rank 0: ");
	show_value(dt, ref, rlen);
	text_add(dt, ")");
	text_add(kt, "%s%.*s", kt->used ? ", " : "", (int)klen, key);
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
	while (fp_next(ref, &pos, &key, &klen, &val, &vlen)) {
		oval = fp_find(other, key, klen, &olen);
		if (oval && olen == vlen && !memcmp(oval, val, vlen))
			continue;
		diff_add(&dt, &kt, key, klen, oval, oval ? olen : 0, val, vlen);
		count++;
	}
	/* Keys only other has (a different build). */
	pos = 0;
	while (fp_next(other, &pos, &key, &klen, &oval, &olen)) {
		if (fp_find(ref, key, klen, &vlen))
			continue;
		diff_add(&dt, &kt, key, klen, oval, olen, NULL, 0);
		count++;
	}
	return count;
}

/* ---- rank 0's report ---------------------------------------------------------- */

/* One stderr line per host, hosts in the order of their lowest rank. */
static void print_placement(const struct agree_record *all, int size, int gpu)
{
	int *ranks = xcalloc((size_t)size, sizeof(*ranks));
	char *seen = xcalloc((size_t)size, 1);
	int hosts = 0;
	for (int pass = 0; pass < 2; pass++) {
		memset(seen, 0, (size_t)size);
		for (int i = 0; i < size; i++) {
			if (seen[i])
				continue;
			int n = 0, same_device = 1;
			for (int j = i; j < size; j++)
				if (!strcmp(all[j].host, all[i].host)) {
					seen[j] = 1;
					ranks[n++] = j;
					same_device &= !strcmp(all[j].device, all[i].device);
				}
			if (pass == 0) {
				hosts++;
				continue;
			}
			char line[2048];
			struct text t;
			text_init(&t, line, sizeof(line));
			text_add(&t, "%s: rank%s ", all[i].host, n == 1 ? "" : "s");
			ranks_text(&t, ranks, n);
			if (same_device && !gpu)
				text_add(&t, " on %s", all[i].device);
			else /* one device per rank: the local rank picks the GPU */
				for (int k = 0; k < n; k++)
					text_add(&t, "%s rank %d on %s%s%s%s", k ? "," : ";", ranks[k],
						 gpu ? "cuda:" : "", gpu ? all[ranks[k]].local_rank : "",
						 gpu ? " " : "", all[ranks[k]].device);
			fprintf(stderr, "mnist-train: placement: %s\n", line);
		}
		if (pass == 0)
			fprintf(stderr, "mnist-train: placement: %d rank%s on %d host%s\n", size,
				size == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");
	}
	free(seen);
	free(ranks);
}

/*
 * One stderr line per group of ranks with the same differences, naming their
 * hosts. keys gets every differing key, note "rank(s) R differ(s) from rank 0
 * in KEYS". Returns how many ranks differ.
 */
static int report_differences(const struct agree_record *all, int size, char *keys,
			      size_t keyslen, char *note, size_t notelen)
{
	int *bad = xcalloc((size_t)size, sizeof(*bad));
	int *members = xcalloc((size_t)size, sizeof(*members));
	char *done = xcalloc((size_t)size, 1);
	struct text kt, nt;
	text_init(&kt, keys, keyslen);
	text_init(&nt, note, notelen);
	int differing = 0;
	for (int r = 1; r < size; r++) {
		if (!all[r].keys[0])
			continue;
		bad[differing++] = r;
		for (const char *k = all[r].keys; *k;) {
			size_t n = strcspn(k, ",");
			list_add(&kt, k, n);
			k += n;
			while (*k == ',' || *k == ' ')
				k++;
		}
	}
	for (int g = 0; g < differing; g++) {
		if (done[bad[g]])
			continue;
		const char *diff = all[bad[g]].diff;
		char hosts[320], line[256];
		struct text ht, lt;
		text_init(&ht, hosts, sizeof(hosts));
		text_init(&lt, line, sizeof(line));
		int n = 0, named = 0;
		for (int h = g; h < differing; h++) {
			int q = bad[h];
			if (done[q] || strcmp(diff, all[q].diff))
				continue;
			done[q] = 1;
			members[n++] = q;
			if (named < AGREE_LIST_HOSTS)
				named += list_add(&ht, all[q].host, strlen(all[q].host));
			else if (named++ == AGREE_LIST_HOSTS)
				text_add(&ht, ", ...");
		}
		ranks_text(&lt, members, n);
		fprintf(stderr, "mnist-train: start-up check: rank%s %s on %s differ%s from rank 0 on %s: %s\n",
			n == 1 ? "" : "s", line, hosts, n == 1 ? "s" : "", all[0].host, diff);
	}
	text_add(&nt, "rank%s ", differing == 1 ? "" : "s");
	ranks_text(&nt, bad, differing);
	text_add(&nt, " differ%s from rank 0 in %s", differing == 1 ? "s" : "", keys);
	free(done);
	free(members);
	free(bad);
	return differing;
}

/* ---- the collective ------------------------------------------------------------- */

/* A record from another rank: every field a string, whatever arrived. */
static void record_terminate(struct agree_record *r)
{
	r->host[sizeof(r->host) - 1] = '\0';
	r->device[sizeof(r->device) - 1] = '\0';
	r->local_rank[sizeof(r->local_rank) - 1] = '\0';
	r->keys[sizeof(r->keys) - 1] = '\0';
	r->diff[sizeof(r->diff) - 1] = '\0';
}

enum status agree_check(const struct dist *d, const struct train_config *c,
			const struct mnist_set *train, const struct mnist_set *test,
			const struct backend *be, char *msg, size_t msglen)
{
	char *mine = xcalloc(2, AGREE_FINGERPRINT_BYTES), *ref = mine + AGREE_FINGERPRINT_BYTES;
	char note[AGREE_NOTE_BYTES] = "", keys[256] = "";
	struct agree_record rec, *all = NULL;
	int differing = 0;

	if (agree_fingerprint(c, train, test, backend_name(be), mine, AGREE_FINGERPRINT_BYTES) < 0)
		die(1, "the start-up fingerprint does not fit in %d bytes", AGREE_FINGERPRINT_BYTES);
	if (d->rank == 0)
		memcpy(ref, mine, AGREE_FINGERPRINT_BYTES);
	dist_bcast(d, ref, AGREE_FINGERPRINT_BYTES, 0, "start-up check");
	ref[AGREE_FINGERPRINT_BYTES - 1] = '\0';

	memset(&rec, 0, sizeof(rec));
	snprintf(rec.host, sizeof(rec.host), "%s", d->host);
	snprintf(rec.device, sizeof(rec.device), "%s", be->device);
	snprintf(rec.local_rank, sizeof(rec.local_rank), "%d", d->local_rank);
	int differs = agree_diff(ref, mine, rec.diff, sizeof(rec.diff), rec.keys, sizeof(rec.keys)) > 0;
	int outcome = dist_agree(d, differs ? STATUS_BAD_INPUT : STATUS_OK, NULL);

	if (d->rank == 0)
		all = xcalloc((size_t)d->size, sizeof(*all));
	dist_gather(d, &rec, sizeof(rec), all, 0, "start-up check");
	if (d->rank == 0) {
		for (int i = 0; i < d->size; i++)
			record_terminate(&all[i]);
		print_placement(all, d->size, !strcmp(backend_name(be), "cuda"));
		if (outcome)
			differing = report_differences(all, d->size, keys, sizeof(keys), note, sizeof(note));
		fflush(stderr);
	}
	if (outcome) {
		dist_bcast(d, note, sizeof(note), 0, "start-up check");
		note[sizeof(note) - 1] = '\0';
		if (d->rank == 0)
			status_fail(msg, msglen, STATUS_BAD_INPUT,
				    "start-up check failed: %d of %d ranks differ from rank 0 in %s (values "
				    "above); every rank exits with status 2. Give every rank the same flags, "
				    "the same data files and the same build.",
				    differing, d->size, keys);
		else if (differs)
			status_fail(msg, msglen, STATUS_BAD_INPUT,
				    "rank %d on %s: start-up check failed: this rank differs from rank 0 in %s "
				    "(rank 0 prints the values); every rank exits with status 2",
				    d->rank, d->host, rec.keys);
		else
			status_fail(msg, msglen, STATUS_BAD_INPUT,
				    "rank %d on %s: start-up check failed: stopping because %s; every rank "
				    "exits with status 2",
				    d->rank, d->host, note);
	}
	free(all);
	free(mine);
	return outcome ? STATUS_BAD_INPUT : STATUS_OK;
}
