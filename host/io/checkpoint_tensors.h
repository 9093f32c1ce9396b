/*
 * checkpoint_tensors.h - which tensors a model's checkpoint holds, in file
 * order, and their floats as little-endian bytes: what the writer
 * (io/checkpoint_write.c) and the extraction (io/checkpoint_compat.c) share.
 * Internal to io/checkpoint_*.c.
 */
#ifndef MNIST_DDP_CHECKPOINT_TENSORS_H
#define MNIST_DDP_CHECKPOINT_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "io/checkpoint_format.h"
#include "train/model.h"
#include "train/optim.h"

/* Where a tensor's floats come from: the parameters, the optimizer state, or the update count. */
enum tensor_source {
	FROM_PARAMS = 0,
	FROM_STATE,
	FROM_STEP,
};

/* The tensors of a model, in file order: parameters, then the optimizer's state (train/optim.h). */
struct tensor_ref {
	char name[CHECKPOINT_NAME_MAX];
	int ndim;
	uint64_t shape[4];
	size_t offset, count; /* in floats, within params or the state */
	enum tensor_source from;
};

/* At most this many: a weight and a bias per layer, for the parameters and each state, and the step. */
#define CKPT_MODEL_TENSORS (2 * MODEL_MAX_LAYERS * (1 + OPTIM_MAX_STATE) + 1)

/* The tensors of model m with optimizer opt into t (CKPT_MODEL_TENSORS of room); their count. */
int checkpoint_tensors(const struct model *m, enum optimizer_kind opt, struct tensor_ref *t);

/* n floats to and from little-endian bytes, whatever the host's byte order. */
void store_floats_le(uint8_t *dst, const float *src, size_t n);
void load_floats_le(float *dst, const uint8_t *src, size_t n);

#endif /* MNIST_DDP_CHECKPOINT_TENSORS_H */
