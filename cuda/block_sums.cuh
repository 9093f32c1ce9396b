/*
 * block_sums.cuh - a block's threads sharing out sums (the block-reduction
 * bias gradient, cuda/kernels_epilogue.cu; our split GEMM's reduce,
 * cuda/kernels_gemm.cu): neighbouring sums to lanes, each sum's terms to
 * slices of threads, their partial sums folded in shared memory by a tree.
 */
#ifndef MNIST_DDP_BLOCK_SUMS_CUH
#define MNIST_DDP_BLOCK_SUMS_CUH

#include "kernel_launch.cuh"

/* How a block's threads share out sums: `lanes` neighbouring sums, `slices` threads each. */
struct block_sums {
	unsigned int lanes, slices, slice, lane, top; /* top: the least power of two >= slices */
};

static __device__ inline struct block_sums block_sums_make(unsigned int lanes)
{
	struct block_sums b;
	b.lanes = lanes;
	b.slices = blockDim.x / lanes;
	b.slice = threadIdx.x / lanes;
	b.lane = threadIdx.x % lanes;
	b.top = 1;
	while (b.top < b.slices)
		b.top *= 2;
	return b;
}

/*
 * Each thread's partial sum to part[threadIdx.x], then a tree over the
 * slices, a barrier between levels: slice 0's threads hold their lane's
 * total in part[threadIdx.x] after. Every thread of the block calls it.
 */
static __device__ inline void block_sums_fold(const struct block_sums *b, float *part, float sum)
{
	part[threadIdx.x] = sum;
	__syncthreads();
	for (unsigned int half = b->top / 2; half > 0; half /= 2) {
		if (b->slice < half && b->slice + half < b->slices)
			part[threadIdx.x] += part[threadIdx.x + half * b->lanes];
		__syncthreads();
	}
}

#endif /* MNIST_DDP_BLOCK_SUMS_CUH */
