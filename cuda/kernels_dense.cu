/*
 * kernels_dense.cu - a head's dense layers in one kernel and their weight
 * gradients in one more, with their launchers: every dense stage of a head
 * (struct head_req), the loss, their input gradients and the pool's gradient
 * under them (kernels_dense_head), and the stages' weight gradients
 * (kernels_dense_wgrad). cuda/head_plan.cu lists and times them beside the
 * fused head of cuda/kernels_head.cu. Written as cuda/kernels.cu is (whose
 * file comment says how each build runs them): a block's threads cooperate
 * through shared memory and __syncthreads, their loops the same for every
 * thread of a block.
 */
#include "kernels.h"

#include <string.h>

#include "elem.h"
#include "kernel_launch.cuh"
#include "kernels_loss.cuh"

/* ---- a head's dense stages in one kernel ------------------------------------------------- */

/* One dense stage of dense_head_kernel: y = act(x W^T + b), and dx = dz W (through x's ReLU). */
struct dense_stage_args {
	const float *w, *b; /* W (out, in), b (out) */
	float *y;           /* (rows, out): the next stage's input, or the logits */
	float *dx;          /* (rows, in), NULL: none (the lowest stage may have none) */
	int in, out, relu, drelu;
};

/*
 * The pool under st[0], when dz is not NULL: st[0]'s input gradient goes on
 * through it (pool_relu_backward_elem against x, the pool's output, batch
 * first) into its convolution's dz (c, h, w, batch), not into st[0].dx.
 */
struct dense_pool_args {
	struct pool_shape p;
	const int32_t *arg; /* (c, oh, ow, batch): each window's argmax */
	float *dz;
};

/* dense_head_kernel's arguments (kernels_dense_head_fits): st[0] the lowest stage. */
struct dense_head_args {
	const float *x; /* st[0]'s input (rows, in) */
	int n, rows_per_block;
	struct dense_stage_args st[HEAD_MAX_BELOW + 1];
	struct xent_req loss; /* on st[n - 1].y */
	struct dense_pool_args pool;
};

/* Row b's gradient v at pooled value k (batch first) through the pool into dz, gated by y. */
static __device__ void dense_pool_scatter(const struct dense_pool_args *pool, size_t batch, int k,
					  size_t b, float v, float y)
{
	const struct pool_shape *p = &pool->p;
	int px = k % p->ow, py = k / p->ow % p->oh, c = k / (p->ow * p->oh);
	int32_t best = pool->arg[(((size_t)c * p->oh + (size_t)py) * p->ow + (size_t)px) * batch + b];
	for (int ky = 0; ky < p->k; ky++)
		for (int kx = 0; kx < p->k; kx++) {
			size_t at = (((size_t)c * p->h + (size_t)(py * p->k + ky)) * p->w +
				     (size_t)(px * p->k + kx)) * batch + b;
			pool->dz[at] = pool_relu_backward_elem(v, y, best, ky, kx, p->k);
		}
}

/* Columns of a warp's tile of a forward; a lane's inputs of a stage in registers. */
#define DENSE_TILE 4
#define DENSE_K_REGS (DENSE_HEAD_MAX_IN / (int)COOP_LANES)
#define DENSE_TILE_OUT (DENSE_HEAD_MAX_ROWS * DENSE_TILE)
/* Loads a lane has in flight: a forward's inputs (x 4 columns), a backward's rows of W (x 2). */
#define DENSE_BATCH 8
#define DENSE_BACK_BATCH 16
/* A backward thread's inputs k, k + blockDim, ... (DENSE_HEAD_MAX_IN / DENSE_HEAD_THREADS). */
#define DENSE_BACK_K 2

/* What dense_head_kernel's warps share: a tile's partial sums, a lane's column each. */
struct dense_shared {
	float part[DENSE_HEAD_THREADS / COOP_LANES][DENSE_TILE_OUT][COOP_LANES + 1];
};

/* Four floats from 16-byte aligned p: one load on the GPU. */
static __device__ void load4(const float *p, float v[4])
{
#if defined(__CUDACC__)
	float4 q = *(const float4 *)p;
	v[0] = q.x;
	v[1] = q.y;
	v[2] = q.z;
	v[3] = q.w;
#else
	for (int i = 0; i < 4; i++)
		v[i] = p[i];
#endif
}

/*
 * Stage st's forward for a block's R rows: xs (R, in) in shared memory to ys
 * (R, out) there and, for the live rows, st->y from row0. A warp's tile is R
 * rows x DENSE_TILE columns: lane t sums its inputs k = t, t + 32, ... (held
 * in registers for every tile) times W's rows, coalesced, the partial sums
 * meet in shared memory and lane i adds row i / 4's column i % 4 in lane
 * order, with the bias and the ReLU (bias_act_elem). Every thread calls it.
 */
static __device__ void dense_forward_rows(const struct dense_stage_args *st, const float *xs,
					  float *ys, struct dense_shared *sh, size_t row0,
					  int live, int rows)
{
	unsigned int warps = blockDim.x / COOP_LANES, warp = threadIdx.x / COOP_LANES;
	int lane = (int)(threadIdx.x % COOP_LANES);
	int in = st->in, out = st->out;
	float xr[DENSE_K_REGS][DENSE_HEAD_MAX_ROWS];
	KERNEL_UNROLL
	for (int t = 0; t < DENSE_K_REGS; t++) {
		int k = lane + t * (int)COOP_LANES;
		KERNEL_UNROLL
		for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++)
			xr[t][r] = r < rows && k < in ? xs[r * in + k] : 0.0f;
	}
	int tiles = (out + DENSE_TILE - 1) / DENSE_TILE;
	for (int first = 0; first < tiles; first += (int)warps) { /* the same trips for every warp */
		int tile = first + (int)warp, j0 = tile * DENSE_TILE;
		float acc[DENSE_HEAD_MAX_ROWS][DENSE_TILE];
		KERNEL_UNROLL
		for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++)
			KERNEL_UNROLL
			for (int c = 0; c < DENSE_TILE; c++)
				acc[r][c] = 0.0f;
		/* DENSE_BATCH of a lane's inputs at a time, their weights loaded first. */
		KERNEL_UNROLL
		for (int t0 = 0; t0 < DENSE_K_REGS; t0 += DENSE_BATCH) {
			if (tile >= tiles || t0 * (int)COOP_LANES >= in)
				break;
			float wv[DENSE_BATCH][DENSE_TILE];
			KERNEL_UNROLL
			for (int t = 0; t < DENSE_BATCH; t++) {
				int k = lane + (t0 + t) * (int)COOP_LANES;
				KERNEL_UNROLL
				for (int c = 0; c < DENSE_TILE; c++)
					wv[t][c] = k < in && j0 + c < out
							   ? st->w[(size_t)(j0 + c) * in + k]
							   : 0.0f;
			}
			KERNEL_UNROLL
			for (int t = 0; t < DENSE_BATCH; t++)
				KERNEL_UNROLL
				for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++)
					KERNEL_UNROLL
					for (int c = 0; c < DENSE_TILE; c++)
						acc[r][c] += xr[t0 + t][r] * wv[t][c];
		}
		KERNEL_UNROLL
		for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++)
			KERNEL_UNROLL
			for (int c = 0; c < DENSE_TILE; c++)
				sh->part[warp][r * DENSE_TILE + c][lane] = acc[r][c];
		__syncthreads();
		int r = lane / DENSE_TILE, j = j0 + lane % DENSE_TILE;
		if (tile < tiles && r < rows && j < out) {
			const float *p = sh->part[warp][lane];
			float sum = 0.0f;
			for (int t = 0; t < (int)COOP_LANES; t++)
				sum += p[t];
			float v = bias_act_elem(sum, st->b[j], st->relu);
			ys[r * out + j] = v;
			if (r < live)
				st->y[(row0 + (size_t)r) * (size_t)out + (size_t)j] = v;
		}
		__syncthreads();
	}
}

/*
 * Stage st's input gradient for a block's rows: dx[r, k] = sum over j of
 * dz[r, j] W[j, k] (dz in shared memory as (out, DENSE_HEAD_MAX_ROWS), a
 * column's rows side by side, dead rows 0), through the ReLU of its input xs
 * when drelu, into st->dx for the live rows (or, when pooled, on through
 * the pool into its dz) and, unless NULL, dz_below (in, DENSE_HEAD_MAX_ROWS) for
 * the stage below. A thread per k; no barrier.
 */
static __device__ void dense_backward_rows(const struct dense_stage_args *st, const float *xs,
					   const float *dz, float *dz_below,
					   const struct dense_pool_args *pool, int pooled,
					   size_t batch, size_t row0, int live)
{
	int in = st->in, out = st->out, stride = (int)blockDim.x;
	for (int k0 = (int)threadIdx.x; k0 < in; k0 += DENSE_BACK_K * stride) {
		float acc[DENSE_BACK_K][DENSE_HEAD_MAX_ROWS];
		KERNEL_UNROLL
		for (int i = 0; i < DENSE_BACK_K; i++)
			KERNEL_UNROLL
			for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++)
				acc[i][r] = 0.0f;
		/* DENSE_BACK_BATCH of W's rows at a time, loaded first. */
		for (int j0 = 0; j0 < out; j0 += DENSE_BACK_BATCH) {
			float w[DENSE_BACK_BATCH][DENSE_BACK_K];
			KERNEL_UNROLL
			for (int q = 0; q < DENSE_BACK_BATCH; q++)
				KERNEL_UNROLL
				for (int i = 0; i < DENSE_BACK_K; i++) {
					int k = k0 + i * stride;
					w[q][i] = j0 + q < out && k < in ? st->w[(size_t)(j0 + q) * in + k]
									 : 0.0f;
				}
			KERNEL_UNROLL
			for (int q = 0; q < DENSE_BACK_BATCH; q++) {
				if (j0 + q >= out)
					break;
				float d[DENSE_HEAD_MAX_ROWS];
				load4(dz + (j0 + q) * DENSE_HEAD_MAX_ROWS, d);
				KERNEL_UNROLL
				for (int i = 0; i < DENSE_BACK_K; i++)
					KERNEL_UNROLL
					for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++)
						acc[i][r] += d[r] * w[q][i];
			}
		}
		KERNEL_UNROLL
		for (int i = 0; i < DENSE_BACK_K; i++) {
			int k = k0 + i * stride;
			if (k >= in)
				break;
			KERNEL_UNROLL
			for (int r = 0; r < DENSE_HEAD_MAX_ROWS; r++) {
				float v = 0.0f;
				if (r < live) {
					v = st->drelu ? relu_backward_elem(acc[i][r], xs[r * in + k])
						      : acc[i][r];
					if (pooled)
						dense_pool_scatter(pool, batch, k, row0 + (size_t)r, v,
								   xs[r * in + k]);
					else if (st->dx)
						st->dx[(row0 + (size_t)r) * (size_t)in + (size_t)k] = v;
				}
				if (dz_below)
					dz_below[k * DENSE_HEAD_MAX_ROWS + r] = v;
			}
		}
	}
}

/*
 * A head's dense stages in one launch (kernels_dense_head): for each group of
 * rows_per_block rows, the lowest stage's input into shared memory, each
 * stage's forward (dense_forward_rows), the loss on the logits a warp per
 * row (xent_row), then each stage's input gradient down (dense_backward_rows).
 * Shared memory: two gradient buffers, then every stage's input and the
 * logits, the rows' values at stride the width.
 */
static __global__ void dense_head_kernel(struct dense_head_args h)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ struct xent_shared xsh;
	__shared__ struct dense_shared dsh;
	__shared__ KERNEL_ALIGN16 float mem[DENSE_HEAD_SHARED];
	const struct xent_req *x = &h.loss;
	int R = h.rows_per_block, n = h.n;
	unsigned int warps = blockDim.x / COOP_LANES, warp = threadIdx.x / COOP_LANES;
	unsigned int lane = threadIdx.x % COOP_LANES;
	int widest = 0;
	for (int s = 0; s < n; s++)
		widest = h.st[s].out > widest ? h.st[s].out : widest;
	float *dz = mem, *dz_other = mem + widest * DENSE_HEAD_MAX_ROWS;
	float *acts = dz_other + widest * DENSE_HEAD_MAX_ROWS;
	for (size_t row0 = (size_t)blockIdx.x * (size_t)R; row0 < (size_t)x->rows;
	     row0 += (size_t)gridDim.x * (size_t)R) {
		int live = (size_t)x->rows - row0 < (size_t)R ? (int)((size_t)x->rows - row0) : R;
		int in0 = h.st[0].in;
		for (int i = (int)threadIdx.x; i < R * in0; i += (int)blockDim.x) {
			int r = i / in0;
			acts[i] = r < live ? h.x[(row0 + (size_t)r) * (size_t)in0 + (size_t)(i % in0)]
					   : 0.0f;
		}
		__syncthreads();
		float *xs = acts;
		for (int s = 0; s < n; s++) {
			float *ys = xs + R * h.st[s].in;
			dense_forward_rows(&h.st[s], xs, ys, &dsh, row0, live, R);
			xs = ys;
		}
		for (int first = 0; first < R; first += (int)warps) {
			int r = first + (int)warp;
			int on = r < live;
			xent_row(x, &xsh, row0 + (size_t)r, on, warp, lane, COOP_LANES);
			xent_count(x, row0 + (size_t)r, on, lane);
		}
		__syncthreads(); /* the rows' dlogits written before they are read */
		int cols = x->cols;
		for (int i = (int)threadIdx.x; i < cols * DENSE_HEAD_MAX_ROWS; i += (int)blockDim.x) {
			int j = i / DENSE_HEAD_MAX_ROWS, r = i % DENSE_HEAD_MAX_ROWS;
			dz[i] = r < live ? x->dlogits[(row0 + (size_t)r) * (size_t)cols + (size_t)j] : 0.0f;
		}
		__syncthreads();
		for (int s = n - 1; s >= 0; s--) {
			const struct dense_stage_args *st = &h.st[s];
			xs -= R * st->in;
			if (s == 0 && !st->dx)
				break;
			dense_backward_rows(st, xs, dz, s > 0 ? dz_other : NULL, &h.pool,
					    s == 0 && h.pool.dz, (size_t)x->rows, row0, live);
			__syncthreads();
			float *t = dz;
			dz = dz_other;
			dz_other = t;
		}
		/* The last barrier above frees the shared buffers for the next rows. */
	}
}
KERNEL_COOP_THUNK(dense_head_kernel, struct dense_head_args)

/* ---- a head's dense weight gradients in one kernel ---------------------------------------- */

/* One dense stage's weight gradient: dW (out, in) = dz^T x, db (out) = the sums of dz's columns. */
struct wgrad_stage_args {
	const float *dz, *x; /* (rows, out), (rows, in) */
	float *dw, *db;
	int in, out;
	uint32_t first;      /* the stage's first unit */
	int col_units;       /* units along in + 1 (the bias as a column of ones) */
};

/* dense_wgrad_kernel's arguments (kernels_dense_wgrad_fits): every stage of a head. */
struct wgrad_args {
	int n, rows;
	uint32_t units;
	struct wgrad_stage_args st[HEAD_MAX_BELOW + 1];
};

/* Columns of dW a unit holds (its tile: WGRAD_TILE rows of dW x a warp's lanes). */
#define WGRAD_TILE 4
/* Rows of the batch a thread has loaded at a time. */
#define WGRAD_BATCH 8

/* What dense_wgrad_kernel's warps share: a unit's partial sums, a lane's column each. */
struct wgrad_shared {
	float part[DENSE_HEAD_THREADS / COOP_LANES][WGRAD_TILE][COOP_LANES + 1];
};

/*
 * A head's dense weight gradients in one launch (kernels_dense_wgrad): a
 * block per unit, WGRAD_TILE rows j of one stage's dW x the 32 columns k of
 * a lane each (k == in: db, against a column of ones); warp w sums the batch
 * rows w, w + warps, ... (dz's value broadcast to its lanes, x's row
 * coalesced), the warps' partial sums added in warp order through shared
 * memory: each sum in a fixed order.
 */
static __global__ void dense_wgrad_kernel(struct wgrad_args a)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ struct wgrad_shared sh;
	unsigned int warps = blockDim.x / COOP_LANES, warp = threadIdx.x / COOP_LANES;
	int lane = (int)(threadIdx.x % COOP_LANES);
	for (uint32_t u = blockIdx.x; u < a.units; u += gridDim.x) { /* the same for the block */
		int s = 0;
		while (s + 1 < a.n && u >= a.st[s + 1].first)
			s++;
		const struct wgrad_stage_args *st = &a.st[s];
		uint32_t local = u - st->first;
		int j0 = (int)(local / (uint32_t)st->col_units) * WGRAD_TILE;
		int k = (int)(local % (uint32_t)st->col_units) * (int)COOP_LANES + lane;
		float acc[WGRAD_TILE] = {0.0f, 0.0f, 0.0f, 0.0f};
		for (int r0 = (int)warp; r0 < a.rows; r0 += WGRAD_BATCH * (int)warps) {
			float xv[WGRAD_BATCH], d[WGRAD_BATCH][WGRAD_TILE];
			KERNEL_UNROLL
			for (int q = 0; q < WGRAD_BATCH; q++) {
				int r = r0 + q * (int)warps;
				int on = r < a.rows;
				xv[q] = on && k < st->in ? st->x[(size_t)r * st->in + k]
					: on && k == st->in ? 1.0f
							    : 0.0f;
				KERNEL_UNROLL
				for (int c = 0; c < WGRAD_TILE; c++)
					d[q][c] = on && j0 + c < st->out
							  ? st->dz[(size_t)r * st->out + (size_t)(j0 + c)]
							  : 0.0f;
			}
			KERNEL_UNROLL
			for (int q = 0; q < WGRAD_BATCH; q++)
				KERNEL_UNROLL
				for (int c = 0; c < WGRAD_TILE; c++)
					acc[c] += d[q][c] * xv[q];
		}
		KERNEL_UNROLL
		for (int c = 0; c < WGRAD_TILE; c++)
			sh.part[warp][c][lane] = acc[c];
		__syncthreads();
		for (int c = (int)warp; c < WGRAD_TILE; c += (int)warps) {
			int j = j0 + c;
			float sum = 0.0f;
			for (unsigned int w = 0; w < warps; w++)
				sum += sh.part[w][c][lane];
			if (j < st->out && k < st->in)
				st->dw[(size_t)j * st->in + k] = sum;
			else if (j < st->out && k == st->in)
				st->db[j] = sum;
		}
		__syncthreads();
	}
}
KERNEL_COOP_THUNK(dense_wgrad_kernel, struct wgrad_args)

/* ---- launchers ------------------------------------------------------------------------- */

/*
 * The dense kernels' geometry: a block of DENSE_HEAD_THREADS per item, or
 * the caller's, its block rounded down to whole warps, one to
 * DENSE_HEAD_THREADS / 32 of them (their shared arrays' size).
 */
static struct kernel_geom dense_geom(const struct kernel_geom *geom, size_t items)
{
	struct kernel_geom g = geom ? *geom
				    : kernel_geom_sized(items * DENSE_HEAD_THREADS, DENSE_HEAD_THREADS);
	g.block = g.block / COOP_LANES * COOP_LANES;
	if (g.block < COOP_LANES)
		g.block = COOP_LANES;
	if (g.block > DENSE_HEAD_THREADS)
		g.block = DENSE_HEAD_THREADS;
	return g;
}

/* Request r as a dense_head_kernel stage, its ReLU for the input gradient from ig. */
static struct dense_stage_args dense_stage_of(const struct gemm_req *f, const struct gemm_req *ig)
{
	struct dense_stage_args a = {f->b, f->bias, f->c, ig->m > 0 ? ig->c : NULL, f->k, f->n,
				     f->epilogue == GEMM_EPILOGUE_BIAS_RELU,
				     ig->m > 0 && ig->epilogue == GEMM_EPILOGUE_DRELU};
	return a;
}

/* A forward dense_head_kernel runs: x W^T + b, packed, at most DENSE_HEAD_MAX_IN inputs. */
static int dense_forward_fits(const struct gemm_req *f, int rows)
{
	return f->m == rows && f->n > 0 && f->k > 0 && f->k <= DENSE_HEAD_MAX_IN && !f->trans_a &&
	       f->trans_b && f->lda == f->k && f->ldb == f->k && f->ldc == f->n &&
	       f->alpha == 1.0f && f->beta == 0.0f && f->bias && !f->bias_grad &&
	       (f->epilogue == GEMM_EPILOGUE_BIAS || f->epilogue == GEMM_EPILOGUE_BIAS_RELU);
}

/* An input gradient of forward f it runs: dz W packed, from dz, through f's input's ReLU or not. */
static int dense_input_grad_fits(const struct gemm_req *g, const struct gemm_req *f,
				 const float *dz)
{
	return g->m == f->m && g->n == f->k && g->k == f->n && !g->trans_a && !g->trans_b &&
	       g->a == dz && g->lda == f->n && g->b == f->b && g->ldb == f->k && g->ldc == f->k &&
	       g->alpha == 1.0f && g->beta == 0.0f && !g->bias_grad &&
	       (g->epilogue == GEMM_EPILOGUE_NONE ||
		(g->epilogue == GEMM_EPILOGUE_DRELU && g->act == f->a));
}

/*
 * A pool's gradient it folds in: none, or the pool under the lowest stage,
 * batch first, whose output is that stage's input, from its plain input
 * gradient, the windows tiling the convolution's output.
 */
static int dense_pool_fits(const struct head_req *h)
{
	if (!h->pool.conv)
		return 1;
	const struct gemm_req *f = h->n_below ? &h->below[0].forward : &h->forward;
	const struct gemm_req *g = head_lowest_input_grad(h);
	const struct pool_shape *p = h->pool.pool;
	return p && h->pool.batch_first && h->pool.rows == h->loss.rows && h->pool_y == f->a &&
	       h->pool_arg && h->pool_dz && g->m > 0 && g->epilogue == GEMM_EPILOGUE_NONE &&
	       p->k > 0 && p->c * p->oh * p->ow == f->k && p->oh * p->k == p->h &&
	       p->ow * p->k == p->w;
}

int kernels_dense_head_fits(const struct head_req *h, int rows_per_block)
{
	const struct xent_req *x = &h->loss;
	int rows = x->rows, n = h->n_below + 1;
	if (rows_per_block < 1 || rows_per_block > DENSE_HEAD_MAX_ROWS || h->n_below < 0 ||
	    h->n_below > HEAD_MAX_BELOW || rows <= 0 || !x->dlogits || x->logits != h->forward.c ||
	    x->cols != h->forward.n)
		return 0;
	size_t floats = 0;
	int widest = 0;
	const float *dz = x->dlogits;
	for (int s = n - 1; s >= 0; s--) {
		const struct gemm_req *f = s < h->n_below ? &h->below[s].forward : &h->forward;
		const struct gemm_req *g = s < h->n_below ? &h->below[s].input_grad : &h->input_grad;
		if (!dense_forward_fits(f, rows))
			return 0;
		if (s > 0) {
			const struct gemm_req *under = &h->below[s - 1].forward;
			if (under->c != f->a || under->n != f->k || g->m == 0)
				return 0;
		}
		if (g->m > 0 && !dense_input_grad_fits(g, f, dz))
			return 0;
		dz = g->c;
		floats += (size_t)rows_per_block * (size_t)(f->k + (s == n - 1 ? f->n : 0));
		widest = f->n > widest ? f->n : widest;
	}
	floats += 2 * (size_t)widest * DENSE_HEAD_MAX_ROWS;
	return floats <= DENSE_HEAD_SHARED && dense_pool_fits(h);
}

void kernels_dense_head(cudaStream_t stream, const struct kernel_geom *geom,
			const struct head_req *h, int rows_per_block)
{
	if (h->loss.rows <= 0)
		return;
	struct dense_head_args a;
	memset(&a, 0, sizeof(a));
	a.n = h->n_below + 1;
	a.rows_per_block = rows_per_block;
	a.x = h->n_below ? h->below[0].forward.a : h->forward.a;
	for (int s = 0; s < h->n_below; s++)
		a.st[s] = dense_stage_of(&h->below[s].forward, &h->below[s].input_grad);
	a.st[h->n_below] = dense_stage_of(&h->forward, &h->input_grad);
	a.loss = h->loss;
	if (h->pool.conv)
		a.pool = (struct dense_pool_args){*h->pool.pool, h->pool_arg, h->pool_dz};
	size_t groups = ((size_t)h->loss.rows + (size_t)rows_per_block - 1) / (size_t)rows_per_block;
	struct kernel_geom g = dense_geom(geom, groups);
	KERNEL_LAUNCH_COOP(dense_head_kernel, g, stream, a);
}

/* A weight gradient dense_wgrad_kernel runs: dz^T x packed, with its bias gradient. */
static int dense_wgrad_fits_one(const struct gemm_req *g, int rows)
{
	return g->m > 0 && g->n > 0 && g->k == rows && g->trans_a && !g->trans_b &&
	       g->lda == g->m && g->ldb == g->n && g->ldc == g->n && g->alpha == 1.0f &&
	       g->beta == 0.0f && g->bias_grad && g->epilogue == GEMM_EPILOGUE_NONE &&
	       !g->b_im2col && g->a && g->b && g->c;
}

int kernels_dense_wgrad_fits(const struct head_req *h)
{
	int rows = h->loss.rows;
	if (rows <= 0 || h->n_below < 0 || h->n_below > HEAD_MAX_BELOW ||
	    !dense_wgrad_fits_one(&h->weight_grad, rows))
		return 0;
	for (int i = 0; i < h->n_below; i++)
		if (!dense_wgrad_fits_one(&h->below[i].weight_grad, rows))
			return 0;
	return 1;
}

void kernels_dense_wgrad(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct head_req *h)
{
	struct wgrad_args a;
	memset(&a, 0, sizeof(a));
	a.n = h->n_below + 1;
	a.rows = h->loss.rows;
	for (int s = 0; s < a.n; s++) {
		const struct gemm_req *g = s < h->n_below ? &h->below[s].weight_grad : &h->weight_grad;
		struct wgrad_stage_args *st = &a.st[s];
		st->dz = g->a;
		st->x = g->b;
		st->dw = g->c;
		st->db = g->bias_grad;
		st->out = g->m;
		st->in = g->n;
		st->first = a.units;
		st->col_units = (g->n + 1 + (int)COOP_LANES - 1) / (int)COOP_LANES;
		a.units += (uint32_t)((g->m + WGRAD_TILE - 1) / WGRAD_TILE) * (uint32_t)st->col_units;
	}
	if (a.units == 0 || a.rows <= 0)
		return;
	struct kernel_geom g = dense_geom(geom, a.units);
	KERNEL_LAUNCH_COOP(dense_wgrad_kernel, g, stream, a);
}
