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
#include <string.h>

#include "agree.h"
#include "config.h"
#include "io/idx.h"

static struct mnist_set train_set = {.count = 60000, .checksum = 0x1234abcdu};
static struct mnist_set test_set = {.count = 10000, .checksum = 0x0badf00du};

/* A fingerprint of cfg with the usual data sets, placement from (host, local, device). */
static void print(const struct train_config *cfg, const char *host, int local, const char *device,
		  char *rec)
{
	memset(rec, 0x5a, AGREE_RECORD_BYTES);
	agree_fingerprint(cfg, &train_set, &test_set, "host", host, local, device, rec,
			  AGREE_RECORD_BYTES);
}

static struct train_config defaults(void)
{
	struct train_config c;
	config_defaults(&c);
	return c;
}

/* Does rec hold exactly this line? */
static int has_line(const char *rec, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = rec; (p = strstr(p, line)); p++)
		if ((p == rec || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

Test(agree, fingerprint_holds_the_contract_keys)
{
	struct train_config c = defaults();
	char rec[AGREE_RECORD_BYTES];
	print(&c, "node1", 0, "cpu", rec);
	const char *want[] = {
		"@host=node1", "@local_rank=0", "@device=cpu", "version=" MNIST_DDP_VERSION,
		"backend=host", "model=seed", "layers=784,10", "params=7850", "batch_size=32",
		"lr=0.01", "momentum=0", "epochs=10", "seed=1", "limit=0", "grad_reduce=mean",
		"drop_last=0", "train_images=60000", "train_crc32=1234abcd", "test_images=10000",
		"test_crc32=0badf00d",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(has_line(rec, want[i]), "fingerprint lacks the line '%s':\n%s", want[i], rec);
	cr_expect(strstr(rec, "\nmpi=") != NULL, "no MPI library line:\n%s", rec);
	cr_expect(strlen(rec) < AGREE_RECORD_BYTES, "record not terminated");
}

Test(agree, no_test_set_and_mlp_layers)
{
	struct train_config c = defaults();
	c.model = MODEL_MLP;
	c.hidden[0] = 100;
	c.hidden[1] = 50;
	c.n_hidden = 2;
	char rec[AGREE_RECORD_BYTES];
	agree_fingerprint(&c, &train_set, NULL, "cuda", "n", 3, "GPU", rec, sizeof(rec));
	cr_expect(has_line(rec, "layers=784,100,50,10"), "%s", rec);
	cr_expect(has_line(rec, "params=84060"), "784*100+100 + 100*50+50 + 50*10+10:\n%s", rec);
	cr_expect(has_line(rec, "test_images=none") && has_line(rec, "test_crc32=none"), "%s", rec);
	cr_expect(has_line(rec, "backend=cuda") && has_line(rec, "@local_rank=3"), "%s", rec);
}

Test(agree, same_configuration_agrees_whatever_the_placement)
{
	struct train_config c = defaults();
	char a[AGREE_RECORD_BYTES], b[AGREE_RECORD_BYTES], diff[256], keys[64];
	print(&c, "node1", 0, "cpu (OpenBLAS, 1 thread)", a);
	print(&c, "node2", 5, "cpu (OpenBLAS, 8 threads)", b);
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 0, "placement alone made %d differences: %s", n, diff);
	cr_expect_str_empty(diff);
	cr_expect_str_empty(keys);
}

Test(agree, learning_rates_differ_in_lr_only)
{
	struct train_config c = defaults();
	char a[AGREE_RECORD_BYTES], b[AGREE_RECORD_BYTES], diff[256], keys[64];
	print(&c, "h", 0, "cpu", a);
	c.lr = 0.02f;
	print(&c, "h", 1, "cpu", b);
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 1);
	cr_expect_str_eq(diff, "lr=0.02 (rank 0: 0.01)");
	cr_expect_str_eq(keys, "lr");
}

Test(agree, neighbouring_floats_differ)
{
	struct train_config c = defaults();
	char a[AGREE_RECORD_BYTES], b[AGREE_RECORD_BYTES];
	c.lr = 0.1f;
	print(&c, "h", 0, "cpu", a);
	cr_expect(has_line(a, "lr=0.1"), "%s", a);
	c.lr = nextafterf(0.1f, 1.0f);
	print(&c, "h", 0, "cpu", b);
	cr_expect_eq(agree_diff(a, b, NULL, 0, NULL, 0), 1,
		     "lr 0.1f and the next float must not print alike");
}

Test(agree, data_and_several_keys)
{
	struct train_config c = defaults();
	char a[AGREE_RECORD_BYTES], b[AGREE_RECORD_BYTES], diff[512], keys[128];
	print(&c, "h", 0, "cpu", a);
	c.epochs = 3;
	c.seed = 7;
	train_set.checksum ^= 1;
	print(&c, "h", 0, "cpu", b);
	train_set.checksum ^= 1;
	int n = agree_diff(a, b, diff, sizeof(diff), keys, sizeof(keys));
	cr_expect_eq(n, 3, "%s", diff);
	cr_expect_str_eq(keys, "epochs, seed, train_crc32");
	cr_expect_str_eq(diff, "epochs=3 (rank 0: 10), seed=7 (rank 0: 1), "
			       "train_crc32=1234abcc (rank 0: 1234abcd)");
}

Test(agree, keys_of_another_build)
{
	const char *ref = "@host=a\nversion=0.1.0\nlr=0.01\nold_key=1\n";
	const char *other = "@host=b\nversion=0.2.0\nlr=0.01\nnew_key=x\n";
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

Test(agree, small_record_is_cut_at_a_line)
{
	struct train_config c = defaults();
	char rec[64];
	memset(rec, 0x5a, sizeof(rec));
	agree_fingerprint(&c, &train_set, &test_set, "host", "node1", 0, "cpu", rec, sizeof(rec));
	size_t n = strnlen(rec, sizeof(rec));
	cr_assert_lt(n, sizeof(rec), "record not terminated");
	cr_expect(n > 0 && rec[n - 1] == '\n', "record cut inside a line: '%s'", rec);
}
