/*
 * test_deadline.c - the collective deadline's watchdog (host/dist/deadline.c),
 * without MPI: a deadline that passes while armed ends the process with
 * status 1 and the message; a disarmed or unset one never fires; destroy
 * stops the thread at once.
 *
 *   ctest --test-dir build -R test_deadline --output-on-failure
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "check.h"
#include "deadline.h"
#include "io/report.h"

static void pause_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/*
 * As rank 3 on nodeA at epoch 4 step 17: a 0.2 s deadline armed around a
 * collective that never ends. The watchdog must end the process with status
 * 1; reaching the end exits with 0.
 */
static _Noreturn void stall_armed(const char *what, int at_step)
{
	check_set_identity(3, "nodeA");
	struct deadline *w = deadline_create();
	deadline_set_timeout(w, 0.2);
	deadline_set_position(w, 4, 17);
	deadline_arm(w, what, at_step);
	pause_s(5.0);
	_exit(0);
}

/* Runs in its own process (Criterion forks): it must end with status 1 within the grace second. */
Test(deadline, fires_on_an_armed_collective_past_its_time, .exit_code = 1, .timeout = 10.0)
{
	stall_armed("allreduce", 1);
}

/* The firing of stall_armed(what, at_step) in a child: its stderr into text (len bytes). */
static void stderr_of_stall(const char *what, int at_step, char *text, size_t len)
{
	char path[] = "/tmp/test_deadline.XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	double t0 = clock_seconds();
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(fd, 2);
		stall_armed(what, at_step);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	double took = clock_seconds() - t0;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "the child ended with status 0x%x", status);
	/* 0.2 s deadline, at most one 10 ms period late, then the 1 s grace. */
	cr_assert(took >= 1.15 && took < 3.0, "the child ended after %.2f s", took);
	FILE *f = fdopen(fd, "r");
	rewind(f);
	size_t got = fread(text, 1, len - 1, f);
	text[got] = '\0';
	fclose(f);
	unlink(path);
}

Test(deadline, message_names_rank_host_collective_and_position, .timeout = 10.0)
{
	char text[256];
	stderr_of_stall("broadcast", 1, text, sizeof(text));
	cr_assert_str_eq(text, "rank 3 on nodeA: broadcast at epoch 4 step 17 not complete after 0.2 s\n");
}

/* The host program's own collectives (start-up, evaluation) belong to no step. */
Test(deadline, message_of_a_collective_outside_the_steps_has_no_position, .timeout = 10.0)
{
	char text[256];
	stderr_of_stall("start-up agreement", 0, text, sizeof(text));
	cr_assert_str_eq(text, "rank 3 on nodeA: start-up agreement not complete after 0.2 s\n");
}

Test(deadline, disarmed_and_unset_deadlines_never_fire, .timeout = 10.0)
{
	struct deadline *w = deadline_create();
	deadline_arm(w, "allreduce", 1); /* no timeout yet: nothing to arm */
	pause_s(0.1);
	deadline_set_timeout(w, 0.05);
	for (int i = 0; i < 20; i++) {
		deadline_arm(w, "allreduce", 1);
		pause_s(0.01);
		deadline_disarm(w);
	}
	pause_s(0.3); /* several periods with nothing armed */
	double t0 = clock_seconds();
	deadline_destroy(w);
	cr_assert(clock_seconds() - t0 < 0.1, "destroy took %.3f s", clock_seconds() - t0);
}

Test(deadline, timeout_zero_turns_it_off, .timeout = 10.0)
{
	struct deadline *w = deadline_create();
	deadline_set_timeout(w, 0.05);
	deadline_set_timeout(w, 0.0);
	deadline_arm(w, "allreduce", 1);
	pause_s(0.4);
	deadline_destroy(w);
	deadline_destroy(NULL);
}
