/*
 * mpi_bare.c - the yardstick for start-up time: an MPI program that does
 * nothing but start, meet and end (MPI_Init, MPI_Barrier, MPI_Finalize).
 *
 *   mpirun -n 2 build/bench/mpi_bare
 *
 * bench/startup times mnist-train against it: what mnist-train takes beyond
 * this is its own start-up (libraries, data, agreement) and training.
 */
#include <mpi.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
