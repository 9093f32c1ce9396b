/*
 * test_agree.c - the start-up fingerprint and its comparison (host/agree.c),
 * without MPI ranks: the collective part runs in tests/multinode/agree.sh
 * and namespaces.sh.
 *
 *   ctest --test-dir build -R test_agree --output-on-failure
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "config.h"
#include "io/idx.h"

static struct mnist_set train_set = {.count = 60000, .checksum = 0x1234abcdu};
static struct mnist_set test_set = {.count = 10000, .checksum = 0x0badf00du};

/* The fingerprint of cfg with the usual data sets on the host backend. */
static void print(const struct train_config *cfg, char *fp)
{
	memset(fp, 0x5a, AGREE_FINGERPRINT_BYTES);
	int n = agree_fingerprint(cfg, &train_set, &test_set, "host", fp, AGREE_FINGERPRINT_BYTES);
	cr_assert(n > 0 && (size_t)n == strlen(fp), "fingerprint length %d", n);
}

static struct train_config defaults(void)
{
	struct train_config c;
	unsetenv("DATA_PATH");
	config_defaults(&c);
	return c;
}

/* Does fp hold exactly this line? */
static int has_line(const char *fp, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = fp; (p = strstr(p, line)); p++)
		if ((p == fp || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

static char a[AGREE_FINGERPRINT_BYTES], b[AGREE_FINGERPRINT_BYTES];

Test(agree, fingerprint_holds_the_contract_keys)
{
	struct train_config c = defaults();
	print(&c, a);
	const char *want[] = {
		"version=" MNIST_DDP_VERSION, "backend=host", "model=seed", "hidden=", "epochs=10",
		"batch_size=32", "lr=0.01", "momentum=0", "seed=1", "limit=", "grad_reduce=mean",
		"drop_last=off", "checkpoint_dir=", "save_every=", "keep=", "resume=", "timeout=300",
		"allow_nonfinite=off", "train_images=60000", "train_crc32=1234abcd",
		"test_images=10000", "test_crc32=0badf00d",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(has_line(a, want[i]), "fingerprint lacks the line '%s':\n%s", want[i], a);
	cr_expect(strstr(a, "\nmpi=") != NULL, "no MPI library line:\n%s", a);
	/* What may differ per rank is not in it. */
	const char *absent[] = {"\ndata=", "\ntest_data=", "\nthreads=", "\nlog_every=", "\nmetrics=",
				"\nbackend=auto"};
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		cr_expect(!strstr(a, absent[i]), "fingerprint holds '%s':\n%s", absent[i] + 1, a);
}

Test(agree, every_agreed_setting_has_its_line)
{
	struct train_config c = defaults();
	print(&c, a);
	int n = 0;
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		char key[64], line[128];
		config_key(s, key, sizeof(key));
		snprintf(line, sizeof(line), "\n%s=", key);
		if (!strcmp(key, "backend"))
			continue; /* the line is the backend chosen, not --backend */
		cr_expect(!(s->where & SETTING_AGREE) == !strstr(a, line), "--%s: %s in the fingerprint", s->flag,
			  s->where & SETTING_AGREE ? "missing" : "present");
		n += !!(s->where & SETTING_AGREE);
	}
	cr_expect_geq(n, 16, "only %d settings are agreed", n);
}

Test(agree, no_test_set_and_mlp_layers)
{
	struct train_config c = defaults();
	c.model = MODEL_MLP;
	c.hidden[0] = 100;
	c.hidden[1] = 50;
	c.n_hidden = 2;
	cr_assert_gt(agree_fingerprint(&c, &train_set, NULL, "cuda", a, sizeof(a)), 0);
	cr_expect(has_line(a, "model=mlp") && has_line(a, "hidden=100,50"), "%s", a);
	cr_expect(has_line(a, "test_images=none") && has_line(a, "test_crc32=none"), "%s", a);
	cr_expect(has_line(a, "backend=cuda"), "%s", a);
}

/* --eval-only reads no training set: its fingerprint says so; the checkpoint's path is agreed. */
Test(agree, eval_only_without_a_training_set)
{
	struct train_config c = defaults();
	snprintf(c.eval_only, sizeof(c.eval_only), "ck");
	cr_assert_gt(agree_fingerprint(&c, NULL, &test_set, "host", a, sizeof(a)), 0);
	cr_expect(has_line(a, "train_images=none") && has_line(a, "train_crc32=none"), "%s", a);
	cr_expect(has_line(a, "eval_only=ck") && has_line(a, "init_from=") &&
			  has_line(a, "test_images=10000"),
		  "%s", a);
	snprintf(c.eval_only, sizeof(c.eval_only), "ck2");
	cr_assert_gt(agree_fingerprint(&c, NULL, &test_set, "host", b, sizeof(b)), 0);
	char keys[64];
	cr_expect_eq(agree_diff(a, b, NULL, 0, keys, sizeof(keys)), 1);
	cr_expect_str_eq(keys, "eval_only");
}

Test(agree, per_rank_settings_do_not_differ)
{
	struct train_config c = defaults();
	char diff[256], keys[64];
	print(&c, a);
	snprintf(c.data_dir, sizeof(c.data_dir), "/elsewhere/train");
	snprintf(c.metrics_path, sizeof(c.metrics_path), "m.jsonl");
	c.threads = 1;
	c.log_every = 5; /* the launches of several steps end at every rank's lines (train.c) */
	c.backend = BACKEND_HOST;
	print(&c, b);
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 0, "per-rank settings made %d differences: %s", n, diff);
	cr_expect_str_empty(diff);
	cr_expect_str_empty(keys);
}

Test(agree, learning_rates_differ_in_lr_only)
{
	struct train_config c = defaults();
	char diff[256], keys[64];
	print(&c, a);
	c.lr = 0.02f;
	print(&c, b);
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 1);
	cr_expect_str_eq(diff, "lr=0.02 (rank 0: 0.01)");
	cr_expect_str_eq(keys, "lr");
}

Test(agree, neighbouring_floats_differ)
{
	struct train_config c = defaults();
	c.lr = 0.1f;
	print(&c, a);
	cr_expect(has_line(a, "lr=0.1"), "%s", a);
	c.lr = nextafterf(0.1f, 1.0f);
	print(&c, b);
	cr_expect_eq(agree_diff(a, b, NULL, 0, NULL, 0), 1,
		     "lr 0.1f and the next float must not print alike");
}

Test(agree, data_and_several_keys)
{
	struct train_config c = defaults();
	char diff[512], keys[128];
	print(&c, a);
	c.epochs = 3;
	c.seed = 7;
	train_set.checksum ^= 1;
	print(&c, b);
	train_set.checksum ^= 1;
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 3, "%s", diff);
	cr_expect_str_eq(keys, "epochs, seed, train_crc32");
	cr_expect_str_eq(diff, "epochs=3 (rank 0: 10), seed=7 (rank 0: 1), "
			       "train_crc32=1234abcc (rank 0: 1234abcd)");
}

/* The checkpoint and deadline flags are part of the one fingerprint. */
Test(agree, checkpoint_and_deadline_flags_are_agreed)
{
	struct train_config c = defaults();
	char diff[512], keys[128];
	print(&c, a);
	snprintf(c.resume, sizeof(c.resume), "ck");
	snprintf(c.checkpoint_dir, sizeof(c.checkpoint_dir), "ck");
	c.save_every = 50;
	c.timeout = 2.5f;
	c.allow_nonfinite = 1;
	print(&c, b);
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 6, "%s", diff);
	cr_expect_str_eq(keys, "checkpoint_dir, save_every, keep, resume, timeout, allow_nonfinite");
	cr_expect_str_eq(diff, "checkpoint_dir=ck (rank 0: \"\"), save_every=50 (rank 0: \"\"), keep=3 "
			       "(rank 0: \"\"), resume=ck (rank 0: \"\"), timeout=2.5 (rank 0: 300), "
			       "allow_nonfinite=on (rank 0: off)");
	/* A path with a newline stays one line. */
	snprintf(c.resume, sizeof(c.resume), "a\nb\\c");
	print(&c, b);
	cr_expect(has_line(b, "resume=a\\nb\\\\c"), "%s", b);
}

Test(agree, keys_of_another_build)
{
	const char *ref = "version=0.1.0\nlr=0.01\nold_key=1\n";
	const char *other = "version=0.2.0\nlr=0.01\nnew_key=x\n";
	char diff[256], keys[64];
	int n = agree_diff(ref, other, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 3);
	cr_expect_str_eq(diff, "version=0.2.0 (rank 0: 0.1.0), old_key missing (rank 0: 1), "
			       "new_key=x (rank 0: missing)");
	cr_expect_str_eq(keys, "version, old_key, new_key");
}

Test(agree, garbage_lines_are_ignored_and_output_is_bounded)
{
	const char *ref = "no equals sign\n=no key\nlr=0.01\n";
	const char *other = "lr=0.5\n\n\n";
	char diff[12], keys[4];
	memset(diff, 0x5a, sizeof(diff));
	int n = agree_diff(ref, other, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 1);
	cr_expect(memchr(diff, '\0', sizeof(diff)) != NULL, "diff not terminated");
	cr_expect_eq(strncmp(diff, "lr=0.5 (", 8), 0, "'%s'", diff);
	cr_expect(strlen(diff) == sizeof(diff) - 1 && !strcmp(diff + sizeof(diff) - 4, "..."),
		  "a cut diff ends with '...': '%s'", diff);
}

Test(agree, a_fingerprint_that_does_not_fit_is_refused)
{
	struct train_config c = defaults();
	char small[64];
	memset(small, 0x5a, sizeof(small));
	cr_expect_eq(agree_fingerprint(&c, &train_set, &test_set, "host", small, sizeof(small)), -1);
	cr_expect(memchr(small, '\0', sizeof(small)) != NULL, "not terminated");
	/* The longest paths the parser takes still fit the broadcast. */
	memset(c.resume, 'r', sizeof(c.resume));
	memset(c.checkpoint_dir, 'c', sizeof(c.checkpoint_dir));
	c.checkpoint_dir[(int)config_setting("checkpoint-dir")->hi] = '\0';
	c.resume[(int)config_setting("resume")->hi] = '\0';
	cr_expect_gt(agree_fingerprint(&c, &train_set, &test_set, "host", a, sizeof(a)), 0);
}
