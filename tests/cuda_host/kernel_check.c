/* kernel_check.c - helpers of the kernel tests on the CPU: see kernel_check.h. */
#include "kernel_check.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_runtime.h" /* the stand-in: tests/cuda_host/ */
#include "ref.h"

/* Grids to launch with besides the backend's own: one thread, wrapping grids, idle threads. */
const struct kernel_geom kc_test_geoms[KC_N_GEOMS] = {
	{1, 1}, {1, 32}, {3, 7}, {2, 256}, {7, 1024}, {1000, 64},
};

/* geom index -1 is the backend's (NULL). */
const struct kernel_geom *kc_geom_at(int gi)
{
	return gi < 0 ? NULL : &kc_test_geoms[gi];
}

void kc_geom_name(int gi, char *buf, size_t len)
{
	if (gi < 0)
		snprintf(buf, len, "backend geometry");
	else
		snprintf(buf, len, "grid %u x block %u", kc_test_geoms[gi].grid, kc_test_geoms[gi].block);
}

/* ---- guarded buffers ---------------------------------------------------------- */

float *kc_guarded_f(size_t n)
{
	float *p = malloc((n + 2 * KC_GUARD) * sizeof(*p));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n + 2 * KC_GUARD; i++)
		p[i] = KC_GUARD_F;
	return p + KC_GUARD;
}

int32_t *kc_guarded_i(size_t n)
{
	int32_t *p = malloc((n + 2 * KC_GUARD) * sizeof(*p));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n + 2 * KC_GUARD; i++)
		p[i] = KC_GUARD_I;
	return p + KC_GUARD;
}

void kc_check_guards_f(const float *p, size_t n, const char *what)
{
	for (int i = 1; i <= KC_GUARD; i++) {
		cr_assert(p[-i] == KC_GUARD_F, "%s: wrote before the buffer at [-%d]", what, i);
		cr_assert(p[n + (size_t)i - 1] == KC_GUARD_F, "%s: wrote past the end at [%zu]", what,
			  n + (size_t)i - 1);
	}
}

void kc_check_guards_i(const int32_t *p, size_t n, const char *what)
{
	for (int i = 1; i <= KC_GUARD; i++) {
		cr_assert(p[-i] == KC_GUARD_I, "%s: wrote before the buffer at [-%d]", what, i);
		cr_assert(p[n + (size_t)i - 1] == KC_GUARD_I, "%s: wrote past the end at [%zu]", what,
			  n + (size_t)i - 1);
	}
}

void kc_free_guarded_f(float *p)
{
	free(p - KC_GUARD);
}

void kc_free_guarded_i(int32_t *p)
{
	free(p - KC_GUARD);
}

double *kc_dbuf(size_t n)
{
	double *p = malloc((n ? n : 1) * sizeof(*p));
	cr_assert_not_null(p);
	return p;
}

/* ---- comparisons ---------------------------------------------------------------- */

void kc_expect_close(const char *what, const float *got, const double *ref, size_t n,
			 double atol, double rtol, uint64_t seed)
{
	struct ref_cmp c = ref_compare_f(what, got, ref, n, atol, rtol, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu elements off the reference, largest error %g (seed %llu)",
		     what, c.bad, n, c.max_err, (unsigned long long)seed);
}

/* Bit-for-bit equality with the host backend (same elem.h bodies, same order per item). */
void kc_expect_same_f(const char *what, const float *got, const float *host, size_t n,
			  uint64_t seed)
{
	double *h = kc_dbuf(n);
	ref_widen(host, h, n);
	struct ref_cmp c = ref_compare_f(what, got, h, n, 0.0, 0.0, seed);
	free(h);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu elements differ from the host backend (seed %llu)",
		     what, c.bad, n, (unsigned long long)seed);
}

void kc_expect_same_i(const char *what, const int32_t *got, const int32_t *ref, size_t n,
			  uint64_t seed)
{
	struct ref_cmp c = ref_compare_i32(what, got, ref, n, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu elements differ (seed %llu)", what, c.bad, n,
		     (unsigned long long)seed);
}

struct backend kc_host;
uint64_t kc_seed;

void kc_setup(void)
{
	cr_assert_eq(backend_host_create(NULL, 1, &kc_host), 0);
	kc_seed = ref_seed(20240611);
	memset(&fake_cuda_stats, 0, sizeof(fake_cuda_stats));
}

void kc_teardown(void)
{
	backend_destroy(&kc_host);
}

