/*
 * checkpoint.c - the safetensors checkpoint format: encoding, and reading in
 * three steps that tell each kind of failure apart (io/checkpoint.h has the
 * format and the guarantees; io/checkpoint_dir.c the files and directories):
 *   checkpoint_parse    is this a whole, well-formed checkpoint?  (else corrupt:
 *                       --resume DIR falls back to an older one)
 *   checkpoint_compat   was it written by a run this run may continue? (else another run's)
 *   checkpoint_extract  does it hold exactly this model's tensors?     (else another model's)
 * The JSON header is read and written by jansson, which refuses duplicate
 * keys and bounds its nesting; this file checks the shape safetensors uses
 * (an object of objects) with every count and length bounded. The metadata's
 * settings are written and read through the settings table (config.h).
 *
 * Tested by tests/test_checkpoint.c (round trips, every malformed case,
 * discovery, pruning) and fuzzed by tests/fuzz/fuzz_checkpoint.c.
 */
#include "io/checkpoint.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/crc32.h"
#include "text.h"
#include "train/optim.h"

#define CKPT_CHECKSUM_FIELD "\"checksum\":\"crc32:" /* as the writer writes it */
#define CKPT_DIGITS 8
#define CKPT_INT_LIMIT ((uint64_t)1 << 53) /* integers a JSON reader keeps exact */

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
	info->cfg = *c;
	info->ranks = ranks;
	info->examples = examples;
	info->train_crc32 = train_crc32;
}

struct checkpoint_position checkpoint_position(long long global_step, int steps_per_epoch)
{
	struct checkpoint_position p;
	long long last = global_step - 1; /* index of the last completed step */
	p.epoch = (int)(last / steps_per_epoch);
	p.step = (int)(last % steps_per_epoch);
	p.next_epoch = (int)(global_step / steps_per_epoch);
	p.next_step = (int)(global_step % steps_per_epoch);
	return p;
}

/* ---- writing -------------------------------------------------------------- */

/* Where a tensor's floats come from: the parameters, the optimizer state, or the update count. */
enum tensor_source {
	FROM_PARAMS = 0,
	FROM_STATE,
	FROM_STEP,
};

/* The tensors of a model, in file order: parameters, then the optimizer's state (train/optim.h). */
struct tensor_ref {
	char name[CHECKPOINT_NAME_MAX];
	int ndim;
	uint64_t shape[4];
	size_t offset, count; /* in floats, within params or the state */
	enum tensor_source from;
};

/* At most this many: a weight and a bias per layer, for the parameters and each state, and the step. */
#define CKPT_MODEL_TENSORS (2 * MODEL_MAX_LAYERS * (1 + OPTIM_MAX_STATE) + 1)

static int model_tensors(const struct model *m, enum optimizer_kind opt, struct tensor_ref *t)
{
	struct optim_desc od = optim_desc_of(opt);
	int n = 0, per = model_n_tensors(m);
	for (int set = 0; set <= od.n_state; set++)
		for (int i = 0; i < per; i++) {
			struct model_tensor mt;
			model_tensor_at(m, i, &mt);
			if (set == 0)
				snprintf(t[n].name, sizeof(t[n].name), "%s", mt.name);
			else
				snprintf(t[n].name, sizeof(t[n].name), "optimizer.%s%s", mt.name,
					 od.state_suffix[set - 1]);
			t[n].from = set ? FROM_STATE : FROM_PARAMS;
			t[n].ndim = mt.ndim;
			for (int d = 0; d < 4; d++)
				t[n].shape[d] = d < mt.ndim ? (uint64_t)mt.shape[d] : 0;
			t[n].offset = mt.offset + (set ? (size_t)(set - 1) * m->n_params : 0);
			t[n].count = mt.count;
			n++;
		}
	if (od.counts_steps) {
		memset(&t[n], 0, sizeof(t[n]));
		snprintf(t[n].name, sizeof(t[n].name), "optimizer.step");
		t[n].from = FROM_STEP;
		t[n].count = 1; /* a scalar: shape [] */
		n++;
	}
	return n;
}

/* "[a, b, ...]" of a shape. */
static void shape_text(const uint64_t *shape, int ndim, char *buf, size_t len)
{
	struct text t;
	text_init(&t, buf, len);
	text_add(&t, "[");
	for (int d = 0; d < ndim; d++)
		text_add(&t, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
	text_add(&t, "]");
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

/* meta[key] = printf text; -1 when out of memory. */
static int meta_put(json_t *meta, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

static int meta_put(json_t *meta, const char *key, const char *fmt, ...)
{
	char v[CHECKPOINT_VALUE_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	return json_object_set_new(meta, key, json_string(v));
}

/* The metadata object: format, version, position, settings, run, checksum (zeros). */
static json_t *metadata(const struct checkpoint_info *info)
{
	char key[64], value[CHECKPOINT_VALUE_MAX];
	json_t *meta = json_object();
	int bad = !meta;
	bad = bad || meta_put(meta, "format", "%s", CHECKPOINT_FORMAT) ||
	      meta_put(meta, "version", "%s", MNIST_DDP_VERSION) ||
	      meta_put(meta, "global_step", "%lld", info->global_step) ||
	      meta_put(meta, "steps_per_epoch", "%d", info->steps_per_epoch);
	for (int i = 0; !bad && i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		if (!(s->where & SETTING_CHECKPOINT))
			continue;
		config_key(s, key, sizeof(key));
		config_format(s, &info->cfg, value, sizeof(value));
		bad = meta_put(meta, key, "%s", value);
	}
	bad = bad || meta_put(meta, "ranks", "%d", info->ranks) ||
	      meta_put(meta, "examples", "%d", info->examples) ||
	      meta_put(meta, "train_crc32", "%08x", (unsigned)info->train_crc32) ||
	      meta_put(meta, "checksum", "crc32:00000000");
	if (bad) {
		json_decref(meta);
		return NULL;
	}
	return meta;
}

/* The whole header text (compact JSON), or NULL when out of memory; the caller frees it. */
static char *header_text(const struct checkpoint_info *info, const struct tensor_ref *t, int nt)
{
	json_t *root = json_object();
	json_t *meta = metadata(info);
	char *text = NULL;
	if (!root || !meta || json_object_set_new(root, "__metadata__", meta)) {
		if (!root)
			json_decref(meta);
		goto out;
	}
	json_int_t off = 0;
	for (int i = 0; i < nt; i++) {
		json_int_t bytes = (json_int_t)t[i].count * 4;
		json_t *shape = json_array();
		for (int k = 0; shape && k < t[i].ndim; k++)
			if (json_array_append_new(shape, json_integer((json_int_t)t[i].shape[k]))) {
				json_decref(shape);
				shape = NULL;
			}
		json_t *entry = json_pack("{s:s,s:o,s:[I,I]}", "dtype", "F32", "shape", shape,
					  "data_offsets", off, off + bytes);
		if (!entry || json_object_set_new(root, t[i].name, entry))
			goto out;
		off += bytes;
	}
	text = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
out:
	json_decref(root);
	return text;
}

enum status checkpoint_encode(const struct model *m, const struct checkpoint_info *info,
			      const float *params, const float *state, uint8_t **buf,
			      size_t *len)
{
	struct tensor_ref t[CKPT_MODEL_TENSORS];
	int nt = model_tensors(m, info->cfg.optimizer, t);
	const float step = (float)info->global_step; /* the update count: one per step */
	char *text = header_text(info, t, nt);
	if (!text)
		return STATUS_RUNTIME;
	/* The checksum's digits: the last metadata value, so the only such field. */
	char *digits = strstr(text, CKPT_CHECKSUM_FIELD "00000000\"");
	size_t n = strlen(text);
	size_t hlen = n + (8 - (8 + n) % 8) % 8; /* spaces up to 8-byte alignment of the data */
	size_t data = 0;
	for (int i = 0; i < nt; i++)
		data += t[i].count * 4u;
	size_t total = 8 + hlen + data;
	uint8_t *img = digits ? malloc(total) : NULL;
	if (!img) {
		free(text);
		return STATUS_RUNTIME;
	}
	for (int i = 0; i < 8; i++)
		img[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
	memcpy(img + 8, text, n);
	memset(img + 8 + n, ' ', hlen - n);
	uint8_t *at = img + 8 + hlen;
	for (int i = 0; i < nt; i++) {
		const float *src = t[i].from == FROM_PARAMS ? params : t[i].from == FROM_STATE ? state : &step;
		store_floats_le(at, src + t[i].offset, t[i].count);
		at += t[i].count * 4u;
	}
	/* The checksum covers every byte, its own digits read as '0'. */
	size_t digits_at = 8 + (size_t)(digits - text) + strlen(CKPT_CHECKSUM_FIELD);
	char hex[CKPT_DIGITS + 1];
	snprintf(hex, sizeof(hex), "%08x", (unsigned)crc32_bytes(0, img, total));
	memcpy(img + digits_at, hex, CKPT_DIGITS);
	free(text);
	*buf = img;
	*len = total;
	return STATUS_OK;
}

/* ---- the header ------------------------------------------------------------- */

/* [n, n, ...]: at most max non-negative integers below 2^53. NULL, or what is wrong. */
static const char *read_uints(const json_t *a, uint64_t *v, int max, int *count)
{
	size_t i;
	const json_t *e;
	if (!json_is_array(a))
		return "expected an array of non-negative integers";
	if (json_array_size(a) > (size_t)max)
		return "too many entries in an array";
	json_array_foreach(a, i, e)
	{
		if (json_is_real(e))
			return "expected an integer, not a fraction";
		if (!json_is_integer(e) || json_integer_value(e) < 0)
			return "expected a non-negative integer";
		if ((uint64_t)json_integer_value(e) >= CKPT_INT_LIMIT)
			return "integer too large";
		v[i] = (uint64_t)json_integer_value(e);
	}
	*count = (int)json_array_size(a);
	return NULL;
}

/* One tensor entry: exactly dtype, shape and data_offsets. NULL, or what is wrong. */
static const char *read_tensor(const json_t *e, struct checkpoint_tensor *t)
{
	const char *key, *why;
	const json_t *v;
	uint64_t off[2];
	int n;
	if (!json_is_object(e))
		return "a tensor entry must be an object";
	json_object_foreach((json_t *)e, key, v)
		if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
			return "unknown key in a tensor entry (expected dtype, shape, data_offsets)";
	const json_t *dtype = json_object_get(e, "dtype");
	const json_t *shape = json_object_get(e, "shape");
	const json_t *offsets = json_object_get(e, "data_offsets");
	if (!dtype || !shape || !offsets)
		return "tensor entry lacks dtype, shape or data_offsets";
	if (!json_is_string(dtype) || json_string_length(dtype) >= sizeof(t->dtype))
		return "dtype is not a short string";
	strcpy(t->dtype, json_string_value(dtype));
	if ((why = read_uints(shape, t->shape, 8, &t->ndim)) || (why = read_uints(offsets, off, 2, &n)))
		return why;
	if (n != 2)
		return "data_offsets must hold 2 integers";
	t->begin = off[0];
	t->end = off[1];
	return NULL;
}

/* The tensor table into view and the metadata object into *meta (NULL when absent). */
static enum status read_header(json_t *root, const char *name, struct checkpoint_view *view,
			       json_t **meta, char *err, size_t errlen)
{
	const char *key, *why;
	json_t *v;
	*meta = NULL;
	if (!json_is_object(root))
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: malformed header: expected '{', the header is not a JSON object", name);
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "__metadata__")) {
			if (!json_is_object(v))
				return status_fail(err, errlen, STATUS_BAD_INPUT,
						   "%s: malformed header: __metadata__ is not an object", name);
			*meta = v;
			continue;
		}
		if (view->n_tensors == CHECKPOINT_MAX_TENSORS || strlen(key) >= CHECKPOINT_NAME_MAX)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: malformed header: too many tensors or too long a name (at most "
					   "%d of %d bytes)",
					   name, CHECKPOINT_MAX_TENSORS, CHECKPOINT_NAME_MAX - 1);
		struct checkpoint_tensor *t = &view->tensors[view->n_tensors++];
		memset(t, 0, sizeof(*t));
		strcpy(t->name, key);
		if ((why = read_tensor(v, t)))
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: malformed header: tensor %s: %s", name, t->name, why);
	}
	return STATUS_OK;
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
static enum status check_ranges(const struct checkpoint_view *v, const char *name, char *err,
				size_t errlen)
{
	const struct checkpoint_tensor *order[CHECKPOINT_MAX_TENSORS];
	for (int i = 0; i < v->n_tensors; i++) {
		const struct checkpoint_tensor *t = &v->tensors[i];
		if (strcmp(t->dtype, "F32"))
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s has dtype %s, expected F32", name, t->name,
					   t->dtype);
		if (t->begin > t->end || t->end > v->data_len)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s has data_offsets [%llu, %llu] outside the %llu data bytes",
					   name, t->name, (unsigned long long)t->begin,
					   (unsigned long long)t->end, (unsigned long long)v->data_len);
		uint64_t elems = 1;
		for (int d = 0; d < t->ndim; d++) {
			if (t->shape[d] != 0 && elems > v->data_len / t->shape[d])
				return status_fail(err, errlen, STATUS_BAD_INPUT,
						   "%s: tensor %s has a shape larger than the file", name,
						   t->name);
			elems *= t->shape[d];
		}
		if (elems > v->data_len / 4 || elems * 4 != t->end - t->begin)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s: %llu bytes in data_offsets, its F32 shape needs %llu",
					   name, t->name, (unsigned long long)(t->end - t->begin),
					   (unsigned long long)(elems > v->data_len ? 0 : elems * 4));
		order[i] = t;
	}
	qsort(order, (size_t)v->n_tensors, sizeof(order[0]), cmp_range);
	uint64_t at = 0;
	for (int i = 0; i < v->n_tensors; i++) {
		if (order[i]->begin != at)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s starts at data byte %llu, expected %llu (%s)", name,
					   order[i]->name, (unsigned long long)order[i]->begin,
					   (unsigned long long)at, order[i]->begin < at ? "overlap" : "gap");
		at = order[i]->end;
	}
	if (at != v->data_len)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: the tensors cover %llu of the %llu data bytes", name,
				   (unsigned long long)at, (unsigned long long)v->data_len);
	return STATUS_OK;
}

/* How often needle (n bytes) occurs in hay (len bytes); *at gets the first place. */
static int occurrences(const uint8_t *hay, size_t len, const char *needle, size_t n, size_t *at)
{
	int count = 0;
	for (size_t i = 0; i + n <= len; i++)
		if (hay[i] == (uint8_t)needle[0] && !memcmp(hay + i, needle, n) && count++ == 0)
			*at = i;
	return count;
}

/* The metadata's "checksum" against the CRC-32 of the whole file, its digits read as '0'. */
static enum status check_checksum(const uint8_t *buf, size_t len, size_t hlen, const json_t *meta,
				  const char *name, char *err, size_t errlen)
{
	const json_t *v = json_object_get(meta, "checksum");
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	size_t tag = strlen("crc32:");
	if (!v)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: metadata lacks \"checksum\"", name);
	if (!s || strlen(s) != tag + CKPT_DIGITS || strncmp(s, "crc32:", tag) ||
	    strspn(s + tag, "0123456789abcdef") != CKPT_DIGITS)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: checksum '%s' is not crc32: and 8 lowercase hex digits", name,
				   s ? s : "(not a string)");
	/* The digits' place in the file: the field as the writer writes it, exactly once. */
	char field[64];
	size_t at = 0;
	snprintf(field, sizeof(field), "\"checksum\":\"%s\"", s);
	if (occurrences(buf + 8, hlen, field, strlen(field), &at) != 1)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: the checksum is not written as %s exactly once", name, field);
	uint32_t want = (uint32_t)strtoul(s + tag, NULL, 16);
	size_t digits = 8 + at + strlen(CKPT_CHECKSUM_FIELD);
	static const uint8_t zeros[CKPT_DIGITS] = {'0', '0', '0', '0', '0', '0', '0', '0'};
	uint32_t crc = crc32_bytes(0, buf, digits);
	crc = crc32_bytes(crc, zeros, CKPT_DIGITS);
	crc = crc32_bytes(crc, buf + digits + CKPT_DIGITS, len - digits - CKPT_DIGITS);
	if (crc != want)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: checksum mismatch (file says %08x, contents give %08x): the file is corrupt",
				   name, (unsigned)want, (unsigned)crc);
	return STATUS_OK;
}

/* A metadata string, or NULL with err saying it is missing. */
static const char *meta_text(const json_t *meta, const char *key, const char *name, char *err,
			     size_t errlen)
{
	const char *s = json_string_value(json_object_get(meta, key));
	if (!s)
		status_fail(err, errlen, STATUS_BAD_INPUT, "%s: metadata lacks \"%s\"", name, key);
	return s;
}

/* A whole decimal integer in [lo, hi]. */
static enum status meta_int(const json_t *meta, const char *key, long long lo, long long hi,
			    long long *out, const char *name, char *err, size_t errlen)
{
	const char *s = meta_text(meta, key, name, err, errlen);
	if (!s)
		return STATUS_BAD_INPUT;
	size_t n = strlen(s);
	long long v = 0;
	if (n == 0 || n > 18 || strspn(s, "0123456789") != n || (v = strtoll(s, NULL, 10)) < lo || v > hi)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: metadata \"%s\" is '%s', expected an integer in %lld..%lld", name,
				   key, s, lo, hi);
	*out = v;
	return STATUS_OK;
}

/* The metadata into info: every value checked, the position within the run. */
static enum status meta_info(const json_t *meta, struct checkpoint_info *info, const char *name,
			     char *err, size_t errlen)
{
	const char *key, *s;
	char skey[64], why[512];
	json_t *v;
	long long gs, spe, ranks, examples;
	memset(info, 0, sizeof(*info));
	if (json_object_size(meta) > CHECKPOINT_MAX_META)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: more than %d metadata entries",
				   name, CHECKPOINT_MAX_META);
	json_object_foreach((json_t *)meta, key, v)
		if (!json_is_string(v) || json_string_length(v) >= CHECKPOINT_VALUE_MAX)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: metadata \"%s\": values must be strings (of at most %d bytes)",
					   name, key, CHECKPOINT_VALUE_MAX - 1);
	if (!(s = meta_text(meta, "format", name, err, errlen)))
		return STATUS_BAD_INPUT;
	if (strcmp(s, CHECKPOINT_FORMAT))
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: format '%s', expected '%s'%s", name,
				   s, CHECKPOINT_FORMAT,
				   strcmp(s, "mnist-ddp-checkpoint-1") ? "" : " (a checkpoint of an older build)");
	if (meta_int(meta, "global_step", 1, (long long)1 << 50, &gs, name, err, errlen) ||
	    meta_int(meta, "steps_per_epoch", 1, 1000000000, &spe, name, err, errlen) ||
	    meta_int(meta, "ranks", 1, 1 << 24, &ranks, name, err, errlen) ||
	    meta_int(meta, "examples", 1, 1000000000, &examples, name, err, errlen))
		return STATUS_BAD_INPUT;
	info->global_step = gs;
	info->steps_per_epoch = (int)spe;
	info->ranks = (int)ranks;
	info->examples = (int)examples;
	if (!(s = meta_text(meta, "train_crc32", name, err, errlen)))
		return STATUS_BAD_INPUT;
	if (strlen(s) != 8 || strspn(s, "0123456789abcdefABCDEF") != 8)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: metadata \"train_crc32\" is '%s', expected 8 hex digits", name, s);
	info->train_crc32 = (uint32_t)strtoul(s, NULL, 16);

	/* The settings, in table order (a row's `applies` reads only the rows above it). */
	config_defaults(&info->cfg);
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *row = &config_settings[i];
		if (!(row->where & SETTING_CHECKPOINT))
			continue;
		config_key(row, skey, sizeof(skey));
		if ((row->where & SETTING_NEWER) && !json_object_get(meta, skey))
			continue; /* a checkpoint from before the setting: its default */
		if (!(s = meta_text(meta, skey, name, err, errlen)))
			return STATUS_BAD_INPUT;
		if (row->applies && !row->applies(&info->cfg)) {
			if (*s)
				return status_fail(err, errlen, STATUS_BAD_INPUT,
						   "%s: metadata \"%s\" is '%s' where the setting does not apply "
						   "(expected \"\")",
						   name, skey, s);
			continue;
		}
		if (config_set(row, &info->cfg, s, why, sizeof(why)))
			return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: metadata \"%s\": %s", name,
					   skey, why);
	}
	if (gs > (long long)info->cfg.epochs * spe)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: metadata position is inconsistent: global step %lld is past the "
				   "end of %d epochs of %lld steps",
				   name, gs, info->cfg.epochs, spe);
	return STATUS_OK;
}

enum status checkpoint_parse(const uint8_t *buf, size_t len, const char *name,
			     struct checkpoint_info *info, struct checkpoint_view *view, char *err,
			     size_t errlen)
{
	if (len < 8)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, shorter than the 8-byte header length", name,
				   len);
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	if (hlen < 2 || hlen > CHECKPOINT_MAX_HEADER)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: header length %llu is outside 2..%llu",
				   name, (unsigned long long)hlen,
				   (unsigned long long)CHECKPOINT_MAX_HEADER);
	if (hlen > len - 8)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, the header alone needs %llu", name, len,
				   (unsigned long long)(hlen + 8));
	memset(view, 0, sizeof(*view));
	view->data = buf + 8 + hlen;
	view->data_len = len - 8 - hlen;

	json_error_t je;
	json_t *meta, *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return status_fail(err, errlen,
				   json_error_code(&je) == json_error_out_of_memory ? STATUS_RUNTIME
										   : STATUS_BAD_INPUT,
				   "%s: malformed header: %s at byte %d of the JSON", name, je.text,
				   je.position);
	enum status rc = read_header(root, name, view, &meta, err, errlen);
	if (rc)
		goto out;
	rc = STATUS_BAD_INPUT;
	if (!meta) {
		status_fail(err, errlen, rc, "%s: header has no __metadata__ (not an mnist-ddp checkpoint)",
			    name);
		goto out;
	}
	/* The size check first: a truncated file says so rather than "checksum mismatch". */
	uint64_t need = 0;
	for (int i = 0; i < view->n_tensors; i++)
		if (view->tensors[i].end > need)
			need = view->tensors[i].end;
	if (need > view->data_len) {
		status_fail(err, errlen, rc, "%s: truncated: %zu bytes, the header describes %llu", name,
			    len, (unsigned long long)(8 + hlen + need));
		goto out;
	}
	rc = check_ranges(view, name, err, errlen);
	if (!rc)
		rc = check_checksum(buf, len, (size_t)hlen, meta, name, err, errlen);
	if (!rc)
		rc = meta_info(meta, info, name, err, errlen);
out:
	json_decref(root);
	return rc;
}

/* ---- this model, this run ------------------------------------------------------ */

enum status checkpoint_extract(const struct checkpoint_view *view, const struct model *m,
			       const struct checkpoint_info *info, const char *name, float *params,
			       float *state, char *err, size_t errlen)
{
	struct tensor_ref t[CKPT_MODEL_TENSORS];
	int nt = model_tensors(m, info->cfg.optimizer, t);
	int used[CHECKPOINT_MAX_TENSORS] = {0};
	const struct checkpoint_tensor *found[CKPT_MODEL_TENSORS];
	for (int i = 0; i < nt; i++) {
		found[i] = NULL;
		for (int k = 0; k < view->n_tensors; k++)
			if (!strcmp(view->tensors[k].name, t[i].name)) {
				found[i] = &view->tensors[k];
				used[k] = 1;
			}
		const struct checkpoint_tensor *f = found[i];
		if (!f)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: no tensor %s, which this model and --optimizer %s have", name,
					   t[i].name, optimizer_name(info->cfg.optimizer));
		int same = f->ndim == t[i].ndim && !strcmp(f->dtype, "F32");
		for (int d = 0; same && d < t[i].ndim; d++)
			same = f->shape[d] == t[i].shape[d];
		if (!same) {
			char got[192], want[96];
			shape_text(f->shape, f->ndim, got, sizeof(got));
			shape_text(t[i].shape, t[i].ndim, want, sizeof(want));
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s is %s %s, this model has F32 %s", name, t[i].name,
					   f->dtype, got, want);
		}
	}
	for (int k = 0; k < view->n_tensors; k++)
		if (!used[k])
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s is not part of this model with --optimizer %s", name,
					   view->tensors[k].name, optimizer_name(info->cfg.optimizer));
	for (int i = 0; i < nt; i++) {
		if (t[i].from == FROM_STEP) {
			float step;
			load_floats_le(&step, view->data + found[i]->begin, 1);
			if (step != (float)info->global_step)
				return status_fail(err, errlen, STATUS_BAD_INPUT,
						   "%s: optimizer.step is %g, but the checkpoint is at global "
						   "step %lld (one update per step)",
						   name, (double)step, info->global_step);
			continue;
		}
		load_floats_le((t[i].from == FROM_STATE ? state : params) + t[i].offset,
			       view->data + found[i]->begin, t[i].count);
	}
	return STATUS_OK;
}

/* "; " before every difference but the first. */
static const char *sep(const struct text *t)
{
	return t->used ? "; " : "";
}

enum status checkpoint_compat(const struct checkpoint_info *ck, const struct checkpoint_info *run,
			      const char *name, char *err, size_t errlen)
{
	char list[1536], a[CHECKPOINT_VALUE_MAX], b[CHECKPOINT_VALUE_MAX];
	struct text d;
	text_init(&d, list, sizeof(list));
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		if (!(s->where & SETTING_RESUME))
			continue;
		config_format(s, &ck->cfg, a, sizeof(a));
		config_format(s, &run->cfg, b, sizeof(b));
		/* Not applying on one side: the setting it depends on differs, and is named. */
		if (*a && *b && strcmp(a, b))
			text_add(&d, "%s--%s %s in the checkpoint, %s here", sep(&d), s->flag, a, b);
	}
	if (ck->examples != run->examples)
		text_add(&d, "%s%d training images in the checkpoint (--limit), %d here", sep(&d),
			 ck->examples, run->examples);
	if (ck->train_crc32 != run->train_crc32)
		text_add(&d, "%straining data CRC-32 %08x in the checkpoint, %08x here (a different data set)",
			 sep(&d), (unsigned)ck->train_crc32, (unsigned)run->train_crc32);
	int sum = ck->cfg.grad_reduce == GRAD_REDUCE_SUM && run->cfg.grad_reduce == GRAD_REDUCE_SUM;
	long long gck = (long long)ck->ranks * ck->cfg.batch_size;
	long long grun = (long long)run->ranks * run->cfg.batch_size;
	if (gck != grun)
		text_add(&d,
			 "%sglobal batch %lld in the checkpoint (%d ranks x --batch-size %d), %lld here "
			 "(%d ranks x %d): the sampler position is a count of global batches, so a "
			 "different rank count needs --batch-size %lld / ranks",
			 sep(&d), gck, ck->ranks, ck->cfg.batch_size, grun, run->ranks, run->cfg.batch_size, gck);
	else if (ck->ranks != run->ranks && sum)
		text_add(&d,
			 "%s%d ranks in the checkpoint, %d here, with --grad-reduce sum: the sum of the "
			 "ranks' gradients scales with the rank count",
			 sep(&d), ck->ranks, run->ranks);
	else if (d.used == 0 && ck->steps_per_epoch != run->steps_per_epoch)
		text_add(&d, "%s%d steps per epoch in the checkpoint, %d here", sep(&d),
			 ck->steps_per_epoch, run->steps_per_epoch);
	/* A cosine schedule spans the whole run: its rates depend on --epochs. */
	if (ck->cfg.lr_schedule == LR_COSINE && run->cfg.lr_schedule == LR_COSINE &&
	    ck->cfg.epochs != run->cfg.epochs) {
		text_add(&d,
			 "%s--epochs %d in the checkpoint, %d here, with --lr-schedule cosine: the "
			 "schedule runs over all steps of the run, so the total must stay the same",
			 sep(&d), ck->cfg.epochs, run->cfg.epochs);
	} else if (ck->global_step > (long long)run->cfg.epochs * ck->steps_per_epoch) {
		struct checkpoint_position p = checkpoint_position(ck->global_step, ck->steps_per_epoch);
		text_add(&d,
			 "%s--epochs %d is the total, but the checkpoint is already at epoch %d step %d "
			 "(use --epochs %d or more)",
			 sep(&d), run->cfg.epochs, p.epoch, p.step, p.epoch + 1);
	}
	if (d.used == 0)
		return STATUS_OK;
	return status_fail(err, errlen, STATUS_BAD_INPUT, "%s does not fit this run: %s", name, list);
}
