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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

#define AGREE_NOTE_BYTES 512 /* rank 0's word to the ranks on a mismatch */
#define AGREE_LIST_HOSTS 4   /* hosts named in one line before "..." */

/* What each rank sends rank 0: characters only, so it is laid out alike in every build. */
struct agree_record {
	char host[256];
	char device[256]; /* the backend's: "cpu ISA (OpenBLAS CORE, N threads)", or "cuda:ORDINAL NAME" */
	char keys[256];   /* the keys that differ from rank 0's, "" when none */
	char diff[1280];  /* key=value (rank 0: value), ... */
};
_Static_assert(sizeof(struct agree_record) == 2048, "the record is part of the wire format");

/* Append item (n bytes) to a ", "-separated list unless it is there already. */
static void list_add(struct text *t, const char *item, size_t n)
{
	for (const char *p = t->buf; *p; p += strspn(p, ", ")) {
		size_t k = strcspn(p, ",");
		if (k == n && !memcmp(p, item, n))
			return;
		p += k;
	}
	text_add(t, "%s%.*s", t->used ? ", " : "", (int)n, item);
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
	snprintf(value, sizeof(value), "%d", train ? train->count : 0);
	put(&t, "train_images", train ? value : "none");
	snprintf(value, sizeof(value), "%08x", train ? (unsigned)train->checksum : 0u);
	put(&t, "train_crc32", train ? value : "none");
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

/*
 * The ranks of list[from..n) not taken yet whose text at `off` (a field of
 * the record) equals list[from]'s, in rank order: into group, and taken.
 */
static int take_group(const struct agree_record *all, const int *list, int n, int from,
		      size_t off, char *taken, int *group)
{
	const char *want = (const char *)&all[list[from]] + off;
	int k = 0;
	for (int i = from; i < n; i++)
		if (!taken[list[i]] && !strcmp((const char *)&all[list[i]] + off, want)) {
			taken[list[i]] = 1;
			group[k++] = list[i];
		}
	return k;
}

/* The distinct hosts of a group of ranks, the first AGREE_LIST_HOSTS of them named. */
static void hosts_text(struct text *t, const struct agree_record *all, const int *group, int n)
{
	int named = 0;
	for (int k = 0; k < n; k++) {
		int seen = 0;
		for (int j = 0; j < k && !seen; j++)
			seen = !strcmp(all[group[j]].host, all[group[k]].host);
		if (seen)
			continue;
		if (named++ == AGREE_LIST_HOSTS) {
			text_add(t, ", ...");
			break;
		}
		text_add(t, "%s%s", named > 1 ? ", " : "", all[group[k]].host);
	}
}

/* One stderr line per host, hosts in the order of their lowest rank. */
static void print_placement(const struct agree_record *all, int size, int gpu)
{
	const size_t host = offsetof(struct agree_record, host);
	int *list = xcalloc(2 * (size_t)size, sizeof(*list)), *group = list + size;
	char *taken = xcalloc((size_t)size, 1);
	int hosts = 0;
	for (int i = 0; i < size; i++)
		list[i] = i;
	for (int i = 0; i < size; i++)
		hosts += !taken[i] && take_group(all, list, size, i, host, taken, group);
	fprintf(stderr, "mnist-train: placement: %d rank%s on %d host%s\n", size, size == 1 ? "" : "s",
		hosts, hosts == 1 ? "" : "s");
	memset(taken, 0, (size_t)size);
	for (int i = 0; i < size; i++) {
		if (taken[i])
			continue;
		int n = take_group(all, list, size, i, host, taken, group), same_device = 1;
		for (int k = 0; k < n; k++)
			same_device &= !strcmp(all[group[k]].device, all[i].device);
		char line[2048];
		struct text t;
		text_init(&t, line, sizeof(line));
		text_add(&t, "%s: rank%s ", all[i].host, n == 1 ? "" : "s");
		ranks_text(&t, group, n);
		if (same_device && !gpu)
			text_add(&t, " on %s", all[i].device);
		else /* one device per rank: the one each uses, as that rank numbers its GPUs */
			for (int k = 0; k < n; k++)
				text_add(&t, "%s rank %d on %s", k ? "," : ";", group[k], all[group[k]].device);
		fprintf(stderr, "mnist-train: placement: %s\n", line);
	}
	free(taken);
	free(list);
}

/*
 * One stderr line per group of ranks with the same differences, naming their
 * hosts. keys gets every differing key, note "rank(s) R differ(s) from rank 0
 * in KEYS". Returns how many ranks differ.
 */
static int report_differences(const struct agree_record *all, int size, char *keys,
			      size_t keyslen, char *note, size_t notelen)
{
	int *bad = xcalloc(2 * (size_t)size, sizeof(*bad)), *group = bad + size;
	char *taken = xcalloc((size_t)size, 1);
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
			k += n + strspn(k + n, ", ");
		}
	}
	for (int g = 0; g < differing; g++) {
		if (taken[bad[g]])
			continue;
		char hosts[320], line[256];
		struct text ht, lt;
		text_init(&ht, hosts, sizeof(hosts));
		text_init(&lt, line, sizeof(line));
		int n = take_group(all, bad, differing, g, offsetof(struct agree_record, diff), taken, group);
		hosts_text(&ht, all, group, n);
		ranks_text(&lt, group, n);
		fprintf(stderr, "mnist-train: start-up check: rank%s %s on %s differ%s from rank 0 on %s: %s\n",
			n == 1 ? "" : "s", line, hosts, n == 1 ? "s" : "", all[0].host, all[group[0]].diff);
	}
	text_add(&nt, "rank%s ", differing == 1 ? "" : "s");
	ranks_text(&nt, bad, differing);
	text_add(&nt, " differ%s from rank 0 in %s", differing == 1 ? "s" : "", keys);
	free(taken);
	free(bad);
	return differing;
}

/* ---- the collective ------------------------------------------------------------- */

/* A record from another rank: every field a string, whatever arrived. */
static void record_terminate(struct agree_record *r)
{
	r->host[sizeof(r->host) - 1] = '\0';
	r->device[sizeof(r->device) - 1] = '\0';
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
