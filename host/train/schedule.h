/*
 * schedule.h - the learning-rate schedule: the rate of every global step of a run.
 *
 * Step t counts from 0 over the whole run (epoch * steps_per_epoch + step),
 * T = epochs * steps_per_epoch, W = --warmup-steps, lr = --lr:
 *   t < W                  lr * (t + 1) / W                           (linear warm-up)
 *   constant, t >= W       lr
 *   cosine,   t >= W       lr * (1 + cos(pi * (t - W) / (T - W))) / 2 (to 0 over the rest)
 * The cosine part is PyTorch's CosineAnnealingLR (eta_min 0, T_max = T - W)
 * stepped once per step, in its closed form. Each rate is computed in double
 * and rounded to float once, from (t, T, W, lr) alone, so a resumed run
 * recomputes exactly the rates of an uninterrupted one.
 *
 * The trainer fills a table of one epoch's rates (schedule_fill) and the
 * optimizer step reads its step's entry from backend memory, so a captured
 * step replays with the rate of the step it runs.
 */
#ifndef MNIST_DDP_SCHEDULE_H
#define MNIST_DDP_SCHEDULE_H

#include <stddef.h>

#include "check.h"
#include "config.h" /* enum lr_schedule */

#ifdef __cplusplus
extern "C" {
#endif

struct schedule {
	enum lr_schedule kind;
	double lr;          /* the base rate (--lr) */
	long long warmup;   /* W */
	long long total;    /* T, steps of the whole run */
};

void schedule_init(struct schedule *s, enum lr_schedule kind, float lr, long long warmup,
		   long long total);

/*
 * Whether the schedule fits its run: a warm-up no longer than the run.
 * STATUS_OK, or STATUS_BAD_INPUT with err naming --warmup-steps.
 */
enum status schedule_validate(const struct schedule *s, char *err, size_t errlen);

/* The rate of global step t (0 <= t < total). */
float schedule_lr(const struct schedule *s, long long t);

/* out[i] = schedule_lr(s, first + i) for i < n. */
void schedule_fill(const struct schedule *s, long long first, int n, float *out);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_SCHEDULE_H */
