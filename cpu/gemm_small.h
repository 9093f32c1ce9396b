/*
 * gemm_small.h - the host backend's own row-major GEMM for small and skinny
 * shapes (cpu/gemm_small.c).
 *
 * The models' output layer is 10 wide and a rank's batch is often 32: a
 * GEMM of 32 x 10 x 784 is a quarter of a million multiply-adds, a few
 * microseconds of arithmetic, and OpenBLAS spends longer than that on its
 * per-call work (argument checks, packing both operands into panels, the
 * hand-off to its threads). The host backend sends such shapes here and
 * everything else to cblas_sgemm; gemm_small_wanted() decides, on speed
 * alone: gemm_small() is correct for every shape and transpose.
 */
#ifndef MNIST_DDP_GEMM_SMALL_H
#define MNIST_DDP_GEMM_SMALL_H

#include "gemm_map.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when r is cheaper here than in cblas_sgemm. */
int gemm_small_wanted(const struct gemm_req *r);

/* C = alpha * op(A) * op(B) + beta * C, row-major; with beta == 0 C is only written. */
void gemm_small(const struct gemm_req *r);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_GEMM_SMALL_H */
