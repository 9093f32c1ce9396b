/*
 * head_plan.cu - the plans of a training step's head: see cuda/head_plan.cuh.
 *
 * At batch 32 the head's three ops are three short kernels one after another
 * (a GEMM of 10 columns, the loss, a GEMM of k = 10), each paying the gap
 * between kernels; the fused way is one kernel doing all three, a group of
 * lanes per row (kernels_head). Which is faster is the device's to say: the
 * plan times both. Its candidates' timed runs leave the step's counters
 * alone (the loss moves them on once per real run only). "separate" first:
 * the heuristic's choice, and what a plan without this op ran.
 */
#include "head_plan.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

enum head_way { HEAD_SEPARATE, HEAD_FUSED };

/* A problem, as far as a plan depends on it; compared bytewise (every byte set). */
struct head_key {
	int rows, in, cols, relu, dx, drelu, tf32;
};

struct head_plan {
	struct head_key key;
	int way; /* enum head_way */
};

/* Queue r run as `way` on g's stream. */
static void run_way(struct cuda_gemm *g, const struct head_req *r, int way)
{
	if (way == HEAD_FUSED) {
		kernels_head(g->stream, NULL, r);
		return;
	}
	cuda_gemm_run(g, &r->forward);
	kernels_softmax_xent(g->stream, NULL, &r->loss);
	if (r->input_grad.m > 0)
		cuda_gemm_run(g, &r->input_grad);
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
	return k;
}

/* A timed run: the request without its counters. */
struct head_timed {
	struct cuda_gemm *g;
	struct head_req r;
	int way;
};

static void run_candidate(void *arg)
{
	const struct head_timed *t = (const struct head_timed *)arg;
	run_way(t->g, &t->r, t->way);
}

static double time_candidate(void *arg, int i, double best)
{
	struct head_timed *t = (struct head_timed *)arg;
	t->way = i;
	return cuda_plan_time(t->g, run_candidate, t, best);
}

static struct head_plan *plan_for(struct cuda_head *hd, struct cuda_gemm *g,
				  const struct head_req *r)
{
	struct head_key key = key_of(g, r);
	for (int i = 0; i < hd->n_plans; i++)
		if (!memcmp(&hd->plans[i].key, &key, sizeof(key)))
			return &hd->plans[i];

	struct plan_op rep;
	memset(&rep, 0, sizeof(rep));
	snprintf(rep.key, sizeof(rep.key), "head rows=%d in=%d cols=%d relu=%d dx=%d drelu=%d tf32=%d",
		 key.rows, key.in, key.cols, key.relu, key.dx, key.drelu, key.tf32);
	snprintf(rep.op, sizeof(rep.op), "head");
	snprintf(rep.shape, sizeof(rep.shape), "%dx%dx%d%s%s", key.rows, key.cols, key.in,
		 key.relu ? " relu" : "", key.drelu ? ", dx drelu" : key.dx ? ", dx" : "");
	snprintf(rep.cand[0].name, sizeof(rep.cand[0].name), "separate");
	rep.n_candidates = 1;
	if (kernels_head_fits(r)) {
		snprintf(rep.cand[1].name, sizeof(rep.cand[1].name), "fused");
		rep.n_candidates = 2;
	}
	struct head_timed t = {g, *r, HEAD_SEPARATE};
	t.r.loss.counters = NULL;
	int chosen = cuda_plan_choose(g, &rep, cuda_plan_capturing(g), time_candidate, &t);
	snprintf(rep.chosen, sizeof(rep.chosen), "%s", rep.cand[chosen].name);

	if (hd->n_plans == hd->cap_plans) {
		hd->cap_plans = hd->cap_plans ? 2 * hd->cap_plans : 4;
		hd->plans = (struct head_plan *)xrealloc(hd->plans,
							 (size_t)hd->cap_plans * sizeof(*hd->plans));
		hd->reports = (struct plan_op *)xrealloc(hd->reports,
							 (size_t)hd->cap_plans * sizeof(*hd->reports));
	}
	hd->plans[hd->n_plans].key = key;
	hd->plans[hd->n_plans].way = chosen;
	hd->reports[hd->n_plans] = rep;
	return &hd->plans[hd->n_plans++];
}

void cuda_head_run(struct cuda_head *hd, struct cuda_gemm *g, const struct head_req *r)
{
	if (r->loss.rows <= 0 || r->loss.cols <= 0)
		return;
	/* The separate way's GEMMs are planned first, as if met one by one. */
	cuda_gemm_plan(g, &r->forward);
	if (r->input_grad.m > 0)
		cuda_gemm_plan(g, &r->input_grad);
	run_way(g, r, plan_for(hd, g, r)->way);
}

void cuda_head_forget(struct cuda_head *hd)
{
	free(hd->plans);
	free(hd->reports);
	memset(hd, 0, sizeof(*hd));
}
