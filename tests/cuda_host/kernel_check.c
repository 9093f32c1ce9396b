/* kernel_check.c - helpers of the kernel tests on the CPU: see kernel_check.h. */
#include "kernel_check.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_module.h"
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

int kc_boundary_geoms(size_t at, size_t total, struct kernel_geom *out, int max)
{
	size_t marks[2] = {at, total};
	int n = 0;
	for (int m = 0; m < 2; m++)
		for (int d = -1; d <= 1; d++) {
			if (marks[m] == 0 && d < 0)
				continue;
			size_t t = marks[m] + (size_t)(long)d;
			if (t == 0 || t > 0x7fffffffu)
				continue;
			if (t <= 1024 && n < max)
				out[n++] = (struct kernel_geom){1, (unsigned int)t};
			if (n < max)
				out[n++] = (struct kernel_geom){(unsigned int)t, 1};
		}
	return n;
}

int kc_fused_geoms(size_t at, size_t total, struct kernel_geom *out, int max)
{
	int k = 0;
	for (int gi = 0; gi < KC_N_GEOMS && k < max; gi++)
		out[k++] = kc_test_geoms[gi];
	return k + kc_boundary_geoms(at, total, out + k, max - k);
}

void kc_geoms_name(int gi, const struct kernel_geom *geoms, char *buf, size_t len)
{
	if (gi < 0)
		snprintf(buf, len, "backend geometry");
	else
		snprintf(buf, len, "grid %u x block %u", geoms[gi].grid, geoms[gi].block);
}

float *kc_guard_filled_f(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = KC_GUARD_F;
	return p;
}

int32_t *kc_guard_filled_i(size_t n)
{
	int32_t *p = malloc((n ? n : 1) * sizeof(int32_t));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = KC_GUARD_I;
	return p;
}

float *kc_rand_f(struct rng *r, size_t n, double lo, double hi)
{
	float *p = malloc((n ? n : 1) * sizeof(*p));
	cr_assert_not_null(p);
	ref_fill_uniform(r, p, n, lo, hi);
	return p;
}

float *kc_whole_f(struct rng *r, size_t n, int lo, int hi)
{
	float *p = malloc((n ? n : 1) * sizeof(*p));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)(lo + (int)rng_below(r, (uint64_t)(hi - lo + 1)));
	return p;
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

void kc_expect_close_special(const char *what, const float *got, const double *ref, size_t n,
			     double atol, double rtol, uint64_t seed)
{
	size_t bad = 0;
	double *plain = kc_dbuf(n);
	float *plain_got = malloc((n ? n : 1) * sizeof(float));
	cr_assert_not_null(plain_got);
	for (size_t i = 0; i < n; i++) {
		int ok = 1;
		if (isnan(ref[i]))
			ok = isnan(got[i]);
		else if (isinf(ref[i]))
			ok = (double)got[i] == ref[i];
		/* Special entries are compared here; the others go to ref_compare_f. */
		plain[i] = isfinite(ref[i]) ? ref[i] : 0.0;
		plain_got[i] = isfinite(ref[i]) ? got[i] : 0.0f;
		if (!ok) {
			if (bad < 8)
				fprintf(stderr, "%s: at [%zu] got %.9g, ref %.9g (seed %llu)\n", what, i,
					(double)got[i], ref[i], (unsigned long long)seed);
			bad++;
		}
	}
	struct ref_cmp c = ref_compare_f(what, plain_got, plain, n, atol, rtol, seed);
	free(plain);
	free(plain_got);
	cr_assert_eq(bad + c.bad, 0,
		     "%s: %zu NaN or infinite and %zu finite elements of %zu off the reference (seed %llu)",
		     what, bad, c.bad, n, (unsigned long long)seed);
}

/*
 * Bit-for-bit equality with the host backend (same elem.h bodies, same order
 * per item): the bit patterns, so that a NaN must match a NaN and -0 is not 0.
 */
void kc_expect_same_f(const char *what, const float *got, const float *host, size_t n,
		      uint64_t seed)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t a, b;
		memcpy(&a, &got[i], sizeof(a));
		memcpy(&b, &host[i], sizeof(b));
		if (a == b)
			continue;
		if (bad < 8)
			fprintf(stderr, "%s: at [%zu] got %.9g (0x%08x), host %.9g (0x%08x) (seed %llu)\n",
				what, i, (double)got[i], (unsigned)a, (double)host[i], (unsigned)b,
				(unsigned long long)seed);
		bad++;
	}
	cr_assert_eq(bad, 0, "%s: %zu of %zu elements differ from the host backend (seed %llu)",
		     what, bad, n, (unsigned long long)seed);
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

