/*
 * check.h - errors: the status of a recoverable one, and the fatal path.
 *
 * A library failure cannot be recovered from inside a collective job: the
 * check macros print the rank, host, failing statement, function, file and
 * line, then MPI_Abort so that no other rank is left waiting. Recoverable
 * paths (parsing, file I/O, arguments) return codes instead.
 */
#ifndef MNIST_DDP_CHECK_H
#define MNIST_DDP_CHECK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Recoverable errors, one vocabulary for every module: a function that can
 * fail on its input returns one of these (with a message), and only main()
 * turns it into the exit status (the values are the contract's exit codes).
 */
enum status {
	STATUS_OK = 0,
	STATUS_RUNTIME = 1,   /* the run could not go on: out of memory, a failed write */
	STATUS_BAD_INPUT = 2, /* bad usage, configuration, file or data */
};

/* Format the message into err (when err is not NULL and errlen > 0) and return st. */
enum status status_fail(char *err, size_t errlen, enum status st, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 4, 5)))
#endif
	;

/* Set once by dist_init; used by every message that names the rank. */
void check_set_identity(int rank, const char *host);
int check_rank(void);
const char *check_host(void);

/* Print "rank R on HOST: <what> failed: <detail> (func file:line)" and MPI_Abort(code). */
#if defined(__cplusplus)
[[noreturn]]
#else
_Noreturn
#endif
void check_fail(const char *what, const char *detail, const char *func, const char *file,
		int line, int code);

/* "rank R on HOST: <message>" on stderr, then MPI_Abort(code). */
#if defined(__cplusplus)
[[noreturn]]
#else
_Noreturn
#endif
void die(int code, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

/*
 * "rank R on HOST: <message>" on stderr, flushed, and nothing more: for a stop
 * every rank reaches at once (each says why, meets the others, then
 * check_stop), so that no rank's line is lost to another's abort.
 */
void say(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2)))
#endif
	;

/* MPI_Abort(code) (exit(code) outside MPI), saying nothing. */
#if defined(__cplusplus)
[[noreturn]]
#else
_Noreturn
#endif
void check_stop(int code);

#define MPI_CHECK(stmt)                                                                  \
	do {                                                                             \
		int mpi_check_rc_ = (stmt);                                              \
		if (mpi_check_rc_ != MPI_SUCCESS) {                                      \
			char mpi_check_msg_[MPI_MAX_ERROR_STRING];                       \
			int mpi_check_len_ = 0;                                          \
			MPI_Error_string(mpi_check_rc_, mpi_check_msg_, &mpi_check_len_);\
			check_fail(#stmt, mpi_check_msg_, __func__, __FILE__, __LINE__, 1); \
		}                                                                        \
	} while (0)

/* For allocations that must succeed: aborts with the size that failed. */
void *xmalloc(size_t bytes);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_CHECK_H */
