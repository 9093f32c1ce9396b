/*
 * resume.h - the checkpoint policy of a run: where a resumed run starts, and
 * when and how rank 0 saves (the file format is io/checkpoint.h's).
 *
 * Collective where it says so: every rank calls resume_prepare with the same
 * settings and all get the same outcome, so no rank waits alone.
 */
#ifndef MNIST_DDP_RESUME_H
#define MNIST_DDP_RESUME_H

#include <stddef.h>

#include "config.h"
#include "dist.h"
#include "io/checkpoint.h"
#include "train/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a resumed run starts, and rank 0's copy of the state it starts from. */
struct resume_state {
	int epoch, step;          /* the first step to run */
	float *params; /* (n_params), rank 0 only; NULL elsewhere (free it) */
	float *state;  /* the optimizer's (optim_desc_of(--optimizer).n_state * n_params), likewise */
};

/*
 * Collective (every rank has the same --resume: the start-up agreement,
 * host/agree.h, made sure). With --resume, rank 0 finds, validates and reads
 * the checkpoint (a directory's newest valid one, warning about each corrupt
 * one it skips) and every rank learns where to continue: the step after the
 * checkpoint's (checkpoint_position). Without --resume rs starts at (0, 0).
 * run: this run's configuration (checkpoint_info_from_config). Returns
 * STATUS_OK, or the same failure on every rank (STATUS_BAD_INPUT for a
 * checkpoint that cannot be used) with err saying why.
 */
enum status resume_prepare(const struct train_config *c, const struct dist *d,
			   const struct model *m, const struct checkpoint_info *run,
			   struct resume_state *rs, char *err, size_t errlen);

/*
 * Rank 0 only: save the state after `global_step` steps (info->steps_per_epoch
 * per epoch) from host copies of the parameters and the optimizer state, atomically, and
 * prune to --keep. Unless --allow-nonfinite, parameters that are not all finite stop
 * the run here, so no checkpoint ever holds a diverged model; a failed write
 * ends the job (training on without the checkpoints asked for loses work).
 */
void resume_save(const struct train_config *c, const struct model *m,
		 struct checkpoint_info *info, long long global_step, const float *host_params,
		 const float *host_state);

/*
 * Whether the state after `global_step` steps is saved (--checkpoint-dir: at
 * every epoch's end, and every --save-every steps).
 */
int resume_save_due(const struct train_config *c, long long global_step, int steps_per_epoch);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_RESUME_H */
