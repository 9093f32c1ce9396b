/*
 * idx.h - MNIST IDX files (raw or gzip), read once and validated before use.
 *
 * A data set directory holds `train-images-idx3-ubyte` and
 * `train-labels-idx1-ubyte` (or the `t10k-` pair for a test set), each raw or
 * with a `.gz` suffix. Everything in the headers is checked before anything
 * is trusted or allocated; a failure leaves *out untouched and writes one
 * message naming the file and the problem into err.
 */
#ifndef MNIST_DDP_IDX_H
#define MNIST_DDP_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "check.h" /* enum status */

#ifdef __cplusplus
extern "C" {
#endif

#define IDX_ROWS 28
#define IDX_COLS 28
#define IDX_PIXELS (IDX_ROWS * IDX_COLS)
#define IDX_CLASSES 10
/* Refuse anything larger before allocating: real MNIST has 60000 images, the
 * largest MNIST-format sets under a million; this bounds a file at 784 MB. */
#define IDX_MAX_COUNT 1000000u

/* One split of MNIST, kept as uint8 and normalised on the fly. */
struct mnist_set {
	int count;         /* number of examples */
	uint8_t *images;   /* (count, 28 * 28) row-major pixels */
	uint8_t *labels;   /* (count), each in 0..9 */
	uint32_t checksum; /* CRC-32 over images then labels, for start-up agreement */
};

/*
 * Parse one IDX buffer already in memory. `name` is used in messages only.
 * idx_parse_images: magic 0x00000803 (ubyte, 3 dims), 28 x 28, exact length.
 * idx_parse_labels: magic 0x00000801 (ubyte, 1 dim), every label 0..9, exact length.
 * On success *count is the header's count and *data points into buf past the header.
 */
enum status idx_parse_images(const uint8_t *buf, size_t len, const char *name, int *count,
			     const uint8_t **data, char *err, size_t errlen);
enum status idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int *count,
			     const uint8_t **data, char *err, size_t errlen);

/*
 * Read a whole file, raw or gzip-compressed (decided by the gzip magic, not the
 * name), refusing to grow past max_bytes. *buf is malloc'ed; the caller frees it.
 * STATUS_OK, STATUS_BAD_INPUT (missing, unreadable, too large, corrupt gzip) or
 * STATUS_RUNTIME (out of memory), with err naming the file.
 */
enum status idx_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len,
			  char *err, size_t errlen);

/* 1 when dir holds `<prefix>-images-idx3-ubyte` or the same with `.gz`. */
int idx_set_present(const char *dir, const char *prefix);

/*
 * Load a split from dir: prefix is "train" or "t10k". Reads `<prefix>-images-idx3-ubyte`
 * or, when absent, the same with `.gz` (likewise for labels). STATUS_OK, or
 * STATUS_BAD_INPUT for a missing, malformed or inconsistent set (image and
 * label counts that disagree included), STATUS_RUNTIME when out of memory.
 */
enum status idx_load_set(const char *dir, const char *prefix, struct mnist_set *out, char *err,
			 size_t errlen);

void mnist_set_destroy(struct mnist_set *s);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_IDX_H */
