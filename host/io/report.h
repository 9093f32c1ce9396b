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

struct summary {
	const char *model, *backend;
	int ranks, epochs, steps_per_epoch;
	long long images;
	double train_seconds;
	double test_accuracy; /* NAN when there is no test set */
	float final_loss;
	uint32_t param_crc; /* CRC-32 of the final parameters' bytes */
	long long test_images; /* test examples scored (0 without a test set) */
	const char *backend_fallback; /* why --backend auto ran on the host with GPUs present, or NULL */
	long long graph_nodes; /* nodes of the captured step (0: steps ran uncaptured); -1: not shown */
	const char *backend_keys; /* the backend's own " key=value" pairs (backend_summary), or NULL */
};

/*
 * "summary: model=... backend=... ranks=... ..." (keys in the contract's order),
 * then graph_nodes=N unless s->graph_nodes is -1, the backend's own keys
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

/* A one-line progress display on a terminal; inactive (every call a no-op) otherwise. */
struct progress {
	FILE *tty;
	double last_draw;
};
void progress_start(struct progress *p, int enabled);
void progress_update(struct progress *p, int epoch, int epochs, int step, int steps,
		     double images_per_second, double now);
void progress_end(struct progress *p);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_REPORT_H */
