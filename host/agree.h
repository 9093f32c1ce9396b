/*
 * agree.h - the start-up agreement check: every rank must train the same
 * model on the same data with the same build.
 *
 * Each rank writes a fingerprint of its run as "key=value" text lines into a
 * fixed-size record (model, layer sizes, batch, lr, epochs, seed, data set
 * sizes and CRC-32s, program and MPI versions, backend), plus its placement
 * (host, local rank, device) in lines whose key starts with '@' that are
 * shown but never compared. Rank 0 gathers the records, prints the placement
 * on stderr and compares every record with its own. Text keeps the check
 * meaningful between different builds: a key one build lacks is reported as
 * a difference, not misread.
 *
 * A mismatch is refused on every rank with status 2: rank 0 prints which
 * ranks differ in what; the other ranks say whether they differ or stop
 * because another rank does.
 */
#ifndef MNIST_DDP_AGREE_H
#define MNIST_DDP_AGREE_H

#include <stddef.h>

#include "backend.h"
#include "config.h"
#include "dist.h"
#include "io/idx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes each rank sends rank 0: part of the wire format between builds, never change it. */
#define AGREE_RECORD_BYTES 2048

/*
 * This rank's record into rec (len bytes, NUL-terminated, truncated at a line
 * boundary). test may be NULL (no test set). host, local_rank and device are
 * the placement lines.
 */
void agree_fingerprint(const struct train_config *c, const struct mnist_set *train,
		       const struct mnist_set *test, const char *backend_name,
		       const char *host, int local_rank, const char *device, char *rec,
		       size_t len);

/*
 * Compare record `other` with the reference `ref`, placement lines excluded.
 * Returns how many keys differ (a key present in only one record counts).
 * diff gets "key=other (rank 0: ref), ..." and keys gets "key, key, ..."
 * (either may be NULL).
 */
int agree_diff(const char *ref, const char *other, char *diff, size_t difflen, char *keys,
	       size_t keyslen);

/*
 * Collective: gather every rank's record on rank 0, which prints the
 * placement on stderr and compares. Returns 0 on every rank when all records
 * agree; otherwise 2 on every rank, with msg saying why this rank stops
 * (rank 0 has already printed the differences on stderr).
 */
int agree_check(const struct dist *d, const struct train_config *c,
		const struct mnist_set *train, const struct mnist_set *test,
		const struct backend *be, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_AGREE_H */
