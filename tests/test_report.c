/*
 * test_report.c - what the trainer prints (host/io/report.c): float formatting,
 * the seed's loss line and rank 0's summary line.
 *
 *   ctest --test-dir build -R test_report --output-on-failure
 *
 * report_format_float must give the fewest significant digits (at most 8)
 * that read back as the same float32. The oracle is independent of the
 * implementation: the result must parse back (strtof) to the value, and no
 * correctly rounded representation with one digit less may. Floats that no
 * 8-digit decimal identifies (a few percent of floats in some decades,
 * e.g. 10.0000105f) are printed with 8 digits, as the contract caps the
 * length; for them the result must be within one unit in the last place.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "io/report.h"

/* Significant digits in a %g-style number: first to last nonzero digit of the mantissa. */
static int sig_digits(const char *s)
{
	int first = -1, last = -1, pos = 0;
	for (; *s && *s != 'e' && *s != 'E'; s++) {
		if (*s < '0' || *s > '9')
			continue;
		if (*s != '0') {
			if (first < 0)
				first = pos;
			last = pos;
		}
		pos++;
	}
	return first < 0 ? 1 : last - first + 1;
}

/* 1 when `digits` correctly rounded significant digits identify v. */
static int round_trips(float v, int digits)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%.*e", digits - 1, (double)v);
	return strtof(buf, NULL) == v;
}

static void check_format(float v, uint64_t seed, int *capped)
{
	char buf[64];
	report_format_float(v, buf, sizeof(buf));
	char *end;
	float back = strtof(buf, &end);
	cr_assert(*end == '\0' && end != buf, "%.9g printed as '%s', which does not parse", (double)v, buf);
	int digits = sig_digits(buf);
	cr_assert(digits >= 1 && digits <= 8, "%.9g printed as '%s': %d significant digits", (double)v,
		  buf, digits);
	if (round_trips(v, 8)) {
		cr_assert(back == v, "%.9g printed as '%s', which reads back as %.9g (seed %llu)",
			  (double)v, buf, (double)back, (unsigned long long)seed);
		/* Shortest: with one digit less no representation identifies v. */
		for (int d = 1; d < digits; d++)
			cr_assert(!round_trips(v, d), "%.9g printed as '%s' (%d digits) but %d digits suffice (seed %llu)",
				  (double)v, buf, digits, d, (unsigned long long)seed);
	} else {
		++*capped;
		cr_assert(fabsf(back - v) <= fabsf(nextafterf(v, INFINITY) - v) * 1.0001f,
			  "%.9g printed as '%s' (needs 9 digits): more than 1 ulp off", (double)v, buf);
	}
}

Test(report, format_float_seed_numbers)
{
	const struct {
		float v;
		const char *want;
	} cases[] = {
		{2.3413472f, "2.3413472"}, {0.85778403f, "0.85778403"}, {0.9102987f, "0.9102987"},
		{1.6298866f, "1.6298866"}, {0.5f, "0.5"}, {2.0f, "2"}, {0.1f, "0.1"}, {0.01f, "0.01"},
		{-1.5f, "-1.5"}, {0.0f, "0"}, {1e-5f, "1e-05"}, {NAN, "nan"},
		{INFINITY, "inf"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[64];
		report_format_float(cases[i].v, buf, sizeof(buf));
		cr_expect_str_eq(buf, cases[i].want, "%.9g printed as '%s', want '%s'", (double)cases[i].v,
				 buf, cases[i].want);
	}
}

Test(report, format_float_shortest_round_trip)
{
	uint64_t seed = ref_seed(301);
	struct rng r = rng_make(seed, 1);
	int capped = 0, total = 0;
	/* Loss-like values, in (0, 20). */
	for (int i = 0; i < 20000; i++, total++)
		check_format((float)(20.0 * rng_uniform(&r)), seed, &capped);
	/* Any finite float: random bit patterns. */
	for (int i = 0; i < 20000; i++) {
		uint32_t bits = (uint32_t)rng_next(&r);
		float v;
		memcpy(&v, &bits, sizeof(v));
		if (!isfinite(v))
			continue;
		check_format(v, seed, &capped);
		total++;
	}
	/* Short decimals print as themselves. */
	for (int i = 0; i < 2000; i++, total++) {
		char src[32];
		snprintf(src, sizeof(src), "%.*f", (int)rng_below(&r, 5), 100.0 * rng_uniform(&r));
		check_format(strtof(src, NULL), seed, &capped);
	}
	fprintf(stderr, "format_float: %d values, %d need 9 digits and were capped at 8\n", total, capped);
	cr_assert(capped * 10 < total, "%d of %d values could not be printed exactly", capped, total);
	/* Between 0.5 and 8 every float has an 8-digit name, so none may be capped there. */
	for (float v = 0.5f; v < 8.0f; v = nextafterf(v, INFINITY) + 0.000731f)
		cr_assert(round_trips(v, 8), "%.9g needs 9 digits", (double)v);
}

Test(report, format_float_respects_buffer_length)
{
	char buf[4];
	memset(buf, 'x', sizeof(buf));
	report_format_float(2.3413472f, buf, sizeof(buf));
	cr_assert(memchr(buf, '\0', sizeof(buf)) != NULL, "not terminated within the buffer");
}

/* Everything report_* wrote to a memory stream, as a string the caller frees. */
struct capture {
	FILE *f;
	char *buf;
	size_t len;
};

static void capture_open(struct capture *c)
{
	c->buf = NULL;
	c->len = 0;
	c->f = open_memstream(&c->buf, &c->len);
	cr_assert_not_null(c->f);
}

static char *capture_close(struct capture *c)
{
	fclose(c->f);
	return c->buf;
}

Test(report, loss_line)
{
	struct capture c;
	capture_open(&c);
	report_loss_line(c.f, 0, 10, 1.6298866f);
	report_loss_line(c.f, 9, 1870, 0.85778403f);
	report_loss_line(c.f, 3, 0, 2.0f);
	char *s = capture_close(&c);
	cr_assert_str_eq(s,
			 "epoch: 0, step: 10, loss is 1.6298866\n"
			 "epoch: 9, step: 1870, loss is 0.85778403\n"
			 "epoch: 3, step: 0, loss is 2\n");
	free(s);
}

static const struct summary contract_summary = {
	.model = "seed",
	.backend = "host",
	.ranks = 2,
	.epochs = 10,
	.steps_per_epoch = 938,
	.images = 600000,
	.train_seconds = 2.712,
	.test_accuracy = 0.9231,
	.final_loss = 0.9102987f,
	.param_crc = 0x1234abcdu,
};

Test(report, summary_line_format_and_key_order)
{
	struct capture c;
	capture_open(&c);
	report_summary(c.f, &contract_summary);
	char *s = capture_close(&c);
	/* The contract's own example, byte for byte, as the line's prefix. */
	const char *want = "summary: model=seed backend=host ranks=2 epochs=10 steps_per_epoch=938 "
			   "images=600000 train_seconds=2.712 images_per_second=221239 test_accuracy=0.9231";
	cr_assert(strncmp(s, want, strlen(want)) == 0, "summary line\n  got:  %s  want: %s ...", s, want);
	char *nl = strchr(s, '\n');
	cr_assert(nl && nl[1] == '\0', "summary must be exactly one line ending in a newline: '%s'", s);
	/* Anything after the contract's keys is more key=value pairs. */
	*nl = '\0';
	const char *keys[] = {"model", "backend", "ranks", "epochs", "steps_per_epoch", "images",
			      "train_seconds", "images_per_second", "test_accuracy"};
	char *save = NULL;
	char *tok = strtok_r(s, " ", &save);
	cr_assert_str_eq(tok, "summary:");
	int i = 0;
	for (tok = strtok_r(NULL, " ", &save); tok; tok = strtok_r(NULL, " ", &save), i++) {
		char *eq = strchr(tok, '=');
		cr_assert(eq && eq != tok && eq[1], "token '%s' is not key=value", tok);
		if (i < 9)
			cr_assert(strncmp(tok, keys[i], strlen(keys[i])) == 0 && tok[strlen(keys[i])] == '=',
				  "key %d is '%s', want '%s'", i, tok, keys[i]);
	}
	cr_assert(i >= 9, "only %d keys", i);
	free(s);
}

Test(report, summary_ends_with_the_backend_fallback_when_there_is_one)
{
	struct summary sm = contract_summary;
	struct capture c;
	capture_open(&c);
	report_summary(c.f, &sm);
	char *plain = capture_close(&c);
	sm.backend_fallback = "driver-too-old";
	capture_open(&c);
	report_summary(c.f, &sm);
	char *s = capture_close(&c);
	size_t n = strlen(plain);
	cr_assert(strstr(plain, "backend_fallback") == NULL, "no fallback, yet: '%s'", plain);
	cr_assert(n > 0 && strncmp(s, plain, n - 1) == 0 &&
			  strcmp(s + n - 1, " backend_fallback=driver-too-old\n") == 0,
		  "with a fallback\n  got:  %s  want: the same line plus ' backend_fallback=driver-too-old'", s);
	free(plain);
	free(s);
}

Test(report, summary_without_test_set_says_nan)
{
	struct summary sm = contract_summary;
	sm.test_accuracy = NAN;
	sm.model = "mlp";
	sm.backend = "cuda";
	sm.ranks = 4;
	struct capture c;
	capture_open(&c);
	report_summary(c.f, &sm);
	char *s = capture_close(&c);
	cr_assert(strncmp(s, "summary: model=mlp backend=cuda ranks=4 ", 40) == 0, "got '%s'", s);
	cr_assert(strstr(s, " test_accuracy=nan") != NULL, "no 'test_accuracy=nan' in '%s'", s);
	cr_assert(strstr(s, " test_accuracy=nan ") != NULL || strstr(s, " test_accuracy=nan\n") != NULL,
		  "test_accuracy=nan is not a whole value in '%s'", s);
	free(s);
}

Test(report, epoch_line_format)
{
	struct epoch_line e = {.epoch = 3, .global_step = 3752, .mean_loss = 0.41234123f,
			       .losses = 188, .seconds = 2.134, .images = 60000,
			       .test_accuracy = NAN};
	struct capture c;
	capture_open(&c);
	report_epoch_line(c.f, &e);
	e.test_accuracy = 0.98125;
	e.epoch = 4;
	report_epoch_line(c.f, &e);
	e.seconds = 0.0;
	report_epoch_line(c.f, &e);
	char *s = capture_close(&c);
	cr_assert_str_eq(s,
			 "epoch: 3, mean loss: 0.41234124, epoch time: 2.134 s, images per second: 28116\n"
			 "epoch: 4, mean loss: 0.41234124, epoch time: 2.134 s, images per second: 28116, "
			 "test accuracy: 0.9812\n"
			 "epoch: 4, mean loss: 0.41234124, epoch time: 0.000 s, images per second: 0, "
			 "test accuracy: 0.9812\n");
	free(s);
}

Test(report, epoch_metrics_record)
{
	struct epoch_line e = {.epoch = 0, .global_step = 938, .mean_loss = 0.5f, .losses = 188,
			       .seconds = 2.0, .images = 60032, .test_accuracy = NAN};
	struct capture c;
	capture_open(&c);
	report_metrics_epoch(c.f, &e);
	e.test_accuracy = 0.5;
	report_metrics_epoch(c.f, &e);
	char *s = capture_close(&c);
	cr_assert_str_eq(s,
			 "{\"event\": \"epoch\", \"epoch\": 0, \"global_step\": 938, \"mean_loss\": 0.5, "
			 "\"losses\": 188, \"seconds\": 2.000000, \"images\": 60032, "
			 "\"images_per_second\": 30016.0}\n"
			 "{\"event\": \"epoch\", \"epoch\": 0, \"global_step\": 938, \"mean_loss\": 0.5, "
			 "\"losses\": 188, \"seconds\": 2.000000, \"images\": 60032, "
			 "\"images_per_second\": 30016.0, \"test_accuracy\": 0.500000}\n");
	free(s);
}

Test(report, summary_has_the_epoch_loss_after_test_images)
{
	struct summary sm = contract_summary;
	sm.epoch_loss = 0.25f;
	struct capture c;
	capture_open(&c);
	report_summary(c.f, &sm);
	sm.epoch_loss = NAN;
	report_summary(c.f, &sm);
	char *s = capture_close(&c);
	char *second = strchr(s, '\n');
	cr_assert(second);
	*second++ = '\0';
	cr_assert(strstr(s, " test_images=0 epoch_loss=0.25") != NULL, "got '%s'", s);
	cr_assert(strstr(second, " epoch_loss=nan") != NULL, "got '%s'", second);
	free(s);
}

/* A run that trained no step (--eval-only, a finished run resumed): final_loss=nan, not 0. */
Test(report, summary_of_a_run_that_trained_nothing)
{
	struct summary sm = contract_summary;
	sm.epochs = sm.steps_per_epoch = 0;
	sm.images = 0;
	sm.train_seconds = 0.0;
	sm.final_loss = NAN;
	sm.epoch_loss = NAN;
	sm.test_images = 10000;
	sm.graph_nodes = -1;
	struct capture c;
	capture_open(&c);
	report_summary(c.f, &sm);
	char *s = capture_close(&c);
	const char *want = "summary: model=seed backend=host ranks=2 epochs=0 steps_per_epoch=0 images=0 "
			   "train_seconds=0.000 images_per_second=0 test_accuracy=0.9231 final_loss=nan "
			   "param_crc32=1234abcd test_images=10000 epoch_loss=nan\n";
	cr_assert_str_eq(s, want);
	/* Whatever the NaN's sign bit (-NAN from a computation), the same word. */
	sm.final_loss = -NAN;
	capture_open(&c);
	report_summary(c.f, &sm);
	char *neg = capture_close(&c);
	cr_expect(strstr(neg, " final_loss=nan ") != NULL, "%s", neg);
	free(neg);
	free(s);
}
