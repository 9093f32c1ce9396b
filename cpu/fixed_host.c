/*
 * fixed_host.c - --exact's fixed-point accumulate and decode on the host: see
 * fixed_host.h. The encode is a float widened to double, times 2^FIXED_SHIFT
 * (exact), checked against the limit (a NaN fails the check), and rounded to
 * an integer to nearest, ties to even. On AVX-512 (DQ: double <-> int64 in
 * vectors) eight elements go at a time: vcvtps2pd, vmulpd, a compare mask,
 * vcvtpd2qq under the mask (rounding as the MXCSR says: to nearest even, as
 * llrint does by default), and the count of the mask's zeros; the decode is
 * vcvtqq2pd, vmulpd and vcvtpd2ps, each rounding to nearest as the C
 * conversions do. So both paths give elem.h's bodies' results to the bit
 * (tests/test_ops.c holds them to llrint and ldexp, on every ISA path).
 */
#include "fixed_host.h"

#include "conv_direct.h" /* host_isa() */
#include "elem.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define FIXED_HOST_AVX512 1
#include <immintrin.h>
#else
#define FIXED_HOST_AVX512 0
#endif

static void accumulate_scalar(int64_t *restrict acc, const float *restrict g, size_t from,
			      size_t n, double limit, int first, int64_t *bad_count)
{
	for (size_t i = from; i < n; i++) {
		int bad;
		int64_t q = fixed_encode_elem(g[i], limit, &bad);
		acc[i] = first ? q : acc[i] + q;
		*bad_count += bad;
	}
}

#if FIXED_HOST_AVX512
__attribute__((target("arch=x86-64-v4"))) static size_t
accumulate_avx512(int64_t *restrict acc, const float *restrict g, size_t n, double limit,
		  int first, int64_t *bad_count)
{
	const __m512d scale = _mm512_set1_pd((double)(1ll << FIXED_SHIFT));
	const __m512d bound = _mm512_set1_pd(limit);
	size_t i = 0;
	int64_t bad = 0;
	for (; i + 8 <= n; i += 8) {
		__m512d x = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(g + i)), scale);
		__mmask8 ok = _mm512_cmp_pd_mask(_mm512_abs_pd(x), bound, _CMP_LT_OQ);
		__m512i q = _mm512_maskz_cvtpd_epi64(ok, x);
		if (!first)
			q = _mm512_add_epi64(q, _mm512_loadu_si512(acc + i));
		_mm512_storeu_si512(acc + i, q);
		bad += 8 - __builtin_popcount((unsigned)ok);
	}
	*bad_count += bad;
	return i;
}

__attribute__((target("arch=x86-64-v4"))) static size_t
decode_avx512(float *restrict g, const int64_t *restrict acc, size_t n)
{
	const __m512d scale = _mm512_set1_pd(1.0 / (double)(1ll << FIXED_SHIFT));
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m512d x = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_loadu_si512(acc + i)), scale);
		_mm256_storeu_ps(g + i, _mm512_cvtpd_ps(x));
	}
	return i;
}
#endif

void fixed_host_accumulate(int64_t *restrict acc, const float *restrict g, size_t n, double limit,
			   int first)
{
	int64_t bad = 0;
	size_t done = 0;
#if FIXED_HOST_AVX512
	if (host_isa() == HOST_ISA_AVX512)
		done = accumulate_avx512(acc, g, n, limit, first, &bad);
#endif
	accumulate_scalar(acc, g, done, n, limit, first, &bad);
	acc[n] += bad;
}

void fixed_host_decode(float *restrict g, const int64_t *restrict acc, size_t n)
{
	size_t done = 0;
#if FIXED_HOST_AVX512
	if (host_isa() == HOST_ISA_AVX512)
		done = decode_avx512(g, acc, n);
#endif
	for (size_t i = done; i < n; i++)
		g[i] = fixed_decode_elem(acc[i]);
}
