/* schedule.c - the learning-rate schedule: see host/train/schedule.h. */
#include "train/schedule.h"

#include <math.h>

#define SCHEDULE_PI 3.14159265358979323846

void schedule_init(struct schedule *s, enum lr_schedule kind, float lr, long long warmup,
		   long long total)
{
	s->kind = kind;
	s->lr = lr;
	s->warmup = warmup;
	s->total = total;
}

enum status schedule_validate(const struct schedule *s, char *err, size_t errlen)
{
	if (s->warmup < 0)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--warmup-steps: %lld is negative; expected 0 or more steps", s->warmup);
	if (s->warmup > s->total)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--warmup-steps: %lld is longer than the run, which has %lld steps "
				   "(--epochs x steps per epoch); expected at most %lld",
				   s->warmup, s->total, s->total);
	return STATUS_OK;
}

float schedule_lr(const struct schedule *s, long long t)
{
	if (t < s->warmup)
		return (float)(s->lr * (double)(t + 1) / (double)s->warmup);
	if (s->kind == LR_CONSTANT)
		return (float)s->lr;
	/* t < total here, so total - warmup > 0. */
	double progress = (double)(t - s->warmup) / (double)(s->total - s->warmup);
	return (float)(s->lr * 0.5 * (1.0 + cos(SCHEDULE_PI * progress)));
}

void schedule_fill(const struct schedule *s, long long first, int n, float *out)
{
	for (int i = 0; i < n; i++)
		out[i] = schedule_lr(s, first + i);
}
