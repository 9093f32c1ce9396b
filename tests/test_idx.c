/*
 * test_idx.c - IDX reading (host/io/idx.c): CRC-32, the real MNIST files,
 * well-formed synthetic sets, raw and gzip, and the read limits. Malformed
 * sets: test_idx_malformed.c.
 *
 *   ctest --test-dir build -R test_idx --output-on-failure
 *
 * The real data set comes from MNIST_DATA_DIR (ctest sets it to MNIST_Data;
 * scripts/get-mnist.sh fills it); its absence is a failure, not a skip.
 * Malformed inputs are small synthetic files written into a fresh mkdtemp
 * directory per test (Criterion runs each test in its own process). Every
 * rejection must name the file and the specific problem, and must leave the
 * caller's output untouched.
 */

#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "idx_fixture.h"
#include "io/crc32.h"

TestSuite(idx, .init = make_tmpdir, .fini = remove_tmpdir);

/* ---- CRC-32 ------------------------------------------------------------------ */

Test(idx, crc32_known_vectors)
{
	const uint8_t *check = (const uint8_t *)"123456789";

	cr_assert_eq(crc32_bytes(0, NULL, 0), 0u);
	cr_assert_eq(crc32_bytes(0, check, 9), 0xcbf43926u, "CRC-32 of \"123456789\" is 0x%08x",
		     (unsigned)crc32_bytes(0, check, 9));
	cr_assert_eq(crc32_bytes(crc32_bytes(0, check, 4), check + 4, 5), 0xcbf43926u,
		     "chained CRC differs from one-shot");
}

Test(idx, crc32_matches_zlib_on_random_bytes)
{
	unsigned seed = 12345;
	size_t n = 100003;
	uint8_t *b = malloc(n);
	uint32_t ours;
	uLong theirs;

	cr_assert_not_null(b);
	srand(seed);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(rand() >> 7);
	ours = crc32_bytes(crc32_bytes(0, b, 777), b + 777, n - 777);
	theirs = crc32(crc32(0L, Z_NULL, 0), b, (uInt)n);
	cr_assert_eq(ours, (uint32_t)theirs, "seed %u: idx_crc32 0x%08x, zlib 0x%08lx", seed,
		     (unsigned)ours, (unsigned long)theirs);
	free(b);
}

/* ---- real MNIST ------------------------------------------------------------- */

/* Load <MNIST_DATA_DIR>/<sub> or fail saying how to get the data. */
static void load_real(const char *sub, const char *prefix, struct mnist_set *set)
{
	const char *root = getenv("MNIST_DATA_DIR");
	char dir[1024], err[ERRLEN] = "";
	int rc;

	if (!root || !*root)
		cr_assert_fail("MNIST_DATA_DIR is not set (ctest sets it to the MNIST_Data directory); "
			 "run scripts/get-mnist.sh and run this test through ctest");
	snprintf(dir, sizeof(dir), "%s/%s", root, sub);
	rc = idx_load_set(dir, prefix, set, err, sizeof(err));
	if (rc != STATUS_OK)
		cr_assert_fail("real MNIST not loadable from %s (%s): run scripts/get-mnist.sh to fetch it",
			 dir, err);
}

Test(idx, real_train_set)
{
	struct mnist_set a, b;
	uint32_t crc;

	load_real("train", "train", &a);
	cr_assert_eq(a.count, 60000);
	cr_assert_eq(a.labels[0], 5, "first training label is %d, expected 5", a.labels[0]);
	crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), a.images, (uInt)a.count * IDX_PIXELS);
	crc = (uint32_t)crc32(crc, a.labels, (uInt)a.count);
	cr_assert_eq(a.checksum, crc, "checksum 0x%08x, zlib says 0x%08x", (unsigned)a.checksum,
		     (unsigned)crc);

	load_real("train", "train", &b);
	cr_assert_eq(a.checksum, b.checksum, "checksum differs between two loads");
	cr_assert_eq(memcmp(a.images, b.images, (size_t)a.count * IDX_PIXELS), 0);
	mnist_set_destroy(&a);
	mnist_set_destroy(&b);
	cr_assert_null(a.images);
	cr_assert_eq(a.count, 0);
	mnist_set_destroy(&a); /* twice is harmless */
}

Test(idx, real_test_set)
{
	struct mnist_set a, b;

	load_real("test", "t10k", &a);
	cr_assert_eq(a.count, 10000);
	cr_assert_eq(a.labels[0], 7, "first test label is %d, expected 7", a.labels[0]);
	load_real("test", "t10k", &b);
	cr_assert_eq(a.checksum, b.checksum, "checksum differs between two loads");
	mnist_set_destroy(&a);
	mnist_set_destroy(&b);
}

Test(idx, real_gz_copy_loads_the_same)
{
	const char *root = getenv("MNIST_DATA_DIR");
	struct mnist_set raw, gz;
	char dir[1024], err[ERRLEN] = "";
	uint8_t *b;
	size_t len;
	int rc;

	load_real("test", "t10k", &raw);
	/*
	 * Compressed images beside raw labels: each file is handled on its own. The
	 * bytes come from MNIST_DATA_DIR whichever way it holds them (raw, or .gz only
	 * as scripts/gpu-node's kit carries them), decompressed by zlib itself.
	 */
	snprintf(dir, sizeof(dir), "%s/test", root);
	b = slurp_raw_or_gz(dir, "t10k-images-idx3-ubyte", &len);
	write_gz("t10k-images-idx3-ubyte.gz", b, len, 1);
	free(b);
	b = slurp_raw_or_gz(dir, "t10k-labels-idx1-ubyte", &len);
	write_file("t10k-labels-idx1-ubyte", b, len);
	free(b);

	rc = idx_load_set(tmpdir, "t10k", &gz, err, sizeof(err));
	cr_assert_eq(rc, STATUS_OK, "%s", err);
	cr_assert_eq(gz.count, raw.count);
	cr_assert_eq(gz.checksum, raw.checksum);
	cr_assert_eq(memcmp(gz.images, raw.images, (size_t)raw.count * IDX_PIXELS), 0);
	cr_assert_eq(memcmp(gz.labels, raw.labels, (size_t)raw.count), 0);
	mnist_set_destroy(&raw);
	mnist_set_destroy(&gz);
}

/* ---- well-formed synthetic sets ------------------------------------------------ */

static void check_synthetic(const struct mnist_set *s, int n)
{
	uint32_t crc = 0;

	cr_assert_eq(s->count, n);
	for (size_t i = 0; i < (size_t)n * IDX_PIXELS; i++)
		cr_assert_eq(s->images[i], pixel_at(i), "pixel %zu", i);
	for (int i = 0; i < n; i++)
		cr_assert_eq(s->labels[i], i % 10, "label %d", i);
	crc = crc32_bytes(crc, s->images, (size_t)n * IDX_PIXELS);
	crc = crc32_bytes(crc, s->labels, (size_t)n);
	cr_assert_eq(s->checksum, crc);
}

Test(idx, synthetic_set_loads)
{
	struct mnist_set s;
	char err[ERRLEN] = "", dir[600];

	write_good_set("train", 3);
	cr_assert_eq(idx_load_set(tmpdir, "train", &s, err, sizeof(err)), STATUS_OK, "%s", err);
	check_synthetic(&s, 3);
	mnist_set_destroy(&s);

	/* DATA_PATH=./MNIST_Data/train/ ends with a slash. */
	snprintf(dir, sizeof(dir), "%s/", tmpdir);
	cr_assert_eq(idx_load_set(dir, "train", &s, err, sizeof(err)), STATUS_OK, "%s", err);
	check_synthetic(&s, 3);
	mnist_set_destroy(&s);
}

Test(idx, synthetic_gz_set_loads_the_same)
{
	struct mnist_set s;
	char err[ERRLEN] = "";
	size_t len;
	uint8_t *b;

	b = good_images(4, &len);
	write_gz("train-images-idx3-ubyte.gz", b, len, 6);
	free(b);
	b = good_labels(4, &len);
	write_gz("train-labels-idx1-ubyte.gz", b, len, 9);
	free(b);
	cr_assert_eq(idx_load_set(tmpdir, "train", &s, err, sizeof(err)), STATUS_OK, "%s", err);
	check_synthetic(&s, 4);
	mnist_set_destroy(&s);
}

/* With both a raw file and a .gz beside it, the raw one is read (idx.h's contract). */
Test(idx, raw_file_wins_over_gz)
{
	struct mnist_set s;
	char err[ERRLEN] = "";

	write_good_set("train", 3);
	write_file(IMAGES ".gz", "not gzip, not IDX", 17); /* refused if it were read */
	cr_assert_eq(idx_load_set(tmpdir, "train", &s, err, sizeof(err)), STATUS_OK, "%s", err);
	check_synthetic(&s, 3);
	mnist_set_destroy(&s);
}

Test(idx, gzip_is_detected_by_magic_not_name)
{
	struct mnist_set s;
	char err[ERRLEN] = "";
	size_t len;
	uint8_t *b;

	/* Compressed bytes under the raw name. */
	b = good_images(2, &len);
	write_gz("train-images-idx3-ubyte", b, len, 6);
	free(b);
	/* Raw bytes under the .gz name. */
	b = good_labels(2, &len);
	write_file("train-labels-idx1-ubyte.gz", b, len);
	free(b);
	cr_assert_eq(idx_load_set(tmpdir, "train", &s, err, sizeof(err)), STATUS_OK, "%s", err);
	check_synthetic(&s, 2);
	mnist_set_destroy(&s);
}

Test(idx, parse_points_past_the_header)
{
	char err[ERRLEN] = "";
	const uint8_t *data = NULL;
	int count = -1;
	size_t len;
	uint8_t *b = good_images(2, &len);

	cr_assert_eq(idx_parse_images(b, len, "mem", &count, &data, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_assert_eq(count, 2);
	cr_assert_eq(data, b + 16);
	free(b);
	b = good_labels(2, &len);
	cr_assert_eq(idx_parse_labels(b, len, "mem", &count, &data, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_assert_eq(data, b + 8);
	free(b);
}

/* Every prefix of a valid file is rejected with a message, without reading past it. */
Test(idx, every_truncation_is_rejected)
{
	char err[ERRLEN];
	const uint8_t *data = NULL;
	int count = -1;
	size_t len;
	uint8_t *b = good_images(2, &len);

	for (size_t cut = 0; cut < len; cut++) {
		/* A copy of exactly `cut` bytes, so valgrind sees any read past it. */
		uint8_t *c = malloc(cut ? cut : 1);

		memcpy(c, b, cut);
		err[0] = '\0';
		cr_assert_eq(idx_parse_images(c, cut, "cut-images", &count, &data, err, sizeof(err)),
			     STATUS_BAD_INPUT, "cut at %zu accepted", cut);
		cr_assert_not_null(strstr(err, "cut-images"), "cut %zu: %s", cut, err);
		cr_assert_eq(count, -1);
		cr_assert_null(data);
		free(c);
	}
	free(b);
	b = good_labels(3, &len);
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *c = malloc(cut ? cut : 1);

		memcpy(c, b, cut);
		err[0] = '\0';
		cr_assert_eq(idx_parse_labels(c, cut, "cut-labels", &count, &data, err, sizeof(err)),
			     STATUS_BAD_INPUT, "cut at %zu accepted", cut);
		cr_assert_not_null(strstr(err, "cut-labels"), "cut %zu: %s", cut, err);
		free(c);
	}
	free(b);
}

/* ---- idx_read_file limits ---------------------------------------------------------- */

/* idx_read_file must fail with want_rc and a message naming the file, leaving buf and len. */
static void expect_read_fail(const char *name, size_t max_bytes, int want_rc, const char *problem)
{
	char path[1024], err[ERRLEN] = "";
	uint8_t *buf = (uint8_t *)&err; /* any recognisable pointer */
	size_t len = 12345;
	int rc;

	tmp_path(path, sizeof(path), name);
	rc = idx_read_file(path, max_bytes, &buf, &len, err, sizeof(err));
	cr_assert_eq(rc, want_rc, "rc %d, expected %d: %s", rc, want_rc, err);
	cr_assert_eq(buf, (uint8_t *)&err, "buf touched on failure");
	cr_assert_eq(len, 12345u, "len touched on failure");
	cr_assert_not_null(strstr(err, path), "message does not name %s: %s", path, err);
	cr_assert_not_null(strstr(err, problem), "message lacks \"%s\": %s", problem, err);
}

Test(idx, gzip_bomb_is_refused)
{
	size_t n = (size_t)1 << 20;
	uint8_t *zeros = calloc(n, 1);
	char path[1024], err[ERRLEN] = "";
	uint8_t *buf = NULL;
	size_t len = 0;

	cr_assert_not_null(zeros);
	write_gz("bomb.gz", zeros, n, 9);
	free(zeros);
	expect_read_fail("bomb.gz", 4096, STATUS_BAD_INPUT, "past the limit of 4096 bytes");
	/* Exactly at the limit is fine. */
	tmp_path(path, sizeof(path), "bomb.gz");
	cr_assert_eq(idx_read_file(path, n, &buf, &len, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_assert_eq(len, n);
	free(buf);
	expect_read_fail("bomb.gz", n - 1, STATUS_BAD_INPUT, "past the limit");
}

Test(idx, raw_file_over_the_limit_is_refused)
{
	write_images_good(2);
	expect_read_fail(IMAGES, 100, STATUS_BAD_INPUT, "more than the limit of 100");
}

Test(idx, read_missing_file)
{
	expect_read_fail("nothing-here", 100, STATUS_BAD_INPUT, "cannot open");
}

Test(idx, read_empty_file)
{
	write_file("empty", "", 0);
	expect_read_fail("empty", 100, STATUS_BAD_INPUT, "empty file");
}

Test(idx, read_empty_gzip)
{
	write_gz("empty.gz", "", 0, 6);
	expect_read_fail("empty.gz", 100, STATUS_BAD_INPUT, "empty file");
}

Test(idx, messages_fit_a_small_buffer)
{
	struct mnist_set s;
	char err[8];

	write_images("", 0);
	cr_assert_eq(idx_load_set(tmpdir, "train", &s, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_assert_eq(strlen(err), sizeof(err) - 1);
	cr_assert_eq(idx_load_set(tmpdir, "train", &s, NULL, 0), STATUS_BAD_INPUT);
}
