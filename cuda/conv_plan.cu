/*
 * conv_plan.cu - the convolution stages' plans: see cuda/conv_plan.cuh.
 *
 * A stage's convolution is a GEMM, out (oc, oh*ow*rows) = W (oc, c*k*k) *
 * cols (include/conv_shape.h), and its input gradient one too, dcols =
 * W^T dz, gathered back to the input's pixels (col2im). The direct kernels
 * sum both without the matrices in between, one thread per pooled window:
 * few launches, but each thread walks every tap. The GEMM's ways leave the
 * sums to a library's tiles:
 *   forward      kernels_conv_im2col (cols, which the weight gradient needs
 *                anyway), the GEMM into z, then kernels_conv_pool (bias, ReLU,
 *                pool and argmax from z): "im2col+<the GEMM's way>";
 *   input grad   the GEMM into dcols, then kernels_col2im_backward (through
 *                the stage below's pool and ReLU): "<the GEMM's way>+col2im".
 * Candidates, in the order of cuda/ways.cu: "direct" first (the heuristic's
 * choice); "direct.patch"
 * where the taps (and, forward, the pool) fit the patch kernels (forward,
 * each input channel's patch under a window in registers for four output
 * channels at once, the im2col matrix, where the weight gradient reads it,
 * by kernels_conv_im2col after; input grad, each output channel's dz under
 * a block of 2 x 2 input pixels in registers for three input channels at
 * once; each bitwise direct's output), and the same in blocks of 64
 * threads ("direct.patch.t64"); then one per way
 * gemm_ways lists for the GEMM (cuBLASLt's algorithms, cublasSgemm, ours),
 * each timed as a whole by plan_choose. A forward without cols
 * (scoring the test set, never in a step) runs direct, unplanned; a direct
 * forward leaves cols unwritten once the weight gradient's plan reads the
 * input in its place (cuda_gemm_im2col_unread: an implicit GEMM's way). z or dcols
 * lives in a buffer of the plan's own, allocated when the plan is made
 * (never while the stream captures: then, as when it cannot be had, only
 * direct is offered) and kept while the plan runs a GEMM's way. The outcome
 * is the same to rounding whichever way runs.
 */
#include "conv_plan.cuh"
#include "gemm_way.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_check.cuh"
#include "gemm_map.h"
#include "kernels.h"
#include "ways.cuh"

enum conv_op { CONV_FORWARD, CONV_INPUT_GRAD };

/* What a plan runs: the direct kernels, the patch kernels, or a GEMM's way. */
enum conv_kind { CONV_DIRECT, CONV_PATCH, CONV_GEMM };

/* A problem, as far as a plan depends on it; compared bytewise (every byte set). */
struct conv_key {
	int op; /* enum conv_op */
	struct conv_shape conv;
	struct pool_shape pool; /* the stage's (forward), the stage below's (input grad) */
	int oc, rows, batch_first, tf32;
	unsigned align_w, align_in; /* W's and the GEMM's B's (cols, or dz) */
};

/* A problem's plan: its way, and what the way runs with (the plan's entry, cuda/plan.cuh). */
struct conv_plan {
	int kind;            /* enum conv_kind */
	unsigned block;      /* CONV_PATCH: threads a block, 0 the backend's */
	struct gemm_way gw;
	struct lt_desc d;    /* gw's, when it is cuBLASLt's */
	float *scratch;      /* z or dcols, while kind is CONV_GEMM */
};

/* One call of a convolution op: what it reads and writes. */
struct conv_call {
	enum conv_op op;
	const struct conv_stage *s, *below; /* below: the input gradient's */
	const float *x, *w, *b, *dz, *below_y;
	const int32_t *below_arg;
	float *y, *cols, *dz_below;
	int32_t *arg;
};

/* Columns of the stage's GEMM: its output pixels, oh * ow * rows. */
static size_t gemm_cols(const struct conv_stage *s)
{
	return (size_t)s->conv->oh * s->conv->ow * (size_t)s->rows;
}

static int taps(const struct conv_stage *s)
{
	return s->conv->c * s->conv->k * s->conv->k;
}

/* Floats of the scratch the GEMM writes: z (oc, P) forward, dcols (c*k*k, P) for the input grad. */
static size_t scratch_floats(const struct conv_call *c)
{
	return (size_t)(c->op == CONV_FORWARD ? c->s->oc : taps(c->s)) * gemm_cols(c->s);
}

/* The call's GEMM (row-major, include/gemm_map.h) into scratch. */
static struct gemm_req gemm_of_call(const struct conv_call *c, float *scratch)
{
	int p = (int)gemm_cols(c->s), t = taps(c->s);
	struct gemm_req r;
	memset(&r, 0, sizeof(r));
	r.alpha = 1.0f;
	r.beta = 0.0f;
	r.c = scratch;
	r.ldc = p;
	r.n = p;
	if (c->op == CONV_FORWARD) { /* z (oc, P) = W (oc, taps) cols (taps, P) */
		r.m = c->s->oc;
		r.k = t;
		r.a = c->w;
		r.lda = t;
		r.b = c->cols;
		r.ldb = p;
	} else { /* dcols (taps, P) = W^T (taps, oc) dz (oc, P) */
		r.trans_a = 1;
		r.m = t;
		r.k = c->s->oc;
		r.a = c->w;
		r.lda = t;
		r.b = c->dz;
		r.ldb = p;
	}
	return r;
}

/*
 * Queue the call run as `kind` (CONV_PATCH: in blocks of `block` threads, 0
 * the backend's; CONV_GEMM: gw with d, through scratch).
 */
static void run_call(struct cuda_gemm *g, const struct conv_call *c, int kind, unsigned block,
		     const struct gemm_way *gw, const struct lt_desc *d, float *scratch)
{
	struct kernel_geom sized = {0, 0};
	if (kind == CONV_PATCH && block)
		sized = kernel_geom_sized(c->op == CONV_FORWARD
						  ? kernels_conv_patch_work(c->s)
						  : kernels_conv_backward_patch_work(c->s, c->below),
					  block);
	const struct kernel_geom *geom = sized.block ? &sized : NULL;
	if (c->op == CONV_FORWARD) {
		if (kind == CONV_DIRECT) {
			kernels_conv_forward(g->stream, NULL, c->s, c->x, c->w, c->b, c->y, c->arg,
					     c->cols);
			return;
		}
		if (kind == CONV_PATCH) {
			kernels_conv_patch(g->stream, geom, c->s, c->x, c->w, c->b, c->y, c->arg);
			if (c->cols)
				kernels_conv_im2col(g->stream, NULL, c->s, c->x, c->cols);
			return;
		}
		struct gemm_req r = gemm_of_call(c, scratch);
		kernels_conv_im2col(g->stream, NULL, c->s, c->x, c->cols);
		gemm_way_run(g, &r, gw, d);
		kernels_conv_pool(g->stream, NULL, c->s, scratch, c->b, c->y, c->arg);
		return;
	}
	if (kind == CONV_PATCH) {
		kernels_conv_backward_patch(g->stream, geom, c->s, c->w, c->dz, c->below, c->below_y,
					    c->below_arg, c->dz_below);
		return;
	}
	if (kind != CONV_GEMM) {
		kernels_conv_backward_data(g->stream, NULL, c->s, c->w, c->dz, c->below, c->below_y,
					   c->below_arg, c->dz_below);
		return;
	}
	struct gemm_req r = gemm_of_call(c, scratch);
	gemm_way_run(g, &r, gw, d);
	kernels_col2im_backward(g->stream, NULL, c->s, scratch, c->below, c->below_y, c->below_arg,
				c->dz_below);
}

/* The key a plan is filed under: every field the ways depend on. */
static struct conv_key key_of(const struct cuda_gemm *g, const struct conv_call *c)
{
	struct conv_key k;
	memset(&k, 0, sizeof(k)); /* padding too: keys are compared bytewise */
	k.op = (int)c->op;
	k.conv = *c->s->conv;
	k.pool = c->op == CONV_FORWARD ? *c->s->pool : *c->below->pool;
	k.oc = c->s->oc;
	k.rows = c->s->rows;
	k.batch_first = c->op == CONV_FORWARD ? c->s->batch_first : 0;
	k.tf32 = g->tf32;
	k.align_w = gemm_alignment(c->w);
	k.align_in = gemm_alignment(c->op == CONV_FORWARD ? (const void *)c->cols
							  : (const void *)c->dz);
	return k;
}

/* The key as a plan names it (a checkpoint's plan finds it by this text). */
static void key_text(const struct conv_key *k, char *buf, size_t len)
{
	snprintf(buf, len,
		 "%s c=%d h=%d w=%d k=%d pad=%d oc=%d rows=%d pool=%dx%dx%d/%d bf=%d tf32=%d "
		 "align=%u/%u",
		 k->op == CONV_FORWARD ? "forward" : "input_grad", k->conv.c, k->conv.h, k->conv.w,
		 k->conv.k, k->conv.pad, k->oc, k->rows, k->pool.c, k->pool.h, k->pool.w, k->pool.k,
		 k->batch_first, k->tf32, k->align_w, k->align_in);
}

/* For people: "6x1x5x5 on 28x28 pad2, b256" (oc x c x k x k). */
static void shape_text(const struct conv_call *c, char *buf, size_t len)
{
	const struct conv_shape *v = c->s->conv;
	snprintf(buf, len, "%dx%dx%dx%d on %dx%d pad%d, b%d", c->s->oc, v->c, v->k, v->k, v->h,
		 v->w, v->pad, c->s->rows);
}

/* A candidate: what it runs, by name. */
struct conv_cand {
	int kind;           /* enum conv_kind */
	unsigned block;     /* CONV_PATCH: threads a block, 0 the backend's */
	struct gemm_way gw; /* CONV_GEMM: the GEMM's way */
	char name[PLAN_NAME_LEN];
};

/* A convolution's candidates as they are listed (cuda/ways.cu: conv_list_*, in its order). */
struct conv_listing {
	struct cuda_gemm *g;
	const struct conv_call *c;
	int capturing;
	float *scratch; /* the GEMM's output, where it could be had */
	struct conv_cand *cands;
	int n;
};

static void add_cand(struct conv_listing *l, const char *name, int kind, unsigned block,
		     const struct gemm_way *gw)
{
	if (l->n >= PLAN_MAX_CANDIDATES)
		return;
	struct conv_cand *x = &l->cands[l->n++];
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->block = block;
	if (gw)
		x->gw = *gw;
	snprintf(x->name, sizeof(x->name), "%s", name);
}

void conv_list_direct(void *arg)
{
	add_cand((struct conv_listing *)arg, "direct", CONV_DIRECT, 0, NULL);
}

/*
 * Where the patch kernel takes the problem: it in the backend's blocks and in
 * blocks of 64 threads (a patch kernel's thread sums many terms, so its items
 * are few: at batch 32, LeNet-5's conv2 has 98 warps of them, 13 blocks of 256
 * threads that leave most SMs idle, or 49 blocks of 64).
 */
void conv_list_patch(void *arg)
{
	struct conv_listing *l = (struct conv_listing *)arg;
	const struct conv_call *c = l->c;
	if (!(c->op == CONV_FORWARD ? kernels_conv_patch_fits(c->s)
				    : kernels_conv_backward_patch_fits(c->s)))
		return;
	add_cand(l, "direct.patch", CONV_PATCH, 0, NULL);
	add_cand(l, "direct.patch.t64", CONV_PATCH, 64, NULL);
}

/* The convolution as a GEMM, one candidate per way the GEMM has, where its output has a buffer. */
void conv_list_gemm(void *arg)
{
	struct conv_listing *l = (struct conv_listing *)arg;
	if (!l->scratch)
		return;
	struct gemm_way *ways =
		(struct gemm_way *)xmalloc(PLAN_MAX_CANDIDATES * sizeof(struct gemm_way));
	struct gemm_req r = gemm_of_call(l->c, l->scratch);
	int n = gemm_ways(l->g, &r, l->capturing, ways);
	for (int i = 0; i < n; i++) {
		char name[PLAN_NAME_LEN];
		snprintf(name, sizeof(name), l->c->op == CONV_FORWARD ? "im2col+%s" : "%s+col2im",
			 ways[i].name);
		add_cand(l, name, CONV_GEMM, 0, &ways[i]);
	}
	free(ways);
}

/* One candidate's run, for plan_time. */
struct conv_run {
	struct cuda_gemm *g;
	const struct conv_call *c;
	const struct conv_cand *x;
	const struct lt_desc *d;
	float *scratch;
};

static void run_candidate(void *arg)
{
	const struct conv_run *r = (const struct conv_run *)arg;
	run_call(r->g, r->c, r->x->kind, r->x->block, &r->x->gw, r->d, r->scratch);
}

static double time_candidate(void *arg, int i, double best)
{
	const struct conv_listing *l = (const struct conv_listing *)arg;
	const struct conv_cand *x = &l->cands[i];
	struct lt_desc d;
	memset(&d, 0, sizeof(d));
	if (x->kind == CONV_GEMM) {
		struct gemm_req r = gemm_of_call(l->c, l->scratch);
		if (!gemm_way_desc(l->g, &r, &x->gw, &d))
			return -1.0;
	}
	struct conv_run run = {l->g, l->c, x, &d, l->scratch};
	double us = plan_time(l->g->plan, run_candidate, &run, best);
	gemm_way_desc_destroy(&d);
	return us;
}

static void plan_release_conv(void *state)
{
	struct conv_plan *p = (struct conv_plan *)state;
	gemm_way_desc_destroy(&p->d);
	if (p->scratch)
		cudaFree(p->scratch);
}

/* The plan for c's problem: made, and its way chosen, the first time it is met. */
static struct conv_plan *plan_for(struct cuda_gemm *g, const struct conv_call *c)
{
	struct conv_key key = key_of(g, c);
	int op = c->op == CONV_FORWARD ? PLAN_CONV_FORWARD : PLAN_CONV_INPUT_GRAD;
	struct conv_plan *found = (struct conv_plan *)plan_find(g->plan, op, &key, sizeof(key));
	if (found)
		return found;

	struct plan_op *rep = (struct plan_op *)xcalloc(1, sizeof(*rep));
	key_text(&key, rep->key, sizeof(rep->key));
	snprintf(rep->op, sizeof(rep->op), "%s",
		 c->op == CONV_FORWARD ? "conv_forward" : "conv_input_grad");
	shape_text(c, rep->shape, sizeof(rep->shape));

	/* The GEMM's output, where it can have a buffer now. */
	struct conv_listing l;
	memset(&l, 0, sizeof(l));
	l.g = g;
	l.c = c;
	l.capturing = plan_capturing(g->plan);
	l.cands = (struct conv_cand *)xmalloc(PLAN_MAX_CANDIDATES * sizeof(struct conv_cand));
	if (!l.capturing &&
	    cudaMalloc((void **)&l.scratch, scratch_floats(c) * sizeof(float)) != cudaSuccess) {
		(void)cudaGetLastError(); /* not sticky: keep it from a later launch check */
		l.scratch = NULL;
	}
	ways_list(op, &l);
	for (int i = 0; i < l.n; i++)
		snprintf(rep->cand[i].name, sizeof(rep->cand[i].name), "%s", l.cands[i].name);
	rep->n_candidates = l.n;
	int chosen = plan_choose(g->plan, rep, l.capturing, time_candidate, &l);

	struct conv_plan fresh;
	memset(&fresh, 0, sizeof(fresh));
	fresh.kind = l.cands[chosen].kind;
	fresh.block = l.cands[chosen].block;
	if (fresh.kind == CONV_GEMM) {
		fresh.gw = l.cands[chosen].gw;
		fresh.scratch = l.scratch;
		struct gemm_req r = gemm_of_call(c, l.scratch);
		if (!gemm_way_desc(g, &r, &fresh.gw, &fresh.d))
			die(1, "CUDA %s %s: cuBLASLt refused the descriptors of %s", rep->op,
			    rep->shape, rep->cand[chosen].name);
	} else if (l.scratch) {
		g->plan->drain(g->plan->arg); /* the timed runs may still use it */
		CUDA_CHECK(cudaFree(l.scratch));
	}
	free(l.cands);
	found = (struct conv_plan *)plan_add(g->plan, op, &key, sizeof(key), rep, chosen, &fresh,
					     sizeof(fresh), plan_release_conv);
	free(rep);
	return found;
}

void cuda_conv_forward_run(struct cuda_gemm *g, const struct conv_stage *s,
			   const float *x, const float *w, const float *b, float *y, int32_t *arg,
			   float *cols)
{
	struct conv_call c;
	memset(&c, 0, sizeof(c));
	c.op = CONV_FORWARD;
	c.s = s;
	c.x = x;
	c.w = w;
	c.b = b;
	c.y = y;
	c.arg = arg;
	c.cols = cols;
	if (!cols || gemm_cols(s) == 0) { /* scoring: direct, unplanned */
		run_call(g, &c, CONV_DIRECT, 0, NULL, NULL, NULL);
		return;
	}
	const struct conv_plan *p = plan_for(g, &c);
	/* Our kernels write the im2col matrix for the weight gradient only, unless it reads x. */
	if (p->kind != CONV_GEMM && cuda_gemm_im2col_unread(g, cols, s->conv, s->rows))
		c.cols = NULL;
	run_call(g, &c, p->kind, p->block, &p->gw, &p->d, p->scratch);
}

void cuda_conv_input_grad_run(struct cuda_gemm *g, const struct conv_stage *s, const float *w, const float *dz,
			      const struct conv_stage *below, const float *below_y,
			      const int32_t *below_arg, float *dz_below)
{
	struct conv_call c;
	memset(&c, 0, sizeof(c));
	c.op = CONV_INPUT_GRAD;
	c.s = s;
	c.below = below;
	c.w = w;
	c.dz = dz;
	c.below_y = below_y;
	c.below_arg = below_arg;
	c.dz_below = dz_below;
	if (gemm_cols(s) == 0)
		return;
	const struct conv_plan *p = plan_for(g, &c);
	run_call(g, &c, p->kind, p->block, &p->gw, &p->d, p->scratch);
}
