/* mpi_util.c - helpers for the multi-rank test programs: see mpi_util.h. */
#include "io/crc32.h"
#include "mpi_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int mpi_util_any(const struct dist *d, int failed)
{
	int any = failed != 0;
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, d->comm));
	return any;
}

int mpi_util_load_train(const struct dist *d, const char *dir, struct mnist_set *out)
{
	char err[1024] = "";
	int rc = idx_load_set(dir, "train", out, err, sizeof(err));
	int bad_rank = -1;
	int worst = dist_agree(d, rc, &bad_rank);
	if (!worst)
		return 0;
	if (d->rank == bad_rank)
		fprintf(stderr,
			"FAIL: rank %d cannot load the MNIST training set from %s: %s\n"
			"      This test needs real MNIST: run scripts/get-mnist.sh (it fills "
			"MNIST_Data/{train,test}) or configure with -DMNIST_DATA_DIR=DIR.\n",
			d->rank, dir, err);
	if (rc == STATUS_OK)
		mnist_set_destroy(out);
	return 1;
}

void mpi_util_dist_self(const struct dist *world, struct dist *self)
{
	memset(self, 0, sizeof(*self));
	self->rank = 0;
	self->size = 1;
	self->local_rank = 0;
	self->local_size = 1;
	self->node_count = 1;
	snprintf(self->host, sizeof(self->host), "%s", world->host);
	self->comm = MPI_COMM_SELF;
	self->local_comm = MPI_COMM_SELF;
}

int mpi_util_replicas_identical(const struct dist *d, const float *params, size_t n,
				const char *label)
{
	if (n > (size_t)INT32_MAX / (size_t)d->size) {
		if (d->rank == 0)
			fprintf(stderr, "FAIL: %s: %zu parameters are too many to gather\n", label, n);
		return 1;
	}
	uint32_t crc = crc32_bytes(0, (const uint8_t *)params, n * sizeof(float));
	uint32_t *crcs = NULL;
	float *all = NULL;
	if (d->rank == 0) {
		crcs = xmalloc((size_t)d->size * sizeof(*crcs));
		all = xmalloc((size_t)d->size * n * sizeof(*all));
	}
	MPI_CHECK(MPI_Gather(&crc, 1, MPI_UINT32_T, crcs, 1, MPI_UINT32_T, 0, d->comm));
	MPI_CHECK(MPI_Gather(params, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, 0, d->comm));

	int failed = 0;
	if (d->rank == 0) {
		for (int r = 1; r < d->size; r++) {
			const float *p = all + (size_t)r * n;
			int hash_differs = crcs[r] != crcs[0];
			int bytes_differ = memcmp(p, all, n * sizeof(float)) != 0;
			/* The gathered bytes must also be the ones the rank hashed. */
			int gathered_crc_ok = crc32_bytes(0, (const uint8_t *)p, n * sizeof(float)) == crcs[r];
			if (!hash_differs && !bytes_differ && gathered_crc_ok)
				continue;
			failed = 1;
			size_t first = n, count = 0;
			double maxd = 0.0;
			for (size_t i = 0; i < n; i++) {
				if (memcmp(&p[i], &all[i], sizeof(float)) == 0)
					continue;
				if (first == n)
					first = i;
				count++;
				double diff = fabs((double)p[i] - (double)all[i]);
				if (diff > maxd || isnan(diff))
					maxd = diff;
			}
			fprintf(stderr,
				"FAIL: %s: rank %d's parameters differ from rank 0's: crc32 %08x vs %08x%s; "
				"%zu of %zu values differ (first at index %zu: %.9g vs %.9g), max abs diff %.3g\n",
				label, r, (unsigned)crcs[r], (unsigned)crcs[0],
				gathered_crc_ok ? "" : " (and the gathered bytes do not match the rank's hash)",
				count, n, first, first < n ? (double)p[first] : 0.0,
				first < n ? (double)all[first] : 0.0, maxd);
		}
		if (!failed)
			printf("ok: %s: %d replicas identical (crc32 %08x, %zu parameters, bytewise equal)\n",
			       label, d->size, (unsigned)crcs[0], n);
	}
	free(crcs);
	free(all);
	MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT, 0, d->comm));
	return failed;
}
