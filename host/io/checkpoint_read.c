/*
 * checkpoint_read.c - reading a checkpoint's file image (io/checkpoint.h,
 * checkpoint_parse): is this a whole, well-formed checkpoint? A refusal here
 * means corrupt, and --resume DIR falls back to an older one. The JSON header
 * is read by jansson, which refuses duplicate keys and bounds its nesting;
 * this file checks the shape safetensors uses (an object of objects) with
 * every count and length bounded, the tensors' byte ranges, the checksum, and
 * every metadata value (the settings through the settings table, config.h).
 * Whether the checkpoint fits this run and model is io/checkpoint_compat.c's.
 *
 * Tested by tests/test_checkpoint.c (every malformed case) and fuzzed by
 * tests/fuzz/fuzz_checkpoint.c.
 */
#include "io/checkpoint.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/crc32.h"

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
	json_object_foreach((json_t *)meta, key, v) {
		size_t most = strcmp(key, CHECKPOINT_PLAN_KEY) ? CHECKPOINT_VALUE_MAX : CHECKPOINT_PLAN_MAX;
		if (!json_is_string(v) || json_string_length(v) >= most)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: metadata \"%s\": values must be strings (of at most %zu bytes)",
					   name, key, most - 1);
	}
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
	/*
	 * The GPU plan, when there is one: the backend's text, which only the
	 * backend reads (include/backend.h, ->plan_follow); here, a JSON object.
	 */
	json_t *plan = json_object_get(meta, CHECKPOINT_PLAN_KEY);
	if (plan) {
		json_error_t je;
		json_t *obj = json_loads(json_string_value(plan), 0, &je);
		int ok = json_is_object(obj);
		json_decref(obj);
		if (!ok)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: metadata \"%s\" is damaged: not a JSON object%s%s", name,
					   CHECKPOINT_PLAN_KEY, obj ? "" : ": ", obj ? "" : je.text);
		snprintf(info->gpu_plan, sizeof(info->gpu_plan), "%s", json_string_value(plan));
	}

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
		if (!*s && !row->def)
			continue; /* a value not given (a number without a default): its 0 */
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

/*
 * The header of a file image's first len bytes: its length into *hlen, the
 * JSON into *root (the caller json_decref's it), the tensor table into view
 * (its data: what follows the header in buf) and the metadata object into
 * *meta (NULL when absent).
 */
static enum status parse_header(const uint8_t *buf, size_t len, const char *name,
				struct checkpoint_view *view, uint64_t *hlen, json_t **root,
				json_t **meta, char *err, size_t errlen)
{
	*root = NULL;
	*meta = NULL;
	if (len < 8)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, shorter than the 8-byte header length", name,
				   len);
	*hlen = 0;
	for (int i = 0; i < 8; i++)
		*hlen |= (uint64_t)buf[i] << (8 * i);
	if (*hlen < 2 || *hlen > CHECKPOINT_MAX_HEADER)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: header length %llu is outside 2..%llu",
				   name, (unsigned long long)*hlen,
				   (unsigned long long)CHECKPOINT_MAX_HEADER);
	if (*hlen > len - 8)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, the header alone needs %llu", name, len,
				   (unsigned long long)(*hlen + 8));
	memset(view, 0, sizeof(*view));
	view->data = buf + 8 + *hlen;
	view->data_len = len - 8 - *hlen;

	json_error_t je;
	*root = json_loadb((const char *)buf + 8, (size_t)*hlen, JSON_REJECT_DUPLICATES, &je);
	if (!*root)
		return status_fail(err, errlen,
				   json_error_code(&je) == json_error_out_of_memory ? STATUS_RUNTIME
										   : STATUS_BAD_INPUT,
				   "%s: malformed header: %s at byte %d of the JSON", name, je.text,
				   je.position);
	enum status rc = read_header(*root, name, view, meta, err, errlen);
	if (rc == STATUS_OK && !*meta)
		rc = status_fail(err, errlen, STATUS_BAD_INPUT,
				 "%s: header has no __metadata__ (not an mnist-ddp checkpoint)", name);
	return rc;
}

enum status checkpoint_parse(const uint8_t *buf, size_t len, const char *name,
			     struct checkpoint_info *info, struct checkpoint_view *view, char *err,
			     size_t errlen)
{
	uint64_t hlen = 0;
	json_t *meta, *root;
	enum status rc = parse_header(buf, len, name, view, &hlen, &root, &meta, err, errlen);
	if (rc)
		goto out;
	rc = STATUS_BAD_INPUT;
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

enum status checkpoint_parse_meta(const uint8_t *buf, size_t len, const char *name,
				  struct checkpoint_info *info, char *err, size_t errlen)
{
	struct checkpoint_view *view = malloc(sizeof(*view));
	if (!view)
		return status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory", name);
	uint64_t hlen = 0;
	json_t *meta, *root;
	enum status rc = parse_header(buf, len, name, view, &hlen, &root, &meta, err, errlen);
	/* Refused, and not even its start is a checkpoint's (checkpoint_is_file): say that. */
	if (rc == STATUS_BAD_INPUT &&
	    (len < 9 || buf[3] || buf[4] || buf[5] || buf[6] || buf[7] || buf[8] != '{'))
		status_fail(err, errlen, rc,
			    "%s: not a checkpoint (a safetensors file begins with its header's length "
			    "in 8 bytes and the header's '{'; this one does not)",
			    name);
	if (!rc)
		rc = meta_info(meta, info, name, err, errlen);
	json_decref(root);
	free(view);
	return rc;
}
