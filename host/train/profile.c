/*
 * profile.c - --profile's step, op by op: see host/train/profile.h.
 *
 * The wrapping backend forwards every op to the real one. Around each math or
 * communication op it either records one event before and one after (the
 * timing pass) or captures the op alone and counts the graph's nodes (the
 * counting pass). Memory, copies and settings pass straight through.
 */
#include "train/profile.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/head.h"

struct wrap {
	const struct backend *inner;
	const struct backend *self; /* the wrapping backend */
	struct profile *out;
	int counting;            /* 1: capture each op for its kernels; 0: time it */
	int next;                /* the op's row in out->rows (the passes meet the same ops) */
	void **ev;               /* timing: 2 per row, start and end */
	int n_ev;
	void *graph_open;        /* counting: the op's capture began */
	char layer[16], phase[24];
};

static struct wrap *wrap_of(void *ctx)
{
	return (struct wrap *)ctx;
}

/* Start op number w->next: its row (made in the first pass), its bracket. */
static int op_begin(struct wrap *w, const char *op, const char *shape)
{
	struct profile *p = w->out;
	int i = w->next++;
	if (i == p->n) {
		if (p->n == p->cap) {
			p->cap = p->cap ? 2 * p->cap : 32;
			p->rows = xrealloc(p->rows, (size_t)p->cap * sizeof(*p->rows));
		}
		struct profile_row *r = &p->rows[p->n++];
		memset(r, 0, sizeof(*r));
		snprintf(r->layer, sizeof(r->layer), "%s", w->layer);
		snprintf(r->phase, sizeof(r->phase), "%s", w->phase);
		snprintf(r->op, sizeof(r->op), "%s", op);
		snprintf(r->shape, sizeof(r->shape), "%s", shape);
		r->kernels = -1;
	}
	if (w->counting) {
		w->graph_open = (void *)(uintptr_t)(backend_capture_begin(w->inner) == 0);
	} else {
		if (2 * (i + 1) > w->n_ev) {
			int n = 2 * (i + 1) + 32;
			w->ev = xrealloc(w->ev, (size_t)n * sizeof(*w->ev));
			for (int e = w->n_ev; e < n; e++)
				w->ev[e] = backend_event_create(w->inner);
			w->n_ev = n;
		}
		backend_event_record(w->inner, w->ev[2 * i]);
	}
	return i;
}

/* op_begin with the shape "N UNIT" ("535818 floats"): the ops over a flat buffer. */
static int op_begin_count(struct wrap *w, const char *op, size_t n, const char *unit)
{
	char shape[64];
	snprintf(shape, sizeof(shape), "%zu %s", n, unit);
	return op_begin(w, op, shape);
}

static void op_end(struct wrap *w, int i)
{
	if (w->counting) {
		if (w->graph_open) {
			void *g = backend_capture_end(w->inner);
			if (g)
				w->out->rows[i].kernels = (int)backend_graph_nodes(w->inner, g);
			backend_graph_destroy(w->inner, g);
		}
		w->graph_open = NULL;
	} else {
		backend_event_record(w->inner, w->ev[2 * i + 1]);
	}
}

/* ---- pass-through ---------------------------------------------------------------------- */

static void *w_alloc(void *ctx, size_t bytes)
{
	return backend_alloc(wrap_of(ctx)->inner, bytes);
}
static void w_free(void *ctx, void *p)
{
	backend_free(wrap_of(ctx)->inner, p);
}
static void w_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
	backend_upload(wrap_of(ctx)->inner, dst, src, bytes);
}
static void w_download(void *ctx, void *dst, const void *src, size_t bytes)
{
	backend_download(wrap_of(ctx)->inner, dst, src, bytes);
}
static int w_conv_wgrad_reads_x(void *ctx)
{
	return backend_conv_wgrad_reads_x(wrap_of(ctx)->inner);
}
static size_t w_relu_mask_bytes(void *ctx, int rows, int cols)
{
	return backend_relu_mask_bytes(wrap_of(ctx)->inner, rows, cols);
}
static void w_synchronize(void *ctx)
{
	backend_synchronize(wrap_of(ctx)->inner);
}
static void w_set_position(void *ctx, int epoch, int step)
{
	backend_set_position(wrap_of(ctx)->inner, epoch, step);
}
static void w_label(void *ctx, const char *layer, const char *phase)
{
	struct wrap *w = wrap_of(ctx);
	snprintf(w->layer, sizeof(w->layer), "%s", layer ? layer : "");
	snprintf(w->phase, sizeof(w->phase), "%s", phase ? phase : "");
}

/* ---- the bracketed ops ----------------------------------------------------------------- */

static void w_gemm(void *ctx, const struct gemm_req *r)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	snprintf(shape, sizeof(shape), "%c%c %dx%dx%d%s%s", r->trans_a ? 't' : 'n',
		 r->trans_b ? 't' : 'n', r->m, r->n, r->k,
		 r->epilogue == GEMM_EPILOGUE_BIAS	? " bias"
		 : r->epilogue == GEMM_EPILOGUE_BIAS_RELU ? " bias+relu"
		 : r->epilogue == GEMM_EPILOGUE_DRELU	? " drelu"
							: "",
		 r->bias_grad ? " bias_grad" : "");
	/* Timed alone, so in order: a product sent beside would run outside its events. */
	struct gemm_req in_order = *r;
	in_order.beside = 0;
	int i = op_begin(w, "gemm", shape);
	backend_gemm(w->inner, &in_order);
	op_end(w, i);
}

static void w_gather(void *ctx, const struct gather_req *g)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	snprintf(shape, sizeof(shape), "%d x %d", g->count, g->pixels);
	int i = op_begin(w, "gather", shape);
	backend_gather(w->inner, g);
	op_end(w, i);
}

static void w_advance(void *ctx, int32_t *cursor, int delta)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin(w, "advance", "1");
	backend_advance(w->inner, cursor, delta);
	op_end(w, i);
}

static void w_softmax_xent(void *ctx, const struct xent_req *r)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	snprintf(shape, sizeof(shape), "%d x %d", r->rows, r->cols);
	int i = op_begin(w, "softmax_xent", shape);
	backend_softmax_xent(w->inner, r);
	op_end(w, i);
}

/*
 * The step's head: one op where the backend runs it as one (its plan may
 * fuse it), else its ops, each timed as the step runs them.
 */
static void w_head(void *ctx, const struct head_req *r)
{
	struct wrap *w = wrap_of(ctx);
	if (!w->inner->ops->head) {
		char layer[sizeof(w->layer)];
		snprintf(layer, sizeof(layer), "%s", w->layer);
		head_run_parts(w->self, r, layer);
		return;
	}
	char shape[64];
	int used = snprintf(shape, sizeof(shape), "%d x %d x %d%s", r->loss.rows, r->loss.cols,
			    r->forward.k, r->input_grad.m > 0 ? " + dx" : "");
	if (r->n_below > 0 && used > 0 && (size_t)used < sizeof(shape))
		snprintf(shape + used, sizeof(shape) - (size_t)used, ", %d dense below", r->n_below);
	int i = op_begin(w, "head", shape);
	head_run(w->inner, r, w->layer);
	op_end(w, i);
}

static void w_argmax_hits(void *ctx, const float *logits, const int32_t *labels, int rows,
			  int cols, int32_t *hits)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	snprintf(shape, sizeof(shape), "%d x %d", rows, cols);
	int i = op_begin(w, "argmax_hits", shape);
	backend_argmax_hits(w->inner, logits, labels, rows, cols, hits);
	op_end(w, i);
}

static void update_shape(char *shape, size_t len, size_t n, const struct gather_req *then)
{
	if (then)
		snprintf(shape, len, "%zu + gather %d x %d", n, then->count, then->pixels);
	else
		snprintf(shape, len, "%zu", n);
}

static void w_sgd_update(void *ctx, float *p, const float *g, float *v, size_t n, const float *lr,
			 const struct step_counters *counters, float momentum, float weight_decay,
			 const struct gather_req *then)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	update_shape(shape, sizeof(shape), n, then);
	int i = op_begin(w, "sgd_update", shape);
	backend_sgd_update(w->inner, p, g, v, n, lr, counters, momentum, weight_decay, then);
	op_end(w, i);
}

static void w_adamw_update(void *ctx, float *p, const float *g, float *m, float *v, size_t n,
			   const float *lr, const struct step_counters *counters,
			   struct adamw_hyper h, const struct gather_req *then)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	update_shape(shape, sizeof(shape), n, then);
	int i = op_begin(w, "adamw_update", shape);
	backend_adamw_update(w->inner, p, g, m, v, n, lr, counters, h, then);
	op_end(w, i);
}

static void w_clip_grad_norm(void *ctx, float *g, size_t n, float max_norm, float *norm)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	snprintf(shape, sizeof(shape), "%zu", n);
	int i = op_begin(w, "clip_grad_norm", shape);
	backend_clip_grad_norm(w->inner, g, n, max_norm, norm);
	op_end(w, i);
}

static void stage_shape(char *shape, size_t len, const struct conv_stage *s)
{
	snprintf(shape, len, "%dx%dx%d k%d -> %d, pool %d, rows %d", s->conv->c, s->conv->h,
		 s->conv->w, s->conv->k, s->oc, s->pool->k, s->rows);
}

static void w_conv_forward(void *ctx, const struct conv_stage *s, const float *x, const float *wt,
			   const float *b, float *y, int32_t *arg, float *cols)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	stage_shape(shape, sizeof(shape), s);
	int i = op_begin(w, "conv_forward", shape);
	backend_conv_forward(w->inner, s, x, wt, b, y, arg, cols);
	op_end(w, i);
}

static void w_pool_backward(void *ctx, const struct conv_stage *s, const float *dy, const float *y,
			    const int32_t *arg, float *dz)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	stage_shape(shape, sizeof(shape), s);
	int i = op_begin(w, "pool_backward", shape);
	backend_pool_backward(w->inner, s, dy, y, arg, dz);
	op_end(w, i);
}

static void w_conv_backward_data(void *ctx, const struct conv_stage *s, const float *wt,
				 const float *dz, const struct conv_stage *below,
				 const float *below_y, const int32_t *below_arg, float *dz_below)
{
	struct wrap *w = wrap_of(ctx);
	char shape[64];
	stage_shape(shape, sizeof(shape), s);
	int i = op_begin(w, "conv_backward_data", shape);
	backend_conv_backward_data(w->inner, s, wt, dz, below, below_y, below_arg, dz_below);
	op_end(w, i);
}

static void w_allreduce(void *ctx, float *buf, size_t n, enum reduce_op op)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin_count(w, "allreduce", n, "floats");
	backend_allreduce(w->inner, buf, n, op);
	op_end(w, i);
}

static void w_grad_accumulate(void *ctx, float *acc, const float *g, size_t n)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin_count(w, "grad_accumulate", n, "floats");
	backend_grad_accumulate(w->inner, acc, g, n);
	op_end(w, i);
}

static void w_fixed_accumulate(void *ctx, int64_t *acc, const float *g, size_t n, double limit,
			       int first)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin_count(w, "fixed_accumulate", n, "floats");
	backend_fixed_accumulate(w->inner, acc, g, n, limit, first);
	op_end(w, i);
}

static void w_fixed_decode(void *ctx, float *g, int64_t *acc, size_t n)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin_count(w, "fixed_decode", n, "int64");
	backend_fixed_decode(w->inner, g, acc, n);
	op_end(w, i);
}

static void w_allreduce_i64(void *ctx, int64_t *buf, size_t n)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin_count(w, "allreduce_i64", n, "int64");
	backend_allreduce_i64(w->inner, buf, n);
	op_end(w, i);
}

static void w_broadcast(void *ctx, float *buf, size_t n, int root)
{
	struct wrap *w = wrap_of(ctx);
	int i = op_begin_count(w, "broadcast", n, "floats");
	backend_broadcast(w->inner, buf, n, root);
	op_end(w, i);
}

static const struct backend_ops wrap_ops = {
	.name = "profile",
	.alloc = w_alloc,
	.free = w_free,
	.upload = w_upload,
	.download = w_download,
	.gemm = w_gemm,
	.relu_mask_bytes = w_relu_mask_bytes,
	.conv_wgrad_reads_x = w_conv_wgrad_reads_x,
	.gather = w_gather,
	.advance = w_advance,
	.softmax_xent = w_softmax_xent,
	.head = w_head,
	.argmax_hits = w_argmax_hits,
	.sgd_update = w_sgd_update,
	.adamw_update = w_adamw_update,
	.clip_grad_norm = w_clip_grad_norm,
	.conv_forward = w_conv_forward,
	.pool_backward = w_pool_backward,
	.conv_backward_data = w_conv_backward_data,
	.grad_accumulate = w_grad_accumulate,
	.fixed_accumulate = w_fixed_accumulate,
	.fixed_decode = w_fixed_decode,
	.allreduce_i64 = w_allreduce_i64,
	.allreduce = w_allreduce,
	.broadcast = w_broadcast,
	.synchronize = w_synchronize,
	.set_position = w_set_position,
	.label = w_label,
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of n values (n odd), v left as it was. */
static double median_of(const double *v, int n)
{
	double sorted[PROFILE_REPS];
	memcpy(sorted, v, (size_t)n * sizeof(*v));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
	return sorted[n / 2];
}

void profile_run(const struct backend *be, void (*step)(void *arg, const struct backend *wrapped),
		 void *arg, struct profile *out)
{
	struct wrap w;
	struct backend wrapped;
	memset(out, 0, sizeof(*out));
	memset(&w, 0, sizeof(w));
	memset(&wrapped, 0, sizeof(wrapped));
	w.inner = be;
	w.self = &wrapped;
	w.out = out;
	wrapped.ops = &wrap_ops;
	wrapped.ctx = &w;
	snprintf(wrapped.device, sizeof(wrapped.device), "%s", be->device);

	/* The kernels: each op captured alone (recorded, never run), where the backend captures. */
	if (backend_can_capture(be)) {
		w.counting = 1;
		step(arg, &wrapped);
		w.counting = 0;
	}
	/*
	 * The times: PROFILE_REPS runs; each op's time, and each gap between an
	 * op's end and the next one's start, the median of its runs; the step is
	 * the ops and the gaps added up. A step of a few hundred microseconds on a
	 * shared host is at the scale of one preemption: the medians leave the
	 * runs that met one aside, wherever in the step it fell.
	 */
	if (backend_has_events(be)) {
		double *us = NULL, *gap = NULL;
		int ops = -1;
		for (int rep = 0; rep < PROFILE_REPS; rep++) {
			w.next = 0;
			step(arg, &wrapped);
			if (ops < 0) {
				ops = w.next < out->n ? w.next : out->n;
				us = xmalloc((size_t)(ops > 0 ? ops : 1) * PROFILE_REPS * sizeof(*us));
				gap = xmalloc((size_t)(ops > 0 ? ops : 1) * PROFILE_REPS * sizeof(*gap));
			}
			for (int i = 0; i < ops; i++) {
				us[i * PROFILE_REPS + rep] = backend_event_us(be, w.ev[2 * i], w.ev[2 * i + 1]);
				if (i + 1 < ops)
					gap[i * PROFILE_REPS + rep] =
						backend_event_us(be, w.ev[2 * i + 1], w.ev[2 * (i + 1)]);
			}
		}
		for (int i = 0; i < ops; i++) {
			out->rows[i].us = median_of(&us[i * PROFILE_REPS], PROFILE_REPS);
			out->ops_us += out->rows[i].us;
			out->step_us += out->rows[i].us;
			if (i + 1 < ops)
				out->step_us += median_of(&gap[i * PROFILE_REPS], PROFILE_REPS);
		}
		free(us);
		free(gap);
	}
	for (int e = 0; e < w.n_ev; e++)
		backend_event_destroy(be, w.ev[e]);
	free(w.ev);
}

void profile_print(FILE *f, const struct profile *p, const char *title)
{
	fprintf(f, "profile: %s: %d ops, the step %.1f us op by op, the ops add up to %.1f us\n",
		title, p->n, p->step_us, p->ops_us);
	fprintf(f, "  %-6s %-12s %-18s %-36s %7s %10s %6s\n", "layer", "phase", "op", "shape",
		"kernels", "us", "share");
	for (int i = 0; i < p->n; i++) {
		const struct profile_row *r = &p->rows[i];
		char kernels[16];
		if (r->kernels >= 0)
			snprintf(kernels, sizeof(kernels), "%d", r->kernels);
		else
			snprintf(kernels, sizeof(kernels), "-");
		fprintf(f, "  %-6s %-12s %-18s %-36s %7s %10.2f %5.1f%%\n", r->layer, r->phase, r->op,
			r->shape, kernels, r->us, p->step_us > 0 ? 100.0 * r->us / p->step_us : 0.0);
	}
	fflush(f);
}

void profile_metrics(FILE *f, const struct profile *p)
{
	json_t *root = json_object();
	json_object_set_new(root, "event", json_string("op_times"));
	json_object_set_new(root, "step_us", json_real(p->step_us));
	json_object_set_new(root, "ops_us", json_real(p->ops_us));
	json_t *ops = json_array();
	for (int i = 0; i < p->n; i++) {
		const struct profile_row *r = &p->rows[i];
		json_t *o = json_object();
		json_object_set_new(o, "layer", json_string(r->layer));
		json_object_set_new(o, "phase", json_string(r->phase));
		json_object_set_new(o, "op", json_string(r->op));
		json_object_set_new(o, "shape", json_string(r->shape));
		json_object_set_new(o, "kernels", r->kernels >= 0 ? json_integer(r->kernels) : json_null());
		json_object_set_new(o, "us", json_real(r->us));
		json_array_append_new(ops, o);
	}
	json_object_set_new(root, "ops", ops);
	char *text = json_dumps(root, JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		die(1, "out of memory writing the profile as JSON");
	fprintf(f, "%s\n", text);
	fflush(f);
	free(text);
}

void profile_free(struct profile *p)
{
	free(p->rows);
	memset(p, 0, sizeof(*p));
}
