/*
 * blas_info.h - which kernels the host backend's math runs on (OpenBLAS's
 * core and this backend's own ISA path), for the logs, and the one piece of
 * advice that changes its speed most: OpenBLAS 0.3.21 runs its pre-AVX2
 * kernels on a CPU it does not know (measured ~32 against ~150 GFLOP/s a core
 * on an AVX-512 Xeon, docs/benchmarks.md), unless OPENBLAS_CORETYPE says
 * otherwise, and OpenBLAS reads that before the program starts.
 */
#ifndef MNIST_DDP_BLAS_INFO_H
#define MNIST_DDP_BLAS_INFO_H

#include <stddef.h>

#include "conv_direct.h" /* enum host_isa */

/*
 * The advice for OpenBLAS's core `core` (its name, any case) on a CPU whose
 * widest vectors are `cpu` (host_cpu_isa()), in out (a sentence, no prefix);
 * 1 when there is some, 0 (out empty) when not.
 * There is when the user did not set OPENBLAS_CORETYPE (user_set 0) and
 * OpenBLAS chose a core without AVX2 kernels on a CPU that has AVX2: set
 * OPENBLAS_CORETYPE=SkylakeX on an AVX-512 CPU, else Haswell. A choice among
 * the AVX2 and AVX-512 cores (Haswell, Zen, SkylakeX, Cooperlake,
 * SapphireRapids) is OpenBLAS's to make and left alone.
 */
int blas_advice(const char *core, enum host_isa cpu, int user_set, char *out, size_t cap);

/* "cpu avx512 (OpenBLAS Haswell, 1 thread)": the host backend's device, for the logs. */
void blas_describe(char *out, size_t cap);

/* blas_advice for this process, on stderr as "mnist-train: rank R on HOST: ...", on local rank 0. */
void blas_advise(int rank, const char *host, int local_rank);

#endif /* MNIST_DDP_BLAS_INFO_H */
