/*
 * resume.h - the checkpoint policy of a run: where a resumed run starts (or
 * a new one from a checkpoint's parameters, --init-from; the model that
 * --eval-only scores), and when and how rank 0 saves (the file format is
 * io/checkpoint.h's).
 *
 * Collective where it says so: every rank calls resume_prepare (and
 * resume_eval_prepare) with the same settings and all get the same outcome,
 * so no rank waits alone.
 */
#ifndef MNIST_DDP_RESUME_H
#define MNIST_DDP_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dist.h"
#include "io/checkpoint.h"
#include "train/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A run's checkpointing: where it starts (the step after a --resume
 * checkpoint's, or (0, 0)), rank 0's copy of the state it starts from (with
 * --init-from, the checkpoint's parameters alone), and
 * the run as its checkpoints describe it, which every save and every
 * compatibility check uses. The settings come down once, in resume_prepare.
 */
struct resume_state {
	int epoch, step;          /* the first step to run */
	float *params; /* (n_params), rank 0 only; NULL elsewhere or without a checkpoint (free it) */
	float *state;  /* the optimizer's (n_state * n_params, train/optim.h): --resume only */
	/*
	 * The plan given (the backend's text, which only the backend reads):
	 * after --resume, the checkpoint's; with --gpu-plan-from, that file's;
	 * NULL: none (free it). plan_from: where it came from, for messages.
	 */
	char *plan;
	char plan_from[CONFIG_PATH_MAX + 64];
	/* This run: its settings, ranks, data, steps per epoch, and its backend's plan as kept. */
	struct checkpoint_info run;
};

/*
 * Collective (every rank has the same --resume: the start-up agreement,
 * host/agree.h, made sure). Describes this run in rs->run (the settings c,
 * d's rank count, the training examples used and their CRC-32, the steps per
 * epoch). With --resume, rank 0 finds, validates and reads the checkpoint (a
 * directory's newest valid one, warning about each corrupt one it skips) and
 * every rank learns where to continue: the step after the checkpoint's
 * (checkpoint_position). Without --resume rs starts at (0, 0); with
 * --init-from, rank 0 reads the parameters of that checkpoint (which must hold
 * c's model) into rs->params, and nothing else; with --gpu-plan-from, rank 0
 * reads that file's plan and every rank gets it in rs->plan, as a resumed run
 * gets its checkpoint's. Returns
 * STATUS_OK, or the same failure on every rank (STATUS_BAD_INPUT for a
 * checkpoint or plan file that cannot be used) with err saying why.
 */
enum status resume_prepare(const struct train_config *c, const struct dist *d,
			   const struct model *m, int examples, uint32_t train_crc32,
			   int steps_per_epoch, struct resume_state *rs, char *err, size_t errlen);

/*
 * Collective, --eval-only: rank 0 reads the checkpoint (a file, or a
 * directory's newest valid one, as --resume picks it) for its parameters
 * alone, and every rank learns its model: c's --model and --hidden are set to
 * the checkpoint's (those given on the command line must be its). *params:
 * rank 0's copy of the parameters (NULL elsewhere; free it). Returns
 * STATUS_OK, or the same failure on every rank (STATUS_BAD_INPUT for a path
 * that holds no usable checkpoint, or a checkpoint of another model than the
 * one given) with err saying why.
 */
enum status resume_eval_prepare(struct train_config *c, const struct dist *d, float **params,
				char *err, size_t errlen);

/*
 * Rank 0 only: save the state after `global_step` steps from host copies of
 * the parameters and the optimizer state, atomically, in rs->run's
 * --checkpoint-dir, and prune to --keep. Unless --allow-nonfinite, parameters that are not all finite stop
 * the run here, so no checkpoint ever holds a diverged model; a failed write
 * ends the job (training on without the checkpoints asked for loses work).
 */
void resume_save(struct resume_state *rs, const struct model *m, long long global_step,
		 const float *host_params, const float *host_state);

/*
 * Whether the state after `global_step` steps is saved (--checkpoint-dir: at
 * every epoch's end, and every --save-every steps).
 */
int resume_save_due(const struct resume_state *rs, long long global_step);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_RESUME_H */
