/*
 * model.h - the networks as a stack of Dense layers over one flat parameter
 * buffer, run through the backend interface (so it never knows which
 * backend computes it).
 *
 * Parameters, and gradients, live in one contiguous buffer each, so a step
 * reduces all gradients in a single allreduce. Layer l holds
 *   W_l (dims[l+1], dims[l])  row-major, PyTorch's layout (out, in)
 *   b_l (dims[l+1])
 * at w_off[l] and b_off[l]. Hidden layers apply ReLU; the output layer
 * applies it only in the seed model (the tutorial's net puts ReLU on the
 * logits).
 */
#ifndef MNIST_DDP_MODEL_H
#define MNIST_DDP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAX_LAYERS (CONFIG_MAX_HIDDEN + 1)

struct model {
	enum model_kind kind;
	int n_layers;
	int dims[MODEL_MAX_LAYERS + 1]; /* dims[0] = 784 inputs, dims[n_layers] = 10 classes */
	int relu_out;                   /* ReLU on the logits (seed model) */
	size_t w_off[MODEL_MAX_LAYERS], b_off[MODEL_MAX_LAYERS];
	size_t n_params;
};

void model_init(struct model *m, enum model_kind kind, const int *hidden, int n_hidden);

/*
 * Initial parameters into params (n_params), from the seed alone:
 * seed and linear models: W ~ normal(0, 0.01), b = 0 (the tutorial's Dense);
 * mlp: W and b ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's Linear).
 */
void model_init_params(const struct model *m, uint64_t seed, float *params);

/* Name of layer l's weight or bias tensor ("fc<l>.weight", "fc<l>.bias"). */
void model_tensor_name(int layer, int is_bias, char *buf, size_t len);

/* Backend buffers for one batch of up to max_rows examples. */
struct model_ws {
	int max_rows;
	float *act[MODEL_MAX_LAYERS + 1];  /* act[0] (rows, 784) input; act[l+1] (rows, dims[l+1]) */
	float *dact[MODEL_MAX_LAYERS + 1]; /* gradient of the loss wrt act[l], l >= 1 */
	int32_t *labels;                   /* (rows) */
	float *ones;                       /* (max_rows) all 1, for bias gradients by GEMM */
	float *row_loss;                   /* (rows) per-example loss */
	int32_t *hits;                     /* (max_rows) correct predictions, accumulated */
};

/* 0 on success, -1 when the backend is out of memory (everything freed). */
int model_ws_create(const struct backend *be, const struct model *m, int max_rows,
		    struct model_ws *ws);
void model_ws_destroy(const struct backend *be, struct model_ws *ws);

/* Forward pass of ws->act[0] (rows, 784) to the logits ws->act[n_layers]. */
void model_forward(const struct backend *be, const struct model *m, struct model_ws *ws,
		   const float *params, int rows);

/*
 * Loss and gradients of the batch mean (after model_forward): ws->row_loss gets each
 * row's loss and grads (n_params) the gradient of the mean loss over the rows.
 */
void model_backward(const struct backend *be, const struct model *m, struct model_ws *ws,
		    const float *params, float *grads, int rows);

/*
 * The same with the gradient of scale * (sum of the rows' losses): model_backward is
 * scale = 1/rows. The trainer passes 1/(rows * ranks) to fold the mean over ranks in.
 */
void model_backward_scaled(const struct backend *be, const struct model *m, struct model_ws *ws,
			   const float *params, float *grads, int rows, float scale);

/* Add each row's hit (argmax == label) to ws->hits, after model_forward. */
void model_score(const struct backend *be, const struct model *m, struct model_ws *ws, int rows);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_MODEL_H */
