/*
 * clock.h - the one clock: CLOCK_MONOTONIC, for step times, the collective
 * deadline and the summary's train_seconds. Header-only, so the CUDA module
 * and the host program read the same clock.
 */
#ifndef MNIST_DDP_CLOCK_H
#define MNIST_DDP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary fixed point. */
static inline int64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The same in seconds. */
static inline double clock_seconds(void)
{
	return 1e-9 * (double)clock_ns();
}

#endif /* MNIST_DDP_CLOCK_H */
