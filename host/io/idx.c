/*
 * idx.c - read and validate MNIST IDX files (raw or gzip), see host/io/idx.h.
 *
 * Nothing from a file is trusted before it is checked: the magic, the number
 * of dimensions, the 28 x 28 image size, the count and the exact file length
 * are validated before any pixel or label is used, and a file (or a gzip
 * stream) that would grow past the caller's limit is refused while reading,
 * not after. Every failure writes one message naming the file into err and
 * leaves the caller's output untouched; cleanup runs through a goto chain.
 *
 * Tested by tests/test_idx.c and test_idx_malformed.c (ctest -R test_idx)
 * and fuzzed by tests/fuzz/fuzz_idx.c; real data comes from scripts/get-mnist.sh.
 */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */

#include "io/idx.h"

#include "check.h"
#include "io/crc32.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_IMAGE_HEADER 16u /* magic, count, rows, cols */
#define IDX_LABEL_HEADER 8u  /* magic, count */
/* First allocation for a stream of unknown length (gzip); doubled as it fills. */
#define IDX_READ_CHUNK ((size_t)1 << 22)
#define IDX_PATH_MAX 4096

static uint32_t read_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ---- parsing ------------------------------------------------------------- */

/* The two kinds of IDX file MNIST has. */
struct idx_kind {
	const char *noun; /* "images" or "labels", for messages */
	uint32_t magic;
	size_t header, item; /* bytes of header, and of each example after it */
};
static const struct idx_kind idx_images = {"images", IDX_MAGIC_IMAGES, IDX_IMAGE_HEADER, IDX_PIXELS};
static const struct idx_kind idx_labels = {"labels", IDX_MAGIC_LABELS, IDX_LABEL_HEADER, 1};

/* The magic, with a hint when it is the other kind's or a second gzip layer. */
static enum status check_magic(const uint8_t *buf, const char *name, const struct idx_kind *k,
			       char *err, size_t errlen)
{
	uint32_t magic = read_be32(buf);
	const char *hint = "";
	if (magic == k->magic)
		return STATUS_OK;
	if (magic == IDX_MAGIC_IMAGES)
		hint = " (that is an image file)";
	else if (magic == IDX_MAGIC_LABELS)
		hint = " (that is a label file)";
	else if (buf[0] == 0x1f && buf[1] == 0x8b)
		hint = " (gzip data inside gzip?)";
	return status_fail(err, errlen, STATUS_BAD_INPUT,
			   "%s: bad magic 0x%08x%s, expected 0x%08x (IDX unsigned-byte %s)", name,
			   (unsigned)magic, hint, (unsigned)k->magic, k->noun);
}

/*
 * A whole file of kind k, in order: enough bytes for the magic, the magic,
 * the header, a count in 1..IDX_MAX_COUNT, 28 x 28 images, and the exact
 * length header + count * item, then labels in 0..9. STATUS_OK with *count
 * and *data (where the examples start, past the header), or STATUS_BAD_INPUT
 * with the message written.
 */
static enum status parse_file(const uint8_t *buf, size_t len, const char *name,
			      const struct idx_kind *k, int *count, const uint8_t **data, char *err,
			      size_t errlen)
{
	if (len == 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: empty file (0 bytes), expected an IDX %s file", name, k->noun);
	if (len < 4)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, shorter than the 4-byte magic (an IDX %s "
				   "header is %zu bytes)",
				   name, len, k->noun, k->header);
	enum status rc = check_magic(buf, name, k, err, errlen);
	if (rc != STATUS_OK)
		return rc;
	if (len < k->header)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, shorter than the %zu-byte %s header", name,
				   len, k->header, k->noun);
	uint32_t n = read_be32(buf + 4);
	if (n == 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: count is 0, expected 1..%u %s",
				   name, IDX_MAX_COUNT, k->noun);
	if (n > IDX_MAX_COUNT)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: count %u is absurd: more than the limit of %u %s", name,
				   (unsigned)n, IDX_MAX_COUNT, k->noun);
	if (k == &idx_images) {
		uint32_t rows = read_be32(buf + 8), cols = read_be32(buf + 12);
		if (rows != IDX_ROWS || cols != IDX_COLS)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: wrong dimensions: images are %ux%u, expected %dx%d", name,
					   (unsigned)rows, (unsigned)cols, IDX_ROWS, IDX_COLS);
	}
	size_t want = k->header + (size_t)n * k->item; /* n <= IDX_MAX_COUNT: no overflow */
	if (len < want)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: truncated: %zu bytes, header promises %zu", name, len, want);
	if (len > want)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: %zu trailing bytes after the %zu the header promises", name,
				   len - want, want);
	if (k == &idx_labels)
		for (uint32_t i = 0; i < n; i++)
			if (buf[k->header + i] >= IDX_CLASSES)
				return status_fail(err, errlen, STATUS_BAD_INPUT,
						   "%s: label %u at index %u is out of range 0..%d", name,
						   (unsigned)buf[k->header + i], (unsigned)i, IDX_CLASSES - 1);
	*count = (int)n;
	*data = buf + k->header;
	return STATUS_OK;
}

enum status idx_parse_images(const uint8_t *buf, size_t len, const char *name, int *count,
			     const uint8_t **data, char *err, size_t errlen)
{
	return parse_file(buf, len, name, &idx_images, count, data, err, errlen);
}

enum status idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int *count,
			     const uint8_t **data, char *err, size_t errlen)
{
	return parse_file(buf, len, name, &idx_labels, count, data, err, errlen);
}

/*
 * A buffer for a whole file. A large one (the training images are 47 MB) is
 * 2 MiB-aligned and offered to transparent huge pages: reading into it then
 * takes a few dozen page faults instead of some twelve thousand, which is
 * most of a short run's start-up (docs/benchmarks.md). It is freed with free().
 */
#define IDX_HUGE_MIN ((size_t)4 << 20)
#define IDX_HUGE_PAGE ((size_t)2 << 20)

static void *alloc_file_buffer(size_t bytes)
{
	if (bytes < IDX_HUGE_MIN)
		return malloc(bytes ? bytes : 1);
	size_t rounded = (bytes + IDX_HUGE_PAGE - 1) & ~(IDX_HUGE_PAGE - 1);
	void *p = aligned_alloc(IDX_HUGE_PAGE, rounded);
#ifdef MADV_HUGEPAGE
	if (p)
		madvise(p, rounded, MADV_HUGEPAGE);
#endif
	return p;
}

/* ---- reading ------------------------------------------------------------- */

/*
 * One read path for both kinds: zlib's gzread decompresses a gzip stream and
 * copies any other file as it is (gzdirect tells which). Everything is read
 * into a buffer that may not grow past max_bytes: one byte more than the
 * limit is asked for, so that a stream exactly at the limit is told apart
 * from a longer one, and a raw file's size is checked before any allocation.
 */
enum status idx_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
			  char *err, size_t errlen)
{
	struct stat st;
	size_t limit = max_bytes == SIZE_MAX ? SIZE_MAX : max_bytes + 1;
	size_t cap, len = 0;
	uint8_t *buf = NULL;
	enum status rc = STATUS_BAD_INPUT;
	gzFile gz;
	int direct, zrc;

	if (stat(path, &st) != 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: cannot open: %s", path,
				   strerror(errno));
	errno = 0;
	gz = gzopen(path, "rb");
	if (!gz)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: cannot open: %s", path,
				   errno ? strerror(errno) : "out of memory");
	gzbuffer(gz, 1u << 17);
	direct = gzdirect(gz);
	if (direct && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes) {
		rc = status_fail(err, errlen, STATUS_BAD_INPUT, "%s: file is %lld bytes, more than the limit of %zu",
			    path, (long long)st.st_size, max_bytes);
		goto out_close;
	}
	/* A raw file's size is known: room for one byte more, so its end needs no realloc. */
	cap = direct && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : IDX_READ_CHUNK;
	cap = cap < limit ? cap : limit;
	buf = alloc_file_buffer(cap);
	if (!buf) {
		rc = status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory allocating %zu bytes", path, cap);
		goto out_close;
	}
	for (;;) {
		if (len == cap) {
			if (cap >= limit)
				break;
			size_t grown = cap > limit / 2 ? limit : cap * 2;
			uint8_t *bigger = realloc(buf, grown);
			if (!bigger) {
				rc = status_fail(err, errlen, STATUS_RUNTIME, "%s: out of memory growing to %zu bytes",
					    path, grown);
				goto out_free;
			}
			buf = bigger;
			cap = grown;
		}
		size_t want = cap - len > (1u << 30) ? (1u << 30) : cap - len;
		int got = gzread(gz, buf + len, (unsigned int)want);
		if (got < 0) {
			int zerr = Z_OK;
			const char *msg = gzerror(gz, &zerr);
			size_t pl = strlen(path);
			/* zlib prefixes its message with the path; ours has it already. */
			if (strncmp(msg, path, pl) == 0 && strncmp(msg + pl, ": ", 2) == 0)
				msg += pl + 2;
			if (zerr == Z_ERRNO)
				rc = status_fail(err, errlen, STATUS_BAD_INPUT, "%s: read error: %s", path,
					    strerror(errno));
			else
				rc = status_fail(err, errlen, STATUS_BAD_INPUT, "%s: corrupt gzip data: %s", path, msg);
			goto out_free;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (len > max_bytes) {
		rc = status_fail(err, errlen, STATUS_BAD_INPUT,
			    "%s: %s past the limit of %zu bytes (refused before reading further)", path,
			    direct ? "file grows" : "gzip data expands", max_bytes);
		goto out_free;
	}
	zrc = gzclose(gz);
	gz = NULL;
	if (zrc == Z_BUF_ERROR) {
		rc = status_fail(err, errlen, STATUS_BAD_INPUT,
			    "%s: corrupt gzip data: truncated gzip stream (ends after %zu bytes of output)",
			    path, len);
		goto out_free;
	}
	if (zrc != Z_OK) {
		rc = status_fail(err, errlen, STATUS_BAD_INPUT, "%s: error closing the file (zlib code %d)", path, zrc);
		goto out_free;
	}
	if (len == 0) {
		rc = status_fail(err, errlen, STATUS_BAD_INPUT, "%s: empty file (0 bytes)", path);
		goto out_free;
	}
	*out = buf;
	*out_len = len;
	return STATUS_OK;

out_free:
	free(buf);
out_close:
	if (gz)
		gzclose(gz);
	return rc;
}

/* ---- loading a split --------------------------------------------------------- */

/*
 * The file `<dir>/<prefix>-<what>`, or the same with .gz, into path: 1 when
 * either exists (the raw name first), 0 when neither does or the name does
 * not fit (path then holds the raw name, or is empty).
 */
static int find_file(const char *dir, const char *prefix, const char *what, char *path,
		     size_t cap)
{
	size_t dl = strlen(dir);
	const char *sep = (dl > 0 && dir[dl - 1] == '/') ? "" : "/";
	struct stat st;
	for (int gz = 0; gz <= 1; gz++) {
		int n = snprintf(path, cap, "%s%s%s-%s%s", dir, sep, prefix, what, gz ? ".gz" : "");
		if (n < 0 || (size_t)n >= cap) {
			path[0] = '\0';
			return 0;
		}
		if (stat(path, &st) == 0)
			return 1;
	}
	path[strlen(path) - 3] = '\0'; /* neither: the raw name, without ".gz" */
	return 0;
}

int idx_set_present(const char *dir, const char *prefix)
{
	char path[IDX_PATH_MAX];
	return find_file(dir, prefix, "images-idx3-ubyte", path, sizeof(path));
}

/* Move the payload to the front of buf and give back the header's worth of slack. */
static uint8_t *strip_header(uint8_t *buf, size_t header, size_t payload)
{
	uint8_t *shrunk;

	memmove(buf, buf + header, payload);
	shrunk = realloc(buf, payload);
	return shrunk ? shrunk : buf;
}

/*
 * Read and check one file of a set, no larger than its kind's largest valid
 * file: its buffer (the caller frees it) and count.
 */
static enum status load_file(const char *path, const struct idx_kind *k, uint8_t **buf,
			     int *count, char *err, size_t errlen)
{
	const uint8_t *data;
	size_t len = 0;
	size_t limit = k->header + (size_t)IDX_MAX_COUNT * k->item;
	enum status rc = idx_read_file(path, limit, buf, &len, err, errlen);
	if (rc != STATUS_OK)
		return rc;
	rc = parse_file(*buf, len, path, k, count, &data, err, errlen);
	if (rc != STATUS_OK) {
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

enum status idx_load_set(const char *dir, const char *prefix, struct mnist_set *out, char *err,
			 size_t errlen)
{
	char image_path[IDX_PATH_MAX];
	char label_path[IDX_PATH_MAX];
	uint8_t *image_buf = NULL, *label_buf = NULL;
	int image_count = 0, label_count = 0;
	struct stat st;
	struct mnist_set set;
	enum status rc;

	if (stat(dir, &st) != 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: data directory %s (run scripts/get-mnist.sh?)", dir,
				   errno == ENOENT ? "does not exist" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: not a directory", dir);

	if (!find_file(dir, prefix, "images-idx3-ubyte", image_path, sizeof(image_path)))
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%s: missing, and no %s.gz either (run scripts/get-mnist.sh?)",
				   image_path, image_path);
	rc = load_file(image_path, &idx_images, &image_buf, &image_count, err, errlen);
	if (rc != STATUS_OK)
		return rc;
	if (!find_file(dir, prefix, "labels-idx1-ubyte", label_path, sizeof(label_path))) {
		/* The images are there, so this is a broken set, not an absent one. */
		rc = status_fail(err, errlen, STATUS_BAD_INPUT,
				 "%s: missing, and no %s.gz either, although %s exists", label_path,
				 label_path, image_path);
		goto out_free_images;
	}
	rc = load_file(label_path, &idx_labels, &label_buf, &label_count, err, errlen);
	if (rc != STATUS_OK)
		goto out_free_images;
	if (image_count != label_count) {
		rc = status_fail(err, errlen, STATUS_BAD_INPUT,
				 "image/label count mismatch: %s has %d images, %s has %d labels",
				 image_path, image_count, label_path, label_count);
		goto out_free_labels;
	}

	set.count = image_count;
	set.images = strip_header(image_buf, idx_images.header, (size_t)image_count * idx_images.item);
	set.labels = strip_header(label_buf, idx_labels.header, (size_t)label_count * idx_labels.item);
	set.checksum = crc32_bytes(0, set.images, (size_t)set.count * IDX_PIXELS);
	set.checksum = crc32_bytes(set.checksum, set.labels, (size_t)set.count);
	*out = set;
	return STATUS_OK;

out_free_labels:
	free(label_buf);
out_free_images:
	free(image_buf);
	return rc;
}

void mnist_set_destroy(struct mnist_set *s)
{
	if (!s)
		return;
	free(s->images);
	free(s->labels);
	s->images = NULL;
	s->labels = NULL;
	s->count = 0;
	s->checksum = 0;
}
