/*
 * dist.c - MPI start-up (rank, size, the ranks sharing this node, host name)
 * and the host program's collectives, each under the job's deadline.
 */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "deadline.h"

/*
 * Open MPI's shared-memory transport sends a message of up to 4 KiB eagerly
 * and a larger one by rendezvous, a round trip more. The seed model's whole
 * gradient is 31 KiB, so the eager limit is raised to the transport's
 * fragment size, 32 KiB (docs/benchmarks.md has the measurement), before
 * MPI_Init reads it; a value from the environment or from `mpirun --mca`
 * (which arrives as the same variable) is kept.
 */
#if defined(OPEN_MPI) && OPEN_MPI
#if OMPI_MAJOR_VERSION >= 5
#define DIST_EAGER_VAR "OMPI_MCA_btl_sm_eager_limit"
#else
#define DIST_EAGER_VAR "OMPI_MCA_btl_vader_eager_limit"
#endif
#endif

static void dist_mpi_defaults(void)
{
#ifdef DIST_EAGER_VAR
	setenv(DIST_EAGER_VAR, "32768", 0);
#endif
}

const char *dist_mpi_tuning(void)
{
#ifdef DIST_EAGER_VAR
	static char text[96];
	const char *v = getenv(DIST_EAGER_VAR);
	snprintf(text, sizeof(text), "%s=%s", DIST_EAGER_VAR + strlen("OMPI_MCA_"), v ? v : "(unset)");
	return text;
#else
	return "none";
#endif
}

void dist_init(int *argc, char ***argv, struct dist *d)
{
	memset(d, 0, sizeof(*d));
	dist_mpi_defaults();
	/* Funneled: other threads (OpenBLAS's, the deadline's watchdog) never call MPI. */
	int provided = 0;
	int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS)
		check_fail("MPI_Init", "could not start MPI", __func__, __FILE__, __LINE__, 1);
	/* Errors come back as codes so the check macros can name them. */
	MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d->comm));
	MPI_CHECK(MPI_Comm_rank(d->comm, &d->rank));
	MPI_CHECK(MPI_Comm_size(d->comm, &d->size));
	int len = 0;
	MPI_CHECK(MPI_Get_processor_name(d->host, &len));
	d->host[len < (int)sizeof(d->host) ? len : (int)sizeof(d->host) - 1] = '\0';
	check_set_identity(d->rank, d->host);

	MPI_CHECK(MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL,
				      &d->local_comm));
	MPI_CHECK(MPI_Comm_rank(d->local_comm, &d->local_rank));
	MPI_CHECK(MPI_Comm_size(d->local_comm, &d->local_size));
	/* One leader per node: the node count is the number of local rank 0s. */
	int leader = d->local_rank == 0;
	MPI_CHECK(MPI_Allreduce(&leader, &d->node_count, 1, MPI_INT, MPI_SUM, d->comm));
	d->watch = deadline_create(); /* armed only once dist_set_timeout gives it a time */
}

void dist_set_timeout(struct dist *d, double seconds)
{
	deadline_set_timeout(d->watch, seconds);
}

void dist_finalize(struct dist *d)
{
	deadline_destroy(d->watch);
	d->watch = NULL;
	if (d->local_comm != MPI_COMM_NULL && d->local_comm)
		MPI_Comm_free(&d->local_comm);
	if (d->comm != MPI_COMM_NULL && d->comm)
		MPI_Comm_free(&d->comm);
	MPI_Finalize();
}

int dist_agree(const struct dist *d, int status, int *first_bad)
{
	/* (status, rank) pairs: MAXLOC gives the worst status, lowest rank on ties. */
	struct {
		int status;
		int rank;
	} in = {status, d->rank}, out;
	deadline_arm(d->watch, "start-up agreement", 0);
	MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, d->comm));
	deadline_disarm(d->watch);
	if (first_bad)
		*first_bad = out.status ? out.rank : -1;
	return out.status;
}

void dist_bcast(const struct dist *d, void *buf, size_t bytes, int root, const char *what)
{
	if (bytes > (size_t)INT_MAX)
		die(1, "%s: %zu bytes is more than one broadcast carries", what, bytes);
	deadline_arm(d->watch, what, 0);
	MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, d->comm));
	deadline_disarm(d->watch);
}

void dist_sum_ll(const struct dist *d, long long *v, int n, const char *what)
{
	deadline_arm(d->watch, what, 0);
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG_LONG, MPI_SUM, d->comm));
	deadline_disarm(d->watch);
}

int dist_same_u32(const struct dist *d, uint32_t v, uint32_t *lo, uint32_t *hi,
		  const char *what)
{
	/* One allreduce: the minimum of v and of its complement (whose minimum is ~max). */
	unsigned pair[2] = {v, ~v};
	deadline_arm(d->watch, what, 0);
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, pair, 2, MPI_UNSIGNED, MPI_MIN, d->comm));
	deadline_disarm(d->watch);
	if (lo)
		*lo = pair[0];
	if (hi)
		*hi = ~pair[1];
	return pair[0] == ~pair[1];
}

void dist_barrier(const struct dist *d, const char *what)
{
	deadline_arm(d->watch, what, 0);
	MPI_CHECK(MPI_Barrier(d->comm));
	deadline_disarm(d->watch);
}

void dist_gather(const struct dist *d, const void *send, size_t bytes, void *recv, int root,
		 const char *what)
{
	if (bytes > (size_t)INT_MAX)
		die(1, "%s: %zu bytes is more than one gather carries", what, bytes);
	deadline_arm(d->watch, what, 0);
	MPI_CHECK(MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, d->comm));
	deadline_disarm(d->watch);
}
