/*
 * backend_select.c - the backend registry: which backend a run uses, agreed
 * by every rank before any of them starts.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "config.h"
#include "dist.h"

/* 1 when this rank can run the CUDA backend; else 0 and why. */
static int cuda_usable(const struct dist *d, char *why, size_t whylen)
{
#ifdef MNIST_DDP_HAVE_CUDA
	return backend_cuda_probe(d, why, whylen);
#else
	snprintf(why, whylen, "this build has no CUDA backend (configured with MNIST_DDP_CUDA=OFF or without the CUDA toolkit)");
	return 0;
#endif
}

static int cuda_create(const struct dist *d, struct backend *out, char *why, size_t whylen)
{
#ifdef MNIST_DDP_HAVE_CUDA
	return backend_cuda_create(d, out, why, whylen);
#else
	cuda_usable(d, why, whylen);
	return 1;
#endif
}

int backend_select(int choice, const struct dist *d, int threads, struct backend *out,
		   char *why, size_t whylen)
{
	char mine[512] = "";
	int bad_rank = -1;
	why[0] = '\0';
	memset(out, 0, sizeof(*out));

	if (choice == BACKEND_HOST)
		return backend_host_create(d, threads, out);

	int usable = cuda_usable(d, mine, sizeof(mine));
	int own_failure = !usable;
	int failed = dist_agree(d, own_failure, &bad_rank);
	if (choice == BACKEND_AUTO && failed) {
		/* Tell everyone rank bad_rank's reason: rank 0 reports it. */
		char reason[512];
		memcpy(reason, mine, sizeof(reason));
		MPI_CHECK(MPI_Bcast(reason, (int)sizeof(reason), MPI_CHAR, bad_rank, d->comm));
		reason[sizeof(reason) - 1] = '\0';
		snprintf(why, whylen, "backend auto: using host, because rank %d has no usable CUDA device (%s)",
			 bad_rank, reason);
		return backend_host_create(d, threads, out);
	}
	if (!failed) {
		int rc = cuda_create(d, out, mine, sizeof(mine));
		own_failure = rc != 0;
		failed = dist_agree(d, own_failure, &bad_rank);
		if (!failed) {
			if (choice == BACKEND_AUTO)
				snprintf(why, whylen, "backend auto: using cuda, every rank has a device");
			return 0;
		}
		if (rc == 0)
			backend_destroy(out);
	}
	if (own_failure)
		snprintf(why, whylen, "--backend cuda: %s", mine);
	else
		snprintf(why, whylen, "--backend cuda: stopping because rank %d could not start the CUDA backend",
			 bad_rank);
	return 1;
}

void backend_destroy(struct backend *b)
{
	if (b->ops && b->ops->destroy)
		b->ops->destroy(b->ctx);
	memset(b, 0, sizeof(*b));
}
