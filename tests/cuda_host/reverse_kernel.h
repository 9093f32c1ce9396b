/*
 * reverse_kernel.h (tests/cuda_host/) - a cooperative kernel for the barrier
 * tests of both CPU runners (test_kernels_barrier.c under the unit tests'
 * stand-in, test_cudasim_rules.cc under the simulator's): each block
 * reverses its slice of an array through shared memory, which is right only
 * if every thread's write is seen by the thread reading it after the
 * barrier. Written in the common subset of C and C++; include it after the
 * stand-in <cuda_runtime.h>.
 */
#ifndef MNIST_DDP_REVERSE_KERNEL_H
#define MNIST_DDP_REVERSE_KERNEL_H

#include <stddef.h>

struct reverse_args {
	const float *in;
	float *out;
	int n;
	int divergent; /* 1: thread 0 returns before the barrier */
	int barrier;   /* 0: no barrier (the reads race the writes) */
};

/* out[i] = in[the mirror of i within its block's slice of blockDim.x items], -1 past n. */
static __global__ void reverse_kernel(struct reverse_args a)
{
	__shared__ float slot[1024];
	unsigned int t = threadIdx.x, n = blockDim.x;
	size_t base = (size_t)blockIdx.x * n;
	if (a.divergent && t == 0)
		return;
	slot[t] = base + t < (size_t)a.n ? a.in[base + t] : -1.0f;
	if (a.barrier)
		__syncthreads();
	if (base + t < (size_t)a.n)
		a.out[base + t] = slot[n - 1 - t];
}
KERNEL_COOP_THUNK(reverse_kernel, struct reverse_args)

#endif /* MNIST_DDP_REVERSE_KERNEL_H */
