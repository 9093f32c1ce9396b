/*
 * report.h - what the trainer prints: the seed's loss lines, rank 0's summary
 * line, the one-line progress display and the --metrics JSON lines.
 */
#ifndef MNIST_DDP_REPORT_H
#define MNIST_DDP_REPORT_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A float32 in the fewest significant digits (at most 8) that read back as the
 * same float (text.h); a NaN of either sign as "nan".
 */
void report_format_float(float v, char *buf, size_t len);

/* "epoch: E, step: S, loss is L" and a newline, flushed. */
void report_loss_line(FILE *f, int epoch, int step, float loss);

/* --eval-every: "epoch: E, test accuracy is A" (A with 4 decimals) and a newline, flushed. */
void report_eval_line(FILE *f, int epoch, double accuracy);

/* An epoch's figures over all ranks (the epoch line and its --metrics record). */
struct epoch_line {
	int epoch;
	long long global_step; /* steps done at its end */
	float mean_loss;       /* the mean of every rank's loss lines of the epoch */
	long long losses;      /* how many */
	double seconds;        /* its training time */
	long long images;      /* trained on by all ranks together */
	double test_accuracy;  /* its --eval-every score, NAN when none */
};

/*
 * Rank 0's line after an epoch, flushed:
 *   epoch: E, mean loss: L, epoch time: T s, images per second: I
 * and ", test accuracy: A" (4 decimals) when the epoch was scored: no "loss is"
 * and no "test accuracy is" in it, so that what reads the loss and eval lines by
 * those words reads it as neither.
 */
void report_epoch_line(FILE *f, const struct epoch_line *e);
/* --metrics: {"event": "epoch", ...} with the same figures. */
void report_metrics_epoch(FILE *f, const struct epoch_line *e);

struct summary {
	const char *model, *backend;
	int ranks, epochs, steps_per_epoch;
	long long images;
	double train_seconds;
	double test_accuracy; /* NAN when there is no test set */
	float final_loss;
	float epoch_loss; /* the last epoch's mean loss over all ranks (NAN: no epoch trained) */
	uint32_t param_crc; /* CRC-32 of the final parameters' bytes */
	long long test_images; /* test examples scored (0 without a test set) */
	const char *backend_fallback; /* why --backend auto ran on the host with GPUs present, or NULL */
	long long graph_nodes; /* nodes of the captured step (0: steps ran uncaptured); -1: not shown */
	const char *backend_keys; /* the backend's own " key=value" pairs (backend_summary), or NULL */
};

/*
 * "summary: model=... backend=... ranks=... ..." (keys in the contract's order,
 * through test_images), epoch_loss=L, then graph_nodes=N unless s->graph_nodes is -1, the backend's own keys
 * (the CUDA simulator's sim_step_us=X), and backend_fallback=REASON when
 * s->backend_fallback is set.
 */
void report_summary(FILE *f, const struct summary *s);

/* --metrics: one JSON line for a logged step. */
void report_metrics_step(FILE *f, int epoch, int step, long long global_step, float loss,
			 double images_per_second, double elapsed);
/*
 * --metrics: a record of `event` whose fields are the JSON object `object`
 * (a backend's text): {"event": EVENT, ...its members}.
 */
void report_metrics_record(FILE *f, const char *event, const char *object);
/*
 * --metrics: a test-set score after epoch `epoch` (global_step steps done):
 * {"event": "eval", ...}; elapsed is training time, evaluation excluded.
 */
void report_metrics_eval(FILE *f, int epoch, long long global_step, double accuracy,
			 long long images, double elapsed);
/* --metrics: the last line, the step-time distribution of secs (n; sorted in place). */
void report_metrics_step_times(FILE *f, float *secs, int n);

/*
 * A one-line progress display on rank 0's stderr, redrawn in place, or
 * inactive (every call a no-op). Where a person watches (progress_wanted):
 * rank 0's stderr is a terminal, or the stderr of the mpirun that started it
 * is (mpirun hands a rank pipes, and a terminal only for its stdout, pipe or
 * not), unless mpirun writes the ranks' output to files
 * (--output-filename).
 */
struct progress {
	FILE *tty;
	double last_draw;
	int drawn; /* a line is on the screen */
};
/* mode: 0 auto (above), 1 always, 2 never (--progress auto|on|off). */
int progress_wanted(int mode);
void progress_start(struct progress *p, int enabled);
/* "epoch: E of 0-L, step: S of N, I images/s" (E and S from 0, as the log lines count). */
void progress_update(struct progress *p, int epoch, int epochs, int step, int steps,
		     double images_per_second, double now);
/* The line taken off the screen before anything else is printed; redrawn at the next update. */
void progress_clear(struct progress *p);
void progress_end(struct progress *p);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_REPORT_H */
