/*
 * kernels.cu - the CUDA backend's element kernels and their launchers.
 *
 * Most kernels are grid-stride loops that compute indices and call one body
 * from include/elem.h, the same body the host backend loops over: no shared
 * memory, no barriers, no atomics, every item written by exactly one thread,
 * so the result does not depend on the launch geometry or on the order
 * threads run in. A launch may cover two ranges of independent items, read
 * and written apart (an update and the next batch's gather; a convolution's
 * windows and the im2col matrix it read): one launch where there would be
 * two, with nothing shared between the ranges.
 *
 * Where a reduction must be fast, a block's threads cooperate through shared
 * memory and __syncthreads (KERNEL_LAUNCH_COOP; one argument, a struct by
 * value): the loss, a row's columns on a warp's lanes (one lane folding the
 * max and the sum in column order, so the numbers are the host's to the
 * bit), and the bias gradient by block reduction, one of the ways the GEMM
 * plans time (cuda/gemm_lt.cu). Their loops are the same for every thread of
 * a block, so every thread reaches every barrier, as CUDA requires.
 *
 * The file is written in the common subset of C and C++. nvcc builds it into
 * the CUDA backend; the unit tests build it with the host C compiler and
 * a stand-in <cuda_runtime.h> (tests/cuda_host/), which runs each launch
 * as nested loops over blocks and threads (a cooperative one's threads as
 * fibers that wait at each barrier: tests/cuda_host/block_fibers.h), and with
 * the host C++ compiler against the CUDA simulator (tests/cudasim/), which
 * queues each launch on its stream. Every launch goes through KERNEL_LAUNCH
 * or KERNEL_LAUNCH_COOP, in every build: the raw launch (KERNEL_LAUNCH_ON,
 * KERNEL_LAUNCH_COOP_ON: nvcc's <<<grid, block, 0, stream>>> here, the
 * stand-in headers' loops or queue in the tests), then CUDA_CHECK_LAUNCH, the
 * check of cudaGetLastError that ends the job on a bad launch.
 */
#include "kernels.h"

#include <string.h>

#include "elem.h"

/* The C harness (tests/cuda_host) brings a CUDA_CHECK_LAUNCH of its own. */
#if defined(__CUDACC__) || defined(CUDASIM)
#include "cuda_check.cuh"
#endif

#if defined(__CUDACC__)
#define KERNEL_LAUNCH_ON(kernel, geom, stream, ...) \
	kernel<<<(geom).grid, (geom).block, 0, (stream)>>>(__VA_ARGS__)
#define KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg) \
	kernel<<<(geom).grid, (geom).block, 0, (stream)>>>(arg)
/* What a stand-in runs a cooperative kernel's thread through; nothing on a GPU. */
#define KERNEL_COOP_THUNK(kernel, type)
#endif

#define KERNEL_LAUNCH(kernel, geom, stream, ...)                                          \
	do {                                                                              \
		KERNEL_LAUNCH_ON(kernel, geom, stream, __VA_ARGS__);                      \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

/* A kernel whose block's threads share memory and wait at __syncthreads. */
#define KERNEL_LAUNCH_COOP(kernel, geom, stream, arg)                                    \
	do {                                                                              \
		KERNEL_LAUNCH_COOP_ON(kernel, geom, stream, arg);                         \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

struct kernel_geom kernel_geom_for(size_t n)
{
	struct kernel_geom g;
	size_t blocks = (n + KERNEL_BLOCK - 1) / KERNEL_BLOCK;
	g.block = KERNEL_BLOCK;
	g.grid = (unsigned int)(blocks < KERNEL_MAX_GRID ? blocks : KERNEL_MAX_GRID);
	return g;
}

/* The geometry to launch with: the caller's, or the backend's for n items. */
static struct kernel_geom pick_geom(const struct kernel_geom *geom, size_t n)
{
	return geom ? *geom : kernel_geom_for(n);
}

/* rows * cols as a work size; 0 when either is not positive. */
static __host__ __device__ inline size_t work_2d(int rows, int cols)
{
	return rows > 0 && cols > 0 ? (size_t)rows * (size_t)cols : 0;
}

/* This thread's first item and the distance to its next one. */
static __device__ inline size_t grid_first(void)
{
	return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ inline size_t grid_stride(void)
{
	return (size_t)gridDim.x * blockDim.x;
}

/* ---- the batch ---------------------------------------------------------------------- */

/* Rows a gather takes: count, or what is left of the index at the cursor (none past its end). */
static __host__ __device__ inline int gather_rows(const struct gather_req *g, int32_t cursor)
{
	int left = g->len - (int)cursor;
	return left < 0 ? 0 : left < g->count ? left : g->count;
}

/*
 * Item i < count * pixels of a gather: pixel i % pixels of batch row
 * i / pixels (consecutive items read one image's consecutive bytes).
 */
static __device__ inline void gather_item(const struct gather_req *g, int rows, size_t first,
					  size_t i)
{
	size_t row = i / (size_t)g->pixels;
	size_t col = i - row * (size_t)g->pixels;
	if (row >= (size_t)rows)
		return;
	size_t e = (size_t)g->index[first + row];
	float v = normalize_pixel_elem(g->images[e * (size_t)g->pixels + col]);
	if (g->batch_last)
		g->x[col * (size_t)rows + row] = v;
	else
		g->x[i] = v;
	if (col == 0)
		g->y[row] = (int32_t)g->labels[e];
}

static __global__ void gather_kernel(struct gather_req g)
{
	int32_t cursor = *g.cursor;
	int rows = gather_rows(&g, cursor);
	size_t n = work_2d(g.count, g.pixels);
	for (size_t i = grid_first(); i < n; i += grid_stride())
		gather_item(&g, rows, (size_t)cursor, i);
}

/* One item: the cursor itself. */
static __global__ void advance_kernel(int32_t *cursor, int delta)
{
	for (size_t i = grid_first(); i < 1; i += grid_stride())
		*cursor += delta;
}

/* ---- loss ------------------------------------------------------------------------------ */

/*
 * The cooperative kernels' sizes: a warp's lanes (the threads sharing one
 * row of the loss, or a transposed bias gradient's neighbouring sums; a block
 * narrower than a warp gives them all of it), and CUDA's most threads per
 * block (their shared arrays' size).
 */
#define COOP_LANES 32u
#define COOP_MAX_THREADS 1024

/*
 * Rows of logits (rows, cols) and of dlogits, a group of `lanes` threads per
 * row, blockDim.x / lanes rows per block at a time. Lane j takes column j:
 * its logit to shared memory; lane 0 folds the max in column order; lane j
 * its exponential; lane 0 the sum in column order and the row's loss; lane j
 * its gradient (through the ReLU gate when relu). The arithmetic is
 * softmax_xent_row_elem's to the bit. A row wider than the lanes is lane 0's
 * alone, by softmax_xent_row_elem itself. Lane 0 of row 0 moves the counters
 * on after its row: no thread of this kernel reads them.
 */
static __global__ void softmax_xent_kernel(struct xent_req x)
{
	__shared__ float column[COOP_MAX_THREADS];
	__shared__ float row_max[COOP_MAX_THREADS / COOP_LANES], row_sum[COOP_MAX_THREADS / COOP_LANES];
	unsigned int lanes = blockDim.x < COOP_LANES ? blockDim.x : COOP_LANES;
	unsigned int groups = blockDim.x / lanes, group = threadIdx.x / lanes;
	unsigned int lane = threadIdx.x % lanes;
	int wide = x.cols > (int)lanes; /* the same for every thread */
	for (size_t first = (size_t)blockIdx.x * groups; first < (size_t)x.rows;
	     first += (size_t)gridDim.x * groups) {
		size_t r = first + group;
		int live = group < groups && r < (size_t)x.rows;
		size_t off = live ? r * (size_t)x.cols : 0;
		float *d = x.dlogits && live ? x.dlogits + off : NULL;
		if (wide) {
			if (live && lane == 0) {
				x.row_loss[r] = softmax_xent_row_elem(x.logits + off, x.labels[r], x.cols,
								      x.scale, d);
				if (d && x.relu)
					for (int j = 0; j < x.cols; j++)
						d[j] = relu_backward_elem(d[j], x.logits[off + (size_t)j]);
			}
		} else {
			int col = live && lane < (unsigned int)x.cols;
			float *row = &column[group * lanes];
			float v = col ? x.logits[off + lane] : 0.0f;
			if (col)
				row[lane] = v;
			__syncthreads();
			if (live && lane == 0) {
				float m = row[0];
				for (int j = 1; j < x.cols; j++)
					m = xent_max_elem(m, row[j]);
				row_max[group] = m;
			}
			__syncthreads();
			float e = col ? xent_exp_elem(v, row_max[group]) : 0.0f;
			if (col)
				row[lane] = e;
			__syncthreads();
			if (live && lane == 0) {
				float sum = 0.0f;
				for (int j = 0; j < x.cols; j++)
					sum += row[j];
				row_sum[group] = sum;
				x.row_loss[r] = xent_loss_elem(sum, x.logits[off + (size_t)x.labels[r]],
							       row_max[group]);
			}
			__syncthreads();
			if (col && d) {
				float g = xent_grad_elem(e, 1.0f / row_sum[group], (int)lane == x.labels[r],
							 x.scale);
				d[lane] = x.relu ? relu_backward_elem(g, v) : g;
			}
		}
		if (live && r == 0 && lane == 0 && x.counters) {
			x.counters->cursor += x.rows;
			x.counters->step += 1;
			x.counters->updates += 1;
		}
	}
}
KERNEL_COOP_THUNK(softmax_xent_kernel, struct xent_req)

static __global__ void argmax_hits_kernel(const float *logits, const int32_t *labels, int rows,
					  int cols, int32_t *hits)
{
	for (size_t r = grid_first(); r < (size_t)rows; r += grid_stride())
		hits[r] += argmax_hit_row_elem(logits + r * (size_t)cols, labels[r], cols);
}

/* ---- the optimizers, and the next batch ----------------------------------------------- */

/*
 * Items [0, n) update the parameters; items from n on, when next.count > 0,
 * are the next batch's gather: the two read different memory and write
 * different memory, so one launch does both.
 */
static __global__ void sgd_update_kernel(float *p, const float *g, float *v, size_t n,
					 const float *lr, const struct step_counters *counters,
					 float momentum, float weight_decay, struct gather_req next)
{
	float rate = lr[counters->step - 1];
	int32_t cursor = next.count > 0 ? *next.cursor : 0;
	int rows = next.count > 0 ? gather_rows(&next, cursor) : 0;
	size_t total = n + work_2d(next.count, next.pixels);
	for (size_t i = grid_first(); i < total; i += grid_stride()) {
		if (i >= n) {
			gather_item(&next, rows, (size_t)cursor, i - n);
			continue;
		}
		float unused = 0.0f;
		sgd_update_elem(&p[i], g[i], v ? &v[i] : &unused, rate, momentum, weight_decay);
	}
}

static __global__ void adamw_update_kernel(float *p, const float *g, float *m, float *v, size_t n,
					   const float *lr, const struct step_counters *counters,
					   struct adamw_hyper h, struct gather_req next)
{
	struct adamw_step s = adamw_step_elem(lr[counters->step - 1], counters->updates, h);
	int32_t cursor = next.count > 0 ? *next.cursor : 0;
	int rows = next.count > 0 ? gather_rows(&next, cursor) : 0;
	size_t total = n + work_2d(next.count, next.pixels);
	for (size_t i = grid_first(); i < total; i += grid_stride()) {
		if (i >= n)
			gather_item(&next, rows, (size_t)cursor, i - n);
		else
			adamw_update_elem(&p[i], g[i], &m[i], &v[i], h, s);
	}
}

/* ---- what a GEMM's epilogue does, where cuBLASLt cannot ------------------------------ */

/* y (rows, cols), bias (cols): item i is column i % cols. */
static __global__ void bias_act_kernel(float *y, const float *bias, int rows, int cols, int relu)
{
	size_t n = work_2d(rows, cols);
	for (size_t i = grid_first(); i < n; i += grid_stride())
		y[i] = bias_act_elem(y[i], bias[i % (size_t)cols], relu);
}

static __global__ void relu_backward_kernel(float *dy, const float *y, size_t n)
{
	for (size_t i = grid_first(); i < n; i += grid_stride())
		dy[i] = relu_backward_elem(dy[i], y[i]);
}

/* Item i is out[i], the sum over l of op(A)[i, l] in order of l. */
static __global__ void bias_grad_kernel(const float *a, int lda, int trans_a, int m, int k,
					float *out)
{
	for (size_t i = grid_first(); i < (size_t)m; i += grid_stride()) {
		float sum = 0.0f;
		for (int l = 0; l < k; l++)
			sum += trans_a ? a[(size_t)l * lda + i] : a[i * (size_t)lda + (size_t)l];
		out[i] = sum;
	}
}

/* The bias gradient by block reduction: kernels_bias_grad_block's arguments. */
struct bias_grad_args {
	const float *a;
	float *out;
	int lda, trans_a, m, k;
};

/*
 * out[i] = the sum over l of op(A)[i, l], a block's threads sharing each sum.
 * Not trans_a (A (m, k), a sum along a row): a block per sum, its threads
 * striding over l. trans_a (A (k, m), a sum down a column): a block per
 * `lanes` neighbouring sums, each sum's `slices` threads striding over the
 * rows. Each thread's partial sum to shared memory, then a tree over the
 * slices, a barrier between levels; reads are consecutive across lanes.
 */
static __global__ void bias_grad_block_kernel(struct bias_grad_args g)
{
	__shared__ float part[COOP_MAX_THREADS];
	unsigned int lanes = g.trans_a ? (blockDim.x < COOP_LANES ? blockDim.x : COOP_LANES) : 1u;
	unsigned int slices = blockDim.x / lanes, slice = threadIdx.x / lanes;
	unsigned int lane = threadIdx.x % lanes, top = 1;
	while (top < slices)
		top *= 2;
	for (size_t first = (size_t)blockIdx.x * lanes; first < (size_t)g.m;
	     first += (size_t)gridDim.x * lanes) {
		size_t i = first + lane;
		int live = slice < slices && i < (size_t)g.m;
		float sum = 0.0f;
		for (size_t l = slice; live && l < (size_t)g.k; l += slices)
			sum += g.trans_a ? g.a[l * (size_t)g.lda + i] : g.a[i * (size_t)g.lda + l];
		part[threadIdx.x] = sum;
		__syncthreads();
		for (unsigned int half = top / 2; half > 0; half /= 2) {
			if (slice < half && slice + half < slices)
				part[threadIdx.x] += part[threadIdx.x + half * lanes];
			__syncthreads();
		}
		if (live && slice == 0)
			g.out[i] = part[threadIdx.x];
	}
}
KERNEL_COOP_THUNK(bias_grad_block_kernel, struct bias_grad_args)

/* ---- a GEMM of few outputs and a long k: ours, split over k --------------------------- */

/* gemm_ksplit_kernel's arguments: the request's operands, the partial sums, the split. */
struct ksplit_args {
	const float *a, *b;
	float *part; /* (chunks, outs): each chunk's sums */
	int trans_a, trans_b, m, n, k, lda, ldb;
	int tile;          /* k per tile: a power of two, (m + n) * tile <= KSPLIT_TILE_FLOATS */
	int chunk, chunks; /* k per chunk (a multiple of the tile), and how many */
	int outs;          /* m * n, then m bias-gradient sums when there is one */
};

/* op(A)[i, l] and op(B)[l, j] of a request stored as struct gemm_req says. */
static __host__ __device__ inline float ksplit_a(const struct ksplit_args *g, int i, int l)
{
	return g->trans_a ? g->a[(size_t)l * g->lda + i] : g->a[(size_t)i * g->lda + l];
}

static __host__ __device__ inline float ksplit_b(const struct ksplit_args *g, int l, int j)
{
	return g->trans_b ? g->b[(size_t)j * g->ldb + l] : g->b[(size_t)l * g->ldb + j];
}

/*
 * Chunk c of k, for each output o < outs: the sum over the chunk's l of
 * op(A)[i, l] op(B)[l, j] (o = i * n + j), or of op(A)[i, l] alone (o = m * n
 * + i, the bias gradient), into part[c * outs + o]. The block loads the
 * chunk tile by tile into shared memory, op(A)'s m rows and op(B)'s n
 * columns of g.tile values each (consecutive l, consecutive addresses
 * for A stored (m, k) and B stored (n, k), the convolutions' weight
 * gradients), then each thread adds its outputs' dot products over the tile
 * to their running sums, also in shared memory. Sums run in order of l.
 */
static __global__ void gemm_ksplit_kernel(struct ksplit_args g)
{
	__shared__ float tile[KSPLIT_TILE_FLOATS];
	__shared__ float acc[KSPLIT_MAX_OUTS];
	int rows = g.m + g.n, prod = g.m * g.n;
	for (int c = (int)blockIdx.x; c < g.chunks; c += (int)gridDim.x) {
		for (int o = (int)threadIdx.x; o < g.outs; o += (int)blockDim.x)
			acc[o] = 0.0f;
		int end = (c + 1) * g.chunk < g.k ? (c + 1) * g.chunk : g.k;
		for (int l0 = c * g.chunk; l0 < end; l0 += g.tile) {
			for (int e = (int)threadIdx.x; e < rows * g.tile; e += (int)blockDim.x) {
				int row = e / g.tile, l = l0 + e % g.tile;
				tile[e] = l >= end ? 0.0f
					  : row < g.m ? ksplit_a(&g, row, l)
						      : ksplit_b(&g, l, row - g.m);
			}
			__syncthreads();
			for (int o = (int)threadIdx.x; o < g.outs; o += (int)blockDim.x) {
				const float *ta = &tile[(o < prod ? o / g.n : o - prod) * g.tile];
				const float *tb = &tile[(g.m + (o < prod ? o % g.n : 0)) * g.tile];
				float sum = acc[o];
				for (int t = 0; t < g.tile; t++)
					sum += o < prod ? ta[t] * tb[t] : ta[t];
				acc[o] = sum;
			}
			__syncthreads();
		}
		for (int o = (int)threadIdx.x; o < g.outs; o += (int)blockDim.x)
			g.part[(size_t)c * g.outs + o] = acc[o];
	}
}
KERNEL_COOP_THUNK(gemm_ksplit_kernel, struct ksplit_args)

/*
 * Item o: the chunks' sums in order of chunk; C[i, j] = alpha * sum (+ beta
 * * C[i, j] unless beta is 0, which ignores C as BLAS does), or bias_grad[i]
 * = sum for the bias gradient's items.
 */
static __global__ void gemm_ksplit_reduce_kernel(const float *part, int chunks, int outs, int m,
						 int n, float alpha, float beta, float *c, int ldc,
						 float *bias_grad)
{
	for (size_t o = grid_first(); o < (size_t)outs; o += grid_stride()) {
		float sum = 0.0f;
		for (int k = 0; k < chunks; k++)
			sum += part[(size_t)k * outs + o];
		if (o >= (size_t)m * n) {
			bias_grad[o - (size_t)m * n] = sum;
			continue;
		}
		float *at = &c[o / (size_t)n * ldc + o % (size_t)n];
		*at = beta != 0.0f ? alpha * sum + beta * *at : alpha * sum;
	}
}

/* ---- convolution stages ------------------------------------------------------------- */

/* Where item i of a (c, h, w, batch) array lies: image b, column x, row y, channel c. */
struct chwb {
	size_t c;
	int y, x, b;
};

static __host__ __device__ inline struct chwb chwb_of(size_t i, size_t batch, int h, int w)
{
	struct chwb p;
	size_t rest = i / batch;
	p.b = (int)(i % batch);
	p.x = (int)(rest % (size_t)w);
	rest /= (size_t)w;
	p.y = (int)(rest % (size_t)h);
	p.c = rest / (size_t)h;
	return p;
}

/* Offset of window (c, py, px) of image b in a stage's output y: batch innermost or batch first. */
static __host__ __device__ inline size_t pooled_at(const struct pool_shape *p, int batch_first,
						   size_t batch, size_t c, int py, int px, int b)
{
	size_t f = (c * (size_t)p->oh + (size_t)py) * (size_t)p->ow + (size_t)px;
	return batch_first ? (size_t)b * ((size_t)p->c * p->oh * p->ow) + f : f * batch + (size_t)b;
}

/*
 * Items [0, windows): window i of the output, (oc, py, px, b) batch
 * innermost: conv_pool_window_elem, written to y where its layout puts it,
 * and its argmax. Items from windows on, when cols is not NULL: entry
 * (tap, pixel) of the im2col matrix, im2col_elem.
 */
static __global__ void conv_forward_kernel(struct conv_shape s, struct pool_shape p, int oc,
					   int rows, int batch_first, const float *x, const float *w,
					   const float *bias, float *y, int32_t *arg, float *cols)
{
	size_t nb = (size_t)rows, fan_in = (size_t)s.c * s.k * s.k;
	size_t windows = (size_t)oc * p.oh * p.ow * nb;
	size_t ld = (size_t)s.oh * s.ow * nb, n_cols = cols ? fan_in * ld : 0;
	for (size_t i = grid_first(); i < windows + n_cols; i += grid_stride()) {
		if (i < windows) {
			struct chwb q = chwb_of(i, nb, p.oh, p.ow);
			y[pooled_at(&p, batch_first, nb, q.c, q.y, q.x, q.b)] = conv_pool_window_elem(
				x, &s, rows, w + q.c * fan_in, bias[q.c], p.k, q.y, q.x, q.b, &arg[i]);
			continue;
		}
		size_t j = i - windows, tap = j / ld, col = j - tap * ld;
		int kx = (int)(tap % (size_t)s.k), ky = (int)(tap / (size_t)s.k % (size_t)s.k);
		size_t ci = tap / ((size_t)s.k * s.k);
		int b = (int)(col % nb);
		size_t pixel = col / nb;
		int oy = (int)(pixel / (size_t)s.ow), ox = (int)(pixel % (size_t)s.ow);
		cols[j] = im2col_elem(x + ci * (size_t)s.h * s.w * nb, &s, rows, oy, ox, ky, kx, b);
	}
}

/* dz (oc, oh, ow, rows): item i is conv output pixel (c, y, x) of image b. */
static __global__ void pool_backward_kernel(struct pool_shape p, int rows, int batch_first,
					    const float *dy, const float *y, const int32_t *arg,
					    float *dz)
{
	size_t nb = (size_t)rows, n = (size_t)p.c * p.h * p.w * nb;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		struct chwb q = chwb_of(i, nb, p.h, p.w);
		int py = q.y / p.k, px = q.x / p.k;
		size_t o = (((size_t)q.c * p.oh + (size_t)py) * p.ow + (size_t)px) * nb + (size_t)q.b;
		size_t at = pooled_at(&p, batch_first, nb, q.c, py, px, q.b);
		dz[i] = pool_relu_backward_elem(dy[at], y[at], arg[o], q.y % p.k, q.x % p.k, p.k);
	}
}

/*
 * dz_below (c', oh', ow', rows): item i is the below stage's conv output
 * pixel (c, y, x) of image b. The window it falls in, (py, px), is pixel
 * (c, py, px) of this stage's input; only the window's maximum takes the
 * gradient, conv_backward_data_elem of that input pixel.
 */
static __global__ void conv_backward_data_kernel(struct conv_shape s, int oc, int rows,
						 const float *w, const float *dz,
						 struct pool_shape bp, const float *below_y,
						 const int32_t *below_arg, float *dz_below)
{
	size_t nb = (size_t)rows, n = (size_t)bp.c * bp.h * bp.w * nb;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		struct chwb q = chwb_of(i, nb, bp.h, bp.w);
		int py = q.y / bp.k, px = q.x / bp.k, ky = q.y % bp.k, kx = q.x % bp.k;
		size_t o = (((size_t)q.c * bp.oh + (size_t)py) * bp.ow + (size_t)px) * nb + (size_t)q.b;
		float g = below_arg[o] == ky * bp.k + kx
				  ? conv_backward_data_elem(w, dz, &s, oc, rows, (int)q.c, py, px, q.b)
				  : 0.0f;
		dz_below[i] = pool_relu_backward_elem(g, below_y[o], below_arg[o], ky, kx, bp.k);
	}
}

/* ---- launchers ------------------------------------------------------------------------- */

void kernels_gather(cudaStream_t stream, const struct kernel_geom *geom,
		    const struct gather_req *g)
{
	size_t n = work_2d(g->count, g->pixels);
	if (n == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, n);
	KERNEL_LAUNCH(gather_kernel, gm, stream, *g);
}

void kernels_advance(cudaStream_t stream, const struct kernel_geom *geom, int32_t *cursor,
		     int delta)
{
	struct kernel_geom g = pick_geom(geom, 1);
	KERNEL_LAUNCH(advance_kernel, g, stream, cursor, delta);
}

void kernels_softmax_xent(cudaStream_t stream, const struct kernel_geom *geom,
			  const struct xent_req *r)
{
	if (work_2d(r->rows, r->cols) == 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)r->rows * COOP_LANES);
	KERNEL_LAUNCH_COOP(softmax_xent_kernel, g, stream, *r);
}

void kernels_argmax_hits(cudaStream_t stream, const struct kernel_geom *geom,
			 const float *logits, const int32_t *labels, int rows, int cols,
			 int32_t *hits)
{
	if (work_2d(rows, cols) == 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)rows);
	KERNEL_LAUNCH(argmax_hits_kernel, g, stream, logits, labels, rows, cols, hits);
}

/* The next batch's gather as a kernel argument: none (count 0) when then is NULL. */
static struct gather_req next_batch(const struct gather_req *then)
{
	struct gather_req none;
	memset(&none, 0, sizeof(none));
	return then ? *then : none;
}

void kernels_sgd_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			const float *g, float *v, size_t n, const float *lr,
			const struct step_counters *counters, float momentum, float weight_decay,
			const struct gather_req *then)
{
	struct gather_req next = next_batch(then);
	size_t total = n + work_2d(next.count, next.pixels);
	if (total == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, total);
	KERNEL_LAUNCH(sgd_update_kernel, gm, stream, p, g, v, n, lr, counters, momentum,
		      weight_decay, next);
}

void kernels_adamw_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			  const float *g, float *m, float *v, size_t n, const float *lr,
			  const struct step_counters *counters, struct adamw_hyper h,
			  const struct gather_req *then)
{
	struct gather_req next = next_batch(then);
	size_t total = n + work_2d(next.count, next.pixels);
	if (total == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, total);
	KERNEL_LAUNCH(adamw_update_kernel, gm, stream, p, g, m, v, n, lr, counters, h, next);
}

void kernels_bias_act(cudaStream_t stream, const struct kernel_geom *geom, float *y,
		      const float *bias, int rows, int cols, int relu)
{
	size_t n = work_2d(rows, cols);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(bias_act_kernel, g, stream, y, bias, rows, cols, relu);
}

void kernels_relu_backward(cudaStream_t stream, const struct kernel_geom *geom, float *dy,
			   const float *y, size_t n)
{
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(relu_backward_kernel, g, stream, dy, y, n);
}

void kernels_bias_grad(cudaStream_t stream, const struct kernel_geom *geom, const float *a,
		       int lda, int trans_a, int m, int k, float *out)
{
	if (m <= 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)m);
	KERNEL_LAUNCH(bias_grad_kernel, g, stream, a, lda, trans_a, m, k, out);
}

void kernels_bias_grad_block(cudaStream_t stream, const struct kernel_geom *geom, const float *a,
			     int lda, int trans_a, int m, int k, float *out)
{
	if (m <= 0)
		return;
	struct bias_grad_args args = {a, out, lda, trans_a, m, k};
	size_t blocks = trans_a ? ((size_t)m + COOP_LANES - 1) / COOP_LANES : (size_t)m;
	struct kernel_geom g = pick_geom(geom, blocks * KERNEL_BLOCK);
	KERNEL_LAUNCH_COOP(bias_grad_block_kernel, g, stream, args);
}

int kernels_gemm_ksplit_fits(const struct gemm_req *r)
{
	return r->epilogue == GEMM_EPILOGUE_NONE && r->m > 0 && r->n > 0 && r->k > 0 &&
	       (r->m + r->n) * KSPLIT_TILE_MIN <= KSPLIT_TILE_FLOATS &&
	       (size_t)r->m * r->n + (r->bias_grad ? (size_t)r->m : 0) <= KSPLIT_MAX_OUTS;
}

void kernels_gemm_ksplit(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct gemm_req *r, int chunks, float *part)
{
	struct ksplit_args g;
	memset(&g, 0, sizeof(g));
	/* The longest tile the shared array holds, up to KSPLIT_TILE_MAX: fewer loads to wait for. */
	g.tile = KSPLIT_TILE_MAX;
	while (g.tile > 1 && (r->m + r->n) * g.tile > KSPLIT_TILE_FLOATS)
		g.tile /= 2;
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
	struct kernel_geom split = pick_geom(geom, (size_t)g.chunks * KERNEL_BLOCK);
	KERNEL_LAUNCH_COOP(gemm_ksplit_kernel, split, stream, g);
	struct kernel_geom reduce = pick_geom(geom, (size_t)g.outs);
	KERNEL_LAUNCH(gemm_ksplit_reduce_kernel, reduce, stream, (const float *)part, g.chunks,
		      g.outs, r->m, r->n, r->alpha, r->beta, r->c, r->ldc, r->bias_grad);
}

void kernels_conv_forward(cudaStream_t stream, const struct kernel_geom *geom,
			  const struct conv_stage *s, const float *x, const float *w,
			  const float *b, float *y, int32_t *arg, float *cols)
{
	const struct conv_shape *c = s->conv;
	size_t windows = work_2d(s->rows, s->oc * s->pool->oh * s->pool->ow);
	size_t n_cols = cols ? work_2d(s->rows, c->oh * c->ow) * (size_t)(c->c * c->k * c->k) : 0;
	if (windows == 0)
		return;
	struct kernel_geom g = pick_geom(geom, windows + n_cols);
	KERNEL_LAUNCH(conv_forward_kernel, g, stream, *c, *s->pool, s->oc, s->rows, s->batch_first,
		      x, w, b, y, arg, cols);
}

void kernels_pool_backward(cudaStream_t stream, const struct kernel_geom *geom,
			   const struct conv_stage *s, const float *dy, const float *y,
			   const int32_t *arg, float *dz)
{
	size_t n = work_2d(s->rows, s->pool->c * s->pool->h * s->pool->w);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(pool_backward_kernel, g, stream, *s->pool, s->rows, s->batch_first, dy, y,
		      arg, dz);
}

void kernels_conv_backward_data(cudaStream_t stream, const struct kernel_geom *geom,
				const struct conv_stage *s, const float *w, const float *dz,
				const struct conv_stage *below, const float *below_y,
				const int32_t *below_arg, float *dz_below)
{
	const struct pool_shape *bp = below->pool;
	size_t n = work_2d(s->rows, bp->c * bp->h * bp->w);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(conv_backward_data_kernel, g, stream, *s->conv, s->oc, s->rows, w, dz, *bp,
		      below_y, below_arg, dz_below);
}

#if defined(CUDART_VERSION)
cudaError_t kernels_image_check(void)
{
	struct cudaFuncAttributes attr;
	return cudaFuncGetAttributes(&attr, advance_kernel);
}
#endif
