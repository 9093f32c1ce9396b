/*
 * checkpoint.c - safetensors checkpoints: see include/checkpoint.h for the
 * format, the guarantees and the API.
 *
 * Reading is split in three so that each kind of failure is told apart:
 *   checkpoint_parse    is this a whole, well-formed checkpoint?  (else CORRUPT:
 *                       --resume DIR falls back to an older one)
 *   checkpoint_compat   was it written by a run this run may continue? (else MISMATCH)
 *   checkpoint_extract  does it hold exactly this model's tensors?     (else MISMATCH)
 * The JSON header is read by a small strict parser for exactly the shape
 * safetensors uses (an object of objects), with every length and count
 * bounded, so no input can make it recurse, overrun or allocate without limit.
 *
 * Tested by tests/test_checkpoint.c (round trips, every malformed case,
 * discovery, pruning) and fuzzed by tests/fuzz/fuzz_checkpoint.c.
 */
#include "io/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/crc32.h"

#define CKPT_PREFIX "ckpt-"
#define CKPT_SUFFIX ".safetensors"
#define CKPT_CHECKSUM_KEY "checksum"
#define CKPT_CHECKSUM_TAG "crc32:"
#define CKPT_DIGITS 8

static void set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int host_is_little_endian(void)
{
	const uint16_t one = 1;
	return *(const uint8_t *)&one == 1;
}

/* ---- configuration and position ------------------------------------------- */

void checkpoint_info_from_config(struct checkpoint_info *info, const struct train_config *c,
				 int ranks, int examples, uint32_t train_crc32)
{
	memset(info, 0, sizeof(*info));
	info->model = c->model;
	if (c->model == MODEL_MLP) {
		info->n_hidden = c->n_hidden;
		for (int i = 0; i < c->n_hidden && i < CONFIG_MAX_HIDDEN; i++)
			info->hidden[i] = c->hidden[i];
	}
	info->seed = c->seed;
	info->lr = c->lr;
	info->momentum = c->momentum;
	info->lr_schedule = c->lr_schedule;
	info->warmup_steps = c->warmup_steps;
	info->grad_reduce = c->grad_reduce;
	info->drop_last = c->drop_last;
	info->ranks = ranks;
	info->batch_size = c->batch_size;
	info->examples = examples;
	info->train_crc32 = train_crc32;
	info->epochs = c->epochs;
}

void checkpoint_info_set_position(struct checkpoint_info *info, long long global_step,
				  int steps_per_epoch)
{
	long long done = global_step - 1; /* index of the last completed step */
	info->steps_per_epoch = steps_per_epoch;
	info->global_step = global_step;
	info->epoch = (int)(done / steps_per_epoch);
	info->step = (int)(done % steps_per_epoch);
	info->next_epoch = (int)(global_step / steps_per_epoch);
	info->next_step = (int)(global_step % steps_per_epoch);
	info->sampler_offset = (long long)info->next_step * info->ranks * info->batch_size;
}

void checkpoint_file_name(int epoch, long long global_step, char *buf, size_t len)
{
	snprintf(buf, len, CKPT_PREFIX "%d-%lld" CKPT_SUFFIX, epoch, global_step);
}

static void hidden_text(const struct checkpoint_info *info, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < info->n_hidden && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "", info->hidden[i]);
}

/* ---- writing -------------------------------------------------------------- */

/* A growing text buffer; oom is sticky. */
struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sbuf_add(struct sbuf *s, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

static void sbuf_add(struct sbuf *s, const char *fmt, ...)
{
	va_list ap;
	if (s->oom)
		return;
	for (;;) {
		size_t room = s->cap - s->len;
		va_start(ap, fmt);
		int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			s->oom = 1;
			return;
		}
		if (s->p && (size_t)n < room) {
			s->len += (size_t)n;
			return;
		}
		size_t cap = s->cap ? s->cap * 2 : 4096;
		while (cap < s->len + (size_t)n + 1)
			cap *= 2;
		char *q = realloc(s->p, cap);
		if (!q) {
			s->oom = 1;
			return;
		}
		s->p = q;
		s->cap = cap;
	}
}

/* A JSON string of plain text (our values: printable ASCII; anything else escaped). */
static void sbuf_json_string(struct sbuf *s, const char *v)
{
	sbuf_add(s, "\"");
	for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
		if (*c == '"' || *c == '\\')
			sbuf_add(s, "\\%c", *c);
		else if (*c < 0x20 || *c >= 0x7f)
			sbuf_add(s, "\\u%04x", *c);
		else
			sbuf_add(s, "%c", *c);
	}
	sbuf_add(s, "\"");
}

static void sbuf_meta(struct sbuf *s, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

static void sbuf_meta(struct sbuf *s, const char *key, const char *fmt, ...)
{
	char v[CHECKPOINT_VALUE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	sbuf_add(s, ",");
	sbuf_json_string(s, key);
	sbuf_add(s, ":");
	sbuf_json_string(s, v);
}

/* The tensors of a model, in file order: parameters, then the velocity. */
struct tensor_ref {
	char name[CHECKPOINT_NAME_MAX];
	int ndim;
	uint64_t shape[4];
	size_t offset, count; /* in floats, within params or velocity */
	int velocity;
};

#define CKPT_MODEL_TENSORS (4 * MODEL_MAX_LAYERS)

static int model_tensors(const struct model *m, struct tensor_ref *t)
{
	int n = 0, per = model_n_tensors(m);
	for (int opt = 0; opt < 2; opt++)
		for (int i = 0; i < per; i++) {
			struct model_tensor mt;
			model_tensor(m, i, &mt);
			snprintf(t[n].name, sizeof(t[n].name), "%s%s", opt ? "optimizer." : "", mt.name);
			t[n].velocity = opt;
			t[n].ndim = mt.ndim;
			for (int d = 0; d < 4; d++)
				t[n].shape[d] = d < mt.ndim ? (uint64_t)mt.shape[d] : 0;
			t[n].offset = mt.offset;
			t[n].count = mt.count;
			n++;
		}
	return n;
}

/* "a,b,..." of a shape, with sep between the sizes. */
static void shape_text(const uint64_t *shape, int ndim, const char *sep, char *buf, size_t len)
{
	size_t u = 0;
	buf[0] = '\0';
	for (int d = 0; d < ndim && u < len; d++)
		u += (size_t)snprintf(buf + u, len - u, "%s%llu", d ? sep : "",
				      (unsigned long long)shape[d]);
}

static void store_floats_le(uint8_t *dst, const float *src, size_t n)
{
	if (host_is_little_endian()) {
		memcpy(dst, src, n * sizeof(float));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &src[i], 4);
		dst[4 * i + 0] = (uint8_t)u;
		dst[4 * i + 1] = (uint8_t)(u >> 8);
		dst[4 * i + 2] = (uint8_t)(u >> 16);
		dst[4 * i + 3] = (uint8_t)(u >> 24);
	}
}

static void load_floats_le(float *dst, const uint8_t *src, size_t n)
{
	if (host_is_little_endian()) {
		memcpy(dst, src, n * sizeof(float));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
			     (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
		memcpy(&dst[i], &u, 4);
	}
}

int checkpoint_encode(const struct model *m, const struct checkpoint_info *info,
		      const float *params, const float *velocity, uint8_t **buf, size_t *len)
{
	struct tensor_ref t[CKPT_MODEL_TENSORS];
	int nt = model_tensors(m, t);
	struct sbuf s = {0};
	char hidden[128];
	hidden_text(info, hidden, sizeof(hidden));

	sbuf_add(&s, "{\"__metadata__\":{\"format\":\"%s\"", CHECKPOINT_FORMAT);
	sbuf_meta(&s, "version", "%s", MNIST_DDP_VERSION);
	sbuf_meta(&s, "epoch", "%d", info->epoch);
	sbuf_meta(&s, "step", "%d", info->step);
	sbuf_meta(&s, "global_step", "%lld", info->global_step);
	sbuf_meta(&s, "next_epoch", "%d", info->next_epoch);
	sbuf_meta(&s, "next_step", "%d", info->next_step);
	sbuf_meta(&s, "sampler_offset", "%lld", info->sampler_offset);
	sbuf_meta(&s, "steps_per_epoch", "%d", info->steps_per_epoch);
	sbuf_meta(&s, "model", "%s", model_kind_name(info->model));
	sbuf_meta(&s, "hidden", "%s", hidden);
	sbuf_meta(&s, "seed", "%llu", (unsigned long long)info->seed);
	sbuf_meta(&s, "lr", "%.9g", (double)info->lr);
	sbuf_meta(&s, "momentum", "%.9g", (double)info->momentum);
	sbuf_meta(&s, "lr_schedule", "%s", lr_schedule_name(info->lr_schedule));
	sbuf_meta(&s, "warmup_steps", "%ld", info->warmup_steps);
	sbuf_meta(&s, "grad_reduce", "%s", info->grad_reduce == REDUCE_SUM ? "sum" : "mean");
	sbuf_meta(&s, "drop_last", "%d", info->drop_last ? 1 : 0);
	sbuf_meta(&s, "ranks", "%d", info->ranks);
	sbuf_meta(&s, "batch_size", "%d", info->batch_size);
	sbuf_meta(&s, "global_batch", "%lld", (long long)info->ranks * info->batch_size);
	sbuf_meta(&s, "examples", "%d", info->examples);
	sbuf_meta(&s, "train_crc32", "%08x", (unsigned)info->train_crc32);
	sbuf_meta(&s, "epochs", "%d", info->epochs);
	sbuf_add(&s, ",\"" CKPT_CHECKSUM_KEY "\":\"" CKPT_CHECKSUM_TAG);
	size_t digits_at = s.len; /* within the header text */
	sbuf_add(&s, "00000000\"}");

	uint64_t off = 0;
	for (int i = 0; i < nt; i++) {
		uint64_t bytes = (uint64_t)t[i].count * 4u;
		char shape[96];
		shape_text(t[i].shape, t[i].ndim, ",", shape, sizeof(shape));
		sbuf_add(&s, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%s", t[i].name, shape);
		sbuf_add(&s, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
			 (unsigned long long)(off + bytes));
		off += bytes;
	}
	sbuf_add(&s, "}");
	/* Spaces up to 8-byte alignment of the data, as safetensors writes it. */
	while (!s.oom && (8 + s.len) % 8)
		sbuf_add(&s, " ");
	if (s.oom) {
		free(s.p);
		return -1;
	}

	size_t total = 8 + s.len + (size_t)off;
	uint8_t *img = malloc(total);
	if (!img) {
		free(s.p);
		return -1;
	}
	uint64_t h = s.len;
	for (int i = 0; i < 8; i++)
		img[i] = (uint8_t)(h >> (8 * i));
	memcpy(img + 8, s.p, s.len);
	uint8_t *data = img + 8 + s.len;
	for (int i = 0; i < nt; i++) {
		store_floats_le(data, (t[i].velocity ? velocity : params) + t[i].offset, t[i].count);
		data += t[i].count * 4u;
	}
	/* The checksum covers every byte, its own digits read as '0'. */
	uint32_t crc = crc32_bytes(0, img, total);
	char hex[CKPT_DIGITS + 1];
	snprintf(hex, sizeof(hex), "%08x", (unsigned)crc);
	memcpy(img + 8 + digits_at, hex, CKPT_DIGITS);
	free(s.p);
	*buf = img;
	*len = total;
	return 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

int checkpoint_save(const char *dir, const struct model *m, const struct checkpoint_info *info,
		    const float *params, const float *velocity, char *path, size_t pathlen,
		    char *err, size_t errlen)
{
	char file[64], tmp[CONFIG_PATH_MAX + 96];
	uint8_t *img = NULL;
	size_t len = 0;
	FILE *f = NULL;
	int rc = CHECKPOINT_ERR_IO;

	checkpoint_file_name(info->epoch, info->global_step, file, sizeof(file));
	snprintf(path, pathlen, "%s/%s", dir, file);
	/* Hidden, and not a ckpt- name, so discovery never sees a partial file. */
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, file, (long)getpid());
	if (checkpoint_encode(m, info, params, velocity, &img, &len)) {
		set_err(err, errlen, "%s: out of memory building the checkpoint", path);
		return CHECKPOINT_ERR_IO;
	}
	f = fopen(tmp, "wb");
	if (!f) {
		set_err(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		goto out_free_img;
	}
	if (fwrite(img, 1, len, f) != len || fflush(f) != 0) {
		set_err(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
		goto out_close;
	}
	if (fsync(fileno(f)) != 0) {
		set_err(err, errlen, "%s: fsync failed: %s", tmp, strerror(errno));
		goto out_close;
	}
	if (fclose(f) != 0) {
		f = NULL;
		set_err(err, errlen, "%s: close failed: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	f = NULL;
	if (rename(tmp, path) != 0) {
		set_err(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		goto out_unlink;
	}
	if (fsync_dir(dir) != 0) {
		/* The file is whole and named; only its directory entry may not be durable yet. */
		set_err(err, errlen, "%s: fsync of the directory failed: %s", dir, strerror(errno));
		goto out_free_img;
	}
	rc = CHECKPOINT_OK;
	goto out_free_img;

out_close:
	fclose(f);
out_unlink:
	unlink(tmp);
out_free_img:
	free(img);
	return rc;
}

/* ---- the JSON header -------------------------------------------------------- */

struct meta_entry {
	char key[CHECKPOINT_NAME_MAX];
	char value[CHECKPOINT_VALUE_MAX];
	size_t raw_at, raw_len; /* the value's bytes in the header, between the quotes */
};

struct header {
	struct meta_entry meta[CHECKPOINT_MAX_META];
	int n_meta;
	int have_meta;
};

struct jp {
	const uint8_t *s;
	size_t n, i;
	const char *name;
	char *err;
	size_t errlen;
};

static int jp_fail(struct jp *p, const char *what)
{
	set_err(p->err, p->errlen, "%s: malformed header: %s at byte %zu of the JSON", p->name, what,
		p->i);
	return -1;
}

static void jp_ws(struct jp *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
			       p->s[p->i] == '\r'))
		p->i++;
}

static int jp_peek(struct jp *p)
{
	jp_ws(p);
	return p->i < p->n ? p->s[p->i] : -1;
}

static int jp_expect(struct jp *p, char c)
{
	char what[32];
	if (jp_peek(p) != (unsigned char)c) {
		snprintf(what, sizeof(what), "expected '%c'", c);
		return jp_fail(p, what);
	}
	p->i++;
	return 0;
}

/* After a member: ',' (0, more follow) or `close` (1, done); -1 otherwise. */
static int jp_sep(struct jp *p, char close)
{
	int c = jp_peek(p);
	if (c == ',' || c == (unsigned char)close) {
		p->i++;
		return c != ',';
	}
	return jp_fail(p, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
}

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int jp_hex4(struct jp *p, unsigned *out)
{
	unsigned v = 0;
	if (p->n - p->i < 4)
		return jp_fail(p, "truncated \\u escape");
	for (int k = 0; k < 4; k++) {
		int h = hex_value(p->s[p->i + (size_t)k]);
		if (h < 0)
			return jp_fail(p, "bad \\u escape");
		v = v << 4 | (unsigned)h;
	}
	p->i += 4;
	*out = v;
	return 0;
}

/* Append code point cp as UTF-8; -1 when it does not fit. */
static int utf8_put(char *out, size_t cap, size_t *used, unsigned cp)
{
	uint8_t b[4];
	size_t n;
	if (cp < 0x80) {
		b[0] = (uint8_t)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (uint8_t)(0xc0 | cp >> 6);
		b[1] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (uint8_t)(0xe0 | cp >> 12);
		b[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | cp >> 18);
		b[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		b[3] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (*used + n >= cap)
		return -1;
	memcpy(out + *used, b, n);
	*used += n;
	return 0;
}

/*
 * A JSON string into out (cap bytes, NUL-terminated), decoded. raw_at and
 * raw_len (may be NULL) get the bytes between the quotes. A NUL, a control
 * character or a string longer than cap - 1 bytes is refused.
 */
static int jp_string(struct jp *p, char *out, size_t cap, size_t *raw_at, size_t *raw_len)
{
	size_t used = 0;
	if (jp_expect(p, '"'))
		return -1;
	size_t start = p->i;
	for (;;) {
		if (p->i >= p->n)
			return jp_fail(p, "unterminated string");
		unsigned c = p->s[p->i++];
		if (c == '"')
			break;
		if (c < 0x20)
			return jp_fail(p, "control character in a string");
		if (c == '\\') {
			if (p->i >= p->n)
				return jp_fail(p, "unterminated string");
			c = p->s[p->i++];
			switch (c) {
			case '"':
			case '\\':
			case '/':
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			case 'u': {
				unsigned cp;
				if (jp_hex4(p, &cp))
					return -1;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return jp_fail(p, "lone low surrogate");
				if (cp >= 0xd800 && cp <= 0xdbff) {
					unsigned lo;
					if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
						return jp_fail(p, "lone high surrogate");
					p->i += 2;
					if (jp_hex4(p, &lo))
						return -1;
					if (lo < 0xdc00 || lo > 0xdfff)
						return jp_fail(p, "bad surrogate pair");
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (cp == 0)
					return jp_fail(p, "NUL in a string");
				if (utf8_put(out, cap, &used, cp))
					return jp_fail(p, "string too long");
				continue;
			}
			default:
				return jp_fail(p, "bad escape");
			}
		}
		if (used + 1 >= cap)
			return jp_fail(p, "string too long");
		out[used++] = (char)c;
	}
	out[used] = '\0';
	if (raw_at)
		*raw_at = start;
	if (raw_len)
		*raw_len = p->i - 1 - start;
	return 0;
}

/* A non-negative integer without sign, fraction or exponent, below 2^53. */
static int jp_uint(struct jp *p, uint64_t *out)
{
	uint64_t v = 0;
	int c = jp_peek(p);
	if (c < '0' || c > '9')
		return jp_fail(p, "expected a non-negative integer");
	if (c == '0' && p->i + 1 < p->n && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
		return jp_fail(p, "leading zero");
	while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
		v = v * 10 + (uint64_t)(p->s[p->i] - '0');
		if (v >= ((uint64_t)1 << 53))
			return jp_fail(p, "integer too large");
		p->i++;
	}
	if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
		return jp_fail(p, "expected an integer, not a fraction");
	*out = v;
	return 0;
}

/* [n, n, ...] with at most max entries (exactly max when exact). */
static int jp_uint_array(struct jp *p, uint64_t *v, int max, int exact, int *count)
{
	int n = 0;
	if (jp_expect(p, '['))
		return -1;
	if (jp_peek(p) == ']') {
		p->i++;
	} else {
		for (;;) {
			if (n == max)
				return jp_fail(p, "too many entries in an array");
			if (jp_uint(p, &v[n++]))
				return -1;
			int done = jp_sep(p, ']');
			if (done < 0)
				return -1;
			if (done)
				break;
		}
	}
	if (exact && n != max)
		return jp_fail(p, "wrong number of entries in an array");
	*count = n;
	return 0;
}

static int jp_metadata(struct jp *p, struct header *h)
{
	if (h->have_meta)
		return jp_fail(p, "second __metadata__");
	h->have_meta = 1;
	if (jp_expect(p, '{'))
		return -1;
	if (jp_peek(p) == '}') {
		p->i++;
		return 0;
	}
	for (;;) {
		if (h->n_meta == CHECKPOINT_MAX_META)
			return jp_fail(p, "too many metadata entries");
		struct meta_entry *e = &h->meta[h->n_meta];
		if (jp_string(p, e->key, sizeof(e->key), NULL, NULL) || jp_expect(p, ':'))
			return -1;
		for (int k = 0; k < h->n_meta; k++)
			if (!strcmp(h->meta[k].key, e->key))
				return jp_fail(p, "duplicate metadata key");
		if (jp_peek(p) != '"')
			return jp_fail(p, "metadata values must be strings");
		if (jp_string(p, e->value, sizeof(e->value), &e->raw_at, &e->raw_len))
			return -1;
		h->n_meta++;
		int done = jp_sep(p, '}');
		if (done)
			return done > 0 ? 0 : -1;
	}
}

static int jp_tensor(struct jp *p, struct checkpoint_tensor *t)
{
	int have_dtype = 0, have_shape = 0, have_offsets = 0;
	char key[32];
	if (jp_expect(p, '{'))
		return -1;
	if (jp_peek(p) == '}')
		return jp_fail(p, "empty tensor entry");
	for (;;) {
		if (jp_string(p, key, sizeof(key), NULL, NULL) || jp_expect(p, ':'))
			return -1;
		if (!strcmp(key, "dtype")) {
			if (have_dtype++)
				return jp_fail(p, "duplicate dtype");
			if (jp_string(p, t->dtype, sizeof(t->dtype), NULL, NULL))
				return -1;
		} else if (!strcmp(key, "shape")) {
			if (have_shape++)
				return jp_fail(p, "duplicate shape");
			if (jp_uint_array(p, t->shape, 8, 0, &t->ndim))
				return -1;
		} else if (!strcmp(key, "data_offsets")) {
			uint64_t v[2];
			int n;
			if (have_offsets++)
				return jp_fail(p, "duplicate data_offsets");
			if (jp_uint_array(p, v, 2, 1, &n))
				return -1;
			t->begin = v[0];
			t->end = v[1];
		} else {
			return jp_fail(p, "unknown key in a tensor entry (expected dtype, shape, data_offsets)");
		}
		int done = jp_sep(p, '}');
		if (done < 0)
			return -1;
		if (done)
			break;
	}
	if (!have_dtype || !have_shape || !have_offsets)
		return jp_fail(p, "tensor entry lacks dtype, shape or data_offsets");
	return 0;
}

static int jp_header(struct jp *p, struct header *h, struct checkpoint_view *v)
{
	char key[CHECKPOINT_NAME_MAX];
	if (jp_expect(p, '{'))
		return -1;
	if (jp_peek(p) == '}') {
		p->i++;
	} else {
		for (;;) {
			if (jp_string(p, key, sizeof(key), NULL, NULL) || jp_expect(p, ':'))
				return -1;
			if (!strcmp(key, "__metadata__")) {
				if (jp_metadata(p, h))
					return -1;
			} else {
				if (v->n_tensors == CHECKPOINT_MAX_TENSORS)
					return jp_fail(p, "too many tensors");
				for (int k = 0; k < v->n_tensors; k++)
					if (!strcmp(v->tensors[k].name, key))
						return jp_fail(p, "duplicate tensor name");
				struct checkpoint_tensor *t = &v->tensors[v->n_tensors];
				memset(t, 0, sizeof(*t));
				memcpy(t->name, key, sizeof(t->name));
				if (jp_tensor(p, t))
					return -1;
				v->n_tensors++;
			}
			int done = jp_sep(p, '}');
			if (done < 0)
				return -1;
			if (done)
				break;
		}
	}
	jp_ws(p);
	if (p->i != p->n)
		return jp_fail(p, "bytes after the header's object");
	return 0;
}

/* ---- checks on a parsed header ------------------------------------------------ */

static const struct meta_entry *meta_find(const struct header *h, const char *key)
{
	for (int i = 0; i < h->n_meta; i++)
		if (!strcmp(h->meta[i].key, key))
			return &h->meta[i];
	return NULL;
}

static int cmp_range(const void *a, const void *b)
{
	const struct checkpoint_tensor *x = *(const struct checkpoint_tensor *const *)a;
	const struct checkpoint_tensor *y = *(const struct checkpoint_tensor *const *)b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

/* Each tensor's bytes match its dtype and shape; together they tile the data exactly. */
static int check_ranges(const struct checkpoint_view *v, const char *name, char *err,
			size_t errlen)
{
	const struct checkpoint_tensor *order[CHECKPOINT_MAX_TENSORS];
	for (int i = 0; i < v->n_tensors; i++) {
		const struct checkpoint_tensor *t = &v->tensors[i];
		if (strcmp(t->dtype, "F32")) {
			set_err(err, errlen, "%s: tensor %s has dtype %s, expected F32", name, t->name,
				t->dtype);
			return -1;
		}
		if (t->begin > t->end || t->end > v->data_len) {
			set_err(err, errlen,
				"%s: tensor %s has data_offsets [%llu, %llu] outside the %llu data bytes",
				name, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
				(unsigned long long)v->data_len);
			return -1;
		}
		uint64_t elems = 1;
		for (int d = 0; d < t->ndim; d++) {
			if (t->shape[d] != 0 && elems > v->data_len / t->shape[d]) {
				set_err(err, errlen, "%s: tensor %s has a shape larger than the file", name,
					t->name);
				return -1;
			}
			elems *= t->shape[d];
		}
		if (elems > v->data_len / 4 || elems * 4 != t->end - t->begin) {
			set_err(err, errlen,
				"%s: tensor %s: %llu bytes in data_offsets, its F32 shape needs %llu",
				name, t->name, (unsigned long long)(t->end - t->begin),
				(unsigned long long)(elems > v->data_len ? 0 : elems * 4));
			return -1;
		}
		order[i] = t;
	}
	qsort(order, (size_t)v->n_tensors, sizeof(order[0]), cmp_range);
	uint64_t at = 0;
	for (int i = 0; i < v->n_tensors; i++) {
		if (order[i]->begin != at) {
			set_err(err, errlen, "%s: tensor %s starts at data byte %llu, expected %llu (%s)",
				name, order[i]->name, (unsigned long long)order[i]->begin,
				(unsigned long long)at, order[i]->begin < at ? "overlap" : "gap");
			return -1;
		}
		at = order[i]->end;
	}
	if (at != v->data_len) {
		set_err(err, errlen, "%s: the tensors cover %llu of the %llu data bytes", name,
			(unsigned long long)at, (unsigned long long)v->data_len);
		return -1;
	}
	return 0;
}

static int check_checksum(const uint8_t *buf, size_t len, const struct header *h,
			  const char *name, char *err, size_t errlen)
{
	const struct meta_entry *e = meta_find(h, CKPT_CHECKSUM_KEY);
	size_t tag = strlen(CKPT_CHECKSUM_TAG);
	if (!e) {
		set_err(err, errlen, "%s: metadata lacks \"" CKPT_CHECKSUM_KEY "\"", name);
		return -1;
	}
	/* The raw bytes must be the value itself (no escapes) for the digits to be found. */
	if (strlen(e->value) != tag + CKPT_DIGITS || e->raw_len != tag + CKPT_DIGITS ||
	    memcmp(e->value, CKPT_CHECKSUM_TAG, tag)) {
		set_err(err, errlen, "%s: checksum '%s' is not crc32: and 8 hex digits", name, e->value);
		return -1;
	}
	uint32_t want = 0;
	for (size_t k = 0; k < CKPT_DIGITS; k++) {
		int d = hex_value((unsigned char)e->value[tag + k]);
		if (d < 0 || (e->value[tag + k] >= 'A' && e->value[tag + k] <= 'F')) {
			set_err(err, errlen, "%s: checksum '%s' is not crc32: and 8 lowercase hex digits",
				name, e->value);
			return -1;
		}
		want = want << 4 | (uint32_t)d;
	}
	size_t at = 8 + e->raw_at + tag; /* the digits within the file */
	static const uint8_t zeros[CKPT_DIGITS] = {'0', '0', '0', '0', '0', '0', '0', '0'};
	uint32_t crc = crc32_bytes(0, buf, at);
	crc = crc32_bytes(crc, zeros, CKPT_DIGITS);
	crc = crc32_bytes(crc, buf + at + CKPT_DIGITS, len - at - CKPT_DIGITS);
	if (crc != want) {
		set_err(err, errlen,
			"%s: checksum mismatch (file says %08x, contents give %08x): the file is corrupt",
			name, (unsigned)want, (unsigned)crc);
		return -1;
	}
	return 0;
}

/* A whole decimal integer in [lo, hi]. */
static int meta_int(const struct header *h, const char *key, long long lo, long long hi,
		    long long *out, const char *name, char *err, size_t errlen)
{
	const struct meta_entry *e = meta_find(h, key);
	if (!e) {
		set_err(err, errlen, "%s: metadata lacks \"%s\"", name, key);
		return -1;
	}
	const char *s = e->value;
	long long v = 0;
	int neg = *s == '-';
	if (neg)
		s++;
	if (!*s || strlen(s) > 18)
		goto bad;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			goto bad;
		v = v * 10 + (*s - '0');
	}
	if (neg)
		v = -v;
	if (v < lo || v > hi)
		goto bad;
	*out = v;
	return 0;
bad:
	set_err(err, errlen, "%s: metadata \"%s\" is '%s', expected an integer in %lld..%lld", name,
		key, e->value, lo, hi);
	return -1;
}

static int meta_float(const struct header *h, const char *key, float *out, const char *name,
		      char *err, size_t errlen)
{
	const struct meta_entry *e = meta_find(h, key);
	char *end;
	if (!e) {
		set_err(err, errlen, "%s: metadata lacks \"%s\"", name, key);
		return -1;
	}
	errno = 0;
	double v = strtod(e->value, &end);
	if (errno || end == e->value || *end || !isfinite(v) || fabs(v) > 1e30) {
		set_err(err, errlen, "%s: metadata \"%s\" is '%s', expected a finite number", name, key,
			e->value);
		return -1;
	}
	*out = (float)v;
	return 0;
}

static int meta_text(const struct header *h, const char *key, const char **out,
		     const char *name, char *err, size_t errlen)
{
	const struct meta_entry *e = meta_find(h, key);
	if (!e) {
		set_err(err, errlen, "%s: metadata lacks \"%s\"", name, key);
		return -1;
	}
	*out = e->value;
	return 0;
}

static int parse_hidden_list(const char *s, int *hidden, int *n_hidden)
{
	int n = 0;
	if (!*s)
		return -1;
	while (*s) {
		long v = 0;
		int digits = 0;
		while (*s >= '0' && *s <= '9' && digits < 6) {
			v = v * 10 + (*s++ - '0');
			digits++;
		}
		if (!digits || v < 1 || v > 16384 || n == CONFIG_MAX_HIDDEN)
			return -1;
		hidden[n++] = (int)v;
		if (*s == ',' && s[1])
			s++;
		else if (*s)
			return -1;
	}
	*n_hidden = n;
	return 0;
}

/* The metadata into info, each value checked and the position consistent with itself. */
static int meta_info(const struct header *h, struct checkpoint_info *info, const char *name,
		     char *err, size_t errlen)
{
	const char *fmt, *model, *hidden, *reduce, *crc, *sched = "";
	long long v[16];
	memset(info, 0, sizeof(*info));
	if (meta_text(h, "format", &fmt, name, err, errlen))
		return -1;
	if (strcmp(fmt, CHECKPOINT_FORMAT)) {
		set_err(err, errlen, "%s: format '%s', expected '%s'", name, fmt, CHECKPOINT_FORMAT);
		return -1;
	}
	if (meta_int(h, "epoch", 0, 1000000, &v[0], name, err, errlen) ||
	    meta_int(h, "step", 0, 1000000000, &v[1], name, err, errlen) ||
	    meta_int(h, "global_step", 1, (long long)1 << 50, &v[2], name, err, errlen) ||
	    meta_int(h, "next_epoch", 0, 1000001, &v[3], name, err, errlen) ||
	    meta_int(h, "next_step", 0, 1000000000, &v[4], name, err, errlen) ||
	    meta_int(h, "sampler_offset", 0, (long long)1 << 50, &v[5], name, err, errlen) ||
	    meta_int(h, "steps_per_epoch", 1, 1000000000, &v[6], name, err, errlen) ||
	    meta_int(h, "drop_last", 0, 1, &v[7], name, err, errlen) ||
	    meta_int(h, "ranks", 1, 1 << 24, &v[8], name, err, errlen) ||
	    meta_int(h, "batch_size", 1, 65536, &v[9], name, err, errlen) ||
	    meta_int(h, "global_batch", 1, (long long)1 << 40, &v[10], name, err, errlen) ||
	    meta_int(h, "examples", 1, 1000000000, &v[11], name, err, errlen) ||
	    meta_int(h, "epochs", 1, 1000000, &v[12], name, err, errlen) ||
	    meta_float(h, "lr", &info->lr, name, err, errlen) ||
	    meta_float(h, "momentum", &info->momentum, name, err, errlen) ||
	    meta_text(h, "model", &model, name, err, errlen) ||
	    meta_text(h, "hidden", &hidden, name, err, errlen) ||
	    meta_text(h, "grad_reduce", &reduce, name, err, errlen) ||
	    meta_text(h, "train_crc32", &crc, name, err, errlen))
		return -1;
	info->epoch = (int)v[0];
	info->step = (int)v[1];
	info->global_step = v[2];
	info->next_epoch = (int)v[3];
	info->next_step = (int)v[4];
	info->sampler_offset = v[5];
	info->steps_per_epoch = (int)v[6];
	info->drop_last = (int)v[7];
	info->ranks = (int)v[8];
	info->batch_size = (int)v[9];
	info->examples = (int)v[11];
	info->epochs = (int)v[12];

	if (!strcmp(model, "seed"))
		info->model = MODEL_SEED;
	else if (!strcmp(model, "linear"))
		info->model = MODEL_LINEAR;
	else if (!strcmp(model, "mlp"))
		info->model = MODEL_MLP;
	else if (!strcmp(model, "lenet"))
		info->model = MODEL_LENET;
	else {
		set_err(err, errlen, "%s: metadata \"model\" is '%s', expected seed, linear, mlp or lenet",
			name, model);
		return -1;
	}
	/* The schedule: absent from checkpoints written before it existed, which ran at a constant rate. */
	if (meta_find(h, "lr_schedule") &&
	    (meta_text(h, "lr_schedule", &sched, name, err, errlen) ||
	     lr_schedule_parse(sched, &info->lr_schedule))) {
		set_err(err, errlen, "%s: metadata \"lr_schedule\" is '%s', expected constant or cosine",
			name, sched);
		return -1;
	}
	if (meta_find(h, "warmup_steps")) {
		if (meta_int(h, "warmup_steps", 0, 1000000000, &v[13], name, err, errlen))
			return -1;
		info->warmup_steps = (long)v[13];
	}
	if (info->model == MODEL_MLP ? parse_hidden_list(hidden, info->hidden, &info->n_hidden)
				     : *hidden != '\0') {
		set_err(err, errlen, "%s: metadata \"hidden\" is '%s', which does not fit model %s", name,
			hidden, model);
		return -1;
	}
	if (!strcmp(reduce, "mean"))
		info->grad_reduce = REDUCE_MEAN;
	else if (!strcmp(reduce, "sum"))
		info->grad_reduce = REDUCE_SUM;
	else {
		set_err(err, errlen, "%s: metadata \"grad_reduce\" is '%s', expected mean or sum", name,
			reduce);
		return -1;
	}
	{
		char *end;
		errno = 0;
		unsigned long x = strtoul(crc, &end, 16);
		if (strlen(crc) != 8 || errno || *end || x > 0xffffffffUL) {
			set_err(err, errlen, "%s: metadata \"train_crc32\" is '%s', expected 8 hex digits",
				name, crc);
			return -1;
		}
		info->train_crc32 = (uint32_t)x;
	}
	{
		const char *s;
		char *end;
		if (meta_text(h, "seed", &s, name, err, errlen))
			return -1;
		errno = 0;
		unsigned long long x = strtoull(s, &end, 10);
		if (errno || end == s || *end || *s < '0' || *s > '9') {
			set_err(err, errlen, "%s: metadata \"seed\" is '%s', expected an unsigned integer",
				name, s);
			return -1;
		}
		info->seed = x;
	}
	if (info->momentum < 0.0f || info->momentum >= 1.0f || !(info->lr > 0.0f)) {
		set_err(err, errlen, "%s: metadata lr %g / momentum %g out of range", name,
			(double)info->lr, (double)info->momentum);
		return -1;
	}

	/* The position must agree with itself. */
	long long spe = info->steps_per_epoch;
	long long nxt = info->global_step;
	if (v[10] != (long long)info->ranks * info->batch_size || info->step >= spe ||
	    info->global_step != (long long)info->epoch * spe + info->step + 1 ||
	    info->next_epoch != nxt / spe || info->next_step != nxt % spe ||
	    info->next_step > ((long long)1 << 50) / v[10] ||
	    info->sampler_offset != (long long)info->next_step * v[10] ||
	    info->next_epoch > info->epochs ||
	    (info->next_epoch == info->epochs && info->next_step > 0)) {
		set_err(err, errlen,
			"%s: metadata position is inconsistent (epoch %d step %d global_step %lld "
			"next %d/%d sampler_offset %lld, %d steps per epoch, global batch %lld, "
			"%d epochs)",
			name, info->epoch, info->step, info->global_step, info->next_epoch,
			info->next_step, info->sampler_offset, info->steps_per_epoch, v[10],
			info->epochs);
		return -1;
	}
	return 0;
}

int checkpoint_parse(const uint8_t *buf, size_t len, const char *name,
		     struct checkpoint_info *info, struct checkpoint_view *view, char *err,
		     size_t errlen)
{
	struct header *h;
	int rc = CHECKPOINT_ERR_CORRUPT;
	if (len < 8) {
		set_err(err, errlen, "%s: truncated: %zu bytes, shorter than the 8-byte header length",
			name, len);
		return CHECKPOINT_ERR_CORRUPT;
	}
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	if (hlen < 2 || hlen > CHECKPOINT_MAX_HEADER) {
		set_err(err, errlen, "%s: header length %llu is outside 2..%llu", name,
			(unsigned long long)hlen, (unsigned long long)CHECKPOINT_MAX_HEADER);
		return CHECKPOINT_ERR_CORRUPT;
	}
	if (hlen > len - 8) {
		set_err(err, errlen, "%s: truncated: %zu bytes, the header alone needs %llu", name, len,
			(unsigned long long)(hlen + 8));
		return CHECKPOINT_ERR_CORRUPT;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		set_err(err, errlen, "%s: out of memory", name);
		return CHECKPOINT_ERR_IO;
	}
	memset(view, 0, sizeof(*view));
	view->data = buf + 8 + hlen;
	view->data_len = len - 8 - hlen;
	struct jp p = {.s = buf + 8, .n = (size_t)hlen, .name = name, .err = err, .errlen = errlen};
	if (jp_header(&p, h, view))
		goto out;
	if (!h->have_meta) {
		set_err(err, errlen, "%s: header has no __metadata__ (not an mnist-ddp checkpoint)", name);
		goto out;
	}
	/* The size check first: a truncated file says so rather than "checksum mismatch". */
	uint64_t need = 0;
	for (int i = 0; i < view->n_tensors; i++)
		if (view->tensors[i].end > need)
			need = view->tensors[i].end;
	if (need > view->data_len) {
		set_err(err, errlen, "%s: truncated: %zu bytes, the header describes %llu", name, len,
			(unsigned long long)(8 + hlen + need));
		goto out;
	}
	if (check_ranges(view, name, err, errlen) || check_checksum(buf, len, h, name, err, errlen) ||
	    meta_info(h, info, name, err, errlen))
		goto out;
	rc = CHECKPOINT_OK;
out:
	free(h);
	return rc;
}

int checkpoint_extract(const struct checkpoint_view *view, const struct model *m,
		       const char *name, float *params, float *velocity, char *err,
		       size_t errlen)
{
	struct tensor_ref t[CKPT_MODEL_TENSORS];
	int nt = model_tensors(m, t);
	int used[CHECKPOINT_MAX_TENSORS] = {0};
	const struct checkpoint_tensor *found[CKPT_MODEL_TENSORS];
	for (int i = 0; i < nt; i++) {
		found[i] = NULL;
		for (int k = 0; k < view->n_tensors; k++)
			if (!strcmp(view->tensors[k].name, t[i].name)) {
				found[i] = &view->tensors[k];
				used[k] = 1;
			}
		if (!found[i]) {
			set_err(err, errlen, "%s: no tensor %s, which this model has", name, t[i].name);
			return CHECKPOINT_ERR_MISMATCH;
		}
		const struct checkpoint_tensor *f = found[i];
		int same = f->ndim == t[i].ndim && !strcmp(f->dtype, "F32");
		for (int d = 0; same && d < t[i].ndim; d++)
			same = f->shape[d] == t[i].shape[d];
		if (!same) {
			char want[96], got[192];
			shape_text(t[i].shape, t[i].ndim, ", ", want, sizeof(want));
			shape_text(f->shape, f->ndim, ", ", got, sizeof(got));
			set_err(err, errlen, "%s: tensor %s is %s [%s], this model has F32 [%s]", name,
				t[i].name, f->dtype, got, want);
			return CHECKPOINT_ERR_MISMATCH;
		}
	}
	for (int k = 0; k < view->n_tensors; k++)
		if (!used[k]) {
			set_err(err, errlen, "%s: tensor %s is not part of this model", name,
				view->tensors[k].name);
			return CHECKPOINT_ERR_MISMATCH;
		}
	for (int i = 0; i < nt; i++)
		load_floats_le((t[i].velocity ? velocity : params) + t[i].offset,
			       view->data + found[i]->begin, t[i].count);
	return CHECKPOINT_OK;
}

/* ---- compatibility -------------------------------------------------------------- */

struct diffs {
	char *buf;
	size_t len, used;
	int n;
};

static void diff_add(struct diffs *d, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

static void diff_add(struct diffs *d, const char *fmt, ...)
{
	va_list ap;
	if (d->used + 3 >= d->len)
		return;
	if (d->n++)
		d->used += (size_t)snprintf(d->buf + d->used, d->len - d->used, "; ");
	if (d->used >= d->len)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(d->buf + d->used, d->len - d->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		d->used += (size_t)n;
	if (d->used > d->len)
		d->used = d->len;
}

int checkpoint_compat(const struct checkpoint_info *ck, const struct checkpoint_info *run,
		      const char *name, char *err, size_t errlen)
{
	char list[1536] = "", a[128], b[128];
	struct diffs d = {.buf = list, .len = sizeof(list)};
	if (ck->model != run->model)
		diff_add(&d, "--model %s in the checkpoint, %s here", model_kind_name(ck->model),
			 model_kind_name(run->model));
	hidden_text(ck, a, sizeof(a));
	hidden_text(run, b, sizeof(b));
	if (ck->model == run->model && strcmp(a, b))
		diff_add(&d, "--hidden %s in the checkpoint, %s here", a, b);
	if (ck->seed != run->seed)
		diff_add(&d, "--seed %llu in the checkpoint, %llu here", (unsigned long long)ck->seed,
			 (unsigned long long)run->seed);
	if (memcmp(&ck->lr, &run->lr, sizeof(float)))
		diff_add(&d, "--lr %.9g in the checkpoint, %.9g here", (double)ck->lr, (double)run->lr);
	if (memcmp(&ck->momentum, &run->momentum, sizeof(float)))
		diff_add(&d, "--momentum %.9g in the checkpoint, %.9g here", (double)ck->momentum,
			 (double)run->momentum);
	if (ck->lr_schedule != run->lr_schedule)
		diff_add(&d, "--lr-schedule %s in the checkpoint, %s here",
			 lr_schedule_name(ck->lr_schedule), lr_schedule_name(run->lr_schedule));
	if (ck->warmup_steps != run->warmup_steps)
		diff_add(&d, "--warmup-steps %ld in the checkpoint, %ld here", ck->warmup_steps,
			 run->warmup_steps);
	if (ck->grad_reduce != run->grad_reduce)
		diff_add(&d, "--grad-reduce %s in the checkpoint, %s here",
			 ck->grad_reduce == REDUCE_SUM ? "sum" : "mean",
			 run->grad_reduce == REDUCE_SUM ? "sum" : "mean");
	if (ck->drop_last != run->drop_last)
		diff_add(&d, "--drop-last %s in the checkpoint, %s here", ck->drop_last ? "on" : "off",
			 run->drop_last ? "on" : "off");
	if (ck->examples != run->examples)
		diff_add(&d, "%d training images in the checkpoint (--limit), %d here", ck->examples,
			 run->examples);
	if (ck->train_crc32 != run->train_crc32)
		diff_add(&d, "training data CRC-32 %08x in the checkpoint, %08x here (a different data set)",
			 (unsigned)ck->train_crc32, (unsigned)run->train_crc32);
	long long gck = (long long)ck->ranks * ck->batch_size;
	long long grun = (long long)run->ranks * run->batch_size;
	if (gck != grun)
		diff_add(&d,
			 "global batch %lld in the checkpoint (%d ranks x --batch-size %d), %lld here "
			 "(%d ranks x %d): the sampler position is a count of global batches, so a "
			 "different rank count needs --batch-size %lld / ranks",
			 gck, ck->ranks, ck->batch_size, grun, run->ranks, run->batch_size, gck);
	else if (ck->ranks != run->ranks && ck->grad_reduce == REDUCE_SUM &&
		 run->grad_reduce == REDUCE_SUM)
		diff_add(&d,
			 "%d ranks in the checkpoint, %d here, with --grad-reduce sum: the sum of the "
			 "ranks' gradients scales with the rank count",
			 ck->ranks, run->ranks);
	else if (d.n == 0 && ck->steps_per_epoch != run->steps_per_epoch)
		diff_add(&d, "%d steps per epoch in the checkpoint, %d here", ck->steps_per_epoch,
			 run->steps_per_epoch);
	/* A cosine schedule spans the whole run: its rates depend on --epochs. */
	if (ck->lr_schedule == LR_COSINE && run->lr_schedule == LR_COSINE && ck->epochs != run->epochs)
		diff_add(&d,
			 "--epochs %d in the checkpoint, %d here, with --lr-schedule cosine: the "
			 "schedule runs over all steps of the run, so the total must stay the same",
			 ck->epochs, run->epochs);
	else if (ck->next_epoch > run->epochs || (ck->next_epoch == run->epochs && ck->next_step > 0))
		diff_add(&d,
			 "--epochs %d is the total, but the checkpoint is already at epoch %d step %d "
			 "(use --epochs %d or more)",
			 run->epochs, ck->epoch, ck->step, ck->epoch + 1);
	if (d.n == 0)
		return CHECKPOINT_OK;
	set_err(err, errlen, "%s does not fit this run: %s", name, list);
	return CHECKPOINT_ERR_MISMATCH;
}

/* ---- files and directories ------------------------------------------------------ */

int checkpoint_load(const char *path, const struct model *m, const struct checkpoint_info *run,
		    struct checkpoint_info *info, float *params, float *velocity, char *err,
		    size_t errlen)
{
	struct checkpoint_view *view = NULL;
	uint8_t *buf = NULL;
	struct stat st;
	int rc = CHECKPOINT_ERR_IO;
	FILE *f = fopen(path, "rb");
	if (!f) {
		set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return CHECKPOINT_ERR_IO;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		set_err(err, errlen, "%s: not a regular file", path);
		goto out_close;
	}
	/* Never read more than this model's checkpoint can be. */
	uint64_t limit = 8 + CHECKPOINT_MAX_HEADER + (uint64_t)m->n_params * 8u;
	if ((uint64_t)st.st_size > limit) {
		set_err(err, errlen, "%s: %lld bytes, more than a checkpoint of this model can be (%llu)",
			path, (long long)st.st_size, (unsigned long long)limit);
		rc = CHECKPOINT_ERR_MISMATCH;
		goto out_close;
	}
	size_t len = (size_t)st.st_size;
	buf = malloc(len ? len : 1);
	view = malloc(sizeof(*view));
	if (!buf || !view) {
		set_err(err, errlen, "%s: out of memory reading %zu bytes", path, len);
		goto out_free;
	}
	if (fread(buf, 1, len, f) != len) {
		set_err(err, errlen, "%s: read failed: %s", path, ferror(f) ? strerror(errno) : "short read");
		goto out_free;
	}
	rc = checkpoint_parse(buf, len, path, info, view, err, errlen);
	if (rc == CHECKPOINT_OK)
		rc = checkpoint_compat(info, run, path, err, errlen);
	if (rc == CHECKPOINT_OK)
		rc = checkpoint_extract(view, m, path, params, velocity, err, errlen);
out_free:
	free(view);
	free(buf);
out_close:
	fclose(f);
	return rc;
}

int checkpoint_parse_file_name(const char *file, int *epoch, long long *global_step)
{
	const char *s = file;
	long long v[2] = {0, 0};
	if (strncmp(s, CKPT_PREFIX, strlen(CKPT_PREFIX)))
		return -1;
	s += strlen(CKPT_PREFIX);
	for (int k = 0; k < 2; k++) {
		int digits = 0;
		if (*s == '0' && s[1] >= '0' && s[1] <= '9')
			return -1;
		while (*s >= '0' && *s <= '9') {
			if (++digits > 15)
				return -1;
			v[k] = v[k] * 10 + (*s++ - '0');
		}
		if (!digits)
			return -1;
		if (k == 0 && *s++ != '-')
			return -1;
	}
	if (strcmp(s, CKPT_SUFFIX) || v[0] > 1000000 || v[1] < 1)
		return -1;
	*epoch = (int)v[0];
	*global_step = v[1];
	return 0;
}

static int cmp_newest(const void *a, const void *b)
{
	const struct checkpoint_entry *x = a, *y = b;
	if (x->global_step != y->global_step)
		return x->global_step > y->global_step ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch > y->epoch ? -1 : 1;
	return strcmp(x->file, y->file);
}

int checkpoint_list(const char *dir, struct checkpoint_entry **out, char *err, size_t errlen)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	struct checkpoint_entry *list = NULL;
	int n = 0, cap = 0;
	if (!dp) {
		set_err(err, errlen, "%s: cannot open directory: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(dp))) {
		int epoch;
		long long gs;
		if (strlen(de->d_name) >= sizeof(list[0].file) ||
		    checkpoint_parse_file_name(de->d_name, &epoch, &gs))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct checkpoint_entry *bigger = realloc(list, (size_t)cap * sizeof(*list));
			if (!bigger) {
				free(list);
				closedir(dp);
				set_err(err, errlen, "%s: out of memory listing checkpoints", dir);
				return -1;
			}
			list = bigger;
		}
		list[n].epoch = epoch;
		list[n].global_step = gs;
		snprintf(list[n].file, sizeof(list[n].file), "%s", de->d_name);
		n++;
	}
	closedir(dp);
	if (n)
		qsort(list, (size_t)n, sizeof(*list), cmp_newest);
	*out = list;
	return n;
}

int checkpoint_resume(const char *path, const struct model *m, const struct checkpoint_info *run,
		      struct checkpoint_info *info, float *params, float *velocity, char *used,
		      size_t usedlen, FILE *warn, char *err, size_t errlen)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return CHECKPOINT_ERR_IO;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(used, usedlen, "%s", path);
		return checkpoint_load(path, m, run, info, params, velocity, err, errlen);
	}
	struct checkpoint_entry *list = NULL;
	int n = checkpoint_list(path, &list, err, errlen);
	if (n < 0)
		return CHECKPOINT_ERR_IO;
	if (n == 0) {
		free(list);
		set_err(err, errlen, "%s: no checkpoint (ckpt-<epoch>-<global step>.safetensors) in this directory",
			path);
		return CHECKPOINT_ERR_IO;
	}
	int rc = CHECKPOINT_ERR_CORRUPT;
	for (int i = 0; i < n; i++) {
		char file[CONFIG_PATH_MAX + 80], why[1024];
		snprintf(file, sizeof(file), "%s/%s", path, list[i].file);
		rc = checkpoint_load(file, m, run, info, params, velocity, why, sizeof(why));
		if (rc == CHECKPOINT_OK) {
			snprintf(used, usedlen, "%s", file);
			break;
		}
		if (rc == CHECKPOINT_ERR_MISMATCH) {
			set_err(err, errlen, "%s", why);
			break;
		}
		if (warn) {
			fprintf(warn, "mnist-train: warning: skipping checkpoint %s: %s; %s\n", file, why,
				i + 1 < n ? "falling back to the previous one" : "no older checkpoint left");
			fflush(warn);
		}
		if (i + 1 == n)
			set_err(err, errlen, "%s: no valid checkpoint among the %d found (see the warnings)",
				path, n);
	}
	free(list);
	return rc;
}

int checkpoint_prune(const char *dir, long long global_step, int keep, char *err, size_t errlen)
{
	struct checkpoint_entry *list = NULL;
	int removed = 0, kept = 0;
	if (keep <= 0)
		return 0;
	int n = checkpoint_list(dir, &list, err, errlen);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (list[i].global_step > global_step)
			continue; /* from a run that went further; not ours to judge */
		if (kept < keep) {
			kept++;
			continue;
		}
		char file[CONFIG_PATH_MAX + 80];
		snprintf(file, sizeof(file), "%s/%s", dir, list[i].file);
		if (unlink(file) != 0 && errno != ENOENT) {
			set_err(err, errlen, "%s: cannot delete: %s", file, strerror(errno));
			free(list);
			return -1;
		}
		removed++;
	}
	free(list);
	return removed;
}

int checkpoint_prepare_dir(const char *dir, char *err, size_t errlen)
{
	char buf[CONFIG_PATH_MAX];
	struct stat st;
	if (!*dir || strlen(dir) >= sizeof(buf)) {
		set_err(err, errlen, "--checkpoint-dir: empty or too long a path");
		return -1;
	}
	strcpy(buf, dir);
	/* mkdir -p: each parent, then the directory itself. */
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
			set_err(err, errlen, "--checkpoint-dir %s: cannot create %s: %s", dir, buf,
				strerror(errno));
			return -1;
		}
		*s = '/';
	}
	if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
		set_err(err, errlen, "--checkpoint-dir %s: cannot create it: %s", dir, strerror(errno));
		return -1;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		set_err(err, errlen, "--checkpoint-dir %s: not a directory", dir);
		return -1;
	}
	char probe[CONFIG_PATH_MAX + 64];
	snprintf(probe, sizeof(probe), "%s/.ckpt-probe.%ld", dir, (long)getpid());
	int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		set_err(err, errlen, "--checkpoint-dir %s: cannot create files in it: %s", dir,
			strerror(errno));
		return -1;
	}
	close(fd);
	unlink(probe);
	/* Temporary files of a writer that died mid-save: no writer of this run exists yet. */
	DIR *dp = opendir(dir);
	struct dirent *de;
	while (dp && (de = readdir(dp))) {
		if (strncmp(de->d_name, "." CKPT_PREFIX, strlen("." CKPT_PREFIX)) ||
		    !strstr(de->d_name, CKPT_SUFFIX ".tmp."))
			continue;
		snprintf(probe, sizeof(probe), "%s/%s", dir, de->d_name);
		unlink(probe);
	}
	if (dp)
		closedir(dp);
	return 0;
}
