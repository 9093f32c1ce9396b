/*
 * dist.h - the MPI job: who this rank is and where it runs.
 *
 * MPI only starts the ranks, carries small agreements (errors, counts,
 * the NCCL id) and, on the host backend, the gradient allreduce.
 */
#ifndef MNIST_DDP_DIST_H
#define MNIST_DDP_DIST_H

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
};

/*
 * MPI_Init and fill *d. Fatal on MPI failure. Before MPI_Init it raises Open
 * MPI's shared-memory eager limit to 32 KiB unless the environment sets it
 * (host/dist.c says why); dist_mpi_tuning() names the setting in effect, for logs.
 */
void dist_init(int *argc, char ***argv, struct dist *d);
const char *dist_mpi_tuning(void);
void dist_finalize(struct dist *d);

/*
 * Collective agreement on an outcome: every rank passes its own status
 * (0 ok); every rank gets the largest status of any rank, and *first_bad
 * the lowest rank that reported it (-1 when all are 0).
 */
int dist_agree(const struct dist *d, int status, int *first_bad);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_DIST_H */
