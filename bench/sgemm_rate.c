/*
 * sgemm_rate.c - the machine's OpenBLAS SGEMM rate, the yardstick for the
 * trainer's "fraction of SGEMM peak" (bench/train measures it in the same run).
 *
 *   build/bench/sgemm_rate [--threads N] [--size N] [--seconds S]
 *
 * Times C = A * B on square row-major float matrices (default 2048) with N
 * OpenBLAS threads (default 1) for about S seconds (default 1), after one
 * untimed call, and prints the best of the timed calls as one line:
 *   sgemm: threads=1 m=2048 n=2048 k=2048 calls=12 best_gflops=97.31 mean_gflops=95.80
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int threads = 1, size = 2048;
	double seconds = 1.0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--threads N] [--size N] [--seconds S]\n", argv[0]);
			return 2;
		}
	}
	if (threads < 1 || size < 16 || size > 16384 || !(seconds > 0)) {
		fprintf(stderr, "sgemm_rate: --threads >= 1, --size in 16..16384, --seconds > 0\n");
		return 2;
	}
	openblas_set_num_threads(threads);
	size_t n = (size_t)size * (size_t)size;
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)),
	      *c = malloc(n * sizeof(float));
	if (!a || !b || !c) {
		fprintf(stderr, "sgemm_rate: out of memory for three %dx%d matrices\n", size, size);
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		a[i] = (float)((i * 7) % 13) * 0.01f;
		b[i] = (float)((i * 5) % 11) * 0.01f;
		c[i] = 0.0f;
	}
	double flop = 2.0 * size * (double)size * size;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, a, size, b,
		    size, 0.0f, c, size);
	double best = 1e30, total = 0.0;
	int calls = 0;
	double start = now();
	while (calls < 3 || now() - start < seconds) {
		double t0 = now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, a,
			    size, b, size, 0.0f, c, size);
		double t = now() - t0;
		best = t < best ? t : best;
		total += t;
		calls++;
	}
	printf("sgemm: threads=%d m=%d n=%d k=%d calls=%d best_gflops=%.2f mean_gflops=%.2f\n",
	       threads, size, size, size, calls, flop / best * 1e-9, flop * calls / total * 1e-9);
	free(a);
	free(b);
	free(c);
	return 0;
}
