/*
 * mpi_util.h - helpers for the multi-rank test programs in tests/mpi/.
 *
 * These programs are plain MPI programs (not Criterion: MPI_Init works once
 * per launch), started by a real mpirun from ctest. They exit 0 when every
 * check passed and 1 otherwise, with the reasons printed by rank 0.
 */
#ifndef MNIST_DDP_TESTS_MPI_UTIL_H
#define MNIST_DDP_TESTS_MPI_UTIL_H

#include <stddef.h>

#include "dist.h"
#include "io/idx.h"

/*
 * Load the training split from dir on every rank. When any rank cannot, rank 0
 * prints why (and that scripts/get-mnist.sh fetches MNIST) and every rank
 * returns non-zero: a missing data set is a failure, never a skip.
 */
int mpi_util_load_train(const struct dist *d, const char *dir, struct mnist_set *out);

/*
 * Replicas identical: gather every rank's CRC-32 of the parameter bytes and the
 * full buffers to rank 0 and compare each with rank 0's. Collective; returns
 * the same 0 (identical) or 1 on every rank, printing mismatches on rank 0.
 */
int mpi_util_replicas_identical(const struct dist *d, const float *params, size_t n,
				const char *label);

/* A struct dist for this rank alone (MPI_COMM_SELF, size 1): a 1-rank run inside the job. */
void mpi_util_dist_self(const struct dist *world, struct dist *self);

/* Every rank's verdict combined: 1 when any rank passes non-zero. */
int mpi_util_any(const struct dist *d, int failed);

#endif /* MNIST_DDP_TESTS_MPI_UTIL_H */
