/*
 * train.h - the data-parallel training loop, evaluation and the run's result.
 *
 * It drives a struct backend and never knows which one: the same loop runs
 * OpenBLAS + MPI on the host and cuBLAS + NCCL on a GPU.
 */
#ifndef MNIST_DDP_TRAIN_H
#define MNIST_DDP_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "config.h"
#include "dist.h"
#include "io/idx.h"
#include "train/model.h"

#ifdef __cplusplus
extern "C" {
#endif

struct train_result {
	int steps_per_epoch;
	long long images;     /* trained on by all ranks together, padding included */
	double train_seconds; /* the training loop only */
	double test_accuracy; /* NAN without a test set */
	long long test_images; /* test examples scored by all ranks together (0 without a test set) */
	float first_loss;     /* this rank's loss at epoch 0 step 0; NAN when that step did not run here */
	float final_loss;     /* this rank's loss at the last step; NAN when no step trained */
	float epoch_loss;     /* the last epoch's mean over every rank's loss lines (NAN: no epoch ran) */
	float *params;        /* (n_params) final parameters, host memory; the caller frees */
	size_t n_params;
	uint32_t param_crc;   /* CRC-32 of params, the same on every rank (the replica check's) */
	long long graph_nodes; /* nodes of the captured step graph; 0 when steps ran uncaptured */
};

/*
 * Train on `train` (and score `test` when not NULL) with every rank of d.
 * Every rank must call it with the same configuration. metrics (may be NULL)
 * receives rank 0's JSON lines. Returns STATUS_OK, or STATUS_BAD_INPUT with
 * err filled when the configuration cannot run (the same on every rank).
 * Runtime failures are fatal and end the job.
 */
enum status train_run(const struct train_config *c, const struct dist *d, const struct backend *be,
	      const struct mnist_set *train, const struct mnist_set *test,
	      FILE *metrics, struct train_result *res, char *err, size_t errlen);

/*
 * --eval-only: score a checkpoint's model on `test` and train nothing. Every
 * rank calls it with the same configuration; rank 0 reads the checkpoint
 * (train/resume.h, resume_eval_prepare), which sets c's --model and --hidden
 * to the checkpoint's. res: test_accuracy, test_images, the parameters and
 * their param_crc; nothing trained (images 0, train_seconds 0, steps_per_epoch
 * 0, final_loss NAN). Returns STATUS_OK, or STATUS_BAD_INPUT with err filled
 * (the same on every rank) when the checkpoint cannot be used.
 */
enum status train_eval_only(struct train_config *c, const struct dist *d, const struct backend *be,
			    const struct mnist_set *test, struct train_result *res, char *err,
			    size_t errlen);

/*
 * The checks train_run makes before it starts (--limit against the data, a
 * sampler that leaves at least one step): 0, or 2 with err filled.
 */
enum status train_validate(const struct train_config *c, const struct dist *d,
			   const struct mnist_set *train, char *err, size_t errlen);

/*
 * Accuracy of params on `test`, rank r of N scoring examples r, r + N, ...;
 * scored (may be NULL) gets how many examples all ranks scored together.
 */
double train_evaluate(const struct dist *d, const struct backend *be, const struct model *m,
		      struct model_ws *ws, const float *params, const struct mnist_set *test,
		      long long *scored);

/* How many of `count` test examples rank `rank` of `size` scores: ceil((count - rank) / size). */
int train_test_shard(int count, int rank, int size);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_TRAIN_H */
