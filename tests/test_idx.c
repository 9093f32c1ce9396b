/*
 * test_idx.c - IDX reading and validation (host/idx.c).
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

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "io/crc32.h"
#include "io/idx.h"

#define ERRLEN 1024
#define SENTINEL 0xa5

static char tmpdir[512];

static void make_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/test_idx.XXXXXX", base && *base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp(%s) failed", tmpdir);
}

/* The directory is flat: remove every file in it, then the directory. */
static void remove_tmpdir(void)
{
	char path[1024];
	struct dirent *e;
	DIR *d = opendir(tmpdir);

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmpdir);
}

TestSuite(idx, .init = make_tmpdir, .fini = remove_tmpdir);

/* ---- synthetic files ------------------------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint8_t pixel_at(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

/* An image file: 16-byte header, then `payload` pixel bytes (normally count * 784). */
static uint8_t *build_images(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
			     size_t payload, size_t *len)
{
	uint8_t *b = malloc(16 + payload);

	cr_assert_not_null(b);
	put_be32(b, magic);
	put_be32(b + 4, count);
	put_be32(b + 8, rows);
	put_be32(b + 12, cols);
	for (size_t i = 0; i < payload; i++)
		b[16 + i] = pixel_at(i);
	*len = 16 + payload;
	return b;
}

/* A label file: 8-byte header, then `payload` labels i % 10. */
static uint8_t *build_labels(uint32_t magic, uint32_t count, size_t payload, size_t *len)
{
	uint8_t *b = malloc(8 + payload);

	cr_assert_not_null(b);
	put_be32(b, magic);
	put_be32(b + 4, count);
	for (size_t i = 0; i < payload; i++)
		b[8 + i] = (uint8_t)(i % 10);
	*len = 8 + payload;
	return b;
}

static uint8_t *good_images(uint32_t n, size_t *len)
{
	return build_images(0x803, n, 28, 28, (size_t)n * IDX_PIXELS, len);
}

static uint8_t *good_labels(uint32_t n, size_t *len)
{
	return build_labels(0x801, n, n, len);
}

static void tmp_path(char *dst, size_t cap, const char *name)
{
	snprintf(dst, cap, "%s/%s", tmpdir, name);
}

static void write_file(const char *name, const void *buf, size_t len)
{
	char path[1024];
	FILE *f;

	tmp_path(path, sizeof(path), name);
	f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot create %s", path);
	cr_assert_eq(fwrite(buf, 1, len, f), len, "short write to %s", path);
	cr_assert_eq(fclose(f), 0);
}

static void write_gz(const char *name, const void *buf, size_t len, int level)
{
	char path[1024], mode[8];
	gzFile gz;

	tmp_path(path, sizeof(path), name);
	snprintf(mode, sizeof(mode), "wb%d", level);
	gz = gzopen(path, mode);
	cr_assert_not_null(gz, "cannot create %s", path);
	cr_assert_eq(gzwrite(gz, buf, (unsigned)len), (int)len, "gzwrite to %s", path);
	cr_assert_eq(gzclose(gz), Z_OK);
}

/* Read a whole file written by this test (no validation) into a malloc'ed buffer. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;
	uint8_t *b;

	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(n > 0 ? (size_t)n : 1);
	cr_assert_not_null(b);
	cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void write_good_set(const char *prefix, uint32_t n)
{
	char name[256];
	size_t len;
	uint8_t *b;

	b = good_images(n, &len);
	snprintf(name, sizeof(name), "%s-images-idx3-ubyte", prefix);
	write_file(name, b, len);
	free(b);
	b = good_labels(n, &len);
	snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", prefix);
	write_file(name, b, len);
	free(b);
}

/*
 * idx_load_set(tmpdir, "train") must fail with want_rc, an error naming
 * `file` (a name inside tmpdir, or NULL) and containing each given problem
 * text, and must leave the output struct byte-for-byte untouched.
 */
static void expect_load_fail(int want_rc, const char *file, const char *problem,
			     const char *problem2)
{
	struct mnist_set set, before;
	char err[ERRLEN] = "";
	char path[1024];
	int rc;

	memset(&set, SENTINEL, sizeof(set));
	memcpy(&before, &set, sizeof(set));
	rc = idx_load_set(tmpdir, "train", &set, err, sizeof(err));
	cr_assert_eq(rc, want_rc, "rc %d, expected %d; message: %s", rc, want_rc, err);
	cr_assert_eq(memcmp(&set, &before, sizeof(set)), 0, "output touched on failure (%s)",
		     err);
	if (file) {
		tmp_path(path, sizeof(path), file);
		cr_assert_not_null(strstr(err, path), "message does not name %s: \"%s\"", path,
				   err);
	}
	if (problem)
		cr_assert_not_null(strstr(err, problem), "message lacks \"%s\": \"%s\"", problem,
				   err);
	if (problem2)
		cr_assert_not_null(strstr(err, problem2), "message lacks \"%s\": \"%s\"",
				   problem2, err);
}

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
	char path[1024], err[ERRLEN] = "";
	uint8_t *b;
	size_t len;
	int rc;

	load_real("test", "t10k", &raw);
	/* Compressed images beside raw labels: each file is handled on its own. */
	snprintf(path, sizeof(path), "%s/test/t10k-images-idx3-ubyte", root);
	b = slurp(path, &len);
	write_gz("t10k-images-idx3-ubyte.gz", b, len, 1);
	free(b);
	snprintf(path, sizeof(path), "%s/test/t10k-labels-idx1-ubyte", root);
	b = slurp(path, &len);
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

/* ---- malformed sets ------------------------------------------------------------ */

#define IMAGES "train-images-idx3-ubyte"
#define LABELS "train-labels-idx1-ubyte"

static void write_images(const void *b, size_t len)
{
	write_file(IMAGES, b, len);
}

static void write_labels_good(uint32_t n)
{
	size_t len;
	uint8_t *b = good_labels(n, &len);

	write_file(LABELS, b, len);
	free(b);
}

static void write_images_good(uint32_t n)
{
	size_t len;
	uint8_t *b = good_images(n, &len);

	write_images(b, len);
	free(b);
}

Test(idx, wrong_image_magic)
{
	size_t len;
	uint8_t *b = build_images(0x804, 3, 28, 28, 3 * IDX_PIXELS, &len);

	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "bad magic 0x00000804", "expected 0x00000803");
}

Test(idx, label_file_given_as_images)
{
	size_t len;
	uint8_t *b = good_labels(3, &len);

	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "bad magic 0x00000801", "expected 0x00000803");
}

Test(idx, wrong_label_magic)
{
	size_t len;
	uint8_t *b = build_labels(0x803, 3, 3, &len);

	write_images_good(3);
	write_file(LABELS, b, len);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "bad magic 0x00000803", "expected 0x00000801");
}

Test(idx, wrong_dimensions)
{
	size_t len;
	uint8_t *b = build_images(0x803, 3, 27, 28, 3 * 27 * 28, &len);

	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "27x28", "expected 28x28");
}

Test(idx, image_count_zero)
{
	size_t len;
	uint8_t *b = build_images(0x803, 0, 28, 28, 0, &len);

	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "count is 0", NULL);
}

Test(idx, label_count_zero)
{
	size_t len;
	uint8_t *b = build_labels(0x801, 0, 0, &len);

	write_images_good(3);
	write_file(LABELS, b, len);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "count is 0", NULL);
}

Test(idx, image_count_absurd)
{
	size_t len;
	uint8_t *b = build_images(0x803, 0xffffffffu, 28, 28, 3 * IDX_PIXELS, &len);

	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "count 4294967295", "limit");
}

Test(idx, label_count_absurd)
{
	size_t len;
	uint8_t *b = build_labels(0x801, 0xffffffffu, 3, &len);

	write_images_good(3);
	write_file(LABELS, b, len);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "count 4294967295", "limit");
}

Test(idx, images_truncated_by_one_byte)
{
	size_t len;
	char want[128];
	uint8_t *b = good_images(3, &len);

	write_images(b, len - 1);
	free(b);
	write_labels_good(3);
	snprintf(want, sizeof(want), "truncated: %zu bytes, header promises %zu", len - 1, len);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, want, NULL);
}

Test(idx, labels_truncated_by_one_byte)
{
	size_t len;
	char want[128];
	uint8_t *b = good_labels(3, &len);

	write_images_good(3);
	write_file(LABELS, b, len - 1);
	free(b);
	snprintf(want, sizeof(want), "truncated: %zu bytes, header promises %zu", len - 1, len);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, want, NULL);
}

Test(idx, images_truncated_to_half_a_header)
{
	size_t len;
	uint8_t *b = good_images(3, &len);

	write_images(b, 8);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "truncated: 8 bytes", "16-byte");
}

Test(idx, labels_truncated_to_half_a_header)
{
	size_t len;
	uint8_t *b = good_labels(3, &len);

	write_images_good(3);
	write_file(LABELS, b, 4);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "truncated: 4 bytes", "8-byte");
}

Test(idx, image_trailing_bytes)
{
	size_t len;
	uint8_t *b = build_images(0x803, 3, 28, 28, 3 * IDX_PIXELS + 5, &len);

	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "5 trailing bytes", NULL);
}

Test(idx, label_trailing_bytes)
{
	size_t len;
	uint8_t *b = build_labels(0x801, 3, 4, &len);

	write_images_good(3);
	write_file(LABELS, b, len);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "1 trailing bytes", NULL);
}

Test(idx, label_out_of_range)
{
	size_t len;
	uint8_t *b = good_labels(4, &len);

	b[8 + 2] = 10;
	b[8 + 3] = 200;
	write_images_good(4);
	write_file(LABELS, b, len);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "label 10 at index 2", "0..9");
}

Test(idx, image_label_count_mismatch)
{
	char images[1024], labels[1024];

	write_images_good(3);
	write_labels_good(4);
	tmp_path(images, sizeof(images), IMAGES);
	tmp_path(labels, sizeof(labels), LABELS);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "count mismatch", "3 images");
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "4 labels", NULL);
}

Test(idx, missing_directory)
{
	struct mnist_set set, before;
	char dir[1024], err[ERRLEN] = "";

	tmp_path(dir, sizeof(dir), "no-such-dir");
	memset(&set, SENTINEL, sizeof(set));
	memcpy(&before, &set, sizeof(set));
	cr_assert_eq(idx_load_set(dir, "train", &set, err, sizeof(err)), STATUS_BAD_INPUT, "%s",
		     err);
	cr_assert_eq(idx_set_present(dir, "train"), 0);
	cr_assert_eq(memcmp(&set, &before, sizeof(set)), 0);
	cr_assert_not_null(strstr(err, dir), "%s", err);
	cr_assert_not_null(strstr(err, "does not exist"), "%s", err);
}

Test(idx, missing_image_file)
{
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "missing", ".gz");
	cr_assert_eq(idx_set_present(tmpdir, "train"), 0, "labels alone are not a set");
}

Test(idx, missing_label_file_is_a_present_but_broken_set)
{
	write_images_good(3);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "missing", NULL);
	cr_assert_eq(idx_set_present(tmpdir, "train"), 1, "the images make the set present");
}

Test(idx, empty_image_file)
{
	write_images("", 0);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, "empty file", NULL);
}

Test(idx, empty_label_file)
{
	write_images_good(3);
	write_file(LABELS, "", 0);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, "empty file", NULL);
}

Test(idx, corrupt_gzip_data)
{
	char path[1024];
	size_t len, glen;
	uint8_t *b = good_images(3, &len), *g;

	write_gz(IMAGES ".gz", b, len, 6);
	free(b);
	write_labels_good(3);
	tmp_path(path, sizeof(path), IMAGES ".gz");
	g = slurp(path, &glen);
	cr_assert_gt(glen, 40u);
	/* Garble the deflate stream after the 10-byte gzip header. */
	for (size_t i = 12; i < 20; i++)
		g[i] ^= 0x5a;
	write_file(IMAGES ".gz", g, glen);
	free(g);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES ".gz", "corrupt gzip", NULL);
}

Test(idx, gzip_with_bad_crc)
{
	char path[1024];
	size_t len, glen;
	uint8_t *b = good_images(3, &len), *g;

	write_gz(IMAGES ".gz", b, len, 6);
	free(b);
	write_labels_good(3);
	tmp_path(path, sizeof(path), IMAGES ".gz");
	g = slurp(path, &glen);
	g[glen - 8] ^= 0xff; /* the CRC-32 in the gzip trailer */
	write_file(IMAGES ".gz", g, glen);
	free(g);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES ".gz", "corrupt gzip", NULL);
}

Test(idx, truncated_gzip)
{
	char path[1024];
	size_t len, glen;
	uint8_t *b = good_images(3, &len), *g;

	write_gz(IMAGES ".gz", b, len, 6);
	free(b);
	write_labels_good(3);
	tmp_path(path, sizeof(path), IMAGES ".gz");
	g = slurp(path, &glen);
	write_file(IMAGES ".gz", g, glen / 2);
	free(g);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES ".gz", "truncated gzip", NULL);
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
