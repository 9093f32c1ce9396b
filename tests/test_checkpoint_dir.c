/*
 * test_checkpoint_dir.c - checkpoint files (host/io/checkpoint_dir.c): atomic
 * saves that load, --resume DIR falling back past corrupt files with a
 * warning and never past a mismatch, pruning to the newest K, directory
 * preparation; a checkpoint's parameters alone (--init-from, --eval-only)
 * from a file or a directory, of the model expected or refused naming both;
 * and the reliability flags of the command line (host/config.c).
 *
 *   ctest --test-dir build -R test_checkpoint_dir --output-on-failure
 *
 * Files live in a fresh mkdtemp directory per test (Criterion runs each test
 * in its own process); the fixtures are tests/checkpoint_fixture.c's.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_fixture.h"

TestSuite(checkpoint, .init = make_tmpdir, .fini = cleanup_tmpdir);

/* ---- files: save, load, resume, prune ---------------------------------------------- */

static void save_at(struct image *im, long long gs, char *path)
{
	char err[ERRLEN];
	set_position(&im->info, gs);
	cr_assert_eq(checkpoint_save(tmpdir, &im->m, &im->info, im->params, im->velocity, path,
				     CONFIG_PATH_MAX + 96, err, sizeof(err)),
		     STATUS_OK, "%s", err);
}

static int count_files(const char *dir, const char *prefix)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	int n = 0;
	cr_assert_not_null(dp);
	while ((de = readdir(dp)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(dp);
	return n;
}

Test(checkpoint, save_is_atomic_and_loads)
{
	struct image im;
	make_image(&im, 1, 1);
	char path[CONFIG_PATH_MAX + 96], want[CONFIG_PATH_MAX + 96], err[ERRLEN];
	save_at(&im, 40, path);
	snprintf(want, sizeof(want), "%s/ckpt-1-40.safetensors", tmpdir);
	cr_expect_str_eq(path, want);
	cr_expect_eq(count_files(tmpdir, "."), 2, "a temporary file was left behind"); /* . and .. */
	struct checkpoint_info info, run;
	run_info(&im.c, &run);
	float *p = calloc(im.m.n_params, 4), *v = calloc(im.m.n_params, 4);
	cr_assert_eq(checkpoint_load(path, &im.m, &run, &info, p, v, NULL, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_expect(!memcmp(p, im.params, im.m.n_params * 4));
	cr_expect(!memcmp(v, im.velocity, im.m.n_params * 4));
	cr_expect_eq(info.global_step, 40);
	/* Saving again over the same name replaces it whole. */
	im.params[3] = 42.0f;
	save_at(&im, 40, path);
	cr_assert_eq(checkpoint_load(path, &im.m, &run, &info, p, v, NULL, err, sizeof(err)), STATUS_OK);
	cr_expect_eq(p[3], 42.0f);
	/* An unwritable destination is an I/O error naming the file. */
	char missing[600];
	snprintf(missing, sizeof(missing), "%s/no/such/dir", tmpdir);
	cr_expect_eq(checkpoint_save(missing, &im.m, &im.info, im.params, im.velocity, path,
				     sizeof(path), err, sizeof(err)),
		     STATUS_RUNTIME);
	cr_expect(strstr(err, missing), "%s", err);
	/* A missing file: unusable, not another run's, and named. */
	int mismatch = -1;
	snprintf(missing, sizeof(missing), "%s/ckpt-9-999.safetensors", tmpdir);
	cr_expect_eq(checkpoint_load(missing, &im.m, &run, &info, p, v, &mismatch, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect_eq(mismatch, 0);
	cr_expect(strstr(err, missing) && strstr(err, "cannot open"), "%s", err);
	free(p);
	free(v);
	free_image(&im);
}

Test(checkpoint, file_names)
{
	int e;
	long long g;
	char buf[64];
	checkpoint_file_name(3, 1234, buf, sizeof(buf));
	cr_expect_str_eq(buf, "ckpt-3-1234.safetensors");
	cr_expect_eq(checkpoint_parse_file_name(buf, &e, &g), 0);
	cr_expect(e == 3 && g == 1234);
	const char *bad[] = {"ckpt-3-1234.safetensors.tmp", ".ckpt-3-1234.safetensors.tmp.77",
			     "ckpt-3.safetensors", "ckpt--1-2.safetensors", "ckpt-03-2.safetensors",
			     "ckpt-3-0.safetensors", "ckpt-a-2.safetensors", "ckpt-3-2.safetensor",
			     "xckpt-3-2.safetensors", "ckpt-3-99999999999999999.safetensors", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(checkpoint_parse_file_name(bad[i], &e, &g), -1, "accepted '%s'", bad[i]);
}

/* Read the warnings written to a temporary FILE. */
static void read_all(FILE *f, char *buf, size_t len)
{
	rewind(f);
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
}

Test(checkpoint, resume_dir_falls_back_past_corrupt_files)
{
	struct image im;
	make_image(&im, 1, 1);
	char p1[CONFIG_PATH_MAX + 96], p2[CONFIG_PATH_MAX + 96], p3[CONFIG_PATH_MAX + 96];
	char used[CONFIG_PATH_MAX + 96], err[ERRLEN], warned[4096];
	save_at(&im, 32, p1);
	im.params[0] = 1.0f;
	save_at(&im, 64, p2);
	im.params[0] = 2.0f;
	save_at(&im, 80, p3);
	/* A stray temporary file and an unrelated file are ignored. */
	char stray[CONFIG_PATH_MAX + 96];
	snprintf(stray, sizeof(stray), "%s/.ckpt-3-99.safetensors.tmp.1", tmpdir);
	write_file(stray, (const uint8_t *)"x", 1);
	snprintf(stray, sizeof(stray), "%s/notes.txt", tmpdir);
	write_file(stray, (const uint8_t *)"x", 1);

	struct checkpoint_info info, run;
	run_info(&im.c, &run);
	float *p = calloc(im.m.n_params, 4), *v = calloc(im.m.n_params, 4);
	FILE *warn = tmpfile();
	cr_assert_eq(checkpoint_resume(tmpdir, &im.m, &run, &info, p, v, used, sizeof(used), warn, err,
				       sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(used, p3);
	cr_expect_eq(p[0], 2.0f);
	cr_expect_eq(ftell(warn), 0, "no warning expected when the newest is valid");

	/* Truncate the newest: fall back to the previous one, with a warning naming the file. */
	cr_assert_eq(truncate(p3, 5000), 0);
	cr_assert_eq(checkpoint_resume(tmpdir, &im.m, &run, &info, p, v, used, sizeof(used), warn, err,
				       sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(used, p2);
	cr_expect_eq(p[0], 1.0f);
	cr_expect_eq(info.global_step, 64);
	read_all(warn, warned, sizeof(warned));
	cr_expect(strstr(warned, "warning: skipping checkpoint") && strstr(warned, p3) &&
			  strstr(warned, "truncated") && strstr(warned, "falling back"),
		  "%s", warned);

	/* Corrupt the next one in its data too: back to the oldest. */
	FILE *f = fopen(p2, "r+b");
	fseek(f, -100, SEEK_END);
	fputc(0x55, f);
	fclose(f);
	cr_assert_eq(checkpoint_resume(tmpdir, &im.m, &run, &info, p, v, used, sizeof(used), NULL, err,
				       sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(used, p1);

	/* None valid: an error saying so. */
	cr_assert_eq(truncate(p1, 0), 0);
	cr_expect_eq(checkpoint_resume(tmpdir, &im.m, &run, &info, p, v, used, sizeof(used), NULL, err,
				       sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "no valid checkpoint among the 3 found"), "%s", err);

	/* A corrupt FILE given explicitly: no fallback, the file is named. */
	cr_expect_eq(checkpoint_resume(p3, &im.m, &run, &info, p, v, used, sizeof(used), NULL, err,
				       sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, p3) && strstr(err, "truncated"), "%s", err);
	fclose(warn);
	free(p);
	free(v);
	free_image(&im);
}

Test(checkpoint, resume_never_falls_back_past_a_mismatch)
{
	struct image im;
	make_image(&im, 1, 1);
	char path[CONFIG_PATH_MAX + 96], used[CONFIG_PATH_MAX + 96], err[ERRLEN];
	save_at(&im, 32, path);
	im.info.cfg.seed = 77; /* the newest from another configuration */
	save_at(&im, 64, path);
	struct checkpoint_info info, run;
	run_info(&im.c, &run);
	float *p = calloc(im.m.n_params, 4), *v = calloc(im.m.n_params, 4);
	cr_expect_eq(checkpoint_resume(tmpdir, &im.m, &run, &info, p, v, used, sizeof(used), NULL, err,
				       sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "ckpt-1-64.safetensors does not fit this run: --seed 77"), "%s", err);
	/* checkpoint_load tells the two kinds apart: another run's, and a corrupt one. */
	int mismatch = 0;
	cr_expect_eq(checkpoint_load(path, &im.m, &run, &info, p, v, &mismatch, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect_eq(mismatch, 1, "%s", err);
	cr_assert_eq(truncate(path, 1000), 0);
	cr_expect_eq(checkpoint_load(path, &im.m, &run, &info, p, v, &mismatch, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect_eq(mismatch, 0, "%s", err);
	free(p);
	free(v);
	free_image(&im);
}

Test(checkpoint, resume_of_nothing)
{
	struct image im;
	make_image(&im, 0, 1);
	char used[CONFIG_PATH_MAX + 96], err[ERRLEN], path[CONFIG_PATH_MAX + 96];
	struct checkpoint_info info, run;
	run_info(&im.c, &run);
	float *p = calloc(im.m.n_params, 4), *v = calloc(im.m.n_params, 4);
	cr_expect_eq(checkpoint_resume(tmpdir, &im.m, &run, &info, p, v, used, sizeof(used), NULL, err,
				       sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "no checkpoint"), "%s", err);
	snprintf(path, sizeof(path), "%s/absent", tmpdir);
	cr_expect_eq(checkpoint_resume(path, &im.m, &run, &info, p, v, used, sizeof(used), NULL, err,
				       sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, path), "%s", err);
	/* A file far larger than this model's checkpoint is refused before it is read. */
	snprintf(path, sizeof(path), "%s/ckpt-0-1.safetensors", tmpdir);
	FILE *f = fopen(path, "wb");
	cr_assert_eq(fseek(f, 8 << 20, SEEK_SET), 0);
	fputc(0, f);
	fclose(f);
	int mismatch = 0;
	cr_expect_eq(checkpoint_load(path, &im.m, &run, &info, p, v, &mismatch, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect_eq(mismatch, 1, "a file too large for this model is another model's");
	cr_expect(strstr(err, "more than a checkpoint of this model can be"), "%s", err);
	free(p);
	free(v);
	free_image(&im);
}

/* ---- the parameters alone: --init-from and --eval-only ------------------------------ */

/* checkpoint_load_params into params (freed first), got, info and used; its status. */
static enum status load_params(const char *path, const struct checkpoint_model *want,
			       struct checkpoint_model *got, float **params,
			       struct checkpoint_info *info, int *other, char *used, FILE *warn,
			       char *err)
{
	free(*params);
	*params = NULL;
	return checkpoint_load_params(path, want, got, params, info, other, used,
				      CONFIG_PATH_MAX + 96, warn, err, ERRLEN);
}

Test(checkpoint, params_alone_of_any_run_from_a_file_or_a_directory)
{
	struct image im;
	make_image(&im, 1, 1); /* an mlp 5,3 with momentum */
	char p1[CONFIG_PATH_MAX + 96], p2[CONFIG_PATH_MAX + 96], p3[CONFIG_PATH_MAX + 96];
	char used[CONFIG_PATH_MAX + 96], err[ERRLEN], warned[4096];
	float *params = NULL;
	struct checkpoint_model want = checkpoint_model_of(&im.c), got;
	struct checkpoint_info info;
	int other = -1;
	save_at(&im, 32, p1);
	im.params[0] = 1.0f;
	save_at(&im, 64, p2);
	/* A file: its parameters bitwise, its model and its metadata. */
	cr_assert_eq(load_params(p2, &want, &got, &params, &info, &other, used, NULL, err), STATUS_OK,
		     "%s", err);
	cr_expect(!memcmp(params, im.params, im.m.n_params * 4), "the parameters differ");
	cr_expect(got.kind == MODEL_MLP && got.n_hidden == 2 && got.hidden[0] == 5 && got.hidden[1] == 3);
	cr_expect_eq(info.global_step, 64);
	cr_expect_str_eq(used, p2);
	/* Any run's: another seed, rate and optimizer (a resume would refuse each) load all the same. */
	im.info.cfg.seed = 77;
	im.info.cfg.lr = 0.5f;
	im.params[0] = 2.0f;
	save_at(&im, 96, p3);
	cr_assert_eq(load_params(tmpdir, &want, &got, &params, &info, &other, used, NULL, err),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(used, p3, "a directory's newest");
	cr_expect_eq(params[0], 2.0f);
	/* An expectation left open takes the checkpoint's model (--eval-only without --model). */
	struct checkpoint_model any = {.kind = -1};
	cr_assert_eq(load_params(p1, &any, &got, &params, &info, &other, used, NULL, err), STATUS_OK,
		     "%s", err);
	cr_expect(got.kind == MODEL_MLP && got.n_hidden == 2 && got.hidden[1] == 3);
	struct checkpoint_model mlp_any = {.kind = MODEL_MLP};
	cr_expect_eq(load_params(p1, &mlp_any, &got, &params, &info, &other, used, NULL, err),
		     STATUS_OK, "%s", err);
	/* The newest truncated: a warning naming it, and the previous one, as --resume DIR does. */
	cr_assert_eq(truncate(p3, 3000), 0);
	FILE *warn = tmpfile();
	cr_assert_eq(load_params(tmpdir, &want, &got, &params, &info, &other, used, warn, err),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(used, p2);
	cr_expect_eq(params[0], 1.0f);
	read_all(warn, warned, sizeof(warned));
	cr_expect(strstr(warned, "warning: skipping checkpoint") && strstr(warned, p3) &&
			  strstr(warned, "truncated"),
		  "%s", warned);
	/* Given as FILE, the truncated one is refused, naming it: corrupt, not another model. */
	cr_expect_eq(load_params(p3, &want, &got, &params, &info, &other, used, NULL, err),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, p3) && strstr(err, "truncated"), "%s", err);
	cr_expect_eq(other, 0);
	cr_expect_null(params, "no parameters after a refusal");
	fclose(warn);
	free(params);
	free_image(&im);
}

Test(checkpoint, params_of_another_model_are_refused_naming_both)
{
	struct image im, seed;
	make_image(&im, 1, 1);  /* mlp 5,3 */
	make_image(&seed, 0, 1); /* the seed model */
	char path[CONFIG_PATH_MAX + 96], used[CONFIG_PATH_MAX + 96], err[ERRLEN], text[128];
	float *params = NULL;
	struct checkpoint_model got, want = checkpoint_model_of(&im.c);
	struct checkpoint_info info;
	int other = 0;
	save_at(&im, 32, path);
	struct {
		struct checkpoint_model want;
		const char *says;
	} cases[] = {
		{{.kind = MODEL_LENET}, "holds --model mlp --hidden 5,3, not --model lenet"},
		{{.kind = MODEL_SEED}, "holds --model mlp --hidden 5,3, not --model seed"},
		{{.kind = MODEL_MLP, .n_hidden = 2, .hidden = {5, 4}},
		 "holds --model mlp --hidden 5,3, not --model mlp --hidden 5,4"},
		{{.kind = MODEL_MLP, .n_hidden = 1, .hidden = {5}},
		 "holds --model mlp --hidden 5,3, not --model mlp --hidden 5"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect_eq(load_params(path, &cases[i].want, &got, &params, &info, &other, used, NULL,
					 err),
			     STATUS_BAD_INPUT, "case %zu loaded", i);
		cr_expect_eq(other, 1, "case %zu: another model, not a corrupt file: %s", i, err);
		cr_expect(strstr(err, path) && strstr(err, cases[i].says), "case %zu: %s", i, err);
	}
	/* A seed model's checkpoint (the newest) into an mlp run. */
	save_at(&seed, 64, path);
	cr_expect_eq(load_params(path, &want, &got, &params, &info, &other, used, NULL, err),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "holds --model seed, not --model mlp --hidden 5,3"), "%s", err);
	/* In a directory, a newest checkpoint of another model ends the search: no fallback. */
	cr_expect_eq(load_params(tmpdir, &want, &got, &params, &info, &other, used, NULL, err),
		     STATUS_BAD_INPUT);
	cr_expect(other == 1 && strstr(err, "holds --model seed"), "%s", err);
	checkpoint_model_text(&want, text, sizeof(text));
	cr_expect_str_eq(text, "--model mlp --hidden 5,3");
	free(params);
	free_image(&seed);
	free_image(&im);
}

Test(checkpoint, params_of_what_is_not_a_checkpoint)
{
	char path[CONFIG_PATH_MAX + 96], used[CONFIG_PATH_MAX + 96], err[ERRLEN];
	float *params = NULL;
	struct checkpoint_model got, any = {.kind = -1};
	struct checkpoint_info info;
	int other = 1;
	snprintf(path, sizeof(path), "%s/absent.safetensors", tmpdir);
	cr_expect_eq(load_params(path, &any, &got, &params, &info, &other, used, NULL, err),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, path) && strstr(err, "No such file"), "%s", err);
	const char *junk[] = {"", "hello, world\n", "{\"__metadata__\": {}}"};
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		snprintf(path, sizeof(path), "%s/junk%zu", tmpdir, i);
		write_file(path, (const uint8_t *)junk[i], strlen(junk[i]));
		other = 1;
		cr_expect_eq(load_params(path, &any, &got, &params, &info, &other, used, NULL, err),
			     STATUS_BAD_INPUT, "junk %zu", i);
		cr_expect(strstr(err, path) && strstr(err, "not a checkpoint"), "junk %zu: %s", i, err);
		cr_expect_eq(other, 0, "junk %zu is not another model's checkpoint", i);
	}
	/* A directory whose only checkpoint is not one: the warning, then none valid. */
	snprintf(path, sizeof(path), "%s/ckpt-0-5.safetensors", tmpdir);
	write_file(path, (const uint8_t *)"hello", 5);
	cr_expect_eq(load_params(tmpdir, &any, &got, &params, &info, &other, used, NULL, err),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "no valid checkpoint among the 1 found"), "%s", err);
	cr_expect_null(params);
}

Test(checkpoint, prune_keeps_the_newest)
{
	struct image im;
	make_image(&im, 0, 1);
	char path[CONFIG_PATH_MAX + 96], err[ERRLEN];
	for (long long gs = 10; gs <= 60; gs += 10)
		save_at(&im, gs, path);
	save_at(&im, 90, path); /* "from the future": a run that went further */
	cr_expect_eq(checkpoint_prune(tmpdir, 60, 0, err, sizeof(err)), 0, "keep 0 deletes nothing");
	cr_expect_eq(checkpoint_prune(tmpdir, 60, 2, err, sizeof(err)), 4, "%s", err);
	struct checkpoint_entry *list;
	int n = checkpoint_list(tmpdir, &list, err, sizeof(err));
	cr_assert_eq(n, 3);
	cr_expect_eq(list[0].global_step, 90);
	cr_expect_eq(list[1].global_step, 60);
	cr_expect_eq(list[2].global_step, 50);
	free(list);
	cr_expect_eq(checkpoint_prune(tmpdir, 60, 1, err, sizeof(err)), 1);
	n = checkpoint_list(tmpdir, &list, err, sizeof(err));
	cr_expect(n == 2 && list[1].global_step == 60);
	free(list);
	free_image(&im);
}

Test(checkpoint, prepare_dir)
{
	char dir[700], err[ERRLEN];
	snprintf(dir, sizeof(dir), "%s/a/b/c", tmpdir);
	cr_expect_eq(checkpoint_prepare_dir(dir, err, sizeof(err)), 0, "%s", err);
	struct stat st;
	cr_expect(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
	cr_expect_eq(checkpoint_prepare_dir(dir, err, sizeof(err)), 0, "an existing directory is fine");
	cr_expect_eq(count_files(dir, ".ckpt-probe"), 0, "the probe file was left behind");
	/* A killed writer's temporary file goes; everything else stays. */
	char stale[800], keep[800];
	snprintf(stale, sizeof(stale), "%s/.ckpt-2-70.safetensors.tmp.4242", dir);
	snprintf(keep, sizeof(keep), "%s/.ckpt-notes", dir);
	write_file(stale, (const uint8_t *)"x", 1);
	write_file(keep, (const uint8_t *)"x", 1);
	cr_expect_eq(checkpoint_prepare_dir(dir, err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(access(stale, F_OK), 0, "the stale temporary file is still there");
	cr_expect_eq(access(keep, F_OK), 0, "an unrelated file was removed");
	snprintf(dir, sizeof(dir), "%s/file", tmpdir);
	write_file(dir, (const uint8_t *)"x", 1);
	cr_expect_eq(checkpoint_prepare_dir(dir, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--checkpoint-dir") && strstr(err, dir), "%s", err);
	snprintf(dir, sizeof(dir), "%s/file/sub", tmpdir);
	cr_expect_eq(checkpoint_prepare_dir(dir, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--checkpoint-dir"), "%s", err);
}

/* ---- the command line --------------------------------------------------------------- */

static int parse_args(struct train_config *c, char *err, const char *a0, ...)
{
	static char storage[16][256];
	char *argv[17];
	int argc = 0;
	va_list ap;
	snprintf(storage[argc], sizeof(storage[0]), "mnist-train");
	argv[argc] = storage[argc];
	argc++;
	va_start(ap, a0);
	for (const char *a = a0; a && argc < 16; a = va_arg(ap, const char *)) {
		snprintf(storage[argc], sizeof(storage[0]), "%s", a);
		argv[argc] = storage[argc];
		argc++;
	}
	va_end(ap);
	argv[argc] = NULL;
	return config_parse(argc, argv, c, err, ERRLEN);
}

Test(reliability_flags, defaults_and_values)
{
	struct train_config c;
	char err[ERRLEN] = "";
	cr_assert_eq(parse_args(&c, err, NULL), STATUS_OK, "%s", err);
	cr_expect_str_eq(c.checkpoint_dir, "");
	cr_expect_str_eq(c.resume, "");
	cr_expect_eq(c.save_every, 0);
	cr_expect_eq(c.keep, 3);
	cr_expect_eq(c.timeout, 300.0);
	cr_expect_eq(c.allow_nonfinite, 0);
	cr_assert_eq(parse_args(&c, err, "--checkpoint-dir", "ck", "--save-every", "50", "--keep",
				"0", "--resume", "ck/ckpt-1-2.safetensors", "--timeout", "2.5",
				"--allow-nonfinite", NULL),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(c.checkpoint_dir, "ck");
	cr_expect_str_eq(c.resume, "ck/ckpt-1-2.safetensors");
	cr_expect_eq(c.save_every, 50);
	cr_expect_eq(c.keep, 0);
	cr_expect_eq(c.timeout, 2.5);
	cr_expect_eq(c.allow_nonfinite, 1);
	/* --resume alone (continue without saving) and --timeout 0 (no deadline) are fine. */
	cr_expect_eq(parse_args(&c, err, "--resume", "ck", "--timeout", "0", NULL), STATUS_OK, "%s", err);
	cr_expect_eq(c.timeout, 0.0);
}

Test(reliability_flags, init_from_and_eval_only)
{
	struct train_config c;
	char err[ERRLEN] = "";
	cr_assert_eq(parse_args(&c, err, NULL), STATUS_OK, "%s", err);
	cr_expect_str_eq(c.init_from, "");
	cr_expect_str_eq(c.eval_only, "");
	cr_assert_eq(parse_args(&c, err, "--init-from", "ck", "--model", "mlp", "--lr", "0.05",
				"--checkpoint-dir", "ck2", "--gpu-plan-from", "m.jsonl", NULL),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(c.init_from, "ck");
	cr_expect(config_given(&c, config_setting("model")) && !config_given(&c, config_setting("hidden")));
	cr_expect_eq(parse_args(&c, err, "--init-from", "a", "--resume", "b", NULL), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--init-from: starts a new run") && strstr(err, "--resume"), "%s", err);
	cr_expect_eq(parse_args(&c, err, "--init-from", "", NULL), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--init-from: expected a path"), "%s", err);
	/* --eval-only takes the model flags and the execution's; every training flag is refused. */
	cr_assert_eq(parse_args(&c, err, "--eval-only", "ck", "--model", "mlp", "--hidden", "64",
				"--backend", "host", "--test-data", "t", "--timeout", "9", NULL),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(c.eval_only, "ck");
	int refused = 0;
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		char flag[64];
		const char *value = s->def ? s->def : s->type == SETTING_PATH ? "x" : "1";
		snprintf(flag, sizeof(flag), "--%s", s->flag);
		if (!strcmp(s->flag, "help") || !strcmp(s->flag, "version") || !strcmp(s->flag, "eval-only"))
			continue;
		int rc = s->type == SETTING_FLAG ? parse_args(&c, err, "--eval-only", "ck", "--model", "mlp",
							      flag, NULL)
						 : parse_args(&c, err, "--eval-only", "ck", "--model", "mlp",
							      flag, value, NULL);
		if (s->where & SETTING_TRAINING) {
			char want[128];
			snprintf(want, sizeof(want), "%s: a flag of training, and --eval-only trains nothing",
				 flag);
			cr_expect(rc == STATUS_BAD_INPUT && strstr(err, want), "%s with --eval-only: %d %s",
				  flag, rc, err);
			refused++;
		} else {
			cr_expect_eq(rc, STATUS_OK, "%s %s with --eval-only: %s", flag, value, err);
			cr_expect(strstr(config_setting("eval-only")->help, flag),
				  "--eval-only's help does not list %s among the flags it takes", flag);
		}
	}
	cr_expect_geq(refused, 25, "only %d training flags", refused);
	cr_expect(config_setting("init-from")->where & SETTING_TRAINING);
	cr_expect(config_setting("resume")->where & SETTING_TRAINING);
	cr_expect(!(config_setting("model")->where & SETTING_TRAINING));
}

Test(reliability_flags, bad_values_name_the_flag)
{
	struct {
		const char *flag, *value, *needle;
	} cases[] = {
		{"--save-every", "-1", "--save-every: '-1'"},
		{"--save-every", "1x", "--save-every: '1x'"},
		{"--save-every", "", "--save-every: ''"},
		{"--keep", "many", "--keep: 'many'"},
		{"--keep", "-2", "--keep: '-2'"},
		{"--timeout", "-1", "--timeout: '-1'"},
		{"--timeout", "inf", "--timeout: 'inf'"},
		{"--timeout", "nan", "--timeout: 'nan'"},
		{"--timeout", "5s", "--timeout: '5s'"},
		{"--timeout", "1e7", "--timeout: '1e7'"},
		{"--checkpoint-dir", "", "--checkpoint-dir: expected a path"},
		{"--resume", "", "--resume: expected a path"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct train_config c;
		char err[ERRLEN] = "";
		int rc = parse_args(&c, err, "--checkpoint-dir", "ck", cases[i].flag, cases[i].value, NULL);
		cr_expect_eq(rc, STATUS_BAD_INPUT, "%s '%s' accepted", cases[i].flag, cases[i].value);
		cr_expect(strstr(err, cases[i].needle), "%s '%s': message '%s' lacks '%s'",
			  cases[i].flag, cases[i].value, err, cases[i].needle);
	}
	struct train_config c;
	char err[ERRLEN] = "";
	cr_expect_eq(parse_args(&c, err, "--save-every", "10", NULL), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--save-every: only applies with --checkpoint-dir"), "%s", err);
	cr_expect_eq(parse_args(&c, err, "--keep", "2", NULL), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--keep: only applies with --checkpoint-dir"), "%s", err);
	cr_expect_eq(parse_args(&c, err, "--checkpoint-dir", NULL), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--checkpoint-dir: missing value"), "%s", err);
}
