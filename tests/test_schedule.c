/*
 * test_schedule.c - the learning-rate schedule (host/train/schedule.c): the
 * rate of every step, warm-up, validation against the run's length, and that
 * a table filled from any step on is the tail of the whole run's (what makes
 * a resumed run's rates bitwise those of an uninterrupted run).
 *
 *   ctest --test-dir build -R test_schedule --output-on-failure
 *
 * Expected cosine values are written from cos() at quarter turns, not taken
 * from the code under test: with T = 4 steps, rates lr * (1 + cos(pi t / 4)) / 2
 * are lr, 0.85355339 lr, 0.5 lr and 0.14644661 lr.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/schedule.h"

static void expect_rate(const struct schedule *s, long long t, double want, const char *what)
{
	float got = schedule_lr(s, t);
	cr_expect(fabs((double)got - want) <= 1e-7 * fabs(want) + 1e-12,
		  "%s: step %lld rate %.9g, want %.9g", what, t, (double)got, want);
}

Test(schedule, constant_is_the_base_rate_exactly)
{
	struct schedule s;
	schedule_init(&s, LR_CONSTANT, 0.05f, 0, 1000);
	for (long long t = 0; t < 1000; t++)
		cr_assert(schedule_lr(&s, t) == 0.05f, "step %lld: %.9g", t, (double)schedule_lr(&s, t));
}

Test(schedule, cosine_quarter_turns)
{
	struct schedule s;
	schedule_init(&s, LR_COSINE, 0.1f, 0, 4);
	double lr = (double)0.1f;
	expect_rate(&s, 0, lr, "cosine T=4");
	expect_rate(&s, 1, lr * 0.8535533905932737, "cosine T=4");
	expect_rate(&s, 2, lr * 0.5, "cosine T=4");
	expect_rate(&s, 3, lr * 0.1464466094067262, "cosine T=4");
}

Test(schedule, cosine_falls_from_lr_towards_zero)
{
	struct schedule s;
	const long long T = 7504; /* 8 epochs of 938 steps */
	schedule_init(&s, LR_COSINE, 0.05f, 0, T);
	cr_assert(schedule_lr(&s, 0) == 0.05f, "first step %.9g", (double)schedule_lr(&s, 0));
	expect_rate(&s, T / 2, 0.025, "cosine halfway");
	float prev = schedule_lr(&s, 0);
	for (long long t = 1; t < T; t++) {
		float r = schedule_lr(&s, t);
		cr_assert(r <= prev && r > 0.0f, "step %lld: %.9g after %.9g", t, (double)r, (double)prev);
		prev = r;
	}
	/* The last step: lr (1 + cos(pi (T-1)/T)) / 2 ~ lr pi^2 / (4 T^2). */
	cr_assert(prev < 0.05f * 5e-7f, "last step %.9g", (double)prev);
}

Test(schedule, warmup_ramps_then_follows_the_schedule)
{
	struct schedule s;
	schedule_init(&s, LR_COSINE, 0.2f, 4, 8);
	double lr = (double)0.2f;
	expect_rate(&s, 0, lr * 0.25, "warm-up");
	expect_rate(&s, 1, lr * 0.5, "warm-up");
	expect_rate(&s, 2, lr * 0.75, "warm-up");
	expect_rate(&s, 3, lr, "warm-up");
	/* Then the cosine over the remaining 4 steps. */
	expect_rate(&s, 4, lr, "cosine after warm-up");
	expect_rate(&s, 5, lr * 0.8535533905932737, "cosine after warm-up");
	expect_rate(&s, 6, lr * 0.5, "cosine after warm-up");
	expect_rate(&s, 7, lr * 0.1464466094067262, "cosine after warm-up");

	schedule_init(&s, LR_CONSTANT, 0.2f, 3, 10);
	expect_rate(&s, 0, lr / 3.0, "constant warm-up");
	expect_rate(&s, 1, lr * 2.0 / 3.0, "constant warm-up");
	for (long long t = 2; t < 10; t++)
		cr_assert(schedule_lr(&s, t) == 0.2f, "constant after warm-up, step %lld", t);

	/* A warm-up as long as the run is all ramp. */
	schedule_init(&s, LR_COSINE, 0.2f, 10, 10);
	for (long long t = 0; t < 10; t++)
		expect_rate(&s, t, lr * (double)(t + 1) / 10.0, "warm-up of the whole run");
}

Test(schedule, a_table_from_any_step_is_the_tail_of_the_whole_run)
{
	const int steps = 938, epochs = 3;
	const long long T = (long long)steps * epochs;
	struct schedule s;
	schedule_init(&s, LR_COSINE, 0.05f, 100, T);
	float *whole = malloc((size_t)T * sizeof(float)), *tail = malloc((size_t)T * sizeof(float));
	cr_assert(whole && tail);
	schedule_fill(&s, 0, (int)T, whole);
	for (long long t = 0; t < T; t++)
		cr_assert(whole[t] == schedule_lr(&s, t), "fill differs from schedule_lr at %lld", t);
	const long long starts[] = {1, 99, 100, 101, 937, 938, 1500, T - 1};
	for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		long long first = starts[i];
		memset(tail, 0, (size_t)T * sizeof(float));
		schedule_fill(&s, first, (int)(T - first), tail);
		cr_assert(memcmp(tail, whole + first, (size_t)(T - first) * sizeof(float)) == 0,
			  "rates from step %lld differ from the whole run's", first);
	}
	free(whole);
	free(tail);
}

Test(schedule, validation_names_the_flag)
{
	struct schedule s;
	char err[256] = "";
	schedule_init(&s, LR_COSINE, 0.1f, 939, 938);
	cr_assert_eq(schedule_validate(&s, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_assert(strstr(err, "--warmup-steps") && strstr(err, "939") && strstr(err, "938"),
		  "message: %s", err);
	schedule_init(&s, LR_CONSTANT, 0.1f, 939, 938);
	cr_assert_eq(schedule_validate(&s, err, sizeof(err)), STATUS_BAD_INPUT);
	schedule_init(&s, LR_COSINE, 0.1f, -1, 938);
	err[0] = '\0';
	cr_assert_eq(schedule_validate(&s, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_assert(strstr(err, "--warmup-steps"), "message: %s", err);
	schedule_init(&s, LR_COSINE, 0.1f, 938, 938);
	cr_assert_eq(schedule_validate(&s, err, sizeof(err)), STATUS_OK);
	schedule_init(&s, LR_COSINE, 0.1f, 0, 1);
	cr_assert_eq(schedule_validate(&s, err, sizeof(err)), STATUS_OK);
}
