/*
 * checkpoint_dir.c - checkpoints as files: the atomic write, loading one
 * file (or only its plan, for --gpu-plan-from; only its header's metadata),
 * the newest-valid search of a directory, for --resume and for the parameters
 * alone of --init-from and --eval-only, pruning to --keep,
 * and preparing --checkpoint-dir (io/checkpoint.h; the format is
 * io/checkpoint_format.h's, the file image io/checkpoint_write.c's, its
 * reading io/checkpoint_read.c's and the fit io/checkpoint_compat.c's).
 */
#include "io/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/optim.h"

void checkpoint_file_name(int epoch, long long global_step, char *buf, size_t len)
{
	snprintf(buf, len, CKPT_PREFIX "%d-%lld" CKPT_SUFFIX, epoch, global_step);
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

/* ---- writing -------------------------------------------------------------- */

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

enum status checkpoint_save(const char *dir, const struct model *m,
			    const struct checkpoint_info *info, const float *params,
			    const float *state, char *path, size_t pathlen, char *err,
			    size_t errlen)
{
	char file[64], tmp[CONFIG_PATH_MAX + 96];
	uint8_t *img = NULL;
	size_t len = 0;
	FILE *f = NULL;
	enum status rc = STATUS_RUNTIME;

	checkpoint_file_name(checkpoint_position(info->global_step, info->steps_per_epoch).epoch,
			     info->global_step, file, sizeof(file));
	snprintf(path, pathlen, "%s/%s", dir, file);
	/* Hidden, and not a ckpt- name, so discovery never sees a partial file. */
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, file, (long)getpid());
	if (checkpoint_encode(m, info, params, state, &img, &len))
		return status_fail(err, errlen, rc, "%s: out of memory building the checkpoint", path);
	f = fopen(tmp, "wb");
	if (!f) {
		status_fail(err, errlen, rc, "%s: cannot create: %s", tmp, strerror(errno));
		goto out_free_img;
	}
	if (fwrite(img, 1, len, f) != len || fflush(f) != 0) {
		status_fail(err, errlen, rc, "%s: write failed: %s", tmp, strerror(errno));
		goto out_close;
	}
	if (fsync(fileno(f)) != 0) {
		status_fail(err, errlen, rc, "%s: fsync failed: %s", tmp, strerror(errno));
		goto out_close;
	}
	if (fclose(f) != 0) {
		f = NULL;
		status_fail(err, errlen, rc, "%s: close failed: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	f = NULL;
	if (rename(tmp, path) != 0) {
		status_fail(err, errlen, rc, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		goto out_unlink;
	}
	if (fsync_dir(dir) != 0) {
		/* The file is whole and named; only its directory entry may not be durable yet. */
		status_fail(err, errlen, rc, "%s: fsync of the directory failed: %s", dir, strerror(errno));
		goto out_free_img;
	}
	rc = STATUS_OK;
	goto out_free_img;

out_close:
	fclose(f);
out_unlink:
	unlink(tmp);
out_free_img:
	free(img);
	return rc;
}

/* ---- reading -------------------------------------------------------------- */

/*
 * Read the file at path whole into *buf (malloc'd; *len bytes), at most the
 * largest checkpoint model m can have. STATUS_BAD_INPUT (*too_big 1 when it
 * is larger than that) or STATUS_RUNTIME, with err naming path.
 */
static enum status read_image(const char *path, const struct model *m, uint8_t **buf, size_t *len,
			      int *too_big, char *err, size_t errlen)
{
	struct stat st;
	enum status rc = STATUS_BAD_INPUT;
	*buf = NULL;
	*too_big = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return status_fail(err, errlen, rc, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		status_fail(err, errlen, rc, "%s: not a regular file", path);
		goto out;
	}
	/* Never read more than this model's checkpoint can be. */
	uint64_t limit = 8 + CHECKPOINT_MAX_HEADER + (uint64_t)m->n_params * 4u * (1 + OPTIM_MAX_STATE) + 4u;
	if ((uint64_t)st.st_size > limit) {
		status_fail(err, errlen, rc, "%s: %lld bytes, more than a checkpoint of this model can be (%llu)",
			    path, (long long)st.st_size, (unsigned long long)limit);
		*too_big = 1;
		goto out;
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		rc = status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory reading %zu bytes", path, *len);
		goto out;
	}
	if (fread(*buf, 1, *len, f) != *len) {
		status_fail(err, errlen, rc, "%s: read failed: %s", path,
			    ferror(f) ? strerror(errno) : "short read");
		free(*buf);
		*buf = NULL;
		goto out;
	}
	rc = STATUS_OK;
out:
	fclose(f);
	return rc;
}

enum status checkpoint_load(const char *path, const struct model *m,
			    const struct checkpoint_info *run, struct checkpoint_info *info,
			    float *params, float *state, int *mismatch, char *err, size_t errlen)
{
	uint8_t *buf;
	size_t len;
	int other_run = 0;
	enum status rc = read_image(path, m, &buf, &len, &other_run, err, errlen);
	struct checkpoint_view *view = rc ? NULL : malloc(sizeof(*view));
	if (!rc && !view)
		rc = status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory", path);
	if (!rc)
		rc = checkpoint_parse(buf, len, path, info, view, err, errlen);
	if (rc == STATUS_OK) {
		/* A whole checkpoint from here on: a refusal is another run's or model's. */
		rc = run ? checkpoint_compat(info, run, path, err, errlen) : STATUS_OK;
		if (rc == STATUS_OK)
			rc = checkpoint_extract(view, m, info, path, params, state, err, errlen);
		other_run = rc != STATUS_OK;
	}
	free(view);
	free(buf);
	if (mismatch)
		*mismatch = other_run;
	return rc;
}

enum status checkpoint_read_meta(const char *path, struct checkpoint_info *info, char *err,
				 size_t errlen)
{
	size_t cap = 8 + CHECKPOINT_MAX_HEADER;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory", path);
	enum status rc = STATUS_BAD_INPUT;
	struct stat st;
	FILE *f = fopen(path, "rb");
	if (!f) {
		status_fail(err, errlen, rc, "%s: cannot open: %s", path, strerror(errno));
		goto out_free;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		status_fail(err, errlen, rc, "%s: not a regular file", path);
		goto out_close;
	}
	/* The header at most: the whole file when it is shorter. */
	size_t n = fread(buf, 1, cap, f);
	if (ferror(f)) {
		status_fail(err, errlen, rc, "%s: read failed: %s", path, strerror(errno));
		goto out_close;
	}
	rc = checkpoint_parse_meta(buf, n, path, info, err, errlen);
out_close:
	fclose(f);
out_free:
	free(buf);
	return rc;
}

int checkpoint_is_file(const char *path)
{
	unsigned char head[9];
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	size_t n = fread(head, 1, sizeof(head), f);
	fclose(f);
	/* A header length under 16 MiB (our headers are under CHECKPOINT_MAX_HEADER), then its '{'. */
	return n == sizeof(head) && !head[3] && !head[4] && !head[5] && !head[6] && !head[7] &&
	       head[8] == '{';
}

enum status checkpoint_read_plan(const char *path, const struct model *m, char *plan, size_t cap,
				 char *err, size_t errlen)
{
	uint8_t *buf;
	size_t len;
	int too_big;
	struct checkpoint_info *info = NULL;
	struct checkpoint_view *view = NULL;
	enum status rc = read_image(path, m, &buf, &len, &too_big, err, errlen);
	if (!rc) {
		info = malloc(sizeof(*info));
		view = malloc(sizeof(*view));
		if (!info || !view)
			rc = status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory", path);
	}
	if (!rc)
		rc = checkpoint_parse(buf, len, path, info, view, err, errlen);
	if (!rc && !info->gpu_plan[0])
		rc = status_fail(err, errlen, STATUS_BAD_INPUT,
				 "%s: the checkpoint holds no GPU plan (it was written by a run on the "
				 "host backend)",
				 path);
	if (!rc && strlen(info->gpu_plan) >= cap)
		rc = status_fail(err, errlen, STATUS_BAD_INPUT, "%s: the checkpoint's GPU plan is %zu bytes, "
				 "expected at most %zu", path, strlen(info->gpu_plan), cap - 1);
	if (!rc)
		snprintf(plan, cap, "%s", info->gpu_plan);
	free(view);
	free(info);
	free(buf);
	return rc;
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
		status_fail(err, errlen, STATUS_BAD_INPUT, "%s: cannot open directory: %s", dir,
			    strerror(errno));
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
				status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory listing checkpoints",
					    dir);
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

/*
 * One file of a search: STATUS_OK, or why not, with *other 1 when it is a
 * whole checkpoint of another run or model (which ends the search).
 */
typedef enum status (*try_file_fn)(const char *file, void *arg, int *other, char *err,
				   size_t errlen);

/*
 * PATH a file: try it. PATH a directory: try its checkpoints newest first
 * (by global step) until one loads; one that cannot be read or is corrupt is
 * skipped with a warning on `warn`, another run's ends the search. used gets
 * the file loaded; *other whether the refusal was another run's.
 */
static enum status search(const char *path, try_file_fn try_file, void *arg, char *used,
			  size_t usedlen, FILE *warn, int *other, char *err, size_t errlen)
{
	struct stat st;
	*other = 0;
	if (stat(path, &st) != 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		snprintf(used, usedlen, "%s", path);
		return try_file(path, arg, other, err, errlen);
	}
	struct checkpoint_entry *list = NULL;
	int n = checkpoint_list(path, &list, err, errlen);
	if (n < 0)
		return STATUS_BAD_INPUT;
	enum status rc = status_fail(err, errlen, STATUS_BAD_INPUT,
				     "%s: no checkpoint (ckpt-<epoch>-<global step>.safetensors) in this directory",
				     path);
	for (int i = 0; i < n; i++) {
		char file[CONFIG_PATH_MAX + 80], why[1024];
		snprintf(file, sizeof(file), "%s/%s", path, list[i].file);
		rc = try_file(file, arg, other, why, sizeof(why));
		if (rc == STATUS_OK) {
			snprintf(used, usedlen, "%s", file);
			break;
		}
		if (rc == STATUS_RUNTIME || *other) {
			status_fail(err, errlen, rc, "%s", why);
			break;
		}
		if (warn) {
			fprintf(warn, "mnist-train: warning: skipping checkpoint %s: %s; %s\n", file, why,
				i + 1 < n ? "falling back to the previous one" : "no older checkpoint left");
			fflush(warn);
		}
		if (i + 1 == n)
			status_fail(err, errlen, rc, "%s: no valid checkpoint among the %d found (see the warnings)",
				    path, n);
	}
	free(list);
	return rc;
}

/* --resume: a checkpoint this run continues, whole. */
struct resume_try {
	const struct model *m;
	const struct checkpoint_info *run;
	struct checkpoint_info *info;
	float *params, *state;
};

static enum status try_resume(const char *file, void *arg, int *other, char *err, size_t errlen)
{
	struct resume_try *a = arg;
	return checkpoint_load(file, a->m, a->run, a->info, a->params, a->state, other, err, errlen);
}

enum status checkpoint_resume(const char *path, const struct model *m,
			      const struct checkpoint_info *run, struct checkpoint_info *info,
			      float *params, float *state, char *used, size_t usedlen, FILE *warn,
			      char *err, size_t errlen)
{
	struct resume_try a = {.m = m, .run = run, .info = info, .params = params, .state = state};
	int other;
	return search(path, try_resume, &a, used, usedlen, warn, &other, err, errlen);
}

/* --init-from, --eval-only: the parameters of a checkpoint of the model expected. */
struct params_try {
	const struct checkpoint_model *want;
	struct checkpoint_model *got;
	float *params; /* (n_params) of the last model tried */
	struct checkpoint_info *info;
};

/* Whether a checkpoint of model `held` is one of `want`. */
static int model_fits(const struct checkpoint_model *held, const struct checkpoint_model *want)
{
	if (want->kind >= 0 && want->kind != held->kind)
		return 0;
	if (held->kind != MODEL_MLP || want->n_hidden == 0)
		return 1;
	return want->n_hidden == held->n_hidden &&
	       !memcmp(want->hidden, held->hidden, (size_t)held->n_hidden * sizeof(int));
}

/* The model from the header's metadata, then the file read whole for its parameters. */
static enum status try_params(const char *file, void *arg, int *other, char *err, size_t errlen)
{
	struct params_try *a = arg;
	char held_text[128], want_text[128];
	struct model m;
	*other = 0;
	enum status rc = checkpoint_read_meta(file, a->info, err, errlen);
	if (rc)
		return rc;
	struct checkpoint_model held = checkpoint_model_of(&a->info->cfg);
	if (!model_fits(&held, a->want)) {
		checkpoint_model_text(&held, held_text, sizeof(held_text));
		checkpoint_model_text(a->want, want_text, sizeof(want_text));
		*other = 1;
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s holds %s, not %s", file,
				   held_text, want_text);
	}
	model_init(&m, (enum model_kind)held.kind, held.hidden, held.n_hidden);
	float *params = realloc(a->params, (m.n_params ? m.n_params : 1) * sizeof(float));
	if (!params)
		return status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory for %zu parameters",
				   file, m.n_params);
	a->params = params;
	rc = checkpoint_load(file, &m, NULL, a->info, params, NULL, other, err, errlen);
	if (rc == STATUS_OK)
		*a->got = held;
	return rc;
}

enum status checkpoint_load_params(const char *path, const struct checkpoint_model *want,
				   struct checkpoint_model *got, float **params,
				   struct checkpoint_info *info, int *other_model, char *used,
				   size_t usedlen, FILE *warn, char *err, size_t errlen)
{
	struct params_try a = {.want = want, .got = got, .params = NULL, .info = info};
	enum status rc = search(path, try_params, &a, used, usedlen, warn, other_model, err, errlen);
	if (rc) {
		free(a.params);
		a.params = NULL;
	}
	*params = a.params;
	return rc;
}

/* ---- the directory ---------------------------------------------------------- */

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
			status_fail(err, errlen, STATUS_RUNTIME, "%s: cannot delete: %s", file, strerror(errno));
			free(list);
			return -1;
		}
		removed++;
	}
	free(list);
	return removed;
}

enum status checkpoint_prepare_dir(const char *dir, char *err, size_t errlen)
{
	char buf[CONFIG_PATH_MAX];
	struct stat st;
	if (!*dir || strlen(dir) >= sizeof(buf))
		return status_fail(err, errlen, STATUS_BAD_INPUT, "--checkpoint-dir: empty or too long a path");
	strcpy(buf, dir);
	/* mkdir -p: each parent, then the directory itself. */
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "--checkpoint-dir %s: cannot create %s: %s", dir, buf, strerror(errno));
		*s = '/';
	}
	if (mkdir(buf, 0777) != 0 && errno != EEXIST)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "--checkpoint-dir %s: cannot create it: %s",
				   dir, strerror(errno));
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return status_fail(err, errlen, STATUS_BAD_INPUT, "--checkpoint-dir %s: not a directory", dir);
	char probe[CONFIG_PATH_MAX + 64];
	snprintf(probe, sizeof(probe), "%s/.ckpt-probe.%ld", dir, (long)getpid());
	int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--checkpoint-dir %s: cannot create files in it: %s", dir, strerror(errno));
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
	return STATUS_OK;
}
