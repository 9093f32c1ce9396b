/*
 * kernels.h - launchers for the CUDA backend's element kernels (cuda/kernels.cu).
 *
 * Each launcher runs one kernel on `stream`. `geom` NULL means the geometry
 * the backend uses, kernel_geom_for() of the kernel's work size (given per
 * launcher below); tests pass smaller grids to make the grid-stride loops wrap.
 * Shapes and meanings are those of the matching ops in include/backend.h; all
 * pointers are device memory. A launch with nothing to do is skipped.
 *
 * nvcc compiles kernels.cu against <cuda_runtime.h>. The unit tests compile the
 * same file with the host C compiler and a stand-in <cuda_runtime.h> first on
 * the include path (tests/cuda_host/), so this header is C as well as C++.
 */
#ifndef MNIST_DDP_KERNELS_H
#define MNIST_DDP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "conv_shape.h"
#include "elem.h"

/* nvcc: the CUDA runtime; a host-compiled test puts its own stand-in first on the path. */
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 1-D launch: grid blocks of block threads. */
struct kernel_geom {
	unsigned int grid, block;
};

#define KERNEL_BLOCK 256u     /* threads per block */
#define KERNEL_MAX_GRID 4096u /* blocks at most; the grid-stride loops cover the rest */

/* The launch the backend uses for n work items: ceil(n / KERNEL_BLOCK) blocks, capped. */
struct kernel_geom kernel_geom_for(size_t n);

/* Work: count * pixels. See backend_ops.gather. */
void kernels_gather(cudaStream_t stream, const struct kernel_geom *geom, const uint8_t *images,
		    const uint8_t *labels, int pixels, const int32_t *index, const int32_t *cursor,
		    int count, float *x, int32_t *y);
/* Work: 1. */
void kernels_advance(cudaStream_t stream, const struct kernel_geom *geom, int32_t *cursor,
		     int delta);
/* Work: rows * cols. */
void kernels_bias_act(cudaStream_t stream, const struct kernel_geom *geom, float *y,
		      const float *bias, int rows, int cols, int relu);
/* Work: n. */
void kernels_relu_backward(cudaStream_t stream, const struct kernel_geom *geom, float *dy,
			   const float *y, size_t n);
/* Work: rows (one thread per row). dlogits may be NULL. */
void kernels_softmax_xent(cudaStream_t stream, const struct kernel_geom *geom,
			  const float *logits, const int32_t *labels, int rows, int cols, float scale,
			  float *row_loss, float *dlogits);
/* Work: rows. */
void kernels_argmax_hits(cudaStream_t stream, const struct kernel_geom *geom,
			 const float *logits, const int32_t *labels, int rows, int cols,
			 int32_t *hits);
/* Work: n, the whole flat buffer. v may be NULL when momentum is 0. The rate is lr[*step]. */
void kernels_sgd_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			const float *g, float *v, size_t n, const float *lr, const int32_t *step,
			float momentum, float weight_decay);
/*
 * Work: n. Two launches: the update (reads *t, the updates done so far), then
 * *t += 1 (kernels_advance, the backend's geometry).
 */
void kernels_adamw_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			  const float *g, float *m, float *v, size_t n, const float *lr,
			  const int32_t *step, int32_t *t, struct adamw_hyper h);
/* Work: c*k*k * oh*ow*batch, the entries of cols. */
void kernels_im2col(cudaStream_t stream, const struct kernel_geom *geom, const float *x,
		    const struct conv_shape *s, int batch, float *cols);
/* Work: c*h*w*batch, the input pixels (one thread gathers all taps of a pixel). */
void kernels_col2im(cudaStream_t stream, const struct kernel_geom *geom, const float *dcols,
		    const struct conv_shape *s, int batch, float *dx);
/* Work: channels * n. */
void kernels_channel_bias_act(cudaStream_t stream, const struct kernel_geom *geom, float *y,
			      const float *bias, int channels, size_t n, int relu);
/* Work: c*oh*ow*batch, the windows. */
void kernels_maxpool(cudaStream_t stream, const struct kernel_geom *geom, const float *x,
		     const struct pool_shape *s, int batch, float *y, int32_t *arg);
/* Work: c*h*w*batch, the input pixels. */
void kernels_maxpool_backward(cudaStream_t stream, const struct kernel_geom *geom,
			      const float *dy, const int32_t *arg, const struct pool_shape *s,
			      int batch, float *dx);
/* x (n) *= alpha. Work: n. */
void kernels_scale(cudaStream_t stream, const struct kernel_geom *geom, float *x, size_t n,
		   float alpha);
/* Work: rows * cols. */
void kernels_transpose(cudaStream_t stream, const struct kernel_geom *geom, const float *x,
		       int rows, int cols, float *y);

#if defined(CUDART_VERSION) /* a CUDA runtime: nvcc's, or the tests' simulator (tests/cudasim) */
/*
 * cudaSuccess when this binary holds code the current device can run
 * (cudaErrorNoKernelImageForDevice, for example, on a GPU older than sm_80).
 */
cudaError_t kernels_image_check(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_KERNELS_H */
