/*
 * stop_at_end.c - a fault for tests/reliability/test_failures.sh (case
 * stop-at-end), loaded into mnist-train with LD_PRELOAD: the rank named by
 * STOP_AT_END_RANK stops itself (SIGSTOP) as it enters MPI_Finalize, after its
 * training, evaluation and summary, as a rank frozen at the job's end would.
 * Every other MPI call, and MPI_Finalize on the other ranks, is the real
 * library's; nothing here stands in for MPI.
 */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int MPI_Finalize(void)
{
	const char *which = getenv("STOP_AT_END_RANK");
	int rank = -1;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (which && atoi(which) == rank)
		kill(getpid(), SIGSTOP);
	return PMPI_Finalize();
}
