/*
 * replay_main.c - runs a fuzz target's LLVMFuzzerTestOneInput over files,
 * without libFuzzer: the seed corpus and every reproducer kept there become
 * regression tests of the ordinary build (and of the sanitizer build).
 *
 *   fuzz_checkpoint_replay tests/fuzz/corpus/checkpoint [FILE|DIR ...]
 *
 * Each argument is a file or a directory of files (not recursive). A broken
 * invariant aborts, as under libFuzzer. Prints how many inputs ran; exit 0,
 * or 1 when an argument cannot be read or no input was found.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s\n", path);
		return -1;
	}
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			fclose(f);
			fprintf(stderr, "replay: out of memory reading %s\n", path);
			return -1;
		}
		len += fread(buf + len, 1, cap - len, f);
		if (len < cap)
			break;
		cap *= 2;
		buf = realloc(buf, cap);
	}
	fclose(f);
	/* An exact-size copy, so that ASan sees any read past the input's end. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

int main(int argc, char **argv)
{
	int inputs = 0, bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s does not exist\n", argv[i]);
			bad = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i]) != 0;
			inputs++;
			continue;
		}
		DIR *dp = opendir(argv[i]);
		struct dirent *de;
		while (dp && (de = readdir(dp))) {
			char path[4096];
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			bad |= run_file(path) != 0;
			inputs++;
		}
		if (dp)
			closedir(dp);
	}
	printf("replay: %d input(s) ran without breaking an invariant\n", inputs);
	if (inputs == 0) {
		fprintf(stderr, "replay: no inputs found: the corpus is missing\n");
		return 1;
	}
	return bad;
}
