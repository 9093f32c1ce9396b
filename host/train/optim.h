/*
 * optim.h - the optimizers a run trains with (--optimizer): what state each
 * keeps, the backend op that updates the parameters, and the names its state
 * has in a checkpoint (PyTorch's names where it has them).
 *
 *   sgd    torch.optim.SGD: one buffer, the momentum velocity, saved as
 *          optimizer.<tensor> (the name older checkpoints use)
 *   adamw  torch.optim.AdamW: the moments optimizer.<tensor>.exp_avg and
 *          .exp_avg_sq, and the update count optimizer.step (a float scalar,
 *          as PyTorch keeps it), which is the global step
 *
 * With --clip-grad-norm the gradients are first clipped by their global norm
 * (torch.nn.utils.clip_grad_norm_), optim_clip; the weight decay comes after,
 * in the update, as torch.optim.SGD and AdamW add it.
 *
 * The training loop calls optim_update once a step and never asks which
 * optimizer runs: a new one is a backend op, a settings value and an entry here.
 */
#ifndef MNIST_DDP_OPTIM_H
#define MNIST_DDP_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OPTIM_MAX_STATE 2

/* What an optimizer keeps: buffers of n_params floats each, and whether it counts its updates. */
struct optim_desc {
	int n_state;
	const char *state_suffix[OPTIM_MAX_STATE]; /* after "optimizer.<tensor>" in a checkpoint */
	int counts_steps;                          /* saves "optimizer.step" */
};

static inline struct optim_desc optim_desc_of(enum optimizer_kind k)
{
	struct optim_desc d = {1, {"", NULL}, 0};
	if (k == OPTIMIZER_ADAMW) {
		d.n_state = 2;
		d.state_suffix[0] = ".exp_avg";
		d.state_suffix[1] = ".exp_avg_sq";
		d.counts_steps = 1;
	}
	return d;
}

/* Floats of state an optimizer of kind k keeps for n parameters: n_state * n. */
static inline size_t optim_state_floats(enum optimizer_kind k, size_t n)
{
	return (size_t)optim_desc_of(k).n_state * n;
}

/* A run's optimizer: its settings and its state in backend memory. */
struct optim {
	enum optimizer_kind kind;
	float momentum, weight_decay; /* sgd */
	struct adamw_hyper adamw;     /* adamw */
	float max_norm;               /* --clip-grad-norm; 0: no clipping */
	float *norm;                  /* (1) the gradients' norm, backend memory; NULL without clipping */
	size_t n;                     /* parameters */
	float *state;                 /* (n_state, n): sgd the velocity; adamw exp_avg, exp_avg_sq */
};

/*
 * The optimizer of c over n parameters, its state zeroed (and with
 * --clip-grad-norm the norm's scalar); -1 when out of backend memory.
 */
int optim_create(struct optim *o, const struct backend *be, const struct train_config *c,
		 size_t n);
void optim_destroy(struct optim *o, const struct backend *be);

/* Floats of state: n_state * n. */
size_t optim_state_count(const struct optim *o);

/* Set the state from host memory (state: optim_state_count floats). */
void optim_load(const struct optim *o, const struct backend *be, const float *state);

/*
 * With --clip-grad-norm: g (n), the gradients averaged over the ranks, clipped
 * by their global norm on the backend (backend.h, ->clip_grad_norm), before
 * the update; nothing without it.
 */
void optim_clip(const struct backend *be, const struct optim *o, float *g);

/*
 * One update of p (n) from g (n) at the step's rate, lr[counters->step - 1]
 * (lr, counters: backend memory, see backend.h; AdamW's update count is
 * counters->updates); then, unless NULL, the next batch's gather.
 */
void optim_update(const struct backend *be, const struct optim *o, float *p, const float *g,
		  const float *lr, const struct step_counters *counters,
		  const struct gather_req *then);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_OPTIM_H */
