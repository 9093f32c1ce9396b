/*
 * agree.h - the start-up agreement: every rank must train the same model on
 * the same data with the same build, and rank 0 says where the ranks run.
 *
 * A fingerprint is "key=value" text lines: every setting the table marks
 * SETTING_AGREE (config.h), in its text form, plus the program and MPI
 * versions, the backend, and the data sets' sizes and CRC-32s. Rank 0
 * broadcasts its fingerprint, each rank compares it with its own, and the
 * ranks agree on the outcome. Every rank also sends rank 0 its placement
 * (host, local rank, device), which rank 0 prints on stderr, and its
 * differences, which rank 0 prints grouped by rank. Text keeps the check
 * meaningful between different builds: a key one build lacks is reported as
 * a difference, not misread.
 *
 * A mismatch is refused on every rank with status 2: rank 0 prints which
 * ranks differ in what (the keys, both values, the ranks and their hosts);
 * the other ranks say whether they differ or stop because another rank does.
 */
#ifndef MNIST_DDP_AGREE_H
#define MNIST_DDP_AGREE_H

#include <stddef.h>

#include "backend.h"
#include "check.h"
#include "config.h"
#include "dist.h"
#include "io/idx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the broadcast fingerprint: part of the wire format between builds, never change it. */
#define AGREE_FINGERPRINT_BYTES 16384

/*
 * This rank's fingerprint into fp (len bytes, NUL-terminated). test may be
 * NULL (no test set), and train (--eval-only reads none). Returns its
 * length, or -1 when it does not fit in len.
 */
int agree_fingerprint(const struct train_config *c, const struct mnist_set *train,
		      const struct mnist_set *test, const char *backend_name, char *fp, size_t len);

/*
 * Compare fingerprint `other` with rank 0's `ref`. Returns how many keys
 * differ (a key present in only one of them counts). diff gets
 * "key=other (rank 0: ref), ..." and keys gets "key, key, ..." (either may be
 * NULL; both are cut with "..." when they do not fit).
 */
int agree_diff(const char *ref, const char *other, char *diff, size_t difflen, char *keys,
	       size_t keyslen);

/*
 * Collective, under the job's deadline: the check above. STATUS_OK on every
 * rank when all fingerprints equal rank 0's; otherwise STATUS_BAD_INPUT on
 * every rank, with msg saying why this rank stops (rank 0 has printed the
 * differences on stderr).
 */
enum status agree_check(const struct dist *d, const struct train_config *c,
			const struct mnist_set *train, const struct mnist_set *test,
			const struct backend *be, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_AGREE_H */
