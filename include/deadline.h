/*
 * deadline.h - a watchdog for blocking collectives (host/dist/deadline.c).
 *
 * One watchdog per process, owned by the job (struct dist): the host
 * backend's blocking MPI_Allreduce and MPI_Bcast (Open MPI's fastest) and the
 * host program's own collectives (start-up agreement, resume, evaluation,
 * replica check) arm it around each call. A watchdog thread, which never
 * calls MPI, checks the armed deadline a few times a second; when a
 * collective is still running past it, the watchdog prints
 *   rank R on HOST: allreduce at epoch E step S not complete after T s
 *   rank R on HOST: start-up agreement not complete after T s
 * on stderr, waits one second so that the other waiting ranks can print
 * theirs, and ends the process with status 1, which makes mpirun end the job.
 */
#ifndef MNIST_DDP_DEADLINE_H
#define MNIST_DDP_DEADLINE_H

struct deadline;

/* A disarmed watchdog with no timeout: no thread runs until a timeout is set. */
struct deadline *deadline_create(void);
/* Seconds a collective may take (0: no deadline). Starts the thread the first time. */
void deadline_set_timeout(struct deadline *w, double seconds);
/* The epoch and step the following collectives belong to, for the message. */
void deadline_set_position(struct deadline *w, int epoch, int step);
/*
 * Around one collective: `what` names it in the message (a string literal);
 * at_step adds the position of deadline_set_position. Every function here
 * accepts w == NULL and then does nothing.
 */
void deadline_arm(struct deadline *w, const char *what, int at_step);
void deadline_disarm(struct deadline *w);
/* Stop and join the thread; free. NULL is allowed. */
void deadline_destroy(struct deadline *w);

#endif /* MNIST_DDP_DEADLINE_H */
