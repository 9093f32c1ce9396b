/*
 * checkpoint_write.c - a checkpoint's file image (io/checkpoint.h,
 * checkpoint_encode): the metadata, the JSON header written by jansson, the
 * tensors' bytes and the checksum over the whole (io/checkpoint_format.h has
 * the layout). Writing it to a file atomically is io/checkpoint_dir.c's.
 *
 * Tested by tests/test_checkpoint.c (round trips) and, through every file it
 * reads back, by tests/fuzz/fuzz_checkpoint.c.
 */
#include "io/checkpoint.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint_tensors.h"
#include "io/crc32.h"

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
	      meta_put(meta, "train_crc32", "%08x", (unsigned)info->train_crc32);
	if (!bad && info->gpu_plan[0])
		bad = json_object_set_new(meta, CHECKPOINT_PLAN_KEY, json_string(info->gpu_plan));
	bad = bad || meta_put(meta, "checksum", "crc32:00000000");
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
	int nt = checkpoint_tensors(m, info->cfg.optimizer, t);
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
