/*
 * step.h - one training step on the backend (host/train/step.c): the training
 * set in backend memory, everything a step reads and writes, the gather of a
 * batch, the step's ops (forward, loss, backward, allreduce, the gradients'
 * clipping with --clip-grad-norm, update and the next batch's gather) and its loss read back. The loop (train.c) decides
 * when; launch.c how steps are grouped into launches.
 */
#ifndef MNIST_DDP_STEP_H
#define MNIST_DDP_STEP_H

#include <stdint.h>

#include "backend.h"
#include "io/idx.h"
#include "train/model.h"
#include "train/optim.h"

/* Backend copies of one split. */
struct device_set {
	uint8_t *images; /* (count, 784) */
	uint8_t *labels; /* (count) */
	int count;
};

/* The first `count` examples of s into backend memory: 0, or -1 when out of memory. */
int device_set_upload(const struct backend *be, const struct mnist_set *s, int count,
		      struct device_set *out);
void device_set_free(const struct backend *be, struct device_set *s);

/* Everything one step reads and writes, in backend memory. */
struct step_state {
	const struct backend *be;
	const struct model *m;
	struct model_ws *ws;
	struct device_set data;
	int32_t *index;  /* (shard_len) this rank's examples of the epoch */
	int index_len;
	int batch;       /* rows of a full batch */
	struct step_counters *counters; /* (1) the step's position (backend.h) */
	float *lr;       /* (steps_per_epoch) the epoch's learning rates (train/schedule.h) */
	float *params, *grads; /* (n_params) each */
	struct optim opt;      /* its state, and which update */
	enum reduce_op reduce;
	int ranks;
	/*
	 * Micro-batch mode (docs/exact.md); global 0: off. A step is `micro`
	 * passes of `batch` rows, each one's loss scaled by 1/global, their
	 * gradients summed into grads (the first pass writes it, the others into
	 * scratch, then added), or with --exact into fixed; then one allreduce.
	 */
	int global;     /* G: rows of a step over all ranks */
	int micro;      /* this rank's passes a step */
	float *scratch; /* (n_params) the gradients of a pass after the first; float mode */
	int64_t *fixed; /* (n_params + 2) --exact: the sum in fixed point, the step's out-of-range
			 * count, the count of every step so far (backend.h, ->fixed_decode) */
	double fixed_limit; /* fixed_limit_elem(G / M) */
};

/* The gather of the batch at the counters' cursor into the model's input. */
struct gather_req step_gather(const struct step_state *s);

/*
 * One step on the batch already gathered into the model's input (by the
 * epoch's first gather, or by the step before). The loss op moves the
 * counters on; the optimizer's update is followed, in the same op, by the
 * next batch's gather, so that a captured step holds no launch of its own
 * for the data.
 */
void step_ops(const struct step_state *s, int rows);

/*
 * --exact: the elements out of fixed point's range in every step so far,
 * over every rank (the same count on each: it is reduced with the sums); 0
 * without --exact. It waits for the steps launched (a device backend's
 * sync): the loop reads it where it reads the loss anyway.
 */
long long step_fixed_overflow(const struct step_state *s);

/*
 * The mean of this rank's per-example losses of the last step (host_rows:
 * rows floats); in micro-batch mode, of its last micro-batch.
 */
float step_loss(const struct step_state *s, int rows, float *host_rows);

#endif /* MNIST_DDP_STEP_H */
