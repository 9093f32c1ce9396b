/*
 * test_idx_malformed.c - IDX validation (host/io/idx.c): every malformed set
 * (wrong magic or dimensions, absurd or zero counts, truncation, trailing
 * bytes, labels out of range, counts that disagree, missing or empty files,
 * corrupt gzip) is refused with one message naming the file and the problem,
 * the caller's output untouched.
 *
 *   ctest --test-dir build -R test_idx --output-on-failure
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

/* ---- malformed sets ------------------------------------------------------------ */

/*
 * The set made of image file b (len bytes, freed here) and 3 good labels, or
 * of 3 good images and label file b, must be refused with a message that
 * holds want and want2 (when not NULL).
 */
static void refuse_images(uint8_t *b, size_t len, const char *want, const char *want2)
{
	write_images(b, len);
	free(b);
	write_labels_good(3);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES, want, want2);
}

static void refuse_labels(uint8_t *b, size_t len, const char *want, const char *want2)
{
	write_images_good(3);
	write_file(LABELS, b, len);
	free(b);
	expect_load_fail(STATUS_BAD_INPUT, LABELS, want, want2);
}

Test(idx, wrong_image_magic)
{
	size_t len;
	uint8_t *b = build_images(0x804, 3, 28, 28, 3 * IDX_PIXELS, &len);
	refuse_images(b, len, "bad magic 0x00000804", "expected 0x00000803");
}

Test(idx, label_file_given_as_images)
{
	size_t len;
	uint8_t *b = good_labels(3, &len);
	refuse_images(b, len, "bad magic 0x00000801", "expected 0x00000803");
}

Test(idx, wrong_label_magic)
{
	size_t len;
	uint8_t *b = build_labels(0x803, 3, 3, &len);
	refuse_labels(b, len, "bad magic 0x00000803", "expected 0x00000801");
}

Test(idx, wrong_dimensions)
{
	size_t len;
	uint8_t *b = build_images(0x803, 3, 27, 28, 3 * 27 * 28, &len);
	refuse_images(b, len, "27x28", "expected 28x28");
}

Test(idx, image_count_zero)
{
	size_t len;
	uint8_t *b = build_images(0x803, 0, 28, 28, 0, &len);
	refuse_images(b, len, "count is 0", NULL);
}

Test(idx, label_count_zero)
{
	size_t len;
	uint8_t *b = build_labels(0x801, 0, 0, &len);
	refuse_labels(b, len, "count is 0", NULL);
}

Test(idx, image_count_absurd)
{
	size_t len;
	uint8_t *b = build_images(0x803, 0xffffffffu, 28, 28, 3 * IDX_PIXELS, &len);
	refuse_images(b, len, "count 4294967295", "limit");
}

Test(idx, label_count_absurd)
{
	size_t len;
	uint8_t *b = build_labels(0x801, 0xffffffffu, 3, &len);
	refuse_labels(b, len, "count 4294967295", "limit");
}

Test(idx, images_truncated_by_one_byte)
{
	size_t len;
	char want[128];
	uint8_t *b = good_images(3, &len);

	snprintf(want, sizeof(want), "truncated: %zu bytes, header promises %zu", len - 1, len);
	refuse_images(b, len - 1, want, NULL);
}

Test(idx, labels_truncated_by_one_byte)
{
	size_t len;
	char want[128];
	uint8_t *b = good_labels(3, &len);

	snprintf(want, sizeof(want), "truncated: %zu bytes, header promises %zu", len - 1, len);
	refuse_labels(b, len - 1, want, NULL);
}

Test(idx, images_truncated_to_half_a_header)
{
	size_t len;
	uint8_t *b = good_images(3, &len);
	refuse_images(b, 8, "truncated: 8 bytes", "16-byte");
}

Test(idx, labels_truncated_to_half_a_header)
{
	size_t len;
	uint8_t *b = good_labels(3, &len);
	refuse_labels(b, 4, "truncated: 4 bytes", "8-byte");
}

Test(idx, image_trailing_bytes)
{
	size_t len;
	uint8_t *b = build_images(0x803, 3, 28, 28, 3 * IDX_PIXELS + 5, &len);
	refuse_images(b, len, "5 trailing bytes", NULL);
}

Test(idx, label_trailing_bytes)
{
	size_t len;
	uint8_t *b = build_labels(0x801, 3, 4, &len);
	refuse_labels(b, len, "1 trailing bytes", NULL);
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

/* A set of 3 good images, gzipped, and 3 good labels; the gzip file's bytes (freed by the caller). */
static uint8_t *gzip_set(size_t *glen)
{
	char path[1024];
	size_t len;
	uint8_t *b = good_images(3, &len);

	write_gz(IMAGES ".gz", b, len, 6);
	free(b);
	write_labels_good(3);
	tmp_path(path, sizeof(path), IMAGES ".gz");
	return slurp(path, glen);
}

Test(idx, corrupt_gzip_data)
{
	size_t glen;
	uint8_t *g = gzip_set(&glen);
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
	size_t glen;
	uint8_t *g = gzip_set(&glen);
	g[glen - 8] ^= 0xff; /* the CRC-32 in the gzip trailer */
	write_file(IMAGES ".gz", g, glen);
	free(g);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES ".gz", "corrupt gzip", NULL);
}

Test(idx, truncated_gzip)
{
	size_t glen;
	uint8_t *g = gzip_set(&glen);
	write_file(IMAGES ".gz", g, glen / 2);
	free(g);
	expect_load_fail(STATUS_BAD_INPUT, IMAGES ".gz", "truncated gzip", NULL);
}

