/*
 * deadline.c - the collective deadline's watchdog thread: see include/deadline.h.
 *
 * The state the training thread touches every step is a few atomics: arming
 * stores the expiry time, disarming stores 0. The watchdog sleeps on a
 * condition variable (so that destroy can wake it at once) for a period of
 * a twentieth of the timeout, between 10 ms and 500 ms, and then reads the
 * expiry: a deadline fires at most one period late.
 */
#include "deadline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"

struct deadline {
	_Atomic int64_t expires_ns; /* CLOCK_MONOTONIC; 0: disarmed */
	_Atomic int64_t timeout_ns; /* 0: no deadline */
	_Atomic int epoch, step;
	_Atomic int at_step; /* the armed collective belongs to (epoch, step) */
	_Atomic(const char *) what;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	int stop;    /* under mu */
	int started; /* the thread exists; touched by the training thread only */
	pthread_t thread;
};

static _Noreturn void deadline_fire(struct deadline *w)
{
	char where[64] = "";
	if (atomic_load(&w->at_step))
		snprintf(where, sizeof(where), " at epoch %d step %d", atomic_load(&w->epoch),
			 atomic_load(&w->step));
	fprintf(stderr, "rank %d on %s: %s%s not complete after %g s\n", check_rank(),
		check_host(), atomic_load(&w->what), where,
		(double)atomic_load(&w->timeout_ns) / 1e9);
	fflush(stderr);
	struct timespec grace = {1, 0};
	nanosleep(&grace, NULL);
	/* Not MPI_Abort: MPI belongs to the training thread. mpirun ends the job on this exit. */
	_exit(1);
}

static void *deadline_main(void *arg)
{
	struct deadline *w = arg;
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		int64_t period = atomic_load(&w->timeout_ns) / 20;
		period = period < 10000000 ? 10000000 : period > 500000000 ? 500000000 : period;
		int64_t until = clock_ns() + period;
		struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
		pthread_cond_timedwait(&w->wake, &w->mu, &ts);
		int64_t expires = atomic_load(&w->expires_ns);
		if (!w->stop && expires && clock_ns() > expires)
			deadline_fire(w);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct deadline *deadline_create(void)
{
	struct deadline *w = xcalloc(1, sizeof(*w));
	atomic_init(&w->expires_ns, 0);
	atomic_init(&w->timeout_ns, 0);
	atomic_init(&w->epoch, 0);
	atomic_init(&w->step, 0);
	atomic_init(&w->at_step, 0);
	atomic_init(&w->what, "collective");
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&w->mu, NULL);
	return w;
}

void deadline_set_timeout(struct deadline *w, double seconds)
{
	if (!w)
		return;
	atomic_store(&w->timeout_ns, seconds > 0.0 ? (int64_t)(seconds * 1e9) : 0);
	if (seconds > 0.0 && !w->started) {
		int rc = pthread_create(&w->thread, NULL, deadline_main, w);
		if (rc)
			die(1, "cannot start the collective deadline's thread (error %d)", rc);
		w->started = 1;
	}
}

void deadline_set_position(struct deadline *w, int epoch, int step)
{
	if (!w)
		return;
	atomic_store_explicit(&w->epoch, epoch, memory_order_relaxed);
	atomic_store_explicit(&w->step, step, memory_order_relaxed);
}

void deadline_arm(struct deadline *w, const char *what, int at_step)
{
	if (!w)
		return;
	int64_t t = atomic_load_explicit(&w->timeout_ns, memory_order_relaxed);
	if (!t)
		return;
	atomic_store_explicit(&w->what, what, memory_order_relaxed);
	atomic_store_explicit(&w->at_step, at_step, memory_order_relaxed);
	atomic_store_explicit(&w->expires_ns, clock_ns() + t, memory_order_release);
}

void deadline_disarm(struct deadline *w)
{
	if (!w)
		return;
	atomic_store_explicit(&w->expires_ns, 0, memory_order_release);
}

void deadline_destroy(struct deadline *w)
{
	if (!w)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->stop = 1;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thread, NULL);
	}
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
