/*
 * dist.h - the MPI job: who this rank is, where it runs, and the few
 * collectives the host program needs (host/dist/dist.c).
 *
 * MPI only starts the ranks, carries small agreements (errors, counts, the
 * fingerprint, the NCCL id) and, on the host backend, the gradient allreduce.
 * Every collective here runs under the job's deadline (deadline.h): past
 * --timeout the rank that waits says which collective hangs and the job ends.
 */
#ifndef MNIST_DDP_DIST_H
#define MNIST_DDP_DIST_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

struct dist {
	int rank, size;             /* in MPI_COMM_WORLD */
	int local_rank, local_size; /* among the ranks sharing this node */
	int node_count;             /* distinct nodes in the job */
	char host[MPI_MAX_PROCESSOR_NAME];
	MPI_Comm comm;       /* the job's communicator (a dup of MPI_COMM_WORLD) */
	MPI_Comm local_comm; /* ranks on this node */
	struct deadline *watch; /* the job's collective deadline; none until dist_set_timeout */
};

/*
 * MPI_Init and fill *d. Fatal on MPI failure. Before MPI_Init it sets Open
 * MPI's shared-memory defaults (eager limit 32 KiB, no single copy) unless the
 * environment sets them (host/dist/dist.c says why); dist_mpi_tuning() names
 * the values MPI holds (read through MPI_T after MPI_Init), for logs.
 */
void dist_init(int *argc, char ***argv, struct dist *d);
const char *dist_mpi_tuning(void);
void dist_finalize(struct dist *d);

/* Seconds any collective of the job may take (0: no deadline), from --timeout. */
void dist_set_timeout(struct dist *d, double seconds);

/*
 * Collective agreement on an outcome: every rank passes its own status
 * (0 ok); every rank gets the largest status of any rank, and *first_bad
 * the lowest rank that reported it (-1 when all are 0).
 */
int dist_agree(const struct dist *d, int status, int *first_bad);

/*
 * The host program's other collectives; `what` names each for the deadline's
 * message ("resume", "evaluation", ...).
 */
void dist_bcast(const struct dist *d, void *buf, size_t bytes, int root, const char *what);
/* v (n) summed over the ranks, in place. */
void dist_sum_ll(const struct dist *d, long long *v, int n, const char *what);
/* 1 when v is the same on every rank; lo and hi get its smallest and largest value. */
int dist_same_u32(const struct dist *d, uint32_t v, uint32_t *lo, uint32_t *hi,
		  const char *what);
void dist_barrier(const struct dist *d, const char *what);
/* Every rank's `bytes` bytes at send, in rank order into recv (size x bytes) on root only. */
void dist_gather(const struct dist *d, const void *send, size_t bytes, void *recv, int root,
		 const char *what);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_DIST_H */
