/*
 * kernel_check.h - what the tests of cuda/kernels.cu on the CPU share
 * (tests/test_kernels_host.c, tests/test_kernels_conv.c): the host backend
 * they compare with, the input seed, the launch geometries each kernel is run
 * with, outputs between guard words, and the comparisons.
 */
#ifndef MNIST_DDP_TESTS_KERNEL_CHECK_H
#define MNIST_DDP_TESTS_KERNEL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "kernels.h"
#include "train/rng.h"

#define KC_GUARD 16
#define KC_GUARD_F -7777.25f
#define KC_GUARD_I 0x5a5a5a5a

/* The host backend (1 thread, no MPI) and the seed of the inputs: set by kc_setup. */
extern struct backend kc_host;
extern uint64_t kc_seed;

/* Suite init and fini: create and destroy kc_host, read the seed, reset the launch counters. */
void kc_setup(void);
void kc_teardown(void);

/* Grids to launch with besides the backend's own: one thread, wrapping grids, idle threads. */
extern const struct kernel_geom kc_test_geoms[];
#define KC_N_GEOMS 6

/* Geometry index -1 is the backend's (NULL). */
const struct kernel_geom *kc_geom_at(int gi);
void kc_geom_name(int gi, char *buf, size_t len);

/*
 * Geometries whose thread counts fall just before, on and just after item
 * `at` and the end `total` of a launch's items (t - 1, t, t + 1 threads, as
 * one block where t allows, and as t blocks of one thread), so that the
 * first thread to wrap, and the boundary between two ranges of a fused
 * kernel, land on every side of it. Returns how many were written (at most max).
 */
int kc_boundary_geoms(size_t at, size_t total, struct kernel_geom *out, int max);

/*
 * The geometries of a launch with two ranges of items (a fused kernel): the
 * harness's (kc_test_geoms) then those kc_boundary_geoms gives around item
 * `at` and the end `total`. Returns how many (at most max); index -1 stands
 * for the backend's own, as in kc_geoms_name.
 */
int kc_fused_geoms(size_t at, size_t total, struct kernel_geom *out, int max);
void kc_geoms_name(int gi, const struct kernel_geom *geoms, char *buf, size_t len);

/* Buffers filled with the guard values, as the guarded ones start: for the host backend's outputs. */
float *kc_guard_filled_f(size_t n);
int32_t *kc_guard_filled_i(size_t n);

/* n random floats (malloc'd, free with free): uniform in [lo, hi), or whole numbers in [lo, hi]. */
float *kc_rand_f(struct rng *r, size_t n, double lo, double hi);
float *kc_whole_f(struct rng *r, size_t n, int lo, int hi);

/* n elements between KC_GUARD guard words on each side (free with kc_free_guarded_*). */
float *kc_guarded_f(size_t n);
int32_t *kc_guarded_i(size_t n);
/* Fails the test when a guard word was overwritten. */
void kc_check_guards_f(const float *p, size_t n, const char *what);
void kc_check_guards_i(const int32_t *p, size_t n, const char *what);
void kc_free_guarded_f(float *p);
void kc_free_guarded_i(int32_t *p);

double *kc_dbuf(size_t n);

/* got within atol + rtol |ref| of the double reference. */
void kc_expect_close(const char *what, const float *got, const double *ref, size_t n, double atol,
		     double rtol, uint64_t seed);
/*
 * kc_expect_close where the reference may hold NaN or infinities: there got
 * must be a NaN, or the same infinity.
 */
void kc_expect_close_special(const char *what, const float *got, const double *ref, size_t n,
			     double atol, double rtol, uint64_t seed);
/* Bit-for-bit equality with the host backend (same elem.h bodies, same order per item): NaN-aware. */
void kc_expect_same_f(const char *what, const float *got, const float *host, size_t n,
		      uint64_t seed);
void kc_expect_same_i(const char *what, const int32_t *got, const int32_t *ref, size_t n,
		      uint64_t seed);

#endif /* MNIST_DDP_TESTS_KERNEL_CHECK_H */
