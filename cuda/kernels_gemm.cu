/*
 * kernels_gemm.cu - the GEMMs of ours and their launchers (cuda/gemm_lt.cu
 * lists and times them as ways of a GEMM, cuda/ways.cu): a GEMM of few
 * outputs and a long k split over k (explicit, or reading a convolution's
 * input in place of its im2col matrix), and a small GEMM whole in one kernel. Written as cuda/kernels.cu
 * is (whose file comment says how each build runs them); the block-wide ones
 * cooperate through shared memory and __syncthreads.
 */
#include "kernels.h"

#include <string.h>

#include "block_sums.cuh"
#include "elem.h"
#include "fastdiv.h"
#include "kernel_launch.cuh"

/* ---- a GEMM of few outputs and a long k: ours, split over k --------------------------- */

/* gemm_ksplit_micro_kernel's arguments: the request's operands, the partial sums, the split. */
struct ksplit_args {
	const float *a, *b;
	float *part; /* (chunks, outs): each chunk's sums */
	int trans_a, trans_b, m, n, k, lda, ldb;
	int tile;          /* k per tile: a power of two, (m + n) * (tile + 1) <= the tile's floats */
	int tile_shift;    /* log2(tile) */
	int chunk, chunks; /* k per chunk (a multiple of the tile), and how many */
	int outs;          /* m * n, then m bias-gradient sums when there is one */
	/* x not NULL: B is its im2col matrix (struct gemm_im2col), read from x */
	const float *x;
	struct conv_shape conv;
	int rows;
	struct fastdiv by_batch, by_ow, by_k; /* a column l: (pixel (oy, ox), b); a row j: tap (ci, ky, kx) */
};

/* op(A)[i, l] and op(B)[l, j] of a request stored as struct gemm_req says. */
static __host__ __device__ inline float ksplit_a(const struct ksplit_args *g, int i, int l)
{
	return g->trans_a ? g->a[(size_t)l * g->lda + i] : g->a[(size_t)i * g->lda + l];
}

/* An implicit B's column l: output pixel (oy, ox) of image b. */
struct ksplit_pixel {
	int oy, ox, b;
};

static __host__ __device__ inline struct ksplit_pixel ksplit_pixel_of(const struct ksplit_args *g,
								       int l)
{
	struct ksplit_pixel p;
	uint32_t pixel = fastdiv_q(&g->by_batch, (uint32_t)l), oy = fastdiv_q(&g->by_ow, pixel);
	p.oy = (int)oy;
	p.ox = (int)(pixel - oy * g->by_ow.d);
	p.b = (int)((uint32_t)l - pixel * g->by_batch.d);
	return p;
}

/* op(B)[l, j] = cols[j, l] of an implicit B: what tap j reads for pixel p, im2col_elem. */
static __host__ __device__ inline float ksplit_b_at(const struct ksplit_args *g,
						    const struct ksplit_pixel *p, int j)
{
	uint32_t kyx = fastdiv_q(&g->by_k, (uint32_t)j), ci = fastdiv_q(&g->by_k, kyx);
	int kx = (int)((uint32_t)j - kyx * g->by_k.d), ky = (int)(kyx - ci * g->by_k.d);
	size_t plane = (size_t)g->conv.h * g->conv.w * (size_t)g->rows;
	return im2col_elem(g->x + ci * plane, &g->conv, g->rows, p->oy, p->ox, ky, kx, p->b);
}

static __host__ __device__ inline float ksplit_b(const struct ksplit_args *g, int l, int j)
{
	if (g->x) {
		struct ksplit_pixel p = ksplit_pixel_of(g, l);
		return ksplit_b_at(g, &p, j);
	}
	return g->trans_b ? g->b[(size_t)j * g->ldb + l] : g->b[(size_t)l * g->ldb + j];
}

/*
 * Values l0 to l0 + g.tile - 1 of op(A)'s m rows and op(B)'s n columns into
 * the tile, row r at r * (g.tile + 1), 0 from `end` on; every thread of the
 * block calls it. Where the block's threads are a multiple of the tile (the
 * backend's 256 against a tile of at most 128), each thread keeps one value
 * t of every row it loads, so that an implicit B's pixel is decoded once a
 * tile, not once an entry, and neighbouring threads read neighbouring l; it
 * reads KSPLIT_LOAD_BATCH rows before it stores any, so that their loads
 * wait for memory together, not one after another.
 */
static __device__ inline void ksplit_load_tile(const struct ksplit_args *g, float *tile, int l0,
					       int end)
{
	int rows = g->m + g->n, pitch = g->tile + 1, mask = g->tile - 1;
	if ((int)blockDim.x & mask) {
		for (int e = (int)threadIdx.x; e < rows * g->tile; e += (int)blockDim.x) {
			int row = e >> g->tile_shift, t = e & mask, l = l0 + t;
			tile[row * pitch + t] = l >= end ? 0.0f
				  : row < g->m ? ksplit_a(g, row, l)
					       : ksplit_b(g, l, row - g->m);
		}
		return;
	}
	int t = (int)threadIdx.x & mask, l = l0 + t, step = (int)blockDim.x >> g->tile_shift;
	struct ksplit_pixel p = {0, 0, 0};
	if (g->x && l < end)
		p = ksplit_pixel_of(g, l);
	for (int row = (int)threadIdx.x >> g->tile_shift; row < rows;
	     row += step * KSPLIT_LOAD_BATCH) {
		float v[KSPLIT_LOAD_BATCH];
		for (int q = 0; q < KSPLIT_LOAD_BATCH; q++) {
			int r = row + q * step;
			v[q] = r >= rows || l >= end ? 0.0f
			       : r < g->m	     ? ksplit_a(g, r, l)
			       : g->x		     ? ksplit_b_at(g, &p, r - g->m)
						     : ksplit_b(g, l, r - g->m);
		}
		for (int q = 0; q < KSPLIT_LOAD_BATCH; q++)
			if (row + q * step < rows)
				tile[(row + q * step) * pitch + t] = v[q];
	}
}

/*
 * How many slices of a tile's values a block of `threads` shares out (each
 * thread one slice of one micro-tile): as many as the threads left by the
 * micro-tiles allow, at most one per value of the tile and at most as many
 * as the tile's shared memory holds of every output's sums, for adding them
 * at the chunk's end; 1 where the micro-tiles take every thread or more.
 */
static __host__ __device__ inline int ksplit_slices(int micro, int outs, int tile, int threads)
{
	int s = threads / micro;
	s = s < tile ? s : tile;
	s = s < KSPLIT_MICRO_TILE_FLOATS / outs ? s : KSPLIT_MICRO_TILE_FLOATS / outs;
	return s > 1 ? s : 1;
}

/*
 * Chunk c of k, for each output o < outs: the sum over the chunk's l of
 * op(A)[i, l] op(B)[l, j] (o = i * n + j), or of op(A)[i, l] alone (o = m * n
 * + i, the bias gradient), into part[c * outs + o] (`ksplit.cN.micro`). The
 * block loads the chunk tile by tile into shared memory (ksplit_load_tile),
 * op(A)'s m rows and op(B)'s n columns of g.tile values each. A thread owns a
 * micro-tile of KSPLIT_MICRO x KSPLIT_MICRO outputs, rows ig, ig + IG, ...
 * and columns jg, jg + JG, ... (IG and JG the
 * micro-tiles along m and n), its sums in registers for the whole chunk:
 * each value read from shared memory serves KSPLIT_MICRO products, where one
 * thread per output (removed: kernels.h) read two values per product and
 * shared memory's bandwidth bounded it. Threads of the first micro-tile column add
 * their rows' values alone too, for the bias gradient. Where the micro-tiles
 * leave threads over (few outputs), S = ksplit_slices threads share each
 * micro-tile, slice s taking the tile's values s, s + S, ..., and the slices'
 * sums meet in shared memory at the chunk's end, added in slice order; where
 * they outnumber the threads, the block walks the chunk once per blockful
 * of them. Each slice sums in order of l: every run of a geometry adds the
 * same terms in the same order. A tile's rows lie g.tile + 1 floats apart
 * (odd): the warp's neighbouring micro-tiles read value t of neighbouring
 * rows, 32 different banks of shared memory.
 */
static __global__ void gemm_ksplit_micro_kernel(struct ksplit_args g)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ float tile[KSPLIT_MICRO_TILE_FLOATS];
	const int R = KSPLIT_MICRO;
	int prod = g.m * g.n, pitch = g.tile + 1;
	int ig_n = (g.m + R - 1) / R, jg_n = (g.n + R - 1) / R, micro = ig_n * jg_n;
	int slices = ksplit_slices(micro, g.outs, g.tile, (int)blockDim.x), units = micro * slices;
	for (int c = (int)blockIdx.x; c < g.chunks; c += (int)gridDim.x) {
		int begin = c * g.chunk, end = begin + g.chunk < g.k ? begin + g.chunk : g.k;
		for (int base = 0; base < units; base += (int)blockDim.x) {
			int u = base + (int)threadIdx.x, live = u < units;
			int s = live ? u / micro : 0, mt = live ? u % micro : 0;
			int ig = mt / jg_n, jg = mt % jg_n, with_bias = live && g.outs > prod && jg == 0;
			/* A row or column past the edge reads the last one: its sums are never written. */
			const float *ra[KSPLIT_MICRO], *rb[KSPLIT_MICRO];
			float acc[KSPLIT_MICRO][KSPLIT_MICRO], row_sum[KSPLIT_MICRO];
			for (int p = 0; p < R; p++) {
				int i = ig + p * ig_n, j = jg + p * jg_n;
				ra[p] = &tile[(i < g.m ? i : g.m - 1) * pitch];
				rb[p] = &tile[(g.m + (j < g.n ? j : g.n - 1)) * pitch];
				row_sum[p] = 0.0f;
				for (int q = 0; q < R; q++)
					acc[p][q] = 0.0f;
			}
			for (int l0 = begin; l0 < end; l0 += g.tile) {
				ksplit_load_tile(&g, tile, l0, end);
				__syncthreads();
				for (int t = s; live && t < g.tile; t += slices) {
					float av[KSPLIT_MICRO], bv[KSPLIT_MICRO];
					for (int p = 0; p < R; p++) {
						av[p] = ra[p][t];
						bv[p] = rb[p][t];
					}
					for (int p = 0; p < R; p++) {
						for (int q = 0; q < R; q++)
							acc[p][q] += av[p] * bv[q];
						row_sum[p] += with_bias ? av[p] : 0.0f;
					}
				}
				__syncthreads();
			}
			/* The sums out: one slice straight to part, more into the tile's memory first. */
			float *out = slices == 1 ? g.part + (size_t)c * g.outs : tile + s * g.outs;
			for (int p = 0; live && p < R; p++) {
				int i = ig + p * ig_n;
				if (i >= g.m)
					continue;
				for (int q = 0; q < R; q++)
					if (jg + q * jg_n < g.n)
						out[i * g.n + jg + q * jg_n] = acc[p][q];
				if (with_bias)
					out[prod + i] = row_sum[p];
			}
			if (slices == 1)
				continue;
			__syncthreads();
			for (int o = (int)threadIdx.x; o < g.outs; o += (int)blockDim.x) {
				float sum = tile[o];
				for (int sl = 1; sl < slices; sl++)
					sum += tile[sl * g.outs + o];
				g.part[(size_t)c * g.outs + o] = sum;
			}
			__syncthreads(); /* the slices' sums read before the next chunk's tile */
		}
	}
}
KERNEL_COOP_THUNK(gemm_ksplit_micro_kernel, struct ksplit_args)

/* gemm_ksplit_reduce_kernel's arguments. */
struct ksplit_reduce_args {
	const float *part; /* (chunks, outs) */
	int chunks, outs, m, n, ldc;
	float alpha, beta;
	float *c, *bias_grad;
};

/*
 * Output o: the sum of its chunks' partial sums (column o of part), a
 * block's threads sharing COOP_LANES neighbouring outputs, each output's
 * slices striding over the chunks (block_sums_fold); then C[i, j] = alpha *
 * sum (+ beta * C[i, j] unless beta is 0, which ignores C as BLAS does), or
 * bias_grad[i] = sum for the bias gradient's outputs. The terms and their
 * order depend on the block's size only: every run of a plan adds the same.
 */
static __global__ void gemm_ksplit_reduce_kernel(struct ksplit_reduce_args g)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ float part[COOP_MAX_THREADS];
	struct block_sums b = block_sums_make(blockDim.x < COOP_LANES ? blockDim.x : COOP_LANES);
	size_t prod = (size_t)g.m * g.n;
	for (size_t first = (size_t)blockIdx.x * b.lanes; first < (size_t)g.outs;
	     first += (size_t)gridDim.x * b.lanes) {
		size_t o = first + b.lane;
		int live = b.slice < b.slices && o < (size_t)g.outs;
		float sum = 0.0f;
		for (size_t l = b.slice; live && l < (size_t)g.chunks; l += b.slices)
			sum += g.part[l * (size_t)g.outs + o];
		block_sums_fold(&b, part, sum);
		if (!live || b.slice != 0)
			continue;
		sum = part[threadIdx.x];
		if (o >= prod) {
			g.bias_grad[o - prod] = sum;
			continue;
		}
		float *at = &g.c[o / (size_t)g.n * g.ldc + o % (size_t)g.n];
		*at = g.beta != 0.0f ? g.alpha * sum + g.beta * *at : g.alpha * sum;
	}
}
KERNEL_COOP_THUNK(gemm_ksplit_reduce_kernel, struct ksplit_reduce_args)

/* ---- a small GEMM of ours, whole in one kernel: the epilogue and the bias gradient in it ---- */

/* gemm_tile_kernel's arguments: the request (kernels_gemm_tile_fits), its tiles, the step of k. */
struct tile_args {
	struct gemm_req r;
	int tiles_n; /* tiles along n */
	int kstep;   /* k per step: GEMM_TILE or GEMM_TILE_KMAX */
};

/* Tiles of GEMM_TILE outputs along an edge of `len`. */
static __host__ __device__ inline int tiles_along(int len)
{
	return (len + GEMM_TILE - 1) / GEMM_TILE;
}

/*
 * Tile elements a thread loads at once: every load of a batch issued before
 * the first is stored, so that a thread waits for one round trip to memory a
 * batch, not one an element (a step of k is 4 elements a thread at
 * GEMM_TILE and 16 at GEMM_TILE_KMAX, blocks of 256).
 */
#define TILE_LOAD_BATCH 8

/*
 * Elements e0, e0 + blockDim.x, ... (TILE_LOAD_BATCH of them, those under
 * GEMM_TILE x K) of the step of k from l0: op(A)'s tile rows into ta and
 * op(B)'s tile columns into tb (gemm_tile_kernel), 0 past the matrices.
 */
static __device__ void tile_load(const struct gemm_req *g, int i0, int j0, int l0, int K, int e0,
				 float *ta, float *tb)
{
	const int T = GEMM_TILE, pitch = K + 1;
	float va[TILE_LOAD_BATCH], vb[TILE_LOAD_BATCH];
	KERNEL_UNROLL
	for (int q = 0; q < TILE_LOAD_BATCH; q++) {
		int e = e0 + q * (int)blockDim.x;
		va[q] = vb[q] = 0.0f;
		if (e >= T * K)
			continue;
		/* A stored (m, k): consecutive threads along l; stored (k, m): along i. */
		int r = g->trans_a ? e % T : e / K, t = g->trans_a ? e / T : e % K;
		int i = i0 + r, l = l0 + t;
		if (i < g->m && l < g->k)
			va[q] = g->trans_a ? g->a[(size_t)l * g->lda + i] : g->a[(size_t)i * g->lda + l];
		/* B stored (n, k): along l; stored (k, n): along j. */
		r = g->trans_b ? e / K : e % T;
		t = g->trans_b ? e % K : e / T;
		int j = j0 + r;
		l = l0 + t;
		if (j < g->n && l < g->k)
			vb[q] = g->trans_b ? g->b[(size_t)j * g->ldb + l] : g->b[(size_t)l * g->ldb + j];
	}
	KERNEL_UNROLL
	for (int q = 0; q < TILE_LOAD_BATCH; q++) {
		int e = e0 + q * (int)blockDim.x;
		if (e >= T * K)
			continue;
		int r = g->trans_a ? e % T : e / K, t = g->trans_a ? e / T : e % K;
		ta[r * pitch + t] = va[q];
		r = g->trans_b ? e / K : e % T;
		t = g->trans_b ? e % K : e / T;
		tb[r * pitch + t] = vb[q];
	}
}

/*
 * One tile of C, GEMM_TILE x GEMM_TILE outputs, per block (striding over the
 * tiles): k walked in steps of g.kstep, op(A)'s tile rows and op(B)'s tile
 * columns loaded into shared memory (each read along the way the matrix is
 * stored, so that a warp's loads are coalesced; rows padded by one, so that
 * a warp reading value t of 32 rows reads 32 banks), each output's running
 * sum in shared memory, a thread's share of the tile loaded TILE_LOAD_BATCH
 * elements at a time and summed 2 x 2 outputs at a time. Then C[i, j] = alpha * sum (+ beta * C[i, j] unless
 * beta is 0) through the epilogue (gemm_map.h: bias_act_elem or
 * relu_backward_elem, the ReLU record not written), and, with a bias
 * gradient, the blocks of the first tile column also sum op(A)'s rows over
 * k. Sums run in order of l: every geometry adds the same terms in the same
 * order. No split over k: for the dense layers' products, whose k is at most
 * a few hundred where it is the batch, one launch where cuBLASLt may take two
 * or three (a split-K reduction, a bias-gradient kernel); a longer step of k
 * waits for fewer loads one after another, a shorter one wastes less past k.
 */
static __global__ void gemm_tile_kernel(struct tile_args args)
{
	KERNEL_WAIT_PREVIOUS();
	const struct gemm_req g = args.r;
	__shared__ float ta[GEMM_TILE * (GEMM_TILE_KMAX + 1)]; /* op(A)[i0 + r, l0 + t] at r * pitch + t */
	__shared__ float tb[GEMM_TILE * (GEMM_TILE_KMAX + 1)]; /* op(B)[l0 + t, j0 + r] at r * pitch + t */
	__shared__ float acc[GEMM_TILE * GEMM_TILE];
	__shared__ float rows_sum[GEMM_TILE];
	const int T = GEMM_TILE, K = args.kstep, pitch = args.kstep + 1;
	int tiles = tiles_along(g.m) * args.tiles_n;
	for (int tile = (int)blockIdx.x; tile < tiles; tile += (int)gridDim.x) {
		int i0 = tile / args.tiles_n * T, j0 = tile % args.tiles_n * T;
		int with_bias = g.bias_grad && j0 == 0;
		for (int o = (int)threadIdx.x; o < T * T; o += (int)blockDim.x)
			acc[o] = 0.0f;
		for (int o = (int)threadIdx.x; o < T; o += (int)blockDim.x)
			rows_sum[o] = 0.0f;
		for (int l0 = 0; l0 < g.k; l0 += K) {
			for (int e0 = (int)threadIdx.x; e0 < T * K; e0 += TILE_LOAD_BATCH * (int)blockDim.x)
				tile_load(&g, i0, j0, l0, K, e0, ta, tb);
			__syncthreads();
			/* A 2 x 2 block of outputs a thread: 4 shared reads for 4 multiply-adds. */
			for (int q = (int)threadIdx.x; q < T * T / 4; q += (int)blockDim.x) {
				int r0 = q / (T / 2) * 2, c0 = q % (T / 2) * 2;
				const float *ra0 = &ta[r0 * pitch], *ra1 = ra0 + pitch;
				const float *rb0 = &tb[c0 * pitch], *rb1 = rb0 + pitch;
				float s00 = acc[r0 * T + c0], s01 = acc[r0 * T + c0 + 1];
				float s10 = acc[(r0 + 1) * T + c0], s11 = acc[(r0 + 1) * T + c0 + 1];
				for (int t = 0; t < K; t++) {
					float a0 = ra0[t], a1 = ra1[t], b0 = rb0[t], b1 = rb1[t];
					s00 += a0 * b0;
					s01 += a0 * b1;
					s10 += a1 * b0;
					s11 += a1 * b1;
				}
				acc[r0 * T + c0] = s00;
				acc[r0 * T + c0 + 1] = s01;
				acc[(r0 + 1) * T + c0] = s10;
				acc[(r0 + 1) * T + c0 + 1] = s11;
			}
			if (with_bias)
				for (int o = (int)threadIdx.x; o < T; o += (int)blockDim.x) {
					float sum = rows_sum[o];
					for (int t = 0; t < K; t++)
						sum += ta[o * pitch + t];
					rows_sum[o] = sum;
				}
			__syncthreads();
		}
		for (int o = (int)threadIdx.x; o < T * T; o += (int)blockDim.x) {
			int i = i0 + o / T, j = j0 + o % T;
			if (i >= g.m || j >= g.n)
				continue;
			float *at = &g.c[(size_t)i * g.ldc + j];
			float v = g.beta != 0.0f ? g.alpha * acc[o] + g.beta * *at : g.alpha * acc[o];
			if (g.epilogue == GEMM_EPILOGUE_BIAS || g.epilogue == GEMM_EPILOGUE_BIAS_RELU)
				v = bias_act_elem(v, g.bias[j], g.epilogue == GEMM_EPILOGUE_BIAS_RELU);
			else if (g.epilogue == GEMM_EPILOGUE_DRELU)
				v = relu_backward_elem(v, g.act[(size_t)i * g.ldc + j]);
			*at = v;
		}
		if (with_bias)
			for (int o = (int)threadIdx.x; o < T && i0 + o < g.m; o += (int)blockDim.x)
				g.bias_grad[i0 + o] = rows_sum[o];
		__syncthreads(); /* the tile's shared sums read before the next tile's zeroing */
	}
}
KERNEL_COOP_THUNK(gemm_tile_kernel, struct tile_args)

/* ---- launchers ------------------------------------------------------------------------- */

int kernels_gemm_im2col_fits(const struct gemm_req *r)
{
	const struct gemm_im2col *ic = r->b_im2col;
	return ic && ic->x && r->trans_b && ic->rows > 0 &&
	       r->n == ic->conv.c * ic->conv.k * ic->conv.k &&
	       (size_t)r->k == (size_t)ic->conv.oh * ic->conv.ow * (size_t)ic->rows &&
	       (size_t)r->k <= FASTDIV_MAX_N;
}

int kernels_gemm_ksplit_fits(const struct gemm_req *r)
{
	if (r->epilogue != GEMM_EPILOGUE_NONE || r->m <= 0 || r->n <= 0 || r->k <= 0)
		return 0;
	return (r->m + r->n) * (KSPLIT_TILE_MIN + 1) <= KSPLIT_MICRO_TILE_FLOATS &&
	       (size_t)((r->m + KSPLIT_MICRO - 1) / KSPLIT_MICRO) *
			       (size_t)((r->n + KSPLIT_MICRO - 1) / KSPLIT_MICRO) <=
		       KSPLIT_MAX_MICRO;
}

void kernels_gemm_ksplit(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct gemm_req *r, int chunks, float *part)
{
	struct ksplit_args g;
	memset(&g, 0, sizeof(g));
	/* The longest tile the shared array holds, up to KSPLIT_TILE_MAX: fewer loads to wait for. */
	int floats = KSPLIT_MICRO_TILE_FLOATS;
	g.tile_shift = 0;
	while (1 << g.tile_shift < KSPLIT_TILE_MAX)
		g.tile_shift++;
	while (g.tile_shift > 0 && (r->m + r->n) * ((1 << g.tile_shift) + 1) > floats)
		g.tile_shift--;
	g.tile = 1 << g.tile_shift;
	int tiles = (r->k + g.tile - 1) / g.tile;
	chunks = chunks < 1 ? 1 : chunks > tiles ? tiles : chunks;
	g.a = r->a;
	g.b = r->b;
	g.part = part;
	g.trans_a = r->trans_a;
	g.trans_b = r->trans_b;
	g.m = r->m;
	g.n = r->n;
	g.k = r->k;
	g.lda = r->lda;
	g.ldb = r->ldb;
	g.chunk = (tiles + chunks - 1) / chunks * g.tile;
	g.chunks = (r->k + g.chunk - 1) / g.chunk;
	g.outs = r->m * r->n + (r->bias_grad ? r->m : 0);
	if (r->b_im2col && kernels_gemm_im2col_fits(r)) {
		g.x = r->b_im2col->x;
		g.conv = r->b_im2col->conv;
		g.rows = r->b_im2col->rows;
		g.by_batch = fastdiv_make((uint32_t)g.rows);
		g.by_ow = fastdiv_make((uint32_t)g.conv.ow);
		g.by_k = fastdiv_make((uint32_t)g.conv.k);
	}
	struct kernel_geom split = pick_geom(geom, (size_t)g.chunks * KERNEL_BLOCK);
	KERNEL_LAUNCH_COOP(gemm_ksplit_micro_kernel, split, stream, g);
	struct ksplit_reduce_args ra = {part, g.chunks, g.outs, r->m, r->n, r->ldc,
					r->alpha, r->beta, r->c, r->bias_grad};
	size_t groups = ((size_t)g.outs + COOP_LANES - 1) / COOP_LANES;
	struct kernel_geom reduce = pick_geom(geom, groups * KERNEL_BLOCK);
	KERNEL_LAUNCH_COOP(gemm_ksplit_reduce_kernel, reduce, stream, ra);
}

int kernels_gemm_tile_fits(const struct gemm_req *r)
{
	return r->m > 0 && r->n > 0 && r->k > 0 && r->k <= GEMM_TILE_MAX_K &&
	       (r->epilogue == GEMM_EPILOGUE_NONE || !r->bias_grad) &&
	       (size_t)tiles_along(r->m) * (size_t)tiles_along(r->n) <= GEMM_TILE_MAX_TILES;
}

void kernels_gemm_tile(cudaStream_t stream, const struct kernel_geom *geom,
		       const struct gemm_req *r, int kstep)
{
	struct tile_args g = {*r, tiles_along(r->n), kstep == GEMM_TILE_KMAX ? GEMM_TILE_KMAX : GEMM_TILE};
	struct kernel_geom t = pick_geom(geom, (size_t)tiles_along(r->m) * (size_t)g.tiles_n * KERNEL_BLOCK);
	KERNEL_LAUNCH_COOP(gemm_tile_kernel, t, stream, g);
}
