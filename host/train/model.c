/* model.c - the networks as lists of layers over a flat parameter buffer: see host/train/model.h. */
#include "train/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/idx.h"
#include "train/rng.h"

/* ---- building the layer list ---------------------------------------------------- */

/* A dense layer reading what the previous one wrote, W and b at the end of the flat buffer. */
static void add_dense(struct model *m, const char *name, int out, int relu)
{
	struct layer *l = &m->layer[m->n_layers];
	memset(l, 0, sizeof(*l));
	l->kind = LAYER_DENSE;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->relu = relu;
	l->in = m->n_layers ? m->layer[m->n_layers - 1].out : IDX_PIXELS;
	l->out = l->units = out;
	l->fan_in = l->in;
	l->w_off = m->n_params;
	l->b_off = l->w_off + (size_t)out * (size_t)l->in;
	m->n_params = l->b_off + (size_t)out;
	m->n_layers++;
}

void model_conv_layer(struct layer *l, int c, int h, int w, int oc, int k, int pad, int relu,
		      size_t w_off)
{
	memset(l, 0, sizeof(*l));
	l->kind = LAYER_CONV;
	l->relu = relu;
	l->conv = conv_shape_make(c, h, w, k, pad);
	l->in = c * h * w;
	l->out = oc * l->conv.oh * l->conv.ow;
	l->units = oc;
	l->fan_in = c * k * k;
	l->w_off = w_off;
	l->b_off = w_off + (size_t)oc * (size_t)l->fan_in;
}

void model_pool_layer(struct layer *l, int c, int h, int w, int k)
{
	memset(l, 0, sizeof(*l));
	l->kind = LAYER_POOL;
	l->pool = pool_shape_make(c, h, w, k);
	l->in = c * h * w;
	l->out = c * l->pool.oh * l->pool.ow;
}

/* A convolution of (c, h, w) inputs to oc channels with ReLU, k x k, stride 1, padding pad. */
static void add_conv(struct model *m, const char *name, int c, int h, int w, int oc, int k,
		     int pad)
{
	struct layer *l = &m->layer[m->n_layers++];
	model_conv_layer(l, c, h, w, oc, k, pad, 1, m->n_params);
	snprintf(l->name, sizeof(l->name), "%s", name);
	m->n_params = l->b_off + (size_t)oc;
}

/* A transpose of `features` per example: to (features, rows) when batch_last, else back. */
static void add_transpose(struct model *m, int features, int batch_last)
{
	struct layer *l = &m->layer[m->n_layers++];
	memset(l, 0, sizeof(*l));
	l->kind = LAYER_TRANSPOSE;
	l->in = l->out = features;
	l->batch_last = batch_last;
}

/* Max-pool k x k, stride k, of the previous convolution's output. */
static void add_pool(struct model *m, int k)
{
	const struct layer *prev = &m->layer[m->n_layers - 1];
	model_pool_layer(&m->layer[m->n_layers++], prev->units, prev->conv.oh, prev->conv.ow, k);
}

void model_init(struct model *m, enum model_kind kind, const int *hidden, int n_hidden)
{
	char name[8];
	memset(m, 0, sizeof(*m));
	m->kind = kind;
	if (kind == MODEL_LENET) {
		add_transpose(m, IDX_PIXELS, 1);
		add_conv(m, "conv1", 1, IDX_ROWS, IDX_COLS, 6, 5, 2);
		add_pool(m, 2);
		add_conv(m, "conv2", 6, m->layer[2].pool.oh, m->layer[2].pool.ow, 16, 5, 0);
		add_pool(m, 2);
		add_transpose(m, m->layer[4].out, 0);
		add_dense(m, "fc1", 120, 1);
		add_dense(m, "fc2", 84, 1);
		add_dense(m, "fc3", IDX_CLASSES, 0);
		return;
	}
	int n = 0;
	if (kind == MODEL_MLP)
		for (; n < n_hidden && n < CONFIG_MAX_HIDDEN; n++) {
			snprintf(name, sizeof(name), "fc%d", n);
			add_dense(m, name, hidden[n], 1);
		}
	snprintf(name, sizeof(name), "fc%d", n);
	add_dense(m, name, IDX_CLASSES, kind == MODEL_SEED); /* the seed's ReLU on the logits */
}

void model_init_params(const struct model *m, uint64_t seed, float *params)
{
	struct rng r = rng_make(seed, 0x1417ull);
	for (int i = 0; i < m->n_layers; i++) {
		const struct layer *l = &m->layer[i];
		if (!layer_has_params(l))
			continue;
		size_t nw = (size_t)l->units * (size_t)l->fan_in;
		float *w = params + l->w_off;
		float *b = params + l->b_off;
		if (m->kind == MODEL_MLP || m->kind == MODEL_LENET) {
			double bound = 1.0 / sqrt((double)l->fan_in);
			for (size_t j = 0; j < nw; j++)
				w[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
			for (int j = 0; j < l->units; j++)
				b[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
		} else {
			for (size_t j = 0; j < nw; j++)
				w[j] = (float)(0.01 * rng_normal(&r));
			for (int j = 0; j < l->units; j++)
				b[j] = 0.0f;
		}
	}
}

/* ---- tensors and description -------------------------------------------------------- */

/* The layer holding tensor i, or NULL. */
static const struct layer *tensor_layer(const struct model *m, int i)
{
	for (int l = 0; l < m->n_layers; l++) {
		if (!layer_has_params(&m->layer[l]))
			continue;
		if (i < 2)
			return &m->layer[l];
		i -= 2;
	}
	return NULL;
}

int model_n_tensors(const struct model *m)
{
	int n = 0;
	for (int l = 0; l < m->n_layers; l++)
		n += layer_has_params(&m->layer[l]) ? 2 : 0;
	return n;
}

void model_tensor_at(const struct model *m, int i, struct model_tensor *t)
{
	const struct layer *l = tensor_layer(m, i);
	int bias = i % 2;
	memset(t, 0, sizeof(*t));
	if (!l)
		return;
	snprintf(t->name, sizeof(t->name), "%s.%s", l->name, bias ? "bias" : "weight");
	t->shape[0] = l->units;
	if (bias) {
		t->ndim = 1;
		t->offset = l->b_off;
		t->count = (size_t)l->units;
	} else {
		t->offset = l->w_off;
		t->count = (size_t)l->units * (size_t)l->fan_in;
		if (l->kind == LAYER_CONV) {
			t->ndim = 4;
			t->shape[1] = l->conv.c;
			t->shape[2] = t->shape[3] = l->conv.k;
		} else {
			t->ndim = 2;
			t->shape[1] = l->fan_in;
		}
	}
}

void model_layers_text(const struct model *m, char *buf, size_t len)
{
	const struct layer *first = &m->layer[m->layer[0].kind == LAYER_TRANSPOSE];
	size_t used = first->kind == LAYER_CONV
			      ? (size_t)snprintf(buf, len, "%dx%dx%d", first->conv.c, first->conv.h,
						 first->conv.w)
			      : (size_t)snprintf(buf, len, "%d", IDX_PIXELS);
	for (int i = 0; i < m->n_layers && used < len; i++) {
		const struct layer *l = &m->layer[i];
		if (l->kind == LAYER_CONV)
			used += (size_t)snprintf(buf + used, len - used, ",conv%dk%dp%d", l->units,
						 l->conv.k, l->conv.pad);
		else if (l->kind == LAYER_POOL)
			used += (size_t)snprintf(buf + used, len - used, ",pool%d", l->pool.k);
		else if (l->kind == LAYER_DENSE)
			used += (size_t)snprintf(buf + used, len - used, ",%d", l->units);
	}
}

/* ---- workspace -------------------------------------------------------------------- */

int model_ws_create(const struct backend *be, const struct model *m, int max_rows,
		    struct model_ws *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->max_rows = max_rows;
	size_t rows = (size_t)max_rows, n_ones = rows;
	ws->act[0] = backend_alloc(be, rows * IDX_PIXELS * sizeof(float));
	if (!ws->act[0])
		goto out_free;
	for (int i = 0; i < m->n_layers; i++) {
		const struct layer *l = &m->layer[i];
		size_t n = rows * (size_t)l->out;
		ws->act[i + 1] = backend_alloc(be, n * sizeof(float));
		ws->dact[i + 1] = backend_alloc(be, n * sizeof(float));
		if (!ws->act[i + 1] || !ws->dact[i + 1])
			goto out_free;
		if (l->kind == LAYER_CONV) {
			size_t pixels = rows * (size_t)l->conv.oh * (size_t)l->conv.ow;
			ws->cols[i] = backend_alloc(be, pixels * (size_t)l->fan_in * sizeof(float));
			if (!ws->cols[i])
				goto out_free;
			n_ones = pixels > n_ones ? pixels : n_ones;
		} else if (l->kind == LAYER_POOL) {
			ws->arg[i] = backend_alloc(be, n * sizeof(int32_t));
			if (!ws->arg[i])
				goto out_free;
		}
	}
	ws->labels = backend_alloc(be, rows * sizeof(int32_t));
	ws->ones = backend_alloc(be, n_ones * sizeof(float));
	ws->row_loss = backend_alloc(be, rows * sizeof(float));
	ws->hits = backend_alloc(be, rows * sizeof(int32_t));
	if (!ws->labels || !ws->ones || !ws->row_loss || !ws->hits)
		goto out_free;
	float *ones = xmalloc(n_ones * sizeof(float));
	for (size_t i = 0; i < n_ones; i++)
		ones[i] = 1.0f;
	backend_upload(be, ws->ones, ones, n_ones * sizeof(float));
	free(ones);
	return 0;

out_free:
	model_ws_destroy(be, ws);
	return -1;
}

void model_ws_destroy(const struct backend *be, struct model_ws *ws)
{
	for (int l = 0; l <= MODEL_MAX_LAYERS; l++) {
		backend_free(be, ws->act[l]);
		backend_free(be, ws->dact[l]);
		if (l < MODEL_MAX_LAYERS) {
			backend_free(be, ws->cols[l]);
			backend_free(be, ws->arg[l]);
		}
	}
	backend_free(be, ws->labels);
	backend_free(be, ws->ones);
	backend_free(be, ws->row_loss);
	backend_free(be, ws->hits);
	memset(ws, 0, sizeof(*ws));
}

/* ---- forward and backward ------------------------------------------------------------ */

/* Row-major GEMM through the backend. */
static void gemm(const struct backend *be, int ta, int tb, int m, int n, int k, const float *a,
		 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	struct gemm_req r = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 1.0f,
			     .a = a, .lda = lda, .b = b, .ldb = ldb, .beta = beta, .c = c, .ldc = ldc};
	backend_gemm(be, &r);
}

/* Output pixels of a conv layer over a batch: the columns of its im2col matrix. */
static int conv_pixels(const struct layer *l, int rows)
{
	return rows * l->conv.oh * l->conv.ow;
}

void layer_forward(const struct backend *be, const struct layer *l, const float *params,
		   const float *x, float *y, float *cols, int32_t *arg, int rows)
{
	const float *w = params + l->w_off, *b = params + l->b_off;
	switch (l->kind) {
	case LAYER_DENSE:
		/* y (rows, out) = x (rows, in) * W^T (in, out), then bias and ReLU */
		gemm(be, 0, 1, rows, l->units, l->in, x, l->in, w, l->in, 0.0f, y, l->units);
		backend_bias_act(be, y, b, rows, l->units, l->relu);
		break;
	case LAYER_CONV: {
		/* y (oc, P) = W (oc, c*k*k) * cols (c*k*k, P), P = oh*ow*rows pixels */
		int p = conv_pixels(l, rows);
		backend_im2col(be, x, &l->conv, rows, cols);
		gemm(be, 0, 0, l->units, p, l->fan_in, w, l->fan_in, cols, p, 0.0f, y, p);
		backend_channel_bias_act(be, y, b, l->units, (size_t)p, l->relu);
		break;
	}
	case LAYER_POOL:
		backend_maxpool(be, x, &l->pool, rows, y, arg);
		break;
	case LAYER_TRANSPOSE:
		if (l->batch_last)
			backend_transpose(be, x, rows, l->in, y);
		else
			backend_transpose(be, x, l->in, rows, y);
		break;
	}
}

void layer_backward(const struct backend *be, const struct layer *l, const float *params,
		    const float *x, const float *y, float *dy, float *grads, float *dx, float *cols,
		    const int32_t *arg, const float *ones, int rows)
{
	const float *w = params + l->w_off;
	float *dw = grads + l->w_off, *db = grads + l->b_off;
	if (l->relu)
		backend_relu_backward(be, dy, y, (size_t)rows * (size_t)l->out);
	switch (l->kind) {
	case LAYER_DENSE:
		/* dW (out, in) = dy^T (out, rows) * x (rows, in) */
		gemm(be, 1, 0, l->units, l->in, rows, dy, l->units, x, l->in, 0.0f, dw, l->in);
		/* db (1, out) = ones (1, rows) * dy (rows, out) */
		gemm(be, 0, 0, 1, l->units, rows, ones, rows, dy, l->units, 0.0f, db, l->units);
		/* dx (rows, in) = dy (rows, out) * W (out, in) */
		if (dx)
			gemm(be, 0, 0, rows, l->in, l->units, dy, l->units, w, l->in, 0.0f, dx, l->in);
		break;
	case LAYER_CONV: {
		int p = conv_pixels(l, rows);
		/* dW (oc, c*k*k) = dy (oc, P) * cols^T (P, c*k*k) */
		gemm(be, 0, 1, l->units, l->fan_in, p, dy, p, cols, p, 0.0f, dw, l->fan_in);
		/* db (oc, 1) = dy (oc, P) * ones (P, 1) */
		gemm(be, 0, 1, l->units, 1, p, dy, p, ones, p, 0.0f, db, 1);
		/* dcols (c*k*k, P) = W^T * dy, into cols; then each input pixel gathers its taps */
		if (dx) {
			gemm(be, 1, 0, l->fan_in, p, l->units, w, l->fan_in, dy, p, 0.0f, cols, p);
			backend_col2im(be, cols, &l->conv, rows, dx);
		}
		break;
	}
	case LAYER_POOL:
		backend_maxpool_backward(be, dy, arg, &l->pool, rows, dx);
		break;
	case LAYER_TRANSPOSE: /* the gradient goes back through the opposite transpose */
		if (!dx)
			break;
		if (l->batch_last)
			backend_transpose(be, dy, l->in, rows, dx);
		else
			backend_transpose(be, dy, rows, l->in, dx);
		break;
	}
}

void model_forward(const struct backend *be, const struct model *m, struct model_ws *ws,
		   const float *params, int rows)
{
	for (int i = 0; i < m->n_layers; i++)
		layer_forward(be, &m->layer[i], params, ws->act[i], ws->act[i + 1], ws->cols[i],
			      ws->arg[i], rows);
}

void model_backward(const struct backend *be, const struct model *m, struct model_ws *ws,
		    const float *params, float *grads, int rows)
{
	model_backward_scaled(be, m, ws, params, grads, rows, 1.0f / (float)rows);
}

void model_backward_scaled(const struct backend *be, const struct model *m, struct model_ws *ws,
			   const float *params, float *grads, int rows, float scale)
{
	int top = m->n_layers;
	backend_softmax_xent(be, ws->act[top], ws->labels, rows, IDX_CLASSES, scale, ws->row_loss,
			      ws->dact[top]);
	/*
	 * A layer's input gradient is computed only where a layer below it holds
	 * parameters: the input needs none, nor does LeNet-5's first convolution,
	 * which has only the transpose of the input below it (its col2im and the
	 * GEMM before it would be a fifth of the step's work, thrown away).
	 */
	int lowest = 0;
	while (lowest < m->n_layers && !layer_has_params(&m->layer[lowest]))
		lowest++;
	for (int i = m->n_layers - 1; i >= 0; i--)
		layer_backward(be, &m->layer[i], params, ws->act[i], ws->act[i + 1], ws->dact[i + 1],
			       grads, i > lowest ? ws->dact[i] : NULL, ws->cols[i], ws->arg[i],
			       ws->ones, rows);
}

void model_score(const struct backend *be, const struct model *m, struct model_ws *ws, int rows)
{
	backend_argmax_hits(be, ws->act[m->n_layers], ws->labels, rows, IDX_CLASSES, ws->hits);
}
