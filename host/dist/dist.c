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
 * Open MPI defaults set before MPI_Init reads them; a value from the
 * environment or from `mpirun --mca` (which arrives as the same variable) is
 * kept. docs/benchmarks.md has the measurements.
 *  - The shared-memory transport sends a message of up to 4 KiB eagerly and a
 *    larger one by rendezvous, a round trip more. The seed model's whole
 *    gradient is 31 KiB, so the eager limit is raised to the transport's
 *    fragment size, 32 KiB.
 *  - Open MPI 4 moves a large message in one copy by the kernel's
 *    cross-memory attach (CMA): a system call that pins each page. Copying it
 *    in and out of the shared segment instead ("none") reduced LeNet-5's
 *    240 KB gradient in 10 us instead of 27 and the mlp's 2 MB in 50 instead
 *    of 84, up to 16 MB; from 64 MB (past the last-level cache) CMA was 1.2x
 *    faster. Open MPI 5 moved the single copy to another framework, which is
 *    left as it is.
 */
struct dist_default {
	const char *name; /* MCA parameter; the variable is OMPI_MCA_<name> */
	const char *value;
};

static const struct dist_default dist_defaults[] = {
#if defined(OPEN_MPI) && OPEN_MPI
#if OMPI_MAJOR_VERSION >= 5
	{ "btl_sm_eager_limit", "32768" },
#else
	{ "btl_vader_eager_limit", "32768" },
	{ "btl_vader_single_copy_mechanism", "none" },
#endif
#endif
	{ NULL, NULL },
};

static void dist_mpi_defaults(void)
{
	for (const struct dist_default *p = dist_defaults; p->name; p++) {
		char var[128];
		snprintf(var, sizeof(var), "OMPI_MCA_%s", p->name);
		setenv(var, p->value, 0);
	}
}

/* An integer control variable's value as MPI holds it now; 0 when unreadable. */
static int dist_cvar_read(int index, MPI_Datatype type, long long *number)
{
	MPI_T_cvar_handle handle;
	int count = 0;
	if (MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) != MPI_SUCCESS)
		return 0;
	unsigned char raw[16] = { 0 }; /* room for any integer type */
	int ok = count == 1 && MPI_T_cvar_read(handle, raw) == MPI_SUCCESS;
	MPI_T_cvar_handle_free(&handle);
	if (type == MPI_INT) {
		int v;
		memcpy(&v, raw, sizeof(v));
		*number = v;
	} else if (type == MPI_UNSIGNED) {
		unsigned v;
		memcpy(&v, raw, sizeof(v));
		*number = v;
	} else {
		unsigned long long v;
		memcpy(&v, raw, sizeof(v));
		*number = (long long)v;
	}
	return ok;
}

/* "name=value" for one MCA parameter as MPI reads it now (an enum by its item's name). */
static void dist_cvar_text(const char *name, char *out, size_t cap)
{
	int index = 0;
	char cname[128], desc[8];
	int cname_len = sizeof(cname), desc_len = sizeof(desc), verbosity, bind, scope;
	MPI_Datatype type;
	MPI_T_enum enumtype;
	long long number = 0;
	if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) {
		snprintf(out, cap, "%s=(not loaded)", name);
		return;
	}
	if (MPI_T_cvar_get_info(index, cname, &cname_len, &verbosity, &type, &enumtype, desc,
				&desc_len, &bind, &scope) != MPI_SUCCESS ||
	    !dist_cvar_read(index, type, &number)) {
		snprintf(out, cap, "%s=(unreadable)", name);
		return;
	}
	snprintf(out, cap, "%s=%lld", name, number);
	int items = 0;
	char ename[8];
	int ename_len = sizeof(ename);
	if (enumtype == MPI_T_ENUM_NULL ||
	    MPI_T_enum_get_info(enumtype, &items, ename, &ename_len) != MPI_SUCCESS)
		return;
	for (int i = 0; i < items; i++) {
		int item = 0;
		char item_name[48];
		int item_len = sizeof(item_name);
		if (MPI_T_enum_get_item(enumtype, i, &item, item_name, &item_len) == MPI_SUCCESS &&
		    item == number)
			snprintf(out, cap, "%s=%s", name, item_name);
	}
}

const char *dist_mpi_tuning(void)
{
	static char text[256];
	text[0] = '\0';
	int provided = 0;
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
		return "(MPI_T unavailable)";
	for (const struct dist_default *p = dist_defaults; p->name; p++) {
		size_t len = strlen(text);
		char one[128];
		dist_cvar_text(p->name, one, sizeof(one));
		snprintf(text + len, sizeof(text) - len, "%s%s", len ? " " : "", one);
	}
	MPI_T_finalize();
	return text[0] ? text : "none";
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
	/*
	 * The end is a collective too (Open MPI's MPI_Finalize waits for every
	 * rank): a rank that never gets there must not hold the others forever.
	 */
	deadline_arm(d->watch, "end of the job (MPI_Finalize)", 0);
	if (d->local_comm != MPI_COMM_NULL && d->local_comm)
		MPI_Comm_free(&d->local_comm);
	if (d->comm != MPI_COMM_NULL && d->comm)
		MPI_Comm_free(&d->comm);
	MPI_Finalize();
	deadline_destroy(d->watch);
	d->watch = NULL;
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
