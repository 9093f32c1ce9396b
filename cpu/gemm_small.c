/*
 * gemm_small.c - row-major GEMM for small and skinny shapes: see
 * cpu/gemm_small.h for why the host backend has its own.
 *
 * Two register-blocked forms, chosen by how op(B) is stored:
 *   op(B) rows contiguous (trans_b == 0): the "axpy" form. A block of C, up
 *     to GS_MR rows by GS_NB * HOST_BLOCK columns, lives in accumulators; for
 *     each p a row piece of op(B) is loaded and multiplied by op(A)(i, p) for
 *     every row i of the block. This is the weight gradient dz^T * x (10 x 784
 *     from a batch of 32), the bias gradient and the input gradients.
 *   op(B) columns contiguous (trans_b == 1, trans_a == 0): the "dot" form.
 *     C(i, j) is the dot product of row i of A and row j of B; a block of
 *     GS_MI rows by up to GS_NR columns runs side by side over HOST_BLOCK-wide
 *     pieces of k, so each load of A or B feeds several products. This is the
 *     forward pass x * W^T. A long sum with few rows (a convolution's weight
 *     gradient, k a batch's pixels) takes blocks of GS_TALL_MI rows by
 *     GS_TALL_NR columns instead, so that op(B) streams past fewer times.
 * Both transposed (never asked for by the models) and the axpy form's last
 * columns take plain loops. Block sizes are compile-time constants in each
 * specialised body (the switches below) and the loops over them are
 * unrolled, so the accumulators stay in registers. This file is built with
 * -ffp-contract=fast: multiply-adds become FMAs where the CPU has them; GEMM
 * results are compared with a tolerance everywhere, never bitwise.
 */
#include "gemm_small.h"

#include <stddef.h>

#include "host_vector.h"

#define GS_MR 10 /* rows of C per block in the axpy form, at most */
#define GS_NB 2  /* HOST_BLOCK-wide column pieces per block in the axpy form */
#define GS_MI 2  /* rows of C per block in the dot form */
#define GS_NR 12 /* columns of C per block in the dot form, at most */
/* Sums this long take the dot form in blocks of GS_TALL_MI rows by up to GS_TALL_NR columns. */
#define GS_TALL_K 2048
#define GS_TALL_MI 6
#define GS_TALL_NR 4

/* Multiply-adds below which OpenBLAS's fixed per-call cost dominates. */
#define GS_SMALL_MACS (1L << 19)
/*
 * The axpy form outruns one OpenBLAS thread up to here when C's rows are
 * whole HOST_BLOCKs (LeNet's fc1 gradients); a ragged edge takes plain loops.
 */
#define GS_AXPY_MACS (1L << 22)
/*
 * With one side of C this narrow, or a sum this short, the work is one thin
 * panel whatever its size, up to here: a convolution's GEMMs (a few output
 * channels by a batch's pixels, or a sum over them) at batch 128 and below.
 */
#define GS_SKINNY 16
#define GS_SKINNY_MACS (1L << 25)

int gemm_small_wanted(const struct gemm_req *r)
{
	if (r->trans_a && r->trans_b)
		return 0;
	long macs = (long)r->m * r->n * r->k;
	return macs <= GS_SMALL_MACS ||
	       (!r->trans_b && r->n % HOST_BLOCK == 0 && macs < GS_AXPY_MACS) ||
	       ((r->m <= GS_SKINNY || r->n <= GS_SKINNY || r->k <= GS_SKINNY) &&
		macs <= GS_SKINNY_MACS);
}

/*
 * c (n) = alpha * acc + beta * c, without reading c when beta is 0; the test
 * is outside the loops so that both vectorize.
 */
static inline __attribute__((always_inline)) void gs_store(float *restrict c,
							  const float *restrict acc, int n,
							  float alpha, float beta)
{
	if (beta == 0.0f)
		for (int l = 0; l < n; l++)
			c[l] = alpha * acc[l];
	else
		for (int l = 0; l < n; l++)
			c[l] = alpha * acc[l] + beta * c[l];
}

/* op(A)(i, p) and op(B)(p, j). */
static inline float gs_a(const struct gemm_req *r, int i, int p)
{
	return r->trans_a ? r->a[(size_t)p * r->lda + i] : r->a[(size_t)i * r->lda + p];
}

static inline float gs_b(const struct gemm_req *r, int p, int j)
{
	return r->trans_b ? r->b[(size_t)j * r->ldb + p] : r->b[(size_t)p * r->ldb + j];
}

/* Columns j0 .. n-1 of C, every row, by plain loops: any transposes. */
static void gemm_plain(const struct gemm_req *r, int j0)
{
	for (int i = 0; i < r->m; i++)
		for (int j = j0; j < r->n; j++) {
			float acc = 0.0f;
			for (int p = 0; p < r->k; p++)
				acc += gs_a(r, i, p) * gs_b(r, p, j);
			gs_store(r->c + (size_t)i * r->ldc + j, &acc, 1, r->alpha, r->beta);
		}
}

/* ---- axpy form: trans_b == 0 ------------------------------------------------ */

/*
 * Rows i0 .. i0+MR-1, columns j0 .. j0+NB*HOST_BLOCK-1 of C; MR and NB are
 * constants where inlined. Per p: NB loads of op(B), MR broadcasts of op(A),
 * MR*NB multiply-adds.
 */
static inline __attribute__((always_inline)) void axpy_block(const struct gemm_req *r, int i0,
							    int j0, const int MR, const int NB)
{
	float acc[GS_MR][GS_NB * HOST_BLOCK];
	for (int q = 0; q < MR; q++)
		for (int l = 0; l < NB * HOST_BLOCK; l++)
			acc[q][l] = 0.0f;
	for (int p = 0; p < r->k; p++) {
		const float *restrict b = r->b + (size_t)p * r->ldb + j0;
#pragma GCC unroll 10
		for (int q = 0; q < MR; q++) {
			float a = gs_a(r, i0 + q, p);
			for (int l = 0; l < NB * HOST_BLOCK; l++)
				acc[q][l] += a * b[l];
		}
	}
	for (int q = 0; q < MR; q++)
		gs_store(r->c + (size_t)(i0 + q) * r->ldc + j0, acc[q], NB * HOST_BLOCK, r->alpha,
			 r->beta);
}

#define AXPY_CASES(NB)                                                        \
	switch (mr) {                                                         \
	case 1: axpy_block(r, i0, j0, 1, NB); break;                          \
	case 2: axpy_block(r, i0, j0, 2, NB); break;                          \
	case 3: axpy_block(r, i0, j0, 3, NB); break;                          \
	case 4: axpy_block(r, i0, j0, 4, NB); break;                          \
	case 5: axpy_block(r, i0, j0, 5, NB); break;                          \
	case 6: axpy_block(r, i0, j0, 6, NB); break;                          \
	case 7: axpy_block(r, i0, j0, 7, NB); break;                          \
	case 8: axpy_block(r, i0, j0, 8, NB); break;                          \
	case 9: axpy_block(r, i0, j0, 9, NB); break;                          \
	default: axpy_block(r, i0, j0, GS_MR, NB); break;                     \
	}

HOST_VECTOR_CLONES
static void gemm_axpy(const struct gemm_req *r)
{
	/* Row blocks of equal height, at most GS_MR: 10 rows are one block, 32 are four of 8. */
	int blocks = (r->m + GS_MR - 1) / GS_MR;
	int rows = (r->m + blocks - 1) / blocks;
	int wide = GS_NB * HOST_BLOCK;
	int jwide = r->n - r->n % wide, jfull = r->n - r->n % HOST_BLOCK;
	for (int i0 = 0; i0 < r->m; i0 += rows) {
		int mr = r->m - i0 < rows ? r->m - i0 : rows;
		int j0 = 0;
		for (; j0 < jwide; j0 += wide)
			AXPY_CASES(GS_NB)
		for (; j0 < jfull; j0 += HOST_BLOCK)
			AXPY_CASES(1)
	}
	if (jfull < r->n)
		gemm_plain(r, jfull); /* the columns past the last whole HOST_BLOCK */
}

/* ---- dot form: trans_a == 0, trans_b == 1 ------------------------------------ */

/*
 * Rows i0 .. i0+MI-1, columns j0 .. j0+NR-1 of C; MI and NR are constants
 * where inlined. Per HOST_BLOCK-wide piece of k: MI loads of A, NR loads of
 * B, MI*NR multiply-adds.
 */
static inline __attribute__((always_inline)) void dot_block(const struct gemm_req *r, int i0,
							   int j0, const int MI, const int NR)
{
	float acc[GS_TALL_MI][GS_NR][HOST_BLOCK], sum[GS_NR];
	for (int u = 0; u < MI; u++)
		for (int q = 0; q < NR; q++)
			for (int l = 0; l < HOST_BLOCK; l++)
				acc[u][q][l] = 0.0f;
	int kfull = r->k - r->k % HOST_BLOCK;
	for (int p = 0; p < kfull; p += HOST_BLOCK)
#pragma GCC unroll 12
		for (int q = 0; q < NR; q++) {
			const float *restrict b = r->b + (size_t)(j0 + q) * r->ldb + p;
#pragma GCC unroll 6
			for (int u = 0; u < MI; u++) {
				const float *restrict a = r->a + (size_t)(i0 + u) * r->lda + p;
				for (int l = 0; l < HOST_BLOCK; l++)
					acc[u][q][l] += a[l] * b[l];
			}
		}
	for (int u = 0; u < MI; u++) {
		const float *a = r->a + (size_t)(i0 + u) * r->lda;
		for (int q = 0; q < NR; q++) {
			const float *b = r->b + (size_t)(j0 + q) * r->ldb;
			sum[q] = 0.0f;
			for (int p = kfull; p < r->k; p++)
				sum[q] += a[p] * b[p];
			for (int l = 0; l < HOST_BLOCK; l++)
				sum[q] += acc[u][q][l];
		}
		gs_store(r->c + (size_t)(i0 + u) * r->ldc + j0, sum, NR, r->alpha, r->beta);
	}
}

#define DOT_CASES(MI)                                                         \
	switch (nr) {                                                         \
	case 1: dot_block(r, i0, j0, MI, 1); break;                           \
	case 2: dot_block(r, i0, j0, MI, 2); break;                           \
	case 3: dot_block(r, i0, j0, MI, 3); break;                           \
	case 4: dot_block(r, i0, j0, MI, 4); break;                           \
	case 5: dot_block(r, i0, j0, MI, 5); break;                           \
	case 6: dot_block(r, i0, j0, MI, 6); break;                           \
	case 7: dot_block(r, i0, j0, MI, 7); break;                           \
	case 8: dot_block(r, i0, j0, MI, 8); break;                           \
	case 9: dot_block(r, i0, j0, MI, 9); break;                           \
	case 10: dot_block(r, i0, j0, MI, 10); break;                         \
	case 11: dot_block(r, i0, j0, MI, 11); break;                         \
	default: dot_block(r, i0, j0, MI, GS_NR); break;                      \
	}

#define DOT_TALL_CASES(MI)                                                    \
	switch (nr) {                                                         \
	case 1: dot_block(r, i0, j0, MI, 1); break;                           \
	case 2: dot_block(r, i0, j0, MI, 2); break;                           \
	case 3: dot_block(r, i0, j0, MI, 3); break;                           \
	default: dot_block(r, i0, j0, MI, GS_TALL_NR); break;                 \
	}

HOST_VECTOR_CLONES
static void gemm_dot(const struct gemm_req *r)
{
	if (r->k >= GS_TALL_K) {
		/*
		 * A long sum (a convolution's weight gradient sums over a batch's
		 * pixels): blocks of GS_TALL_MI rows, so that op(B), megabytes here,
		 * streams past as few times as C has row blocks.
		 */
		for (int i0 = 0; i0 < r->m; i0 += GS_TALL_MI)
			for (int j0 = 0; j0 < r->n; j0 += GS_TALL_NR) {
				int nr = r->n - j0 < GS_TALL_NR ? r->n - j0 : GS_TALL_NR;
				switch (r->m - i0 < GS_TALL_MI ? r->m - i0 : GS_TALL_MI) {
				case 1: DOT_TALL_CASES(1) break;
				case 2: DOT_TALL_CASES(2) break;
				case 3: DOT_TALL_CASES(3) break;
				case 4: DOT_TALL_CASES(4) break;
				case 5: DOT_TALL_CASES(5) break;
				default: DOT_TALL_CASES(GS_TALL_MI) break;
				}
			}
		return;
	}
	for (int i0 = 0; i0 < r->m; i0 += GS_MI)
		for (int j0 = 0; j0 < r->n; j0 += GS_NR) {
			int nr = r->n - j0 < GS_NR ? r->n - j0 : GS_NR;
			if (r->m - i0 >= GS_MI)
				DOT_CASES(GS_MI)
			else
				DOT_CASES(1)
		}
}

void gemm_small(const struct gemm_req *r)
{
	if (r->m <= 0 || r->n <= 0)
		return;
	if (!r->trans_b)
		gemm_axpy(r);
	else if (!r->trans_a)
		gemm_dot(r);
	else
		gemm_plain(r, 0);
}
