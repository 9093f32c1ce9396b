/*
 * model.h - the networks as a short list of layers over one flat parameter
 * buffer, run through the backend interface (so it never knows which
 * backend computes it).
 *
 * Parameters, and gradients, live in one contiguous buffer each, so a step
 * reduces all gradients in a single allreduce. Each layer with parameters
 * holds its weight then its bias, in layer order, in PyTorch's layout:
 *   dense  W (out, in), b (out)                 named fc<i>.weight, fc<i>.bias
 *   conv   W (oc, c, k, k) = (oc, c*k*k), b (oc) named conv<i>.weight, conv<i>.bias
 * The models:
 *   seed    dense 784->10 with ReLU on the logits (the tutorial's net), fc0
 *   linear  dense 784->10, fc0
 *   mlp     784 -> hidden... -> 10, ReLU between, fc0, fc1, ...
 *   lenet   LeNet-5: conv1 1->6 5x5 pad 2 + ReLU, max-pool 2; conv2 6->16 5x5
 *           + ReLU, max-pool 2; fc1 400->120 + ReLU, fc2 120->84 + ReLU, fc3 84->10
 * Activations between layers: dense layers read and write (rows, features);
 * the convolutional stack works batch-innermost, (c, h, w, rows) (conv_shape.h
 * says why), and LeNet-5 has a transpose layer at each end of it: the images
 * (rows, 784) in, the last pool's (400, rows) out to (rows, 400), PyTorch's
 * flatten order. The layers describe the model (its tensors, its text);
 * the stages below say how it runs.
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

#define MODEL_MAX_LAYERS (CONFIG_MAX_HIDDEN + 4)

enum layer_kind {
	LAYER_DENSE = 0,
	LAYER_CONV,
	LAYER_POOL,
	LAYER_TRANSPOSE, /* (rows, in) <-> (in, rows), no parameters */
};

struct layer {
	enum layer_kind kind;
	char name[8];           /* tensor name prefix ("fc0", "conv1"); "" for a pool */
	int relu;               /* ReLU on the output (dense and conv) */
	int batch_last;         /* transpose: 1 writes (in, rows), 0 writes (rows, in) */
	int in, out;            /* values per example read and written */
	int units;              /* dense: output features; conv: output channels */
	struct conv_shape conv; /* LAYER_CONV */
	struct pool_shape pool; /* LAYER_POOL */
	size_t w_off, b_off;    /* dense and conv: where W and b start in the flat buffer */
	int fan_in;             /* dense: in; conv: c*k*k (a row of W) */
};

/* Dense and conv layers hold parameters; pools and transposes do not. */
static inline int layer_has_params(const struct layer *l)
{
	return l->kind == LAYER_DENSE || l->kind == LAYER_CONV;
}

struct model {
	enum model_kind kind;
	int n_layers;
	struct layer layer[MODEL_MAX_LAYERS];
	size_t n_params;
};

void model_init(struct model *m, enum model_kind kind, const int *hidden, int n_hidden);

/*
 * Initial parameters into params (n_params), from the seed alone:
 * seed and linear models: W ~ normal(0, 0.01), b = 0 (the tutorial's Dense);
 * mlp and lenet: W and b ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's
 * default for Linear and Conv2d.
 */
void model_init_params(const struct model *m, uint64_t seed, float *params);

/* One parameter tensor as a checkpoint stores it. */
struct model_tensor {
	char name[24]; /* "fc1.weight", "conv1.bias" */
	int ndim;
	int shape[4];  /* PyTorch's shape */
	size_t offset, count; /* in floats, within the flat buffer */
};

/* How many tensors the model has (a weight and a bias per dense or conv layer). */
int model_n_tensors(const struct model *m);
/* Tensor i (0 <= i < model_n_tensors), in buffer order: weight, bias, next layer... */
void model_tensor_at(const struct model *m, int i, struct model_tensor *t);

/* The layers as text, e.g. "784,512,256,10" or "1x28x28,conv6k5p2,pool2,...,10". */
void model_layers_text(const struct model *m, char *buf, size_t len);

/*
 * Single layers, for the models above and for tests: a conv layer of (c, h, w)
 * inputs to oc channels (k x k, stride 1, padding pad, ReLU when relu) with W
 * at w_off and b right after it; a k x k max-pool of (c, h, w) inputs.
 */
void model_conv_layer(struct layer *l, int c, int h, int w, int oc, int k, int pad, int relu,
		      size_t w_off);
void model_pool_layer(struct layer *l, int c, int h, int w, int k);

/*
 * How a model runs: its layers grouped into stages, each one or a few
 * backend ops forward and back (include/backend.h):
 *   STAGE_DENSE  a dense layer: one GEMM with the bias (and ReLU) in its
 *                epilogue; back, one GEMM for dW with db in its epilogue and,
 *                unless it is the lowest stage, one for the input's gradient,
 *                through the stage below's ReLU when that is dense (DRELU)
 *   STAGE_CONV   a convolution, its ReLU and the max-pool after it (and the
 *                transpose to (rows, features) when a dense stage follows):
 *                ->conv_forward; back, ->pool_backward when the stage above is
 *                dense, one GEMM for dW with db, and ->conv_backward_data
 *                through the stage below when there is one
 * LeNet-5's transpose of the images is the gather's batch_last layout
 * (model.input_batch_last).
 */
enum stage_kind {
	STAGE_DENSE = 0,
	STAGE_CONV,
};

struct stage {
	enum stage_kind kind;
	int layer;       /* the dense or conv layer */
	int pool;        /* STAGE_CONV: its pool layer */
	int batch_first; /* STAGE_CONV: writes (rows, features) */
	int relu;        /* a ReLU on the output */
	int out;         /* values per example written */
};

/* The stages of m (model_init builds them). */
struct model_plan {
	int n;
	struct stage stage[MODEL_MAX_LAYERS];
	int input_batch_last; /* the batch is gathered as (784, rows) */
};

/* m's stages; a layer sequence no stage covers is a bug (abort). */
void model_plan_make(const struct model *m, struct model_plan *plan);

/* Stage s's shapes as the backend's conv ops take them, for `rows` examples. */
struct conv_stage model_conv_stage(const struct model *m, const struct stage *s, int rows);

/* Backend buffers for one batch of up to max_rows examples. */
struct model_ws {
	int max_rows;
	struct model_plan plan;
	float *act[MODEL_MAX_LAYERS + 1]; /* act[0] the batch; act[s+1] stage s's output */
	float *dz[MODEL_MAX_LAYERS];      /* gradient at stage s's pre-activation */
	float *dy[MODEL_MAX_LAYERS];      /* conv stage under a dense one: gradient at its output */
	float *cols[MODEL_MAX_LAYERS];    /* conv stage: its input's im2col matrix (NULL: the
					     backend's weight gradient reads the input) */
	int32_t *arg[MODEL_MAX_LAYERS];   /* conv stage: each pool window's argmax */
	void *relu_mask[MODEL_MAX_LAYERS]; /* dense stage under a dense one: its ReLU's record, or NULL */
	int32_t *labels;                  /* (rows) */
	float *row_loss;                  /* (rows) per-example loss */
	int32_t *hits;                    /* (max_rows) correct predictions, accumulated */
};

/* 0 on success, -1 when the backend is out of memory (everything freed). */
int model_ws_create(const struct backend *be, const struct model *m, int max_rows,
		    struct model_ws *ws);
void model_ws_destroy(const struct backend *be, struct model_ws *ws);

/* The logits (rows, 10) after model_forward. */
static inline float *model_logits(const struct model_ws *ws)
{
	return ws->act[ws->plan.n];
}

/*
 * Forward pass of ws->act[0] (rows, 784), or (784, rows) when
 * ws->plan.input_batch_last, to the logits. keep: also keep what the
 * backward pass needs (the im2col matrices).
 */
void model_forward(const struct backend *be, const struct model *m, struct model_ws *ws,
		   const float *params, int rows, int keep);

/*
 * Loss and gradients of the batch mean (after model_forward with keep): ws->row_loss gets each
 * row's loss and grads (n_params) the gradient of the mean loss over the rows.
 */
void model_backward(const struct backend *be, const struct model *m, struct model_ws *ws,
		    const float *params, float *grads, int rows);

/*
 * The same with the gradient of scale * (sum of the rows' losses): model_backward is
 * scale = 1/rows. The trainer passes 1/(rows * ranks) to fold the mean over ranks in,
 * and its step counters, which the loss op moves on (struct step_counters).
 */
void model_backward_scaled(const struct backend *be, const struct model *m, struct model_ws *ws,
			   const float *params, float *grads, int rows, float scale,
			   struct step_counters *counters);

/*
 * A training step's passes: model_forward (keep), then model_backward_scaled,
 * with the same results, except that where the top stage is dense its
 * forward, the loss and its input gradient go to the backend as one request
 * (backend_head: one op where the backend has it, else the three in order).
 */
void model_step(const struct backend *be, const struct model *m, struct model_ws *ws,
		const float *params, float *grads, int rows, float scale,
		struct step_counters *counters);

/* Add each row's hit (argmax == label) to ws->hits, after model_forward. */
void model_score(const struct backend *be, const struct model *m, struct model_ws *ws, int rows);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_MODEL_H */
