/*
 * block_fibers.h (tests/cuda_host/) - one thread block of a kernel run on the
 * CPU so that __syncthreads holds, for both stand-ins of the CUDA runtime:
 * the unit tests' (tests/cuda_host/cuda_runtime.h) and the simulator's
 * (tests/cudasim/cuda_runtime.h).
 *
 * A kernel whose threads share memory and wait at barriers is launched by
 * cuda/kernels.cu's KERNEL_LAUNCH_COOP. Its block's threads then run as
 * fibers on the calling thread, each on a stack of its own (block_fibers.c
 * says how it switches): each runs until it reaches __syncthreads or returns,
 * and hands over to the next; once every thread of the block has, those at the
 * barrier run on to the next one, and so on until all have returned. This is
 * the rule CUDA states for __syncthreads: it waits until every thread of the
 * block has reached it, and memory written before it by any of them is seen
 * after it by all. CUDA allows a barrier in conditional code only where the
 * condition is the same across the whole block; a block in which some
 * threads wait at a barrier that others never reach (they returned) is
 * reported and the process aborted: on a GPU it may hang or go wrong.
 *
 * Between barriers the threads run one after another, in ascending order of
 * threadIdx.x in the unit tests and descending in the simulator, so a read of
 * another thread's write that a missing barrier leaves unordered sees the
 * write in one suite and not in the other.
 *
 * __shared__ becomes `static`: one copy per kernel, which is the block's
 * while it runs (blocks run one after another). Plain kernels (KERNEL_LAUNCH)
 * keep running as nested loops; one of them reaching __syncthreads is an
 * error, reported here (its launch would have to be KERNEL_LAUNCH_COOP).
 */
#ifndef MNIST_DDP_BLOCK_FIBERS_H
#define MNIST_DDP_BLOCK_FIBERS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Around each switch into a thread (in) and out of it (out): a runner's per-thread state. */
struct block_fiber_hooks {
	void (*in)(void *arg, unsigned int thread);
	void (*out)(void *arg, unsigned int thread);
	void *arg;
};

/*
 * Run threads [0, threads) of block `block` of `kernel`: each calls
 * body(arg) with *thread_index set to its index while it runs. hooks may be
 * NULL. descending: the order threads run in between barriers.
 */
void block_fibers_run(const char *kernel, unsigned int block, unsigned int threads,
		      unsigned int *thread_index, void (*body)(const void *arg), const void *arg,
		      const struct block_fiber_hooks *hooks, int descending);

/* __syncthreads: the running thread waits here for its block (aborts outside block_fibers_run). */
void block_fibers_sync(void);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_BLOCK_FIBERS_H */
