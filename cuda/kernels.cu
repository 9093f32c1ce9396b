/*
 * kernels.cu - the CUDA backend's element kernels and their launchers: the
 * batch, the hits, the optimizers, gradient clipping (the loss and the step's head in
 * kernels_head.cu, the dense layers' in kernels_dense.cu, the GEMM ways of
 * ours in kernels_gemm.cu, the convolution stages' in kernels_conv.cu, the
 * launch macros they share in kernel_launch.cuh).
 *
 * Most kernels are grid-stride loops that compute indices and call one body
 * from include/elem.h, the same body the host backend loops over: no shared
 * memory, no barriers, no atomics, every item written by exactly one thread,
 * so the result does not depend on the launch geometry or on the order
 * threads run in (one exception: --exact's count of gradient elements out of
 * range, an integer atomic add, whose sum is the same in any order). A launch may cover two ranges of independent items, read
 * and written apart (an update and the next batch's gather; a convolution's
 * windows and the im2col matrix it read): one launch where there would be
 * two, with nothing shared between the ranges.
 *
 * Where a reduction must be fast, a block's threads cooperate through shared
 * memory and __syncthreads (KERNEL_LAUNCH_COOP; one argument, a struct by
 * value): the loss, a row's columns on a warp's lanes (one lane folding the
 * max and the sum in column order, so the numbers are the host's to the
 * bit), the step's head (kernels_head.cu, kernels_dense.cu), the GEMM
 * ways of ours in kernels_gemm.cu, and gradient clipping's norm (elem.h's
 * order, the host's to the bit). Their loops are the same for every
 * thread of a block, so every thread reaches
 * every barrier, as CUDA requires.
 *
 * The file is written in the common subset of C and C++. nvcc builds it into
 * the CUDA backend; the unit tests build it with the host C compiler and
 * a stand-in <cuda_runtime.h> (tests/cuda_host/), which runs each launch
 * as nested loops over blocks and threads (a cooperative one's threads as
 * fibers that wait at each barrier: tests/cuda_host/block_fibers.h), and with
 * the host C++ compiler against the CUDA simulator (tests/cudasim/), which
 * queues each launch on its stream. Every launch goes through KERNEL_LAUNCH
 * or KERNEL_LAUNCH_COOP, in every build: the raw launch (KERNEL_LAUNCH_PDL_ON,
 * KERNEL_LAUNCH_COOP_PDL_ON: cudaLaunchKernelEx here, with programmatic
 * dependent launch where kernels_pdl says so; the stand-in headers' loops or
 * queue in the tests), then CUDA_CHECK_LAUNCH, the check of cudaGetLastError
 * that ends the job on a bad launch. Every kernel begins with
 * KERNEL_WAIT_PREVIOUS (kernel_launch.cuh): before it touches memory, it
 * waits for the kernel before it.
 */
#include "kernels.h"

#include <string.h>

#include "elem.h"
#include "kernel_launch.cuh"

int kernels_pdl;

void kernels_set_pdl(int on)
{
	kernels_pdl = on != 0;
}

struct kernel_geom kernel_geom_sized(size_t n, unsigned int block)
{
	struct kernel_geom g;
	size_t blocks = (n + block - 1) / block;
	g.block = block;
	g.grid = (unsigned int)(blocks < KERNEL_MAX_GRID ? blocks : KERNEL_MAX_GRID);
	return g;
}

struct kernel_geom kernel_geom_for(size_t n)
{
	return kernel_geom_sized(n, KERNEL_BLOCK);
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
	KERNEL_WAIT_PREVIOUS();
	int32_t cursor = *g.cursor;
	int rows = gather_rows(&g, cursor);
	size_t n = work_2d(g.count, g.pixels);
	for (size_t i = grid_first(); i < n; i += grid_stride())
		gather_item(&g, rows, (size_t)cursor, i);
}

/* One item: the cursor itself. */
static __global__ void advance_kernel(int32_t *cursor, int delta)
{
	KERNEL_WAIT_PREVIOUS();
	for (size_t i = grid_first(); i < 1; i += grid_stride())
		*cursor += delta;
}

static __global__ void argmax_hits_kernel(const float *logits, const int32_t *labels, int rows,
					  int cols, int32_t *hits)
{
	KERNEL_WAIT_PREVIOUS();
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
	KERNEL_WAIT_PREVIOUS();
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
	KERNEL_WAIT_PREVIOUS();
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

/* ---- gradient clipping ---------------------------------------------------------------- */

/* kernels_clip_norm's arguments. */
struct clip_norm_args {
	const float *g;
	size_t n;
	float *norm;
};

/*
 * *norm = the 2-norm of g (n) in elem.h's order (CLIP_PARTS), whatever the
 * geometry: block 0 alone (one problem), its threads taking the parts c =
 * threadIdx.x, threadIdx.x + blockDim.x, ..., each summing its terms in
 * order of the index into shared memory; then the fold by halves, a barrier
 * between levels. Reads are consecutive across a warp's parts.
 */
static __global__ void clip_norm_kernel(struct clip_norm_args a)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ float part[CLIP_PARTS];
	if (blockIdx.x != 0)
		return;
	for (unsigned int c = threadIdx.x; c < CLIP_PARTS; c += blockDim.x) {
		float sum = 0.0f;
		for (size_t i = c; i < a.n; i += CLIP_PARTS)
			sum = clip_sumsq_elem(sum, a.g[i]);
		part[c] = sum;
	}
	__syncthreads();
	for (unsigned int half = CLIP_PARTS / 2; half > 0; half /= 2) {
		for (unsigned int c = threadIdx.x; c < half; c += blockDim.x)
			part[c] += part[c + half];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*a.norm = clip_norm_elem(part[0]);
}
KERNEL_COOP_THUNK(clip_norm_kernel, struct clip_norm_args)

/* g (n) scaled by clip_coef_elem(*norm, max_norm) where clip_scales_elem says so. */
static __global__ void clip_scale_kernel(float *g, size_t n, const float *norm, float max_norm)
{
	KERNEL_WAIT_PREVIOUS();
	float coef = clip_coef_elem(*norm, max_norm);
	size_t live = clip_scales_elem(coef) ? n : 0;
	for (size_t i = grid_first(); i < live; i += grid_stride())
		g[i] = scale_elem(g[i], coef);
}

/* ---- micro-batch mode: a step's gradients summed over its micro-batches ---------------- */

static __global__ void grad_accumulate_kernel(float *acc, const float *g, size_t n)
{
	KERNEL_WAIT_PREVIOUS();
	for (size_t i = grid_first(); i < n; i += grid_stride())
		acc[i] = grad_add_elem(acc[i], g[i]);
}

/*
 * --exact: acc[i] = (first ? 0 : acc[i]) + fixed_encode_elem(g[i]), each
 * element by its one thread; an element out of range adds 1 to acc[n] with
 * an integer atomic add (exact and the same in any order; a healthy step
 * has none, so no thread contends for it). acc[n] is zero here: the
 * buffer's allocation or the last fixed_decode zeroed it.
 */
static __global__ void fixed_accumulate_kernel(int64_t *acc, const float *g, size_t n,
					       double limit, int first)
{
	KERNEL_WAIT_PREVIOUS();
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		int bad;
		int64_t q = fixed_encode_elem(g[i], limit, &bad);
		acc[i] = first ? q : acc[i] + q;
		if (bad)
			atomicAdd((unsigned long long *)&acc[n], 1ull);
	}
}

/* g[i] = fixed_decode_elem(acc[i]) for i < n; item n moves the step's count into acc[n + 1]. */
static __global__ void fixed_decode_kernel(float *g, int64_t *acc, size_t n)
{
	KERNEL_WAIT_PREVIOUS();
	for (size_t i = grid_first(); i <= n; i += grid_stride()) {
		if (i < n) {
			g[i] = fixed_decode_elem(acc[i]);
		} else {
			acc[n + 1] += acc[n];
			acc[n] = 0;
		}
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

#if defined(__CUDACC__) || defined(CUDASIM)
cudaError_t kernels_advance_try(cudaStream_t stream, int32_t *cursor, int delta, int pdl)
{
	struct kernel_geom g = kernel_geom_for(1);
	KERNEL_LAUNCH_PDL_ON(advance_kernel, g, stream, pdl, cursor, delta);
	return cudaGetLastError();
}
#endif

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

void kernels_clip_norm(cudaStream_t stream, const struct kernel_geom *geom, const float *g,
		       size_t n, float *norm)
{
	struct clip_norm_args a = {g, n, norm};
	struct kernel_geom gm = geom ? *geom : kernel_geom_sized(CLIP_PARTS, COOP_MAX_THREADS);
	KERNEL_LAUNCH_COOP(clip_norm_kernel, gm, stream, a);
}

void kernels_clip_scale(cudaStream_t stream, const struct kernel_geom *geom, float *g, size_t n,
			const float *norm, float max_norm)
{
	if (n == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, n);
	KERNEL_LAUNCH(clip_scale_kernel, gm, stream, g, n, norm, max_norm);
}

void kernels_grad_accumulate(cudaStream_t stream, const struct kernel_geom *geom, float *acc,
			     const float *g, size_t n)
{
	if (n == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, n);
	KERNEL_LAUNCH(grad_accumulate_kernel, gm, stream, acc, g, n);
}

void kernels_fixed_accumulate(cudaStream_t stream, const struct kernel_geom *geom, int64_t *acc,
			      const float *g, size_t n, double limit, int first)
{
	if (n == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, n);
	KERNEL_LAUNCH(fixed_accumulate_kernel, gm, stream, acc, g, n, limit, first);
}

void kernels_fixed_decode(cudaStream_t stream, const struct kernel_geom *geom, float *g,
			  int64_t *acc, size_t n)
{
	struct kernel_geom gm = pick_geom(geom, n + 1);
	KERNEL_LAUNCH(fixed_decode_kernel, gm, stream, g, acc, n);
}

#if defined(CUDART_VERSION)
cudaError_t kernels_image_check(void)
{
	struct cudaFuncAttributes attr;
	return cudaFuncGetAttributes(&attr, advance_kernel);
}
#endif
