/* model.c - Dense stacks over a flat parameter buffer: see include/model.h. */
#include "train/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/idx.h"
#include "train/rng.h"

void model_init(struct model *m, enum model_kind kind, const int *hidden, int n_hidden)
{
	memset(m, 0, sizeof(*m));
	m->kind = kind;
	m->dims[0] = IDX_PIXELS;
	int n = 0;
	if (kind == MODEL_MLP)
		for (; n < n_hidden && n < CONFIG_MAX_HIDDEN; n++)
			m->dims[n + 1] = hidden[n];
	m->dims[n + 1] = IDX_CLASSES;
	m->n_layers = n + 1;
	m->relu_out = kind == MODEL_SEED;
	size_t off = 0;
	for (int l = 0; l < m->n_layers; l++) {
		m->w_off[l] = off;
		off += (size_t)m->dims[l + 1] * (size_t)m->dims[l];
		m->b_off[l] = off;
		off += (size_t)m->dims[l + 1];
	}
	m->n_params = off;
}

void model_init_params(const struct model *m, uint64_t seed, float *params)
{
	struct rng r = rng_make(seed, 0x1417ull);
	for (int l = 0; l < m->n_layers; l++) {
		size_t nw = (size_t)m->dims[l + 1] * (size_t)m->dims[l];
		float *w = params + m->w_off[l];
		float *b = params + m->b_off[l];
		if (m->kind == MODEL_MLP) {
			double bound = 1.0 / sqrt((double)m->dims[l]);
			for (size_t i = 0; i < nw; i++)
				w[i] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
			for (int i = 0; i < m->dims[l + 1]; i++)
				b[i] = (float)((2.0 * rng_uniform(&r) - 1.0) * bound);
		} else {
			for (size_t i = 0; i < nw; i++)
				w[i] = (float)(0.01 * rng_normal(&r));
			for (int i = 0; i < m->dims[l + 1]; i++)
				b[i] = 0.0f;
		}
	}
}

void model_tensor_name(int layer, int is_bias, char *buf, size_t len)
{
	snprintf(buf, len, "fc%d.%s", layer, is_bias ? "bias" : "weight");
}

int model_ws_create(const struct backend *be, const struct model *m, int max_rows,
		    struct model_ws *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->max_rows = max_rows;
	size_t rows = (size_t)max_rows;
	for (int l = 0; l <= m->n_layers; l++) {
		ws->act[l] = backend_alloc(be, rows * (size_t)m->dims[l] * sizeof(float));
		if (!ws->act[l])
			goto out_free;
		if (l > 0) {
			ws->dact[l] = backend_alloc(be, rows * (size_t)m->dims[l] * sizeof(float));
			if (!ws->dact[l])
				goto out_free;
		}
	}
	ws->labels = backend_alloc(be, rows * sizeof(int32_t));
	ws->ones = backend_alloc(be, rows * sizeof(float));
	ws->row_loss = backend_alloc(be, rows * sizeof(float));
	ws->hits = backend_alloc(be, rows * sizeof(int32_t));
	if (!ws->labels || !ws->ones || !ws->row_loss || !ws->hits)
		goto out_free;
	float *ones = xmalloc(rows * sizeof(float));
	for (size_t i = 0; i < rows; i++)
		ones[i] = 1.0f;
	backend_upload(be, ws->ones, ones, rows * sizeof(float));
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
	}
	backend_free(be, ws->labels);
	backend_free(be, ws->ones);
	backend_free(be, ws->row_loss);
	backend_free(be, ws->hits);
	memset(ws, 0, sizeof(*ws));
}

/* Row-major GEMM through the backend. */
static void gemm(const struct backend *be, int ta, int tb, int m, int n, int k, const float *a,
		 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	struct gemm_req r = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 1.0f,
			     .a = a, .lda = lda, .b = b, .ldb = ldb, .beta = beta, .c = c, .ldc = ldc};
	backend_gemm(be, &r);
}

static int layer_relu(const struct model *m, int l)
{
	return l < m->n_layers - 1 || m->relu_out;
}

void model_forward(const struct backend *be, const struct model *m, struct model_ws *ws,
		   const float *params, int rows)
{
	for (int l = 0; l < m->n_layers; l++) {
		int in = m->dims[l], out = m->dims[l + 1];
		/* act[l+1] (rows, out) = act[l] (rows, in) * W^T (in, out) */
		gemm(be, 0, 1, rows, out, in, ws->act[l], in, params + m->w_off[l], in, 0.0f,
		     ws->act[l + 1], out);
		backend_bias_act(be, ws->act[l + 1], params + m->b_off[l], rows, out,
				  layer_relu(m, l));
	}
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
	backend_softmax_xent(be, ws->act[top], ws->labels, rows, m->dims[top], scale,
			      ws->row_loss, ws->dact[top]);
	for (int l = m->n_layers - 1; l >= 0; l--) {
		int in = m->dims[l], out = m->dims[l + 1];
		float *dz = ws->dact[l + 1]; /* (rows, out) */
		if (layer_relu(m, l))
			backend_relu_backward(be, dz, ws->act[l + 1], (size_t)rows * out);
		/* dW (out, in) = dz^T (out, rows) * act[l] (rows, in) */
		gemm(be, 1, 0, out, in, rows, dz, out, ws->act[l], in, 0.0f, grads + m->w_off[l], in);
		/* db (1, out) = ones (1, rows) * dz (rows, out) */
		gemm(be, 0, 0, 1, out, rows, ws->ones, rows, dz, out, 0.0f, grads + m->b_off[l], out);
		/* dact[l] (rows, in) = dz (rows, out) * W (out, in); the input needs none */
		if (l > 0)
			gemm(be, 0, 0, rows, in, out, dz, out, params + m->w_off[l], in, 0.0f,
			     ws->dact[l], in);
	}
}

void model_score(const struct backend *be, const struct model *m, struct model_ws *ws, int rows)
{
	int top = m->n_layers;
	backend_argmax_hits(be, ws->act[top], ws->labels, rows, m->dims[top], ws->hits);
}
