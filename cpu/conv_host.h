/*
 * conv_host.h - the host backend's convolution, pooling and transpose loops (cpu/conv_host.c)
 * and the convolution stages built from them, entries of its ops table in
 * cpu/backend_host.c. Meanings as in include/backend.h; the loops' as those
 * of the element bodies they run (include/elem.h).
 */
#ifndef MNIST_DDP_CONV_HOST_H
#define MNIST_DDP_CONV_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "conv_shape.h"

void host_im2col(void *ctx, const float *x, const struct conv_shape *s, int batch, float *cols);
void host_maxpool_backward(void *ctx, const float *dy, const int32_t *arg,
			   const struct pool_shape *s, int batch, float *dx);
void host_transpose(void *ctx, const float *x, int rows, int cols, float *y);
/* dz (c, h, w, batch) = pool_relu_backward_elem of dy and y (c, oh, ow, batch) through arg. */
void host_pool_relu_backward(const float *dy, const float *y, const int32_t *arg,
			     const struct pool_shape *s, int batch, float *dz);

/* The convolution stages' ops (include/backend.h), built from the ones above. */
void host_conv_forward(void *ctx, const struct conv_stage *st, const float *x, const float *w,
		       const float *b, float *y, int32_t *arg, float *cols);
void host_pool_backward(void *ctx, const struct conv_stage *st, const float *dy, const float *y,
			const int32_t *arg, float *dz);
void host_conv_backward_data(void *ctx, const struct conv_stage *st, const float *w,
			     const float *dz, const struct conv_stage *below, const float *below_y,
			     const int32_t *below_arg, float *dz_below);

#endif /* MNIST_DDP_CONV_HOST_H */
