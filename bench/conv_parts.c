/*
 * conv_parts.c - LeNet-5's convolution stages on the host backend, piece by
 * piece, at one batch size: each piece's median time and GFLOP/s, beside
 * OpenBLAS SGEMM at the pieces' own GEMM shapes and at 2048^3 (the yardstick
 * of bench/train), all in one process, round by round (interleaved), so that
 * the ratios hold on a machine shared with other work. For choosing between
 * ways to run a convolution (docs/benchmarks.md); not a test.
 *
 *   build/bench/conv_parts [--batch N] [--rounds R]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "backend_module.h"
#include "conv_direct.h"
#include "conv_host.h"
#include "conv_shape.h"
#include "gemm_small.h"
#include "host_internal.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *filled(size_t n, unsigned seed)
{
	float *p = malloc(n * sizeof(float));
	if (!p)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
	}
	return p;
}

enum { MAX_PARTS = 32, MAX_ROUNDS = 64 };

struct part {
	const char *name;
	double flop;
	double t[MAX_ROUNDS];
};

static struct part parts[MAX_PARTS];
static int n_parts;

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Time `reps` calls of the statement into part `name`. */
#define TIME(round, name_, flop_, reps, stmt)                                   \
	do {                                                                    \
		int i_ = 0;                                                     \
		while (i_ < n_parts && strcmp(parts[i_].name, name_))           \
			i_++;                                                   \
		if (i_ == n_parts) {                                            \
			parts[i_].name = name_;                                 \
			parts[i_].flop = flop_;                                 \
			n_parts++;                                              \
		}                                                               \
		stmt;                                                           \
		double t0_ = now();                                             \
		for (int r_ = 0; r_ < (reps); r_++)                             \
			stmt;                                                   \
		parts[i_].t[round] = (now() - t0_) / (reps);                    \
	} while (0)

static void sgemm_rm(int ta, int tb, int m, int n, int k, const float *a, int lda,
		     const float *b, int ldb, float *c, int ldc)
{
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
		    m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

int main(int argc, char **argv)
{
	int batch = 64, rounds = 15;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--batch N] [--rounds R]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || batch < 1)
		return 2;
	openblas_set_num_threads(1);
	struct backend be;
	if (backend_host_create(NULL, 1, &be))
		return 1;
	void *ctx = be.ctx;

	struct conv_shape c1 = conv_shape_make(1, 28, 28, 5, 2), c2 = conv_shape_make(6, 14, 14, 5, 0);
	struct pool_shape p1 = pool_shape_make(6, 28, 28, 2), p2 = pool_shape_make(16, 10, 10, 2);
	struct conv_stage s1 = {&c1, &p1, 6, batch, 0}, s2 = {&c2, &p2, 16, batch, 1};
	size_t P1 = (size_t)batch * 28 * 28, P2 = (size_t)batch * 10 * 10;
	float *x1 = filled(784 * (size_t)batch, 1), *w1 = filled(150, 2), *b1 = filled(6, 3);
	float *y1 = filled(6 * 196 * (size_t)batch, 4), *w2 = filled(16 * 150, 5), *b2 = filled(16, 6);
	float *cols1 = filled(25 * P1, 7), *cols2 = filled(150 * P2, 8);
	float *z1 = filled(6 * P1, 9), *z2 = filled(16 * P2, 10), *y2 = filled(400 * (size_t)batch, 11);
	float *dz2 = filled(16 * P2, 12), *dcols2 = filled(150 * P2, 13);
	float *dx2 = filled(6 * 196 * (size_t)batch, 14), *dz1 = filled(6 * P1, 15);
	float *dw = filled(16 * 150, 16), *big = filled(3 * 2048 * 2048, 17);
	int32_t *arg1 = calloc(6 * 196 * (size_t)batch, sizeof(int32_t));
	int32_t *arg2 = calloc(400 * (size_t)batch, sizeof(int32_t));
	double f1 = 2.0 * 6 * 25 * P1, f2 = 2.0 * 16 * 150 * P2;

	for (int r = 0; r < rounds; r++) {
		TIME(r, "sgemm 2048^3 (OpenBLAS)", 2.0 * 2048 * 2048 * 2048, 1,
		     sgemm_rm(0, 0, 2048, 2048, 2048, big, 2048, big + 2048 * 2048, 2048,
			      big + 2 * 2048 * 2048, 2048));
		/* conv1 forward */
		TIME(r, "conv1 fwd: whole op", f1, 20,
		     host_conv_forward(ctx, &s1, x1, w1, b1, y1, arg1, cols1));
		TIME(r, "conv1 fwd: whole op, no cols", f1, 20,
		     host_conv_forward(ctx, &s1, x1, w1, b1, y1, arg1, NULL));
		TIME(r, "conv1 fwd: direct, fused", f1, 20,
		     conv_direct_forward(x1, w1, b1, &c1, &p1, 6, batch, y1, arg1));
		TIME(r, "conv1 fwd: im2col", 0, 20, host_im2col(ctx, x1, &c1, batch, cols1));
		struct gemm_req g1 = {.m = 6, .n = (int)P1, .k = 25, .alpha = 1.0f, .a = w1, .lda = 25,
				      .b = cols1, .ldb = (int)P1, .c = z1, .ldc = (int)P1};
		TIME(r, "conv1 fwd: gemm_small 6x25x50176", f1, 20, gemm_small(&g1));
		TIME(r, "conv1 fwd: OpenBLAS 6x25x50176", f1, 20,
		     sgemm_rm(0, 0, 6, (int)P1, 25, w1, 25, cols1, (int)P1, z1, (int)P1));
		/* conv2 forward */
		TIME(r, "conv2 fwd: whole op", f2, 20,
		     host_conv_forward(ctx, &s2, y1, w2, b2, y2, arg2, cols2));
		TIME(r, "conv2 fwd: whole op, no cols", f2, 20,
		     host_conv_forward(ctx, &s2, y1, w2, b2, y2, arg2, NULL));
		TIME(r, "conv2 fwd: direct, fused (batch-inner y)", f2, 20,
		     conv_direct_forward(y1, w2, b2, &c2, &p2, 16, batch, y2, arg2));
		TIME(r, "conv2 fwd: im2col", 0, 20, host_im2col(ctx, y1, &c2, batch, cols2));
		struct gemm_req g2 = {.m = 16, .n = (int)P2, .k = 150, .alpha = 1.0f, .a = w2, .lda = 150,
				      .b = cols2, .ldb = (int)P2, .c = z2, .ldc = (int)P2};
		TIME(r, "conv2 fwd: gemm_small 16x150x6400", f2, 20, gemm_small(&g2));
		TIME(r, "conv2 fwd: OpenBLAS 16x150x6400", f2, 20,
		     sgemm_rm(0, 0, 16, (int)P2, 150, w2, 150, cols2, (int)P2, z2, (int)P2));
		/* conv2 input gradient */
		TIME(r, "conv2 dx: whole op", f2, 20,
		     host_conv_backward_data(ctx, &s2, w2, dz2, &s1, y1, arg1, dz1));
		struct gemm_req gd = {.trans_a = 1, .m = 150, .n = (int)P2, .k = 16, .alpha = 1.0f,
				      .a = w2, .lda = 150, .b = dz2, .ldb = (int)P2, .c = dcols2,
				      .ldc = (int)P2};
		TIME(r, "conv2 dx: gemm_small 150x6400x16 tn", f2, 20, gemm_small(&gd));
		TIME(r, "conv2 dx: OpenBLAS 150x6400x16 tn", f2, 20,
		     sgemm_rm(1, 0, 150, (int)P2, 16, w2, 150, dz2, (int)P2, dcols2, (int)P2));
		TIME(r, "conv2 dx: direct transposed conv", f2, 20,
		     conv_direct_input_grad(w2, dz2, &c2, 16, batch, dx2));
		TIME(r, "conv2 dx: pool_relu_backward", 0, 20,
		     host_pool_relu_backward(dx2, y1, arg1, &p1, batch, dz1));
		/* weight gradients */
		struct gemm_req gw2 = {.trans_b = 1, .m = 16, .n = 150, .k = (int)P2, .alpha = 1.0f,
				       .a = dz2, .lda = (int)P2, .b = cols2, .ldb = (int)P2, .c = dw,
				       .ldc = 150};
		TIME(r, "conv2 dW: gemm_small 16x150x6400 nt", f2, 20, gemm_small(&gw2));
		TIME(r, "conv2 dW: OpenBLAS 16x150x6400 nt", f2, 20,
		     sgemm_rm(0, 1, 16, 150, (int)P2, dz2, (int)P2, cols2, (int)P2, dw, 150));
		TIME(r, "conv2 dW: direct from x", f2, 20,
		     conv_direct_weight_grad(dz2, y1, &c2, 16, batch, dw));
		struct gemm_req gw1 = {.trans_b = 1, .m = 6, .n = 25, .k = (int)P1, .alpha = 1.0f,
				       .a = z1, .lda = (int)P1, .b = cols1, .ldb = (int)P1, .c = dw,
				       .ldc = 25};
		TIME(r, "conv1 dW: gemm_small 6x25x50176 nt", f1, 20, gemm_small(&gw1));
		TIME(r, "conv1 dW: OpenBLAS 6x25x50176 nt", f1, 20,
		     sgemm_rm(0, 1, 6, 25, (int)P1, z1, (int)P1, cols1, (int)P1, dw, 25));
		TIME(r, "conv1 dW: direct from x", f1, 20,
		     conv_direct_weight_grad(z1, x1, &c1, 6, batch, dw));
	}
	printf("# batch %d, %d rounds, median per call, kernels for %s\n", batch, rounds,
	       host_isa_name(host_isa()));
	printf("# %-40s %10s %9s %8s\n", "part", "us", "GFLOP/s", "of sgemm");
	double peak = 0;
	for (int i = 0; i < n_parts; i++) {
		qsort(parts[i].t, (size_t)rounds, sizeof(double), cmp_d);
		double med = parts[i].t[rounds / 2];
		double gf = parts[i].flop / med * 1e-9;
		if (i == 0)
			peak = gf;
		if (parts[i].flop > 0)
			printf("  %-40s %10.1f %9.1f %7.0f%%\n", parts[i].name, med * 1e6, gf,
			       100.0 * gf / peak);
		else
			printf("  %-40s %10.1f %9s %8s\n", parts[i].name, med * 1e6, "-", "-");
	}
	return 0;
}
