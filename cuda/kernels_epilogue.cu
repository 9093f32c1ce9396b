/*
 * kernels_epilogue.cu - what a GEMM's epilogue does where cuBLASLt does not
 * (the "plain" and sgemm ways of a GEMM, cuda/ways.cu): bias and ReLU, the
 * ReLU's gradient, and the bias gradient by one thread a sum or by block
 * reduction. Written as cuda/kernels.cu is (whose file comment says how each
 * build runs them); the block reduction cooperates through shared memory and
 * __syncthreads.
 */
#include "kernels.h"

#include "block_sums.cuh"
#include "elem.h"
#include "kernel_launch.cuh"

/* ---- what a GEMM's epilogue does, where cuBLASLt cannot ------------------------------ */

/* y (rows, cols), bias (cols): item i is column i % cols. */
static __global__ void bias_act_kernel(float *y, const float *bias, int rows, int cols, int relu)
{
	KERNEL_WAIT_PREVIOUS();
	size_t n = work_2d(rows, cols);
	for (size_t i = grid_first(); i < n; i += grid_stride())
		y[i] = bias_act_elem(y[i], bias[i % (size_t)cols], relu);
}

static __global__ void relu_backward_kernel(float *dy, const float *y, size_t n)
{
	KERNEL_WAIT_PREVIOUS();
	for (size_t i = grid_first(); i < n; i += grid_stride())
		dy[i] = relu_backward_elem(dy[i], y[i]);
}

/* Item i is out[i], the sum over l of op(A)[i, l] in order of l. */
static __global__ void bias_grad_kernel(const float *a, int lda, int trans_a, int m, int k,
					float *out)
{
	KERNEL_WAIT_PREVIOUS();
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
 * rows. Each thread's partial sum, then block_sums_fold; reads are
 * consecutive across lanes.
 */
static __global__ void bias_grad_block_kernel(struct bias_grad_args g)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ float part[COOP_MAX_THREADS];
	struct block_sums b =
		block_sums_make(g.trans_a ? (blockDim.x < COOP_LANES ? blockDim.x : COOP_LANES) : 1u);
	for (size_t first = (size_t)blockIdx.x * b.lanes; first < (size_t)g.m;
	     first += (size_t)gridDim.x * b.lanes) {
		size_t i = first + b.lane;
		int live = b.slice < b.slices && i < (size_t)g.m;
		float sum = 0.0f;
		for (size_t l = b.slice; live && l < (size_t)g.k; l += b.slices)
			sum += g.trans_a ? g.a[l * (size_t)g.lda + i] : g.a[i * (size_t)g.lda + l];
		block_sums_fold(&b, part, sum);
		if (live && b.slice == 0)
			g.out[i] = part[threadIdx.x];
	}
}
KERNEL_COOP_THUNK(bias_grad_block_kernel, struct bias_grad_args)

/* ---- launchers ------------------------------------------------------------------------- */

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
