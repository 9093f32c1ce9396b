/*
 * idx_fixture.h - what the IDX tests share (tests/idx_fixture.c): a fresh
 * temporary directory per test, synthetic IDX files (good and built to
 * order), raw and gzip writers, and the check that loading a set fails with
 * a message naming the file and the problem, leaving the output untouched.
 */
#ifndef MNIST_DDP_TESTS_IDX_FIXTURE_H
#define MNIST_DDP_TESTS_IDX_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "io/idx.h"

#define ERRLEN 1024
#define SENTINEL 0xa5
/* The training set's file names in tmpdir. */
#define IMAGES "train-images-idx3-ubyte"
#define LABELS "train-labels-idx1-ubyte"

/* The test's directory: made by make_tmpdir (the suite's .init), removed by remove_tmpdir. */
extern char tmpdir[512];
void make_tmpdir(void);
void remove_tmpdir(void);
void put_be32(uint8_t *p, uint32_t v);
uint8_t pixel_at(size_t i);
uint8_t *build_images(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
		      size_t payload, size_t *len);
uint8_t *build_labels(uint32_t magic, uint32_t count, size_t payload, size_t *len);
uint8_t *good_images(uint32_t n, size_t *len);
uint8_t *good_labels(uint32_t n, size_t *len);
void tmp_path(char *dst, size_t cap, const char *name);
void write_file(const char *name, const void *buf, size_t len);
void write_gz(const char *name, const void *buf, size_t len, int level);
uint8_t *slurp(const char *path, size_t *len);
/* <dir>/<name>, or <dir>/<name>.gz decompressed where there is no raw file. */
uint8_t *slurp_raw_or_gz(const char *dir, const char *name, size_t *len);
void write_good_set(const char *prefix, uint32_t n);
void expect_load_fail(int want_rc, const char *file, const char *problem,
		      const char *problem2);
/* IMAGES from b; a good LABELS or IMAGES file of n examples. */
void write_images(const void *b, size_t len);
void write_labels_good(uint32_t n);
void write_images_good(uint32_t n);

#endif /* MNIST_DDP_TESTS_IDX_FIXTURE_H */
