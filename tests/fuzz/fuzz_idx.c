/*
 * fuzz_idx.c - libFuzzer target for the IDX reader (host/io/idx.c).
 *
 *   CC=clang cmake -S . -B build-fuzz -DMNIST_DDP_FUZZ=ON -DMNIST_DDP_CUDA=OFF
 *   cmake --build build-fuzz --target fuzz_idx
 *   tests/fuzz/run_fuzz.sh build-fuzz/tests/fuzz_idx tests/fuzz/corpus/idx 60
 *
 * The first input byte picks the path, the rest is the file:
 *   0 idx_parse_images on the bytes       1 idx_parse_labels on the bytes
 *   2 idx_read_file (raw or gzip, by its magic) of a temporary file holding
 *     the bytes, limit 1 MiB, then both parsers on what it read
 *   3 the same with a 4 KiB limit (refusal while reading, not after)
 * Besides the sanitizers' checks, every outcome is checked: a success must
 * describe exactly the bytes given (header + count * item, labels 0..9, data
 * inside the buffer); a refusal must say why and name the file. Built with
 * tests/fuzz/replay_main.c instead of libFuzzer, it replays the corpus in the
 * ordinary test suite (ctest -R fuzz_idx_corpus).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/idx.h"

#define FUZZ_CHECK(cond)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "fuzz_idx: invariant broken: %s (%s:%d)\n", #cond, \
				__FILE__, __LINE__);                                      \
			abort();                                                          \
		}                                                                         \
	} while (0)

static void check_images(const uint8_t *buf, size_t len, const char *name)
{
	char err[1024] = "";
	int count = -1;
	const uint8_t *data = NULL;
	int rc = idx_parse_images(buf, len, name, &count, &data, err, sizeof(err));
	if (rc == STATUS_OK) {
		FUZZ_CHECK(count >= 1 && (unsigned)count <= IDX_MAX_COUNT);
		FUZZ_CHECK(len == 16 + (size_t)count * IDX_PIXELS);
		FUZZ_CHECK(data == buf + 16);
		unsigned sum = 0;
		for (size_t i = 0; i < (size_t)count * IDX_PIXELS; i++)
			sum += data[i]; /* every pixel readable */
		(void)sum;
	} else {
		FUZZ_CHECK(rc == STATUS_BAD_INPUT);
		FUZZ_CHECK(err[0] && strstr(err, name));
		FUZZ_CHECK(count == -1 && data == NULL); /* outputs untouched */
	}
}

static void check_labels(const uint8_t *buf, size_t len, const char *name)
{
	char err[1024] = "";
	int count = -1;
	const uint8_t *data = NULL;
	int rc = idx_parse_labels(buf, len, name, &count, &data, err, sizeof(err));
	if (rc == STATUS_OK) {
		FUZZ_CHECK(count >= 1 && (unsigned)count <= IDX_MAX_COUNT);
		FUZZ_CHECK(len == 8 + (size_t)count);
		FUZZ_CHECK(data == buf + 8);
		for (int i = 0; i < count; i++)
			FUZZ_CHECK(data[i] < IDX_CLASSES);
	} else {
		FUZZ_CHECK(rc == STATUS_BAD_INPUT);
		FUZZ_CHECK(err[0] && strstr(err, name));
		FUZZ_CHECK(count == -1 && data == NULL);
	}
}

/* One temporary file per process, rewritten for every input. */
static char tmp_path[256];

static void remove_tmp(void)
{
	if (tmp_path[0])
		unlink(tmp_path);
}

static const char *write_tmp(const uint8_t *data, size_t size)
{
	if (!tmp_path[0]) {
		const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		snprintf(tmp_path, sizeof(tmp_path), "%s/fuzz_idx.XXXXXX", dir);
		int fd = mkstemp(tmp_path);
		FUZZ_CHECK(fd >= 0);
		close(fd);
		atexit(remove_tmp);
	}
	FILE *f = fopen(tmp_path, "wb");
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(fwrite(data, 1, size, f) == size);
	FUZZ_CHECK(fclose(f) == 0);
	return tmp_path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int mode = data[0] % 4;
	data++;
	size--;
	switch (mode) {
	case 0:
		check_images(data, size, "fuzz-images");
		break;
	case 1:
		check_labels(data, size, "fuzz-labels");
		break;
	default: {
		const char *path = write_tmp(data, size);
		size_t limit = mode == 2 ? (size_t)1 << 20 : 4096;
		uint8_t *buf = NULL;
		size_t len = 0;
		char err[1024] = "";
		int rc = idx_read_file(path, limit, &buf, &len, err, sizeof(err));
		if (rc == STATUS_OK) {
			FUZZ_CHECK(buf != NULL && len <= limit);
			/* A raw file reads back as itself. */
			if (size < 2 || data[0] != 0x1f || data[1] != 0x8b)
				FUZZ_CHECK(len == size && (len == 0 || !memcmp(buf, data, len)));
			check_images(buf, len, path);
			check_labels(buf, len, path);
			free(buf);
		} else {
			FUZZ_CHECK(buf == NULL);
			FUZZ_CHECK(err[0] && strstr(err, path));
		}
		break;
	}
	}
	return 0;
}
