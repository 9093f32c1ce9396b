/* model.c - the networks as lists of layers over a flat parameter buffer: see host/train/model.h. */
#include "train/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/idx.h"
#include "train/head.h"
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

/* ---- stages ------------------------------------------------------------------------- */

void model_plan_make(const struct model *m, struct model_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	int i = 0;
	if (m->n_layers > 0 && m->layer[0].kind == LAYER_TRANSPOSE && m->layer[0].batch_last) {
		plan->input_batch_last = 1;
		i = 1;
	}
	while (i < m->n_layers) {
		const struct layer *l = &m->layer[i];
		struct stage *st = &plan->stage[plan->n++];
		memset(st, 0, sizeof(*st));
		st->layer = i;
		st->relu = l->relu;
		st->out = l->out;
		if (l->kind == LAYER_DENSE) {
			st->kind = STAGE_DENSE;
			i++;
			continue;
		}
		const struct layer *pool = i + 1 < m->n_layers ? &m->layer[i + 1] : NULL;
		if (l->kind != LAYER_CONV || !l->relu || !pool || pool->kind != LAYER_POOL ||
		    pool->pool.c != l->units || l->conv.oh != pool->pool.h || l->conv.ow != pool->pool.w ||
		    l->conv.oh % pool->pool.k || l->conv.ow % pool->pool.k)
			die(1, "model: layer %d (%s) is not a dense layer nor a convolution with ReLU "
			       "and a max-pool tiling its output",
			    i, l->name);
		st->kind = STAGE_CONV;
		st->pool = i + 1;
		if (i + 2 >= m->n_layers)
			die(1, "model: a convolution cannot give the logits");
		st->out = pool->out;
		i += 2;
		if (i < m->n_layers && m->layer[i].kind == LAYER_TRANSPOSE && !m->layer[i].batch_last) {
			st->batch_first = 1;
			i++;
		}
	}
}

struct conv_stage model_conv_stage(const struct model *m, const struct stage *s, int rows)
{
	struct conv_stage c = {&m->layer[s->layer].conv, &m->layer[s->pool].pool,
			       m->layer[s->layer].units, rows, s->batch_first};
	return c;
}

/* ---- workspace -------------------------------------------------------------------- */

int model_ws_create(const struct backend *be, const struct model *m, int max_rows,
		    struct model_ws *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->max_rows = max_rows;
	model_plan_make(m, &ws->plan);
	const struct model_plan *plan = &ws->plan;
	size_t rows = (size_t)max_rows;
	ws->act[0] = backend_alloc(be, rows * IDX_PIXELS * sizeof(float));
	if (!ws->act[0])
		goto out_free;
	for (int s = 0; s < plan->n; s++) {
		const struct stage *st = &plan->stage[s];
		const struct layer *l = &m->layer[st->layer];
		ws->act[s + 1] = backend_alloc(be, rows * (size_t)st->out * sizeof(float));
		/* The gradient at the pre-activation: the layer's own output size. */
		ws->dz[s] = backend_alloc(be, rows * (size_t)l->out * sizeof(float));
		if (!ws->act[s + 1] || !ws->dz[s])
			goto out_free;
		if (st->kind == STAGE_CONV) {
			size_t pixels = rows * (size_t)l->conv.oh * (size_t)l->conv.ow;
			/* No im2col matrix where the weight gradient reads x itself. */
			int keep_cols = !backend_conv_wgrad_reads_x(be);
			if (keep_cols)
				ws->cols[s] = backend_alloc(be, pixels * (size_t)l->fan_in * sizeof(float));
			ws->arg[s] = backend_alloc(be, rows * (size_t)st->out * sizeof(int32_t));
			ws->dy[s] = backend_alloc(be, rows * (size_t)st->out * sizeof(float));
			if ((keep_cols && !ws->cols[s]) || !ws->arg[s] || !ws->dy[s])
				goto out_free;
		} else if (st->relu && s + 1 < plan->n && plan->stage[s + 1].kind == STAGE_DENSE) {
			size_t bytes = backend_relu_mask_bytes(be, max_rows, st->out);
			if (bytes && !(ws->relu_mask[s] = backend_alloc(be, bytes)))
				goto out_free;
		}
	}
	ws->labels = backend_alloc(be, rows * sizeof(int32_t));
	ws->row_loss = backend_alloc(be, rows * sizeof(float));
	ws->hits = backend_alloc(be, rows * sizeof(int32_t));
	if (!ws->labels || !ws->row_loss || !ws->hits)
		goto out_free;
	return 0;

out_free:
	model_ws_destroy(be, ws);
	return -1;
}

void model_ws_destroy(const struct backend *be, struct model_ws *ws)
{
	for (int s = 0; s <= MODEL_MAX_LAYERS; s++) {
		backend_free(be, ws->act[s]);
		if (s < MODEL_MAX_LAYERS) {
			backend_free(be, ws->dz[s]);
			backend_free(be, ws->dy[s]);
			backend_free(be, ws->cols[s]);
			backend_free(be, ws->arg[s]);
			backend_free(be, ws->relu_mask[s]);
		}
	}
	backend_free(be, ws->labels);
	backend_free(be, ws->row_loss);
	backend_free(be, ws->hits);
	memset(ws, 0, sizeof(*ws));
}

/* ---- forward and backward ------------------------------------------------------------ */

/* Row-major GEMM through the backend, plain; callers add an epilogue to the request. */
static struct gemm_req gemm_of(int ta, int tb, int m, int n, int k, const float *a, int lda,
			       const float *b, int ldb, float *c, int ldc)
{
	struct gemm_req r = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 1.0f,
			     .a = a, .lda = lda, .b = b, .ldb = ldb, .beta = 0.0f, .c = c, .ldc = ldc};
	return r;
}

/* A dense stage's forward: y (rows, out) = x (rows, in) * W^T (in, out), then bias and ReLU. */
static struct gemm_req dense_forward_req(const struct model *m, const struct model_ws *ws,
					 const float *params, int s, int rows, int keep)
{
	const struct stage *st = &ws->plan.stage[s];
	const struct layer *l = &m->layer[st->layer];
	struct gemm_req r = gemm_of(0, 1, rows, l->units, l->in, ws->act[s], l->in,
				    params + l->w_off, l->in, ws->act[s + 1], l->units);
	r.epilogue = st->relu ? GEMM_EPILOGUE_BIAS_RELU : GEMM_EPILOGUE_BIAS;
	r.bias = params + l->b_off;
	r.relu_mask = keep ? ws->relu_mask[s] : NULL;
	return r;
}

/* Stages [0, end) forward. */
static void forward_stages(const struct backend *be, const struct model *m, struct model_ws *ws,
			   const float *params, int rows, int keep, int end)
{
	const struct model_plan *plan = &ws->plan;
	for (int s = 0; s < end; s++) {
		const struct stage *st = &plan->stage[s];
		const struct layer *l = &m->layer[st->layer];
		backend_label(be, l->name, "forward");
		if (st->kind == STAGE_CONV) {
			struct conv_stage cs = model_conv_stage(m, st, rows);
			backend_conv_forward(be, &cs, ws->act[s], params + l->w_off, params + l->b_off,
					     ws->act[s + 1], ws->arg[s], keep ? ws->cols[s] : NULL);
			continue;
		}
		struct gemm_req r = dense_forward_req(m, ws, params, s, rows, keep);
		backend_gemm(be, &r);
	}
}

void model_forward(const struct backend *be, const struct model *m, struct model_ws *ws,
		   const float *params, int rows, int keep)
{
	forward_stages(be, m, ws, params, rows, keep, ws->plan.n);
}

/*
 * Stage s's dW and db from dz[s] (and, for a dense stage, its input act[s]);
 * a convolution's names its input through *im2col, which must outlive it.
 */
static struct gemm_req weight_grad_req(const struct model *m, struct model_ws *ws, int s,
				       float *grads, int rows, struct gemm_im2col *im2col)
{
	const struct stage *st = &ws->plan.stage[s];
	const struct layer *l = &m->layer[st->layer];
	struct gemm_req r;
	if (st->kind == STAGE_DENSE) {
		/* dW (out, in) = dz^T (out, rows) * x (rows, in); db = the sums over rows of dz */
		r = gemm_of(1, 0, l->units, l->in, rows, ws->dz[s], l->units, ws->act[s], l->in,
			    grads + l->w_off, l->in);
	} else {
		/* dW (oc, c*k*k) = dz (oc, P) * cols^T (P, c*k*k); db = the sums over P of dz */
		int p = rows * l->conv.oh * l->conv.ow;
		r = gemm_of(0, 1, l->units, l->fan_in, p, ws->dz[s], p, ws->cols[s], p,
			    grads + l->w_off, l->fan_in);
		*im2col = (struct gemm_im2col){ws->act[s], l->conv, rows};
		r.b_im2col = im2col; /* cols is x's im2col matrix: a backend may read x instead */
	}
	r.bias_grad = grads + l->b_off;
	/*
	 * Nothing reads dW and db before the update, and nothing below overwrites
	 * dz[s] or the input, so a backend may compute them beside the input
	 * gradients that follow (the lowest stage has none: it runs in order).
	 */
	r.beside = s > 0;
	return r;
}

static void stage_weight_grad(const struct backend *be, const struct model *m,
			      struct model_ws *ws, int s, float *grads, int rows)
{
	struct gemm_im2col im2col;
	struct gemm_req r = weight_grad_req(m, ws, s, grads, rows, &im2col);
	backend_label(be, m->layer[ws->plan.stage[s].layer].name, "weight grad");
	backend_gemm(be, &r);
}

/* A dense stage's input gradient: into the stage below's dz (through its ReLU) or dy. */
static struct gemm_req dense_input_grad_req(const struct model *m, const struct model_ws *ws,
					    const float *params, int s, int rows)
{
	const struct stage *below = &ws->plan.stage[s - 1];
	const struct layer *l = &m->layer[ws->plan.stage[s].layer];
	int dense_below = below->kind == STAGE_DENSE;
	/* dx (rows, in) = dz (rows, out) * W (out, in) */
	struct gemm_req r = gemm_of(0, 0, rows, l->in, l->units, ws->dz[s], l->units,
				    params + l->w_off, l->in,
				    dense_below ? ws->dz[s - 1] : ws->dy[s - 1], l->in);
	if (dense_below && below->relu) {
		r.epilogue = GEMM_EPILOGUE_DRELU;
		r.act = ws->act[s];
		r.relu_mask = ws->relu_mask[s - 1];
	}
	return r;
}

static void dense_input_grad(const struct backend *be, const struct model *m,
			     struct model_ws *ws, const float *params, int s, int rows)
{
	struct gemm_req r = dense_input_grad_req(m, ws, params, s, rows);
	backend_label(be, m->layer[ws->plan.stage[s].layer].name, "input grad");
	backend_gemm(be, &r);
}

/* The loss on the logits: row losses, dlogits (the top stage's dz) scaled, the counters moved. */
static struct xent_req loss_req(struct model_ws *ws, int rows, float scale,
				struct step_counters *counters)
{
	int top = ws->plan.n - 1;
	struct xent_req x = {.logits = model_logits(ws), .labels = ws->labels, .rows = rows,
			     .cols = IDX_CLASSES, .scale = scale, .row_loss = ws->row_loss,
			     .dlogits = ws->dz[top], .relu = ws->plan.stage[top].relu,
			     .counters = counters};
	return x;
}

/*
 * Stages from..0 backward, from dz[from] (or, for a convolution under a
 * dense stage, from dy[from]: its pool's gradient first, unless pooled).
 */
static void backward_stages(const struct backend *be, const struct model *m,
			    struct model_ws *ws, const float *params, float *grads, int rows,
			    int from, int pooled);

void model_backward(const struct backend *be, const struct model *m, struct model_ws *ws,
		    const float *params, float *grads, int rows)
{
	model_backward_scaled(be, m, ws, params, grads, rows, 1.0f / (float)rows, NULL);
}

void model_backward_scaled(const struct backend *be, const struct model *m, struct model_ws *ws,
			   const float *params, float *grads, int rows, float scale,
			   struct step_counters *counters)
{
	struct xent_req x = loss_req(ws, rows, scale, counters);
	backend_label(be, "", "loss");
	backend_softmax_xent(be, &x);
	backward_stages(be, m, ws, params, grads, rows, ws->plan.n - 1, 0);
}

void model_step(const struct backend *be, const struct model *m, struct model_ws *ws,
		const float *params, float *grads, int rows, float scale,
		struct step_counters *counters)
{
	int top = ws->plan.n - 1;
	if (ws->plan.stage[top].kind != STAGE_DENSE) {
		model_forward(be, m, ws, params, rows, 1);
		model_backward_scaled(be, m, ws, params, grads, rows, scale, counters);
		return;
	}
	/*
	 * The head: the run of dense stages at the top (at most HEAD_MAX_BELOW
	 * under the top), their forwards, the loss and their gradients; the
	 * stages under it forward before and backward after.
	 */
	int lo = top;
	while (lo > 0 && top - lo < HEAD_MAX_BELOW && ws->plan.stage[lo - 1].kind == STAGE_DENSE)
		lo--;
	forward_stages(be, m, ws, params, rows, 1, lo);
	struct head_req h;
	memset(&h, 0, sizeof(h));
	h.forward = dense_forward_req(m, ws, params, top, rows, 1);
	h.loss = loss_req(ws, rows, scale, counters);
	if (top > 0)
		h.input_grad = dense_input_grad_req(m, ws, params, top, rows);
	h.weight_grad = weight_grad_req(m, ws, top, grads, rows, NULL);
	h.n_below = top - lo;
	for (int s = lo; s < top; s++) {
		struct head_below *b = &h.below[s - lo];
		b->layer = m->layer[ws->plan.stage[s].layer].name;
		b->forward = dense_forward_req(m, ws, params, s, rows, 1);
		if (s > 0)
			b->input_grad = dense_input_grad_req(m, ws, params, s, rows);
		b->weight_grad = weight_grad_req(m, ws, s, grads, rows, NULL);
	}
	if (lo > 0) { /* a convolution stage: its pool's gradient from the lowest dense stage's */
		const struct stage *conv = &ws->plan.stage[lo - 1];
		h.pool = model_conv_stage(m, conv, rows);
		h.pool_layer = m->layer[conv->layer].name;
		h.pool_y = ws->act[lo];
		h.pool_arg = ws->arg[lo - 1];
		h.pool_dz = ws->dz[lo - 1];
	}
	head_run(be, &h, m->layer[ws->plan.stage[top].layer].name);
	if (lo > 0)
		backward_stages(be, m, ws, params, grads, rows, lo - 1, 1);
	else
		backend_join(be); /* every gradient done before what follows reads it */
}

static void backward_stages(const struct backend *be, const struct model *m,
			    struct model_ws *ws, const float *params, float *grads, int rows,
			    int from, int pooled)
{
	const struct model_plan *plan = &ws->plan;
	int top = plan->n - 1;
	/*
	 * The lowest stage computes no input gradient: nothing below it learns
	 * (the input needs none; for LeNet-5 its first convolution's would be a
	 * fifth of the step's work, thrown away).
	 */
	for (int s = from; s >= 0; s--) {
		const struct stage *st = &plan->stage[s];
		const struct layer *l = &m->layer[st->layer];
		if (st->kind == STAGE_CONV && s < top && plan->stage[s + 1].kind == STAGE_DENSE &&
		    !(s == from && pooled)) {
			struct conv_stage cs = model_conv_stage(m, st, rows);
			backend_label(be, l->name, "pool grad");
			backend_pool_backward(be, &cs, ws->dy[s], ws->act[s + 1], ws->arg[s], ws->dz[s]);
		}
		stage_weight_grad(be, m, ws, s, grads, rows);
		if (s == 0)
			break;
		if (st->kind == STAGE_DENSE) {
			dense_input_grad(be, m, ws, params, s, rows);
		} else {
			const struct stage *below = &plan->stage[s - 1];
			if (below->kind != STAGE_CONV)
				die(1, "model: a dense stage under a convolution is not supported");
			struct conv_stage cs = model_conv_stage(m, st, rows);
			struct conv_stage cb = model_conv_stage(m, below, rows);
			backend_label(be, l->name, "input grad");
			backend_conv_backward_data(be, &cs, params + l->w_off, ws->dz[s], &cb,
						   ws->act[s], ws->arg[s - 1], ws->dz[s - 1]);
		}
	}
	backend_join(be); /* every gradient done before what follows reads it */
}

void model_score(const struct backend *be, const struct model *m, struct model_ws *ws, int rows)
{
	(void)m;
	backend_argmax_hits(be, model_logits(ws), ws->labels, rows, IDX_CLASSES, ws->hits);
}
