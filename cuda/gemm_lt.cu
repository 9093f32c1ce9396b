/*
 * gemm_lt.cu - the CUDA backend's GEMM: see cuda/gemm_lt.cuh.
 *
 * A request (include/gemm_map.h) is row-major; the libraries are
 * column-major, so it is mapped by gemm_map() as cublasSgemm always was, and
 * its epilogue follows the swap: the bias runs along the rows of cuBLASLt's
 * D (CUBLASLT_EPILOGUE_BIAS, RELU_BIAS, RELU_AUX_BIAS), the bias gradient
 * sums op(B) over k into one value per column of D (BGRADB), and the ReLU
 * gradient reads the bit mask a RELU_AUX_BIAS forward kept (DRELU).
 *
 * Each problem (shapes, transposes, leading dimensions, epilogue, pointer
 * alignments, TF32) is planned the first time it is met. Its ways to run
 * (candidates), in the heuristic's order of preference, as cuda/ways.cu lists
 * them (gemm_list_*):
 *   - cuBLASLt with the whole epilogue fused: each algorithm the heuristic
 *     lists that fits the workspace, split-K ones included (up to
 *     GEMM_LT_CANDIDATES);
 *   - for a forward ReLU whose record cuBLASLt cannot keep: RELU_BIAS, the
 *     backward pass then taking the ReLU's gradient from its output;
 *   - cuBLASLt's plain product, the epilogue in kernels of ours (bias_act,
 *     relu_backward), each algorithm likewise;
 *   - cublasSgemm with those kernels, its bias gradient by cublasSgemv;
 *     where cuBLASLt offers no algorithm, with every unfused bias gradient;
 *   - for a long k and few outputs (the convolutions' weight gradients), a
 *     GEMM of ours split over k (kernels_gemm_ksplit), the bias gradient in
 *     its sums, its partial sums in the libraries' workspace, a thread per
 *     micro-tile of outputs (`.micro`); where B is a
 *     convolution's im2col matrix (r->b_im2col), the same reading B's
 *     entries from the convolution's input (an implicit GEMM: the input's
 *     hundreds of kilobytes, cached, in place of the matrix's megabytes);
 *   - for a k of at most GEMM_TILE_MAX_K (the dense layers), a GEMM of ours
 *     whole in one kernel (kernels_gemm_tile), the epilogue or the bias
 *     gradient in it, k in steps of 32, and of 128 where k is longer.
 * A bias gradient that the product does not fuse is a kernel of ours (one
 * thread per sum, or a block's threads per sum sharing it by block
 * reduction) or cublasSgemv against a vector of ones; each unfused way comes
 * with each of them. The outcome is the same to rounding whichever
 * way runs; what differs is the time. How the way is chosen (the plan's
 * policy, cuda/plan.cu):
 * PLAN_MEASURE times every candidate with CUDA events on the request's own
 * buffers (beta is 0 and no output aliases an input, so a run only rewrites
 * what the next rewrites again): one run (a second where the first was
 * clearly slower than the best so far, PLAN_SLOW_FACTOR times it and
 * PLAN_SLOW_SLACK_US more: it may have loaded its kernels), then, unless that
 * was too, PLAN_TIME_REPS more captured in a graph and replayed, as the step
 * runs them; the fastest
 * is kept. PLAN_HEURISTIC takes the first candidate, untimed. While the stream
 * captures (nothing can be timed, nothing allocated) it is the first too. In
 * a collective stretch (a training step: every rank meets the same problems
 * in the same order) rank 0 decides and the plan's share gives its choice to every
 * rank, so all ranks run the same arithmetic; a rank whose candidate of that
 * index has another name (another GPU or library) ends the job. A problem a
 * given plan names (plan_set, cuda/plan.cu) takes that way, when this
 * GPU offers a candidate of that name, without timing.
 */
#include "gemm_lt.cuh"
#include "gemm_way.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "cuda_check.cuh"
#include "kernels.h"
#include "ways.cuh"

/* A problem's plan: its way, and what the way runs with (the plan's entry, cuda/plan.cuh). */
struct gemm_plan {
	struct gemm_key key;
	struct gemm_way way;
	const void *mask;          /* the ReLU record it writes (RELU_AUX_BIAS), else NULL */
	const float *b;            /* B of the request that made it (an im2col matrix's buffer) */
	struct lt_desc d;          /* the way's, when it is cuBLASLt's */
};

unsigned gemm_alignment(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	unsigned align = 256;
	while (align > 1 && (a & (align - 1)))
		align >>= 1;
	return p ? align : 256;
}

static struct gemm_key key_of(const struct cuda_gemm *g, const struct gemm_req *r)
{
	struct gemm_key k;
	memset(&k, 0, sizeof(k)); /* padding too: keys are compared bytewise */
	k.trans_a = r->trans_a;
	k.trans_b = r->trans_b;
	k.m = r->m;
	k.n = r->n;
	k.k = r->k;
	k.lda = r->lda;
	k.ldb = r->ldb;
	k.ldc = r->ldc;
	k.epilogue = (int)r->epilogue;
	k.mask = r->relu_mask != NULL;
	k.bias_grad = r->bias_grad != NULL;
	k.tf32 = g->tf32;
	k.align_a = gemm_alignment(r->a);
	k.align_b = gemm_alignment(r->b);
	k.align_c = gemm_alignment(r->c);
	k.align_bias = gemm_alignment(r->bias_grad ? (const void *)r->bias_grad
						 : (const void *)r->bias);
	if (r->b_im2col) {
		k.im2col = 1;
		k.conv = r->b_im2col->conv;
		k.rows = r->b_im2col->rows;
	}
	return k;
}

size_t cuda_gemm_relu_mask_bytes(int rows, int cols)
{
	size_t ld = ((size_t)cols + 127) / 128 * 128; /* bits per column of the (cols, rows) result */
	return rows > 0 && cols > 0 ? ld / 8 * (size_t)rows : 0;
}

/* Whether a GEMM planned so far writes the ReLU record `mask` (a fused forward's). */
static int mask_written(const struct cuda_gemm *g, const void *mask)
{
	const void *q;
	for (int i = 0; mask && (q = plan_next(g->plan, PLAN_GEMM, &i)) != NULL;)
		if (((const struct gemm_plan *)q)->mask == mask)
			return 1;
	return 0;
}

/* ---- candidates ------------------------------------------------------------------------- */

/* The epilogue cuBLASLt would fuse for r, all of it. */
static cublasLtEpilogue_t fused_epilogue(const struct cuda_gemm *g, const struct gemm_req *r)
{
	switch (r->epilogue) {
	case GEMM_EPILOGUE_BIAS:
		return CUBLASLT_EPILOGUE_BIAS;
	case GEMM_EPILOGUE_BIAS_RELU:
		return r->relu_mask ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS;
	case GEMM_EPILOGUE_DRELU:
		/* Only a record a fused forward wrote; else the ReLU's output decides, below. */
		return mask_written(g, r->relu_mask) ? CUBLASLT_EPILOGUE_DRELU
						     : CUBLASLT_EPILOGUE_DEFAULT;
	case GEMM_EPILOGUE_NONE:
		break;
	}
	/*
	 * A bias gradient over k == 1 is the operand itself; cuBLASLt's BGRADB has
	 * been reported wrong there (a one-row batch), so it is summed apart.
	 */
	return r->bias_grad && r->k > 1 ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
}

/* Whether cuBLASLt doing `e` leaves a kernel of ours the request's bias and activation. */
static int needs_bias_act(const struct gemm_req *r, cublasLtEpilogue_t e)
{
	return (r->epilogue == GEMM_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_BIAS) ||
	       (r->epilogue == GEMM_EPILOGUE_BIAS_RELU && e != CUBLASLT_EPILOGUE_RELU_BIAS &&
		e != CUBLASLT_EPILOGUE_RELU_AUX_BIAS);
}

static int needs_drelu(const struct gemm_req *r, cublasLtEpilogue_t e)
{
	return r->epilogue == GEMM_EPILOGUE_DRELU && e != CUBLASLT_EPILOGUE_DRELU;
}

/* Whether a bias gradient by cublasSgemv can be had now (its vector of ones, up to k). */
static int ones_ready(struct cuda_gemm *g, int k, int capturing)
{
	if (g->n_ones >= (size_t)k)
		return 1;
	if (capturing)
		return 0; /* nothing may be allocated while the stream captures */
	size_t n = (size_t)k;
	float *host = (float *)xmalloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		host[i] = 1.0f;
	float *dev = NULL;
	if (cudaMalloc((void **)&dev, n * sizeof(float)) != cudaSuccess) {
		(void)cudaGetLastError();
		free(host);
		return 0;
	}
	/* The stream's earlier work may use the old vector: wait for it before freeing. */
	g->plan->drain(g->plan->arg);
	CUDA_CHECK(cudaMemcpy(dev, host, n * sizeof(float), cudaMemcpyHostToDevice));
	free(host);
	if (g->ones)
		CUDA_CHECK(cudaFree(g->ones));
	g->ones = dev;
	g->n_ones = n;
	return 1;
}

/*
 * Chunks of k for our split GEMM (kernels_gemm_ksplit) on r with `chunk` of k
 * a chunk, 0 where it is no candidate: a k of at least KSPLIT_MIN_K (a
 * shorter one is cuBLAS's), at most KSPLIT_CHUNKS chunks (two blocks on each
 * of an H100's 132 SMs), the partial sums within the workspace (free between
 * the libraries' calls: one stream orders them all). The plans time two
 * chunk lengths, KSPLIT_LONG_CHUNK and KSPLIT_SHORT_CHUNK: more chunks keep
 * more SMs busy, fewer leave less for the reduce.
 */
#define KSPLIT_MIN_K 2048
#define KSPLIT_LONG_CHUNK 512
#define KSPLIT_SHORT_CHUNK 128
#define KSPLIT_CHUNKS 264
static int ksplit_chunks(const struct cuda_gemm *g, const struct gemm_req *r, int chunk)
{
	if (r->k < KSPLIT_MIN_K || !kernels_gemm_ksplit_fits(r))
		return 0;
	int chunks = r->k / chunk < KSPLIT_CHUNKS ? r->k / chunk : KSPLIT_CHUNKS;
	size_t outs = (size_t)r->m * r->n + (r->bias_grad ? (size_t)r->m : 0);
	return (size_t)chunks * outs * sizeof(float) <= g->workspace_bytes ? chunks : 0;
}

/*
 * The bias gradient by one thread per sum (BIAS_GRAD_KERNEL) walks all of k
 * alone: a candidate for short k only (the FC layers' batch), where it can
 * beat a library call's set-up; for the convolutions' k of tens of
 * thousands it took milliseconds on the H100 (2026-11-27), time the plan
 * would spend measuring it.
 */
#define BIAS_GRAD_KERNEL_MAX_K 1024

/* Append a way (named), unless the list is full. */
static void add_way(struct gemm_way *ways, int *n, int lt, cublasLtEpilogue_t e,
		    const cublasLtMatmulAlgo_t *algo, int bias_grad)
{
	if (*n >= PLAN_MAX_CANDIDATES)
		return;
	struct gemm_way *w = &ways[(*n)++];
	memset(w, 0, sizeof(*w));
	w->lt = lt;
	w->lt_epilogue = lt ? e : CUBLASLT_EPILOGUE_DEFAULT;
	if (algo)
		w->algo = *algo;
	w->bias_grad = bias_grad;
	gemm_way_name(w);
}

/*
 * A GEMM's candidates as they are listed (cuda/ways.cu: gemm_list_*, in the
 * registry's order): the problem, the unfused bias gradient's ways, and the
 * ways so far.
 */
struct gemm_listing {
	struct cuda_gemm *g;
	const struct gemm_req *r;
	const struct gemm_key *k;
	int bg[3], n_bg; /* the unfused bias gradient's ways, cublasSgemv first where it can be had */
	int gemv;        /* BIAS_GRAD_GEMV among them, else 0 */
	int packed;      /* the output is packed: our epilogue kernels can run on it */
	struct gemm_way *ways;
	int n, n_lt;     /* ways listed; of them cuBLASLt's */
};

void gemm_list_lt(void *arg)
{
	struct gemm_listing *l = (struct gemm_listing *)arg;
	cublasLtEpilogue_t want = fused_epilogue(l->g, l->r), tries[3];
	int n_tries = 0;
	tries[n_tries++] = want;
	if (want == CUBLASLT_EPILOGUE_RELU_AUX_BIAS)
		tries[n_tries++] = CUBLASLT_EPILOGUE_RELU_BIAS;
	if (want != CUBLASLT_EPILOGUE_DEFAULT)
		tries[n_tries++] = CUBLASLT_EPILOGUE_DEFAULT;
	for (int t = 0; t < n_tries; t++) {
		cublasLtEpilogue_t e = tries[t];
		if (!l->packed && (needs_bias_act(l->r, e) || needs_drelu(l->r, e)))
			continue;
		cublasLtMatmulAlgo_t algos[GEMM_LT_CANDIDATES];
		int n_algos = gemm_lt_algos(l->g, l->r, l->k, e, algos, GEMM_LT_CANDIDATES);
		for (int i = 0; i < n_algos; i++) {
			if (e == CUBLASLT_EPILOGUE_BGRADB)
				add_way(l->ways, &l->n, 1, e, &algos[i], BIAS_GRAD_FUSED);
			else
				for (int b = 0; b < l->n_bg; b++)
					add_way(l->ways, &l->n, 1, e, &algos[i], l->bg[b]);
		}
	}
	l->n_lt = l->n;
}

/*
 * cublasSgemm: with its bias gradient by cublasSgemv (chosen on the H100,
 * 2026-11-27, for LeNet-5's first weight gradient at batch 32), and where
 * cuBLASLt offers no algorithm at all, with each of the unfused ways (on that
 * H100, where cuBLASLt offered some, none of those was chosen in any cell, and
 * they are no candidates there).
 */
void gemm_list_sgemm(void *arg)
{
	struct gemm_listing *l = (struct gemm_listing *)arg;
	if (!l->packed && l->r->epilogue != GEMM_EPILOGUE_NONE)
		return;
	for (int b = 0; b < l->n_bg; b++)
		if (l->n_lt == 0 || (l->gemv && l->bg[b] == l->gemv))
			add_way(l->ways, &l->n, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL, l->bg[b]);
}

/*
 * Ours, for a long k and few outputs, its bias gradient in the same sums: a
 * thread per micro-tile of outputs, also reading B's entries from x where B is
 * its im2col matrix (implicit GEMM); two chunk lengths.
 */
void gemm_list_ksplit(void *arg)
{
	struct gemm_listing *l = (struct gemm_listing *)arg;
	const struct gemm_req *r = l->r;
	int long_chunks = ksplit_chunks(l->g, r, KSPLIT_LONG_CHUNK);
	int short_chunks = ksplit_chunks(l->g, r, KSPLIT_SHORT_CHUNK);
	int split[2] = {long_chunks, short_chunks != long_chunks ? short_chunks : 0};
	for (int implicit = 0; implicit <= (r->b_im2col && kernels_gemm_im2col_fits(r)); implicit++)
		for (int i = 0; i < 2; i++)
			if (split[i] > 0 && l->n < PLAN_MAX_CANDIDATES) {
				add_way(l->ways, &l->n, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL,
					r->bias_grad ? BIAS_GRAD_FUSED : BIAS_GRAD_NONE);
				l->ways[l->n - 1].ksplit = split[i];
				l->ways[l->n - 1].im2col = implicit;
				gemm_way_name(&l->ways[l->n - 1]);
			}
}

/* Ours, whole in one launch: the epilogue and the bias gradient inside; two steps of k. */
void gemm_list_tile(void *arg)
{
	struct gemm_listing *l = (struct gemm_listing *)arg;
	const int ksteps[2] = {GEMM_TILE, GEMM_TILE_KMAX};
	for (int i = 0; i < 2 && kernels_gemm_tile_fits(l->r); i++)
		if (l->n < PLAN_MAX_CANDIDATES && (i == 0 || l->r->k > GEMM_TILE)) {
			add_way(l->ways, &l->n, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL,
				l->r->bias_grad ? BIAS_GRAD_FUSED : BIAS_GRAD_NONE);
			l->ways[l->n - 1].tile = ksteps[i];
			gemm_way_name(&l->ways[l->n - 1]);
		}
}

/* Every way to run r, best guess first: the registry's GEMM ways in its order (cuda/ways.cu). */
static int list_ways(struct cuda_gemm *g, const struct gemm_req *r, const struct gemm_key *k,
		     int capturing, struct gemm_way *ways)
{
	struct gemm_listing l;
	memset(&l, 0, sizeof(l));
	l.g = g;
	l.r = r;
	l.k = k;
	l.ways = ways;
	if (!r->bias_grad) {
		l.bg[l.n_bg++] = BIAS_GRAD_NONE;
	} else {
		if (ones_ready(g, r->k, capturing))
			l.bg[l.n_bg++] = l.gemv = BIAS_GRAD_GEMV;
		if (r->k <= BIAS_GRAD_KERNEL_MAX_K)
			l.bg[l.n_bg++] = BIAS_GRAD_KERNEL;
		l.bg[l.n_bg++] = BIAS_GRAD_BLOCK;
	}
	l.packed = r->ldc == r->n;
	ways_list(PLAN_GEMM, &l);
	return l.n;
}

/* ---- running a way ---------------------------------------------------------------------- */

void gemm_way_run(struct cuda_gemm *g, const struct gemm_req *r, const struct gemm_way *w,
		  const struct lt_desc *d)
{
	const struct gemm_lane own = {g->stream, g->blas, g->workspace};
	gemm_way_run_on(g, &own, r, w, d);
}

void gemm_way_run_on(struct cuda_gemm *g, const struct gemm_lane *lane, const struct gemm_req *r,
		     const struct gemm_way *w, const struct lt_desc *d)
{
	struct gemm_colmajor c = gemm_map(r);
	cudaStream_t stream = lane->stream;
	if (w->tile) { /* all of it, the epilogue and the bias gradient */
		kernels_gemm_tile(stream, NULL, r, w->tile);
		return;
	}
	if (w->ksplit) {
		struct gemm_req q = *r;
		if (!w->im2col)
			q.b_im2col = NULL; /* B read as stored */
		kernels_gemm_ksplit(stream, NULL, &q, w->ksplit, (float *)lane->workspace);
	} else if (w->lt) {
		gemm_lt_pointers(d->desc, w->lt_epilogue, r);
		CUBLAS_CHECK(cublasLtMatmul(g->lt, d->desc, &c.alpha, c.a, d->la, c.b, d->lb, &c.beta,
					    c.c, d->lc, c.c, d->lc, &w->algo, lane->workspace,
					    g->workspace_bytes, stream));
	} else {
		CUBLAS_CHECK(cublasSgemm(lane->blas, c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
					 c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, c.m, c.n, c.k, &c.alpha,
					 c.a, c.lda, c.b, c.ldb, &c.beta, c.c, c.ldc));
	}
	if (needs_bias_act(r, w->lt_epilogue))
		kernels_bias_act(stream, NULL, r->c, r->bias, r->m, r->n,
				 r->epilogue == GEMM_EPILOGUE_BIAS_RELU);
	if (needs_drelu(r, w->lt_epilogue))
		kernels_relu_backward(stream, NULL, r->c, r->act, (size_t)r->m * (size_t)r->n);
	if (w->bias_grad == BIAS_GRAD_KERNEL) {
		kernels_bias_grad(stream, NULL, r->a, r->lda, r->trans_a, r->m, r->k, r->bias_grad);
	} else if (w->bias_grad == BIAS_GRAD_BLOCK) {
		kernels_bias_grad_block(stream, NULL, r->a, r->lda, r->trans_a, r->m, r->k,
					r->bias_grad);
	} else if (w->bias_grad == BIAS_GRAD_GEMV) {
		/*
		 * bias_grad (m) = op(A) ones (k). Column-major, A stored (m, k) at lda
		 * is a (k, m) matrix: its transpose times ones; stored (k, m) (trans_a)
		 * it is (m, k): itself times ones.
		 */
		const float one = 1.0f, zero = 0.0f;
		if (r->trans_a)
			CUBLAS_CHECK(cublasSgemv(lane->blas, CUBLAS_OP_N, r->m, r->k, &one, r->a, r->lda,
						 g->ones, 1, &zero, r->bias_grad, 1));
		else
			CUBLAS_CHECK(cublasSgemv(lane->blas, CUBLAS_OP_T, r->k, r->m, &one, r->a, r->lda,
						 g->ones, 1, &zero, r->bias_grad, 1));
	}
}

int gemm_ways(struct cuda_gemm *g, const struct gemm_req *r, int capturing, struct gemm_way *ways)
{
	struct gemm_key k = key_of(g, r);
	return list_ways(g, r, &k, capturing, ways);
}

/* ---- timing a GEMM way (cuda/plan.cu times and chooses every op's) ------------------ */

/* One GEMM way on its request, for plan_time. */
struct way_run {
	struct cuda_gemm *g;
	const struct gemm_req *r;
	const struct gemm_way *w;
	const struct lt_desc *d;
};

static void run_one_way(void *arg)
{
	const struct way_run *x = (const struct way_run *)arg;
	gemm_way_run(x->g, x->r, x->w, x->d);
}

/* The GEMM's ways, for plan_choose. */
struct ways_timed {
	struct cuda_gemm *g;
	const struct gemm_req *r;
	const struct gemm_way *ways;
};

static double time_way(void *arg, int i, double best)
{
	const struct ways_timed *t = (const struct ways_timed *)arg;
	struct lt_desc d;
	if (!gemm_way_desc(t->g, t->r, &t->ways[i], &d))
		return -1.0;
	struct way_run x = {t->g, t->r, &t->ways[i], &d};
	double us = plan_time(t->g->plan, run_one_way, &x, best);
	gemm_way_desc_destroy(&d);
	return us;
}

/* ---- plans ------------------------------------------------------------------------------ */

static void plan_release_gemm(void *state)
{
	gemm_way_desc_destroy(&((struct gemm_plan *)state)->d);
}

static struct gemm_plan *plan_for(struct cuda_gemm *g, const struct gemm_req *r)
{
	struct gemm_key k = key_of(g, r);
	struct gemm_plan *found = (struct gemm_plan *)plan_find(g->plan, PLAN_GEMM, &k, sizeof(k));
	if (found)
		return found;

	int capturing = plan_capturing(g->plan);
	struct gemm_way *ways =
		(struct gemm_way *)xmalloc(PLAN_MAX_CANDIDATES * sizeof(struct gemm_way));
	struct plan_op *rep = (struct plan_op *)xcalloc(1, sizeof(*rep));
	gemm_key_text(&k, rep->key, sizeof(rep->key));
	gemm_shape_text(&k, rep->shape, sizeof(rep->shape));
	snprintf(rep->op, sizeof(rep->op), "gemm");

	int n = list_ways(g, r, &k, capturing, ways);
	if (n == 0)
		die(1, "CUDA GEMM %s: no way to run it (an epilogue kernel needs a packed output: "
		       "ldc %d, n %d)",
		    rep->shape, r->ldc, r->n);
	for (int i = 0; i < n; i++)
		snprintf(rep->cand[i].name, sizeof(rep->cand[i].name), "%s", ways[i].name);
	rep->n_candidates = n;
	struct ways_timed t = {g, r, ways};
	int chosen = plan_choose(g->plan, rep, capturing, time_way, &t);

	struct gemm_plan fresh;
	memset(&fresh, 0, sizeof(fresh));
	fresh.key = k;
	fresh.way = ways[chosen];
	free(ways);
	if (!gemm_way_desc(g, r, &fresh.way, &fresh.d))
		die(1, "CUDA GEMM %s: cuBLASLt refused the descriptors of %s", rep->shape,
		    fresh.way.name);
	if (fresh.way.lt && fresh.way.lt_epilogue == CUBLASLT_EPILOGUE_RELU_AUX_BIAS)
		fresh.mask = r->relu_mask;
	fresh.b = r->b;
	found = (struct gemm_plan *)plan_add(g->plan, PLAN_GEMM, &k, sizeof(k), rep, chosen, &fresh,
					     sizeof(fresh), plan_release_gemm);
	free(rep);
	return found;
}

int cuda_gemm_im2col_unread(const struct cuda_gemm *g, const float *cols,
			    const struct conv_shape *conv, int rows)
{
	int implicit = 0;
	const void *q;
	for (int i = 0; (q = plan_next(g->plan, PLAN_GEMM, &i)) != NULL;) {
		const struct gemm_plan *p = (const struct gemm_plan *)q;
		if (!p->key.im2col || p->b != cols || p->key.rows != rows ||
		    memcmp(&p->key.conv, conv, sizeof(*conv)))
			continue;
		if (!p->way.im2col)
			return 0; /* a way that reads the matrix */
		implicit = 1;
	}
	return implicit;
}

void cuda_gemm_run(struct cuda_gemm *g, const struct gemm_req *r)
{
	if (r->m <= 0 || r->n <= 0)
		return;
	struct gemm_plan *p = plan_for(g, r);
	gemm_way_run(g, r, &p->way, &p->d);
}

void cuda_gemm_plan(struct cuda_gemm *g, const struct gemm_req *r)
{
	if (r->m > 0 && r->n > 0)
		(void)plan_for(g, r);
}

void cuda_gemm_run_on(struct cuda_gemm *g, const struct gemm_lane *lane, const struct gemm_req *r)
{
	if (r->m <= 0 || r->n <= 0)
		return;
	struct gemm_plan *p = plan_for(g, r); /* made already: found */
	gemm_way_run_on(g, lane, r, &p->way, &p->d);
}

void cuda_gemm_release(struct cuda_gemm *g)
{
	if (g->ones)
		cudaFree(g->ones);
	g->ones = NULL;
	g->n_ones = 0;
}
