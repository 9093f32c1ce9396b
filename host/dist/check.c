/* check.c - error statuses and fatal error reporting: see include/check.h. */
#include "check.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_rank_ = -1;
static char check_host_[256] = "?";

void check_set_identity(int rank, const char *host)
{
	check_rank_ = rank;
	snprintf(check_host_, sizeof(check_host_), "%s", host);
}

int check_rank(void)
{
	return check_rank_;
}

const char *check_host(void)
{
	return check_host_;
}

static _Noreturn void check_abort(int code)
{
	int initialized = 0, finalized = 0;
	fflush(stdout);
	fflush(stderr);
	MPI_Initialized(&initialized);
	MPI_Finalized(&finalized);
	if (initialized && !finalized)
		MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

void check_fail(const char *what, const char *detail, const char *func, const char *file,
		int line, int code)
{
	fprintf(stderr, "rank %d on %s: %s failed: %s (%s %s:%d)\n", check_rank_, check_host_,
		what, detail, func, file, line);
	check_abort(code);
}

/* "rank R on HOST: <message>" on stderr, flushed: die's and say's line. */
static void say_line(const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "rank %d on %s: %s\n", check_rank_, check_host_, msg);
	fflush(stderr);
}

void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say_line(fmt, ap);
	va_end(ap);
	check_abort(code);
}

void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say_line(fmt, ap);
	va_end(ap);
}

void check_stop(int code)
{
	check_abort(code);
}

enum status status_fail(char *err, size_t errlen, enum status st, const char *fmt, ...)
{
	va_list ap;
	if (!err || errlen == 0)
		return st;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return st;
}

void *xmalloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);
	if (!p)
		die(1, "out of memory allocating %zu bytes", bytes);
	return p;
}

void *xrealloc(void *p, size_t bytes)
{
	void *q = realloc(p, bytes ? bytes : 1);
	if (!q)
		die(1, "out of memory growing a buffer to %zu bytes", bytes);
	return q;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die(1, "out of memory allocating %zu x %zu bytes", n, size);
	return p;
}
