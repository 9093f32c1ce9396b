/* checkpoint_fixture.c - the checkpoint tests' fixtures: see tests/checkpoint_fixture.h. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint_fixture.h"

#include "train/optim.h"
#include "io/crc32.h"
#include "train/rng.h"


char tmpdir[512];

void make_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_checkpoint.XXXXXX", base && *base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp(%s) failed", tmpdir);
}

void remove_tree(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	char path[1024];
	if (!dp)
		return;
	while ((de = readdir(dp))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			remove_tree(path);
		else
			unlink(path);
	}
	closedir(dp);
	rmdir(dir);
}

void cleanup_tmpdir(void)
{
	remove_tree(tmpdir);
}



/*
 * An mlp 784 -> 5 -> 3 -> 10 (mlp 1: small, several layers), the seed model
 * (mlp 0), LeNet-5 with a cosine schedule and a warm-up (mlp 2), or the mlp
 * of 1 trained with AdamW and weight decay (mlp 3).
 */
void small_model(struct model *m, struct train_config *c, int mlp)
{
	config_defaults(c);
	if (mlp == 1 || mlp == 3) {
		c->model = MODEL_MLP;
		c->hidden[0] = 5;
		c->hidden[1] = 3;
		c->n_hidden = 2;
		c->momentum = 0.9f;
		if (mlp == 3) {
			c->optimizer = OPTIMIZER_ADAMW;
			c->weight_decay = 0.01f;
			c->beta2 = 0.99f;
		}
	} else if (mlp == 2) {
		c->model = MODEL_LENET;
		c->momentum = 0.9f;
		c->lr_schedule = LR_COSINE;
		c->warmup_steps = 10;
	}
	c->lr = 0.05f;
	c->batch_size = 16;
	c->epochs = 4;
	model_init(m, c->model, c->hidden, c->n_hidden);
}

/* The run's configuration for 2 ranks over 1000 examples (32 steps per epoch). */
void run_info(const struct train_config *c, struct checkpoint_info *run)
{
	checkpoint_info_from_config(run, c, 2, 1000, 0x12345678u);
	run->steps_per_epoch = 32;
}

/* After global step gs of 32-step epochs. */
void set_position(struct checkpoint_info *info, long long gs)
{
	info->global_step = gs;
	info->steps_per_epoch = 32;
}

float *random_floats(size_t n, uint64_t stream)
{
	struct rng r = rng_make(SEED, stream);
	float *p = malloc(n * sizeof(float));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)rng_normal(&r);
	return p;
}


/* A valid checkpoint image after global step `gs` of the small mlp (or the seed model). */
void make_image(struct image *im, int mlp, long long gs)
{
	small_model(&im->m, &im->c, mlp);
	run_info(&im->c, &im->info);
	set_position(&im->info, gs);
	im->params = random_floats(im->m.n_params, 1);
	im->velocity = random_floats((size_t)optim_desc_of(im->c.optimizer).n_state * im->m.n_params, 2);
	cr_assert_eq(checkpoint_encode(&im->m, &im->info, im->params, im->velocity, &im->buf,
				       &im->len),
		     0);
}

void free_image(struct image *im)
{
	free(im->buf);
	free(im->params);
	free(im->velocity);
}

void write_file(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot create %s", path);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

uint64_t header_len(const uint8_t *buf)
{
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)buf[i] << (8 * i);
	return h;
}

/* Re-seal an image whose bytes were changed on purpose: recompute its checksum. */
void reseal(uint8_t *buf, size_t len)
{
	const char *tag = "\"checksum\":\"crc32:";
	size_t h = (size_t)header_len(buf);
	char *hdr = malloc(h + 1);
	memcpy(hdr, buf + 8, h);
	hdr[h] = '\0';
	char *at = strstr(hdr, tag);
	cr_assert_not_null(at, "no checksum in the header");
	size_t pos = 8 + (size_t)(at - hdr) + strlen(tag);
	free(hdr);
	memcpy(buf + pos, "00000000", 8);
	uint32_t crc = crc32_bytes(0, buf, len);
	char hex[9];
	snprintf(hex, sizeof(hex), "%08x", (unsigned)crc);
	memcpy(buf + pos, hex, 8);
}

/*
 * A file image with header text `json` (a printf format) over `data_len`
 * bytes of data, sealed with a valid checksum when the header has a
 * checksum field holding "crc32:00000000".
 */
size_t craft(uint8_t **out, size_t data_len, const char *json, ...)
{
	char hdr[8192];
	va_list ap;
	va_start(ap, json);
	int n = vsnprintf(hdr, sizeof(hdr), json, ap);
	va_end(ap);
	cr_assert(n > 0 && n < (int)sizeof(hdr));
	size_t len = 8 + (size_t)n + data_len;
	uint8_t *buf = calloc(1, len);
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, hdr, (size_t)n);
	if (strstr(hdr, "\"checksum\":\"crc32:00000000\""))
		reseal(buf, len);
	*out = buf;
	return len;
}


enum status parse_image(const uint8_t *buf, size_t len, char *err)
{
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	enum status rc = checkpoint_parse(buf, len, "ck.safetensors", &info, view, err, ERRLEN);
	free(view);
	return rc;
}

