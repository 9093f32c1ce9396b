/* idx_fixture.c - the IDX tests' fixtures: see tests/idx_fixture.h. */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "idx_fixture.h"

char tmpdir[512];

void make_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/test_idx.XXXXXX", base && *base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp(%s) failed", tmpdir);
}

/* The directory is flat: remove every file in it, then the directory. */
void remove_tmpdir(void)
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



void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

uint8_t pixel_at(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

/* An image file: 16-byte header, then `payload` pixel bytes (normally count * 784). */
uint8_t *build_images(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
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
uint8_t *build_labels(uint32_t magic, uint32_t count, size_t payload, size_t *len)
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

uint8_t *good_images(uint32_t n, size_t *len)
{
	return build_images(0x803, n, 28, 28, (size_t)n * IDX_PIXELS, len);
}

uint8_t *good_labels(uint32_t n, size_t *len)
{
	return build_labels(0x801, n, n, len);
}

void tmp_path(char *dst, size_t cap, const char *name)
{
	snprintf(dst, cap, "%s/%s", tmpdir, name);
}

void write_file(const char *name, const void *buf, size_t len)
{
	char path[1024];
	FILE *f;

	tmp_path(path, sizeof(path), name);
	f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot create %s", path);
	cr_assert_eq(fwrite(buf, 1, len, f), len, "short write to %s", path);
	cr_assert_eq(fclose(f), 0);
}

void write_gz(const char *name, const void *buf, size_t len, int level)
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
uint8_t *slurp(const char *path, size_t *len)
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

/*
 * The bytes of <dir>/<name>, or of <dir>/<name>.gz decompressed when there is
 * no raw file (the data set's two layouts), read by zlib, not by the reader
 * under test. Fails the test, naming both paths, when neither is readable.
 */
uint8_t *slurp_raw_or_gz(const char *dir, const char *name, size_t *len)
{
	char path[1024], gz_path[1040];
	size_t cap = 1 << 20, n = 0;
	uint8_t *b;
	gzFile f;
	int got;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(gz_path, sizeof(gz_path), "%s.gz", path);
	if (access(path, R_OK) == 0)
		return slurp(path, len);
	f = gzopen(gz_path, "rb");
	cr_assert_not_null(f, "neither %s nor %s can be read: run scripts/get-mnist.sh", path,
			   gz_path);
	b = malloc(cap);
	cr_assert_not_null(b);
	while ((got = gzread(f, b + n, (unsigned)(cap - n))) > 0) {
		n += (size_t)got;
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap);
			cr_assert_not_null(b);
		}
	}
	cr_assert_eq(got, 0, "%s: gzread failed", gz_path);
	cr_assert_eq(gzclose(f), Z_OK, "%s: gzclose failed (a damaged .gz?)", gz_path);
	*len = n;
	return b;
}

void write_good_set(const char *prefix, uint32_t n)
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
void expect_load_fail(int want_rc, const char *file, const char *problem,
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

void write_images(const void *b, size_t len)
{
	write_file(IMAGES, b, len);
}

void write_labels_good(uint32_t n)
{
	size_t len;
	uint8_t *b = good_labels(n, &len);

	write_file(LABELS, b, len);
	free(b);
}

void write_images_good(uint32_t n)
{
	size_t len;
	uint8_t *b = good_images(n, &len);

	write_images(b, len);
	free(b);
}
