/*
 * idx.c - read and validate MNIST IDX files (raw or gzip), see include/idx.h.
 *
 * Nothing from a file is trusted before it is checked: the magic, the number
 * of dimensions, the 28 x 28 image size, the count and the exact file length
 * are validated before any pixel or label is used, and a file (or a gzip
 * stream) that would grow past the caller's limit is refused while reading,
 * not after. Every failure writes one message naming the file into err and
 * leaves the caller's output untouched; cleanup runs through a goto chain.
 *
 * Tested by tests/test_idx.c (ctest -R test_idx); real data comes from
 * scripts/get-mnist.sh.
 */
#define _POSIX_C_SOURCE 200809L

#include "idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_IMAGE_HEADER 16u /* magic, count, rows, cols */
#define IDX_LABEL_HEADER 8u  /* magic, count */
/* First allocation for a stream of unknown length (gzip); doubled as it fills. */
#define IDX_READ_CHUNK ((size_t)1 << 22)
#define IDX_PATH_MAX 4096

static void set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static uint32_t read_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * ---- CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320): zlib's, which
 * is table-driven several bytes at a time (the two MNIST sets, 55 MB, are
 * checksummed at every start). zlib takes the length as a uInt: in pieces.
 */
uint32_t idx_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
	uLong c = crc;
	while (n > 0) {
		uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
		c = crc32(c, p, piece);
		p += piece;
		n -= piece;
	}
	return (uint32_t)c;
}

/* ---- parsing ------------------------------------------------------------- */

/*
 * Checks shared by both kinds: enough bytes for the header, the magic, the
 * count, and the exact length header + count * item. Returns IDX_OK or
 * IDX_ERR_INVALID with the message written.
 */
static int check_header(const uint8_t *buf, size_t len, const char *name, const char *kind,
			uint32_t want_magic, size_t header, int *count, char *err, size_t errlen)
{
	uint32_t magic, n;

	if (len == 0) {
		set_err(err, errlen, "%s: empty file (0 bytes), expected an IDX %s file", name,
			kind);
		return IDX_ERR_INVALID;
	}
	if (len < 4) {
		set_err(err, errlen,
			"%s: truncated: %zu bytes, shorter than the 4-byte magic (an IDX %s header is %zu bytes)",
			name, len, kind, header);
		return IDX_ERR_INVALID;
	}
	magic = read_be32(buf);
	if (magic != want_magic) {
		const char *hint = "";

		if (magic == IDX_MAGIC_IMAGES)
			hint = " (that is an image file)";
		else if (magic == IDX_MAGIC_LABELS)
			hint = " (that is a label file)";
		else if (buf[0] == 0x1f && buf[1] == 0x8b)
			hint = " (gzip data inside gzip?)";
		set_err(err, errlen, "%s: bad magic 0x%08x%s, expected 0x%08x (IDX unsigned-byte %s)",
			name, (unsigned)magic, hint, (unsigned)want_magic, kind);
		return IDX_ERR_INVALID;
	}
	if (len < header) {
		set_err(err, errlen, "%s: truncated: %zu bytes, shorter than the %zu-byte %s header",
			name, len, header, kind);
		return IDX_ERR_INVALID;
	}
	n = read_be32(buf + 4);
	if (n == 0) {
		set_err(err, errlen, "%s: count is 0, expected 1..%u %s", name, IDX_MAX_COUNT,
			kind);
		return IDX_ERR_INVALID;
	}
	if (n > IDX_MAX_COUNT) {
		set_err(err, errlen, "%s: count %u is absurd: more than the limit of %u %s", name,
			(unsigned)n, IDX_MAX_COUNT, kind);
		return IDX_ERR_INVALID;
	}
	*count = (int)n;
	return IDX_OK;
}

/* The file must be exactly header + count * item bytes. */
static int check_length(size_t len, const char *name, size_t header, int count, size_t item,
			char *err, size_t errlen)
{
	size_t want = header + (size_t)count * item; /* count <= IDX_MAX_COUNT: no overflow */

	if (len < want) {
		set_err(err, errlen, "%s: truncated: %zu bytes, header promises %zu", name, len,
			want);
		return IDX_ERR_INVALID;
	}
	if (len > want) {
		set_err(err, errlen, "%s: %zu trailing bytes after the %zu the header promises",
			name, len - want, want);
		return IDX_ERR_INVALID;
	}
	return IDX_OK;
}

int idx_parse_images(const uint8_t *buf, size_t len, const char *name, int *count,
		     const uint8_t **data, char *err, size_t errlen)
{
	uint32_t rows, cols;
	int n = 0;
	int rc;

	rc = check_header(buf, len, name, "images", IDX_MAGIC_IMAGES, IDX_IMAGE_HEADER, &n, err,
			  errlen);
	if (rc != IDX_OK)
		return rc;
	rows = read_be32(buf + 8);
	cols = read_be32(buf + 12);
	if (rows != IDX_ROWS || cols != IDX_COLS) {
		set_err(err, errlen, "%s: wrong dimensions: images are %ux%u, expected %dx%d", name,
			(unsigned)rows, (unsigned)cols, IDX_ROWS, IDX_COLS);
		return IDX_ERR_INVALID;
	}
	rc = check_length(len, name, IDX_IMAGE_HEADER, n, IDX_PIXELS, err, errlen);
	if (rc != IDX_OK)
		return rc;
	*count = n;
	*data = buf + IDX_IMAGE_HEADER;
	return IDX_OK;
}

int idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int *count,
		     const uint8_t **data, char *err, size_t errlen)
{
	const uint8_t *labels;
	int n = 0;
	int rc;

	rc = check_header(buf, len, name, "labels", IDX_MAGIC_LABELS, IDX_LABEL_HEADER, &n, err,
			  errlen);
	if (rc != IDX_OK)
		return rc;
	rc = check_length(len, name, IDX_LABEL_HEADER, n, 1, err, errlen);
	if (rc != IDX_OK)
		return rc;
	labels = buf + IDX_LABEL_HEADER;
	for (int i = 0; i < n; i++) {
		if (labels[i] >= IDX_CLASSES) {
			set_err(err, errlen, "%s: label %u at index %d is out of range 0..%d", name,
				(unsigned)labels[i], i, IDX_CLASSES - 1);
			return IDX_ERR_INVALID;
		}
	}
	*count = n;
	*data = labels;
	return IDX_OK;
}

/* ---- reading ------------------------------------------------------------- */

/* One open file, read either directly or through zlib. */
struct idx_source {
	FILE *file;
	gzFile gz;
};

/* Read up to n bytes; returns the number read (0 at the end) or -1 with err written. */
static long long source_read(struct idx_source *src, uint8_t *dst, size_t n, const char *path,
			     char *err, size_t errlen)
{
	if (src->gz) {
		unsigned int want = n > (1u << 30) ? (1u << 30) : (unsigned int)n;
		int got = gzread(src->gz, dst, want);

		if (got < 0) {
			int zerr = Z_OK;
			const char *msg = gzerror(src->gz, &zerr);
			size_t pl = strlen(path);

			/* zlib prefixes its message with the path; the message here has it already. */
			if (strncmp(msg, path, pl) == 0 && strncmp(msg + pl, ": ", 2) == 0)
				msg += pl + 2;
			set_err(err, errlen, "%s: corrupt gzip data: %s", path,
				zerr == Z_ERRNO ? strerror(errno) : msg);
			return -1;
		}
		return got;
	} else {
		size_t got = fread(dst, 1, n, src->file);

		if (got == 0 && ferror(src->file)) {
			set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
			return -1;
		}
		return (long long)got;
	}
}

/*
 * Read everything from src into a malloc'ed buffer of at most max_bytes,
 * starting with room for `hint` bytes. One byte more than the limit is asked
 * for so that a stream exactly at the limit is told apart from a longer one.
 */
static int source_read_all(struct idx_source *src, const char *path, size_t max_bytes,
			   size_t hint, uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	size_t limit = max_bytes == SIZE_MAX ? SIZE_MAX : max_bytes + 1;
	size_t cap = hint < limit ? hint : limit;
	size_t len = 0;
	uint8_t *buf;
	long long got;

	if (cap == 0)
		cap = 1;
	buf = malloc(cap);
	if (!buf) {
		set_err(err, errlen, "%s: out of memory allocating %zu bytes", path, cap);
		goto out;
	}
	for (;;) {
		if (len == cap) {
			size_t grown;
			uint8_t *bigger;

			if (cap >= limit)
				break;
			grown = cap > limit / 2 ? limit : cap * 2;
			bigger = realloc(buf, grown);
			if (!bigger) {
				set_err(err, errlen, "%s: out of memory growing to %zu bytes", path,
					grown);
				goto out_free_buf;
			}
			buf = bigger;
			cap = grown;
		}
		got = source_read(src, buf + len, cap - len, path, err, errlen);
		if (got < 0)
			goto out_free_buf;
		if (got == 0)
			break;
		len += (size_t)got;
	}
	if (len > max_bytes) {
		set_err(err, errlen,
			"%s: %s past the limit of %zu bytes (refused before reading further)", path,
			src->gz ? "gzip data expands" : "file grows", max_bytes);
		goto out_free_buf;
	}
	*out = buf;
	*out_len = len;
	return IDX_OK;

out_free_buf:
	free(buf);
out:
	return IDX_ERR_INVALID;
}

int idx_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len, char *err,
		  size_t errlen)
{
	struct idx_source src = { NULL, NULL };
	uint8_t magic[2];
	size_t nmagic;
	long size;
	uint8_t *data = NULL;
	size_t data_len = 0;
	int rc = IDX_ERR_INVALID;
	int zrc;

	src.file = fopen(path, "rb");
	if (!src.file) {
		int e = errno;

		set_err(err, errlen, "%s: cannot open: %s", path, strerror(e));
		rc = e == ENOENT ? IDX_ERR_MISSING : IDX_ERR_INVALID;
		goto out;
	}
	nmagic = fread(magic, 1, sizeof(magic), src.file);
	if (nmagic < sizeof(magic) && ferror(src.file)) {
		set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
		goto out_close_file;
	}

	if (nmagic == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		/* gzip: the expanded size is unknown until read, so the limit bounds the growth. */
		fclose(src.file);
		src.file = NULL;
		errno = 0;
		src.gz = gzopen(path, "rb");
		if (!src.gz) {
			set_err(err, errlen, "%s: cannot open as gzip: %s", path,
				errno ? strerror(errno) : "out of memory");
			goto out;
		}
		gzbuffer(src.gz, 1u << 17);
		rc = source_read_all(&src, path, max_bytes, IDX_READ_CHUNK, &data, &data_len, err,
				     errlen);
		zrc = gzclose(src.gz);
		src.gz = NULL;
		if (rc != IDX_OK)
			goto out;
		if (zrc == Z_BUF_ERROR) {
			set_err(err, errlen,
				"%s: corrupt gzip data: truncated gzip stream (ends after %zu bytes of output)",
				path, data_len);
			rc = IDX_ERR_INVALID;
			goto out_free_data;
		}
		if (zrc != Z_OK) {
			set_err(err, errlen, "%s: error closing gzip stream (zlib code %d)", path,
				zrc);
			rc = IDX_ERR_INVALID;
			goto out_free_data;
		}
	} else {
		/* Raw: a regular file's size is known, so a huge one is refused before allocating. */
		if (fseek(src.file, 0, SEEK_END) == 0 && (size = ftell(src.file)) >= 0) {
			if ((unsigned long)size > max_bytes) {
				set_err(err, errlen, "%s: file is %ld bytes, more than the limit of %zu",
					path, size, max_bytes);
				goto out_close_file;
			}
		} else {
			size = (long)IDX_READ_CHUNK; /* not seekable: grow as it comes */
		}
		if (fseek(src.file, 0, SEEK_SET) != 0) {
			set_err(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
			goto out_close_file;
		}
		/* Room for one byte more than expected, so reaching the end needs no realloc. */
		rc = source_read_all(&src, path, max_bytes, (size_t)size + 1, &data, &data_len, err,
				     errlen);
		if (rc != IDX_OK)
			goto out_close_file;
		fclose(src.file);
		src.file = NULL;
	}

	if (data_len == 0) {
		set_err(err, errlen, "%s: empty file (0 bytes)", path);
		rc = IDX_ERR_INVALID;
		goto out_free_data;
	}
	*buf = data;
	*len = data_len;
	return IDX_OK;

out_free_data:
	free(data);
	goto out;
out_close_file:
	fclose(src.file);
out:
	return rc;
}

/* ---- loading a split --------------------------------------------------------- */

/* "<dir>/<prefix>-<what>" without doubling a trailing slash; false if it does not fit. */
static int join_path(char *dst, size_t cap, const char *dir, const char *prefix, const char *what,
		     const char *suffix)
{
	size_t dl = strlen(dir);
	const char *sep = (dl > 0 && dir[dl - 1] == '/') ? "" : "/";
	int n = snprintf(dst, cap, "%s%s%s-%s%s", dir, sep, prefix, what, suffix);

	return n >= 0 && (size_t)n < cap;
}

/*
 * Read `<dir>/<prefix>-<what>`, else the same with .gz. On success *path
 * holds the name that was read. IDX_ERR_MISSING when neither exists.
 */
static int read_either(const char *dir, const char *prefix, const char *what, size_t max_bytes,
		       char *path, size_t pathcap, uint8_t **buf, size_t *len, char *err,
		       size_t errlen)
{
	int rc;

	if (!join_path(path, pathcap, dir, prefix, what, "")) {
		set_err(err, errlen, "%s: path too long for %s-%s", dir, prefix, what);
		return IDX_ERR_INVALID;
	}
	rc = idx_read_file(path, max_bytes, buf, len, err, errlen);
	if (rc != IDX_ERR_MISSING)
		return rc;
	if (!join_path(path, pathcap, dir, prefix, what, ".gz")) {
		set_err(err, errlen, "%s: path too long for %s-%s.gz", dir, prefix, what);
		return IDX_ERR_INVALID;
	}
	return idx_read_file(path, max_bytes, buf, len, err, errlen);
}

/* Move the payload to the front of buf and give back the header's worth of slack. */
static uint8_t *strip_header(uint8_t *buf, size_t header, size_t payload)
{
	uint8_t *shrunk;

	memmove(buf, buf + header, payload);
	shrunk = realloc(buf, payload);
	return shrunk ? shrunk : buf;
}

int idx_load_set(const char *dir, const char *prefix, struct mnist_set *out, char *err,
		 size_t errlen)
{
	char image_path[IDX_PATH_MAX];
	char label_path[IDX_PATH_MAX];
	uint8_t *image_buf = NULL, *label_buf = NULL;
	size_t image_len = 0, label_len = 0;
	const uint8_t *image_data, *label_data;
	int image_count = 0, label_count = 0;
	struct stat st;
	struct mnist_set set;
	int rc;

	if (stat(dir, &st) != 0) {
		int e = errno;

		set_err(err, errlen, "%s: data directory %s (run scripts/get-mnist.sh?)", dir,
			e == ENOENT ? "does not exist" : strerror(e));
		rc = e == ENOENT ? IDX_ERR_MISSING : IDX_ERR_INVALID;
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		set_err(err, errlen, "%s: not a directory", dir);
		rc = IDX_ERR_INVALID;
		goto out;
	}

	rc = read_either(dir, prefix, "images-idx3-ubyte", IDX_MAX_BYTES, image_path,
			 sizeof(image_path), &image_buf, &image_len, err, errlen);
	if (rc == IDX_ERR_MISSING) {
		join_path(image_path, sizeof(image_path), dir, prefix, "images-idx3-ubyte", "");
		set_err(err, errlen, "%s: missing, and no %s.gz either (run scripts/get-mnist.sh?)",
			image_path, image_path);
		goto out;
	}
	if (rc != IDX_OK)
		goto out;
	rc = idx_parse_images(image_buf, image_len, image_path, &image_count, &image_data, err,
			      errlen);
	if (rc != IDX_OK)
		goto out_free_images;

	rc = read_either(dir, prefix, "labels-idx1-ubyte", (size_t)IDX_MAX_COUNT + IDX_LABEL_HEADER,
			 label_path, sizeof(label_path), &label_buf, &label_len, err, errlen);
	if (rc == IDX_ERR_MISSING) {
		/* The images are there, so this is a broken set, not an absent one. */
		join_path(label_path, sizeof(label_path), dir, prefix, "labels-idx1-ubyte", "");
		set_err(err, errlen, "%s: missing, and no %s.gz either, although %s exists",
			label_path, label_path, image_path);
		rc = IDX_ERR_INVALID;
		goto out_free_images;
	}
	if (rc != IDX_OK)
		goto out_free_images;
	rc = idx_parse_labels(label_buf, label_len, label_path, &label_count, &label_data, err,
			      errlen);
	if (rc != IDX_OK)
		goto out_free_labels;

	if (image_count != label_count) {
		set_err(err, errlen, "image/label count mismatch: %s has %d images, %s has %d labels",
			image_path, image_count, label_path, label_count);
		rc = IDX_ERR_INVALID;
		goto out_free_labels;
	}

	set.count = image_count;
	set.images = strip_header(image_buf, IDX_IMAGE_HEADER, (size_t)image_count * IDX_PIXELS);
	set.labels = strip_header(label_buf, IDX_LABEL_HEADER, (size_t)label_count);
	set.checksum = idx_crc32(0, set.images, (size_t)set.count * IDX_PIXELS);
	set.checksum = idx_crc32(set.checksum, set.labels, (size_t)set.count);
	*out = set;
	return IDX_OK;

out_free_labels:
	free(label_buf);
out_free_images:
	free(image_buf);
out:
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
