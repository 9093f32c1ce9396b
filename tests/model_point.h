/*
 * model_point.h - a model at a random test point on the host backend, for the
 * tests that hold the model code against tests/ref.c's double network
 * (test_model.c: the forward pass; test_gradcheck.c: LeNet-5's gradient).
 */
#ifndef MNIST_DDP_TESTS_MODEL_POINT_H
#define MNIST_DDP_TESTS_MODEL_POINT_H

#include <stddef.h>
#include <stdint.h>

#include "backend_module.h"
#include "train/model.h"

struct model_point {
	struct backend be; /* host, 1 thread, no MPI */
	struct model m;
	struct model_ws ws;
	int rows;
	size_t np, nx;
	float *params;   /* (np) model_init_params(seed) times scale */
	double *pd;      /* (np) the same, widened */
	float *x;        /* (rows, 784) normalised random pixels (ws.act[0]: model_point_upload_input) */
	int32_t *labels; /* (rows) */
	float *params_d, *grads_d; /* backend copies */
};

/* Build the point (inputs from rng stream `stream` of seed) and upload it. Aborts when out of memory. */
void model_point_make(struct model_point *p, enum model_kind kind, const int *hidden,
		      int n_hidden, int rows, uint64_t seed, uint64_t stream, float scale);

/*
 * x (rows, 784) into the model's input ws.act[0], in the layout the model
 * reads: transposed to (784, rows) where ws.plan.input_batch_last (LeNet-5).
 */
void model_point_upload_input(struct model_point *p, const float *x);

/* model_forward (keeping what the backward pass needs) then model_backward (mean loss), waited for. */
void model_point_run(struct model_point *p);

void model_point_free(struct model_point *p);

#endif /* MNIST_DDP_TESTS_MODEL_POINT_H */
