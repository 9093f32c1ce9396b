/*
 * leak_control.c - the control of test_valgrind.sh: an MPI program that leaks
 * one block of its own after MPI_Init. Under valgrind with the project's
 * suppressions the leak must still be reported; if it were not, the
 * suppressions would be hiding more than Open MPI's reports.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *leak_control_block(void)
{
	char *p = malloc(4242);
	if (p)
		memset(p, 1, 4242);
	return p;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	char *volatile p = leak_control_block();
	printf("leak_control: %d\n", p ? p[7] : -1);
	p = NULL; /* the only pointer: definitely lost */
	MPI_Finalize();
	return 0;
}
