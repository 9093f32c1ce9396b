/*
 * head_plan.cu - the plans of a training step's head: see cuda/head_plan.cuh.
 *
 * At batch 32 the head's ops are short kernels one after another (LeNet-5's:
 * two GEMMs forward, a GEMM of 10 columns, the loss, three GEMMs back), each
 * paying the gap between kernels; the fused way folds the top three into one
 * kernel, a group of lanes per row (kernels_head); the dense ways all of
 * them, a block per few rows streaming the weights from L2
 * (kernels_dense_head, cuda/kernels_dense.cu). Which is faster is the
 * device's to say: the plan times each as the step sends it, its weight
 * gradients beside and joined at its end. Its candidates' timed runs leave
 * the step's counters alone (the loss moves them on once per real run
 * only). "separate" first: the heuristic's choice, and what a plan without
 * this op ran.
 */
#include "head_plan.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"
#include "ways.cuh"

/* "separate", "fused", then the dense kernel's rows a block (dense_rows[way - HEAD_DENSE]). */
enum head_way { HEAD_SEPARATE, HEAD_FUSED, HEAD_DENSE };
static const int dense_rows[] = {1, 2, 4};
#define HEAD_WAYS (HEAD_DENSE + (int)(sizeof(dense_rows) / sizeof(dense_rows[0])))

/* A dense stage under the top, as far as a plan depends on it. */
struct head_below_key {
	int in, out, relu, dx, drelu;
};

/* A problem, as far as a plan depends on it; compared bytewise (every byte set). */
struct head_key {
	int rows, in, cols, relu, dx, drelu, tf32, n_below;
	struct head_below_key below[HEAD_MAX_BELOW];
	int pool; /* the pool's gradient under the lowest stage: its k, or 0 */
};

/* A problem's plan (the plan's entry, cuda/plan.cuh). */
struct head_plan {
	int way; /* enum head_way, or HEAD_DENSE + an index of dense_rows */
};

/* A way's weight gradients as one kernel of ours (kernels_dense_wgrad): a flag on its way. */
#define HEAD_GROUPED 0x100

/* How a way's weight gradients are sent: as the backend's GEMM op, or beside (the side stream). */
struct head_sink {
	void (*gemm)(void *ctx, const struct gemm_req *r);
	void (*beside)(void *ctx, void (*run)(cudaStream_t stream, void *arg), void *arg);
	void (*join)(void *ctx); /* the first stream waits for what went beside */
	void *ctx;
};

/* One weight gradient, to sink. */
static void weight_grad(const struct head_sink *sink, const struct gemm_req *r)
{
	if (r->m > 0)
		sink->gemm(sink->ctx, r);
}

static void run_grouped(cudaStream_t stream, void *arg)
{
	kernels_dense_wgrad(stream, NULL, (const struct head_req *)arg);
}

/* Every weight gradient of r to sink: top first, one by one, or grouped in one kernel. */
static void weight_grads(const struct head_req *r, const struct head_sink *sink, int grouped)
{
	if (grouped) {
		sink->beside(sink->ctx, run_grouped, (void *)r);
		return;
	}
	weight_grad(sink, &r->weight_grad);
	for (int i = r->n_below - 1; i >= 0; i--)
		weight_grad(sink, &r->below[i].weight_grad);
}

/*
 * Queue r run as `way` on g's stream, its weight gradients sent to sink: in
 * host/train/head.c's order, a stage's as soon as its gradient is there;
 * grouped, once the lowest stage's is; after the kernel, for the dense way,
 * whose kernel takes the pool's gradient in too.
 */
static void run_way(struct cuda_gemm *g, const struct head_req *r, int way,
		    const struct head_sink *sink)
{
	int grouped = way & HEAD_GROUPED;
	way &= ~HEAD_GROUPED;
	if (way >= HEAD_DENSE) {
		kernels_dense_head(g->stream, NULL, r, dense_rows[way - HEAD_DENSE]);
		weight_grads(r, sink, grouped);
		return;
	}
	for (int i = 0; i < r->n_below; i++)
		cuda_gemm_run(g, &r->below[i].forward);
	if (way == HEAD_FUSED) {
		kernels_head(g->stream, NULL, r);
	} else {
		cuda_gemm_run(g, &r->forward);
		kernels_softmax_xent(g->stream, NULL, &r->loss);
		if (r->input_grad.m > 0)
			cuda_gemm_run(g, &r->input_grad);
	}
	/*
	 * Grouped, once the lowest stage's dz is there: after the input gradient
	 * of stage `ready` (below[i] is stage i, the top stage n_below).
	 */
	int ready = 1;
	if (grouped && r->n_below == ready)
		weight_grads(r, sink, 1);
	if (!grouped)
		weight_grad(sink, &r->weight_grad);
	for (int i = r->n_below - 1; i >= 0; i--) {
		if (!grouped)
			weight_grad(sink, &r->below[i].weight_grad);
		if (r->below[i].input_grad.m > 0)
			cuda_gemm_run(g, &r->below[i].input_grad);
		if (grouped && i == ready)
			weight_grads(r, sink, 1);
	}
	if (r->pool.conv)
		kernels_pool_backward(g->stream, NULL, &r->pool, head_lowest_input_grad(r)->c,
				      r->pool_y, r->pool_arg, r->pool_dz);
}

static struct head_key key_of(const struct cuda_gemm *g, const struct head_req *r)
{
	struct head_key k;
	memset(&k, 0, sizeof(k));
	k.rows = r->loss.rows;
	k.in = r->forward.k;
	k.cols = r->loss.cols;
	k.relu = r->forward.epilogue == GEMM_EPILOGUE_BIAS_RELU;
	k.dx = r->input_grad.m > 0;
	k.drelu = k.dx && r->input_grad.epilogue == GEMM_EPILOGUE_DRELU;
	k.tf32 = g->tf32;
	k.n_below = r->n_below;
	k.pool = r->pool.conv ? r->pool.pool->k : 0;
	for (int i = 0; i < r->n_below; i++) {
		const struct head_below *b = &r->below[i];
		struct head_below_key *bk = &k.below[i];
		bk->in = b->forward.k;
		bk->out = b->forward.n;
		bk->relu = b->forward.epilogue == GEMM_EPILOGUE_BIAS_RELU;
		bk->dx = b->input_grad.m > 0;
		bk->drelu = bk->dx && b->input_grad.epilogue == GEMM_EPILOGUE_DRELU;
	}
	return k;
}

/* The stages under the top as text, lowest first: " below 400x120 relu dx,120x84 relu dx drelu pool2". */
static void below_text(const struct head_key *k, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < k->n_below && used < len; i++) {
		const struct head_below_key *b = &k->below[i];
		used += (size_t)snprintf(buf + used, len - used, "%s%dx%d%s%s", i ? "," : " below ",
					 b->in, b->out, b->relu ? " relu" : "",
					 b->drelu ? " dx drelu" : b->dx ? " dx" : "");
	}
	if (k->pool && used < len)
		snprintf(buf + used, len - used, " pool%d", k->pool);
}

/*
 * A timed run: the request without its counters, its weight gradients sent
 * as the step sends them (beside the rest, where the backend has a second
 * stream) and joined at its end: a way's time is its two streams' overlap.
 */
struct head_timed {
	struct cuda_gemm *g;
	struct head_sink sink;
	struct head_req r;
	struct plan_op *rep;     /* the candidates' names, as listed */
	int ways[2 * HEAD_WAYS]; /* candidate i runs as ways[i] */
	int way;
};

static void run_candidate(void *arg)
{
	const struct head_timed *t = (const struct head_timed *)arg;
	run_way(t->g, &t->r, t->way, &t->sink);
	t->sink.join(t->sink.ctx);
}

static double time_candidate(void *arg, int i, double best)
{
	struct head_timed *t = (struct head_timed *)arg;
	t->way = t->ways[i];
	return plan_time(t->g->plan, run_candidate, t, best);
}


/* The next candidate, named for way `way`. */
static void add_candidate(struct head_timed *t, int way)
{
	struct plan_op *rep = t->rep;
	char *name = rep->cand[rep->n_candidates].name;
	size_t len = sizeof(rep->cand[0].name);
	int base = way & ~HEAD_GROUPED;
	const char *wg = way & HEAD_GROUPED ? "+wgrad" : "";
	if (base == HEAD_SEPARATE)
		snprintf(name, len, "separate%s", wg);
	else if (base == HEAD_FUSED)
		snprintf(name, len, "fused%s", wg);
	else
		snprintf(name, len, "dense.r%d%s", dense_rows[base - HEAD_DENSE], wg);
	t->ways[rep->n_candidates++] = way;
}

/* A head's candidates as they are listed (cuda/ways.cu: head_list_*, in its order). */
void head_list_separate(void *arg)
{
	add_candidate((struct head_timed *)arg, HEAD_SEPARATE);
}

void head_list_fused(void *arg)
{
	struct head_timed *t = (struct head_timed *)arg;
	if (kernels_head_fits(&t->r))
		add_candidate(t, HEAD_FUSED);
}

void head_list_dense(void *arg)
{
	struct head_timed *t = (struct head_timed *)arg;
	for (int i = 0; t->r.n_below > 0 && i < HEAD_WAYS - HEAD_DENSE; i++)
		if (kernels_dense_head_fits(&t->r, dense_rows[i]))
			add_candidate(t, HEAD_DENSE + i);
}

/* The grouped weight gradients: where they fit, with every one beside (none the model's lowest). */
static int grouped_fits(const struct head_req *r)
{
	if (r->n_below == 0 || !r->weight_grad.beside || !kernels_dense_wgrad_fits(r))
		return 0;
	for (int i = 0; i < r->n_below; i++)
		if (!r->below[i].weight_grad.beside)
			return 0;
	return 1;
}

/* Each way listed so far again, its weight gradients grouped in one kernel, where they fit. */
void head_list_grouped(void *arg)
{
	struct head_timed *t = (struct head_timed *)arg;
	int n = t->rep->n_candidates;
	for (int i = 0; i < n && grouped_fits(&t->r); i++)
		add_candidate(t, t->ways[i] | HEAD_GROUPED);
}

static const struct head_plan *plan_for(struct cuda_gemm *g, const struct head_req *r,
					const struct head_sink *sink)
{
	struct head_key key = key_of(g, r);
	const struct head_plan *found =
		(const struct head_plan *)plan_find(g->plan, PLAN_HEAD, &key, sizeof(key));
	if (found)
		return found;

	struct plan_op rep;
	char below[96];
	memset(&rep, 0, sizeof(rep));
	below_text(&key, below, sizeof(below));
	snprintf(rep.key, sizeof(rep.key), "head rows=%d in=%d cols=%d relu=%d dx=%d drelu=%d tf32=%d%s",
		 key.rows, key.in, key.cols, key.relu, key.dx, key.drelu, key.tf32, below);
	snprintf(rep.op, sizeof(rep.op), "head");
	int used = snprintf(rep.shape, sizeof(rep.shape), "%dx%dx%d%s%s", key.rows, key.cols,
			    key.in, key.relu ? " relu" : "",
			    key.drelu ? ", dx drelu" : key.dx ? ", dx" : "");
	if (key.n_below && used > 0 && (size_t)used < sizeof(rep.shape))
		snprintf(rep.shape + used, sizeof(rep.shape) - (size_t)used, ", %d dense below%s",
			 key.n_below, key.pool ? ", pool grad" : "");
	struct head_timed *t = (struct head_timed *)xcalloc(1, sizeof(*t));
	t->g = g;
	t->sink = *sink;
	t->r = *r;
	t->r.loss.counters = NULL;
	t->rep = &rep;
	ways_list(PLAN_HEAD, t);
	int chosen = plan_choose(g->plan, &rep, plan_capturing(g->plan), time_candidate, t);
	struct head_plan fresh = {t->ways[chosen]};
	free(t);
	return (const struct head_plan *)plan_add(g->plan, PLAN_HEAD, &key, sizeof(key), &rep,
						  chosen, &fresh, sizeof(fresh), NULL);
}

void cuda_head_run(struct cuda_gemm *g, const struct head_req *r,
		   void (*gemm)(void *ctx, const struct gemm_req *r),
		   void (*beside)(void *ctx, void (*run)(cudaStream_t stream, void *arg), void *arg),
		   void (*join)(void *ctx), void *ctx)
{
	if (r->loss.rows <= 0 || r->loss.cols <= 0)
		return;
	/* The separate way's GEMMs are planned first, as if met one by one. */
	for (int i = 0; i < r->n_below; i++)
		cuda_gemm_plan(g, &r->below[i].forward);
	cuda_gemm_plan(g, &r->forward);
	if (r->input_grad.m > 0)
		cuda_gemm_plan(g, &r->input_grad);
	for (int i = r->n_below - 1; i >= 0; i--)
		if (r->below[i].input_grad.m > 0)
			cuda_gemm_plan(g, &r->below[i].input_grad);
	if (r->weight_grad.m > 0)
		cuda_gemm_plan(g, &r->weight_grad);
	for (int i = r->n_below - 1; i >= 0; i--)
		if (r->below[i].weight_grad.m > 0)
			cuda_gemm_plan(g, &r->below[i].weight_grad);
	struct head_sink sink = {gemm, beside, join, ctx};
	run_way(g, r, plan_for(g, r, &sink)->way, &sink);
}
