/*
 * ref.c - naive double-precision references and the tolerance comparison for
 * the tests: see tests/ref.h. Link it into any test program that needs it
 * (tests/cmake/20-core.cmake adds it to the unit tests).
 */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REF_SHOW_FIRST 8

uint64_t ref_seed(uint64_t fallback)
{
	const char *env = getenv("MNIST_TEST_SEED");
	if (!env || !*env)
		return fallback;
	if (!strcmp(env, "random")) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		struct rng r = {(uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec};
		return rng_next(&r) >> 16; /* short enough to retype */
	}
	char *end;
	unsigned long long v = strtoull(env, &end, 0);
	if (end == env || *end) {
		fprintf(stderr, "MNIST_TEST_SEED='%s' is not a number or 'random'; using %llu\n", env,
			(unsigned long long)fallback);
		return fallback;
	}
	return (uint64_t)v;
}

void ref_fill_uniform(struct rng *r, float *x, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(lo + (hi - lo) * rng_uniform(r));
}

void ref_fill_normal(struct rng *r, float *x, size_t n, double mean, double std)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(mean + std * rng_normal(r));
}

void ref_fill_bytes(struct rng *r, uint8_t *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (uint8_t)rng_below(r, 256);
}

void ref_fill_labels(struct rng *r, int32_t *y, size_t n, int classes)
{
	for (size_t i = 0; i < n; i++)
		y[i] = (int32_t)rng_below(r, (uint64_t)classes);
}

void ref_widen(const float *x, double *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = x[i];
}

void ref_gemm(int trans_a, int trans_b, int m, int n, int k, double alpha, const float *a,
	      int lda, const float *b, int ldb, double beta, double *c, int ldc)
{
	for (int i = 0; i < m; i++) {
		for (int j = 0; j < n; j++) {
			double s = 0.0;
			for (int p = 0; p < k; p++) {
				double av = trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
				double bv = trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
				s += av * bv;
			}
			double *cij = &c[(size_t)i * ldc + j];
			*cij = alpha * s + (beta == 0.0 ? 0.0 : beta * *cij);
		}
	}
}

double ref_normalize_pixel(uint8_t p)
{
	return ((double)p / 255.0 - 0.1307) / 0.3081;
}

void ref_bias_act(double *y, const float *bias, int rows, int cols, int relu)
{
	for (int i = 0; i < rows; i++) {
		for (int j = 0; j < cols; j++) {
			double v = y[(size_t)i * cols + j] + (double)bias[j];
			y[(size_t)i * cols + j] = relu && v < 0.0 ? 0.0 : v;
		}
	}
}

void ref_relu_backward(double *dy, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!(y[i] > 0.0f))
			dy[i] = 0.0;
}

double ref_softmax_xent_row(const float *logits, int label, int c, double scale,
			    double *dlogits)
{
	double m = logits[0];
	for (int j = 1; j < c; j++)
		if (logits[j] > m)
			m = logits[j];
	double s = 0.0;
	for (int j = 0; j < c; j++)
		s += exp((double)logits[j] - m);
	double lse = m + log(s);
	if (dlogits)
		for (int j = 0; j < c; j++)
			dlogits[j] = scale * (exp((double)logits[j] - lse) - (j == label ? 1.0 : 0.0));
	return lse - (double)logits[label];
}

int ref_argmax_row(const float *logits, int c)
{
	int best = 0;
	for (int j = 1; j < c; j++)
		if (logits[j] > logits[best])
			best = j;
	return best;
}

void ref_sgd_update(double *p, const float *g, double *v, size_t n, double lr, double mom)
{
	for (size_t i = 0; i < n; i++) {
		if (mom != 0.0) {
			v[i] = mom * v[i] + (double)g[i];
			p[i] -= lr * v[i];
		} else {
			p[i] -= lr * (double)g[i];
		}
	}
}

struct ref_cmp ref_compare_f(const char *what, const float *got, const double *ref, size_t n,
			     double atol, double rtol, uint64_t seed)
{
	struct ref_cmp c = {.n = n};
	for (size_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - ref[i]);
		double bound = atol + rtol * fabs(ref[i]);
		int bad = !(err <= bound); /* NaN on either side is a mismatch */
		if (isnan(err)) {
			if (!isnan(c.max_err)) { /* report the first NaN */
				c.max_err = err;
				c.max_at = i;
			}
		} else if (err > c.max_err) { /* false once max_err is NaN */
			c.max_err = err;
			c.max_at = i;
		}
		if (bad) {
			if (c.bad < REF_SHOW_FIRST)
				fprintf(stderr,
					"%s: mismatch at [%zu]: got %.9g, ref %.9g, |err| %.3g > %.3g (seed %llu)\n",
					what, i, (double)got[i], ref[i], err, bound,
					(unsigned long long)seed);
			c.bad++;
		}
	}
	if (c.bad)
		fprintf(stderr,
			"%s: %zu of %zu outside atol %.3g + rtol %.3g * |ref|; largest |err| %.3g at [%zu] "
			"(seed %llu; rerun with MNIST_TEST_SEED=%llu)\n",
			what, c.bad, n, atol, rtol, c.max_err, c.max_at, (unsigned long long)seed,
			(unsigned long long)seed);
	return c;
}

struct ref_cmp ref_compare_i32(const char *what, const int32_t *got, const int32_t *ref,
			       size_t n, uint64_t seed)
{
	struct ref_cmp c = {.n = n};
	for (size_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - (double)ref[i]);
		if (err > c.max_err) {
			c.max_err = err;
			c.max_at = i;
		}
		if (got[i] != ref[i]) {
			if (c.bad < REF_SHOW_FIRST)
				fprintf(stderr, "%s: mismatch at [%zu]: got %ld, ref %ld (seed %llu)\n",
					what, i, (long)got[i], (long)ref[i], (unsigned long long)seed);
			c.bad++;
		}
	}
	if (c.bad)
		fprintf(stderr, "%s: %zu of %zu differ; largest |err| %.0f at [%zu] (seed %llu)\n", what,
			c.bad, n, c.max_err, c.max_at, (unsigned long long)seed);
	return c;
}
