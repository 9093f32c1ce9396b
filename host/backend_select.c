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

/* What this rank found: a usable device, none, or GPUs it cannot use (include/backend.h). */
static void cuda_probe(const struct dist *d, struct cuda_probe *p)
{
#ifdef MNIST_DDP_HAVE_CUDA
	backend_cuda_probe(d, p);
#else
	memset(p, 0, sizeof(*p));
	p->verdict = CUDA_ABSENT;
	snprintf(p->reason, sizeof(p->reason), "not-built");
	snprintf(p->why, sizeof(p->why), "this build has no CUDA backend (configured with MNIST_DDP_CUDA=OFF or without the CUDA toolkit)");
#endif
}

static int cuda_create(const struct dist *d, struct backend *out, char *why, size_t whylen)
{
#ifdef MNIST_DDP_HAVE_CUDA
	return backend_cuda_create(d, out, why, whylen);
#else
	struct cuda_probe p;
	cuda_probe(d, &p);
	snprintf(why, whylen, "%s", p.why);
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

	struct cuda_probe probe;
	cuda_probe(d, &probe);
	snprintf(mine, sizeof(mine), "%s", probe.why);
	int own_failure = probe.verdict != CUDA_USABLE;
	/* The worst verdict of any rank: GPUs present but unusable outweigh none. */
	int failed = dist_agree(d, (int)probe.verdict, &bad_rank);
	if (choice == BACKEND_AUTO && failed) {
		/* Tell everyone rank bad_rank's verdict: rank 0 reports it. */
		struct cuda_probe theirs = probe;
		MPI_CHECK(MPI_Bcast(&theirs, (int)sizeof(theirs), MPI_BYTE, bad_rank, d->comm));
		theirs.reason[sizeof(theirs.reason) - 1] = theirs.why[sizeof(theirs.why) - 1] = '\0';
		if (failed == CUDA_UNUSABLE)
			snprintf(why, whylen, "WARNING: GPUs are present but unusable, so this run trains on the CPU (host backend): rank %d: %s [%s]; fix the GPU set-up (docs/gpu.md) or pass --backend host",
				 bad_rank, theirs.why, theirs.reason);
		else
			snprintf(why, whylen, "backend auto: using host, because rank %d has no usable CUDA device (%s)",
				 bad_rank, theirs.why);
		int rc = backend_host_create(d, threads, out);
		if (rc == 0 && failed == CUDA_UNUSABLE)
			snprintf(out->fallback, sizeof(out->fallback), "%s", theirs.reason);
		return rc;
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
