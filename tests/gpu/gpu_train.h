/*
 * gpu_train.h - one data-parallel training step, run through the backend
 * interface with the project's model code (host/train/model.h), for the GPU
 * parity programs: the same ops in the same order as the trainer's step
 * (forward, backward with the loss op moving the step's counters on, one
 * allreduce of the flat gradient buffer, SGD over the flat parameter buffer
 * at the rate its step counter picks from a table in backend memory, and in
 * the same op the next batch's gather by the cursor; the first batch is
 * gathered when the run is created).
 */
#ifndef MNIST_DDP_TESTS_GPU_TRAIN_H
#define MNIST_DDP_TESTS_GPU_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "train/model.h"

/*
 * Synthetic MNIST-shaped data: class prototypes with half the pixels noise and
 * a fifth of the labels random, learnable but never to a loss near zero. The
 * prototypes are made of block x block squares (1: single pixels), the
 * spatial structure a convolutional network learns from.
 */
struct gpu_data {
	int n_images;
	uint8_t *images; /* (n_images, IDX_PIXELS) */
	uint8_t *labels; /* (n_images) */
	int index_len;
	int32_t *index;  /* (index_len) the examples in training order */
};

void gpu_data_make(struct gpu_data *g, uint64_t seed, int n_images, int index_len, int block);
void gpu_data_free(struct gpu_data *g);

/* One replica: data, model state and workspace in one backend's memory. */
struct gpu_run {
	const struct backend *be;
	const struct model *m;
	struct model_ws ws;
	uint8_t *images, *labels; /* (n_images, IDX_PIXELS), (n_images) */
	int32_t *index;           /* (index_len) */
	int index_len;
	struct step_counters *counters; /* (1) cursor, steps begun, updates begun */
	float *lr_table;          /* (index_len / batch) the rate of each step: lr */
	float *params, *grads, *velocity; /* (n_params) each */
	int batch;
	float lr, momentum;
	enum reduce_op reduce;
};

/* Upload everything; params0 (n_params) the initial parameters. Fatal when out of memory. */
void gpu_run_create(struct gpu_run *r, const struct backend *be, const struct model *m,
		    const struct gpu_data *g, const float *params0, int batch, float lr,
		    float momentum, enum reduce_op reduce);
void gpu_run_destroy(struct gpu_run *r);

/* Queue one step (nothing is waited for). */
void gpu_run_step(struct gpu_run *r);

/* The gather of the batch at the run's cursor into its workspace. */
struct gather_req gpu_run_gather(const struct gpu_run *r);

/* The mean per-example loss of the latest step (waits for it). */
double gpu_run_loss(const struct gpu_run *r);

/* Copy out the parameters (n_params) and the cursor. */
void gpu_run_params(const struct gpu_run *r, float *host);
int32_t gpu_run_cursor(const struct gpu_run *r);

/* Optimizer state (n_params each) out of and into the replica. */
void gpu_run_get_state(const struct gpu_run *r, float *params, float *velocity);
void gpu_run_set_state(const struct gpu_run *r, const float *params, const float *velocity);

#endif /* MNIST_DDP_TESTS_GPU_TRAIN_H */
