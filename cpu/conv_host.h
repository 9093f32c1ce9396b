/*
 * conv_host.h - the host backend's convolution, pooling and transpose ops (cpu/conv_host.c),
 * entries of its ops table in cpu/backend_host.c. Meanings as in include/backend.h.
 */
#ifndef MNIST_DDP_CONV_HOST_H
#define MNIST_DDP_CONV_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "conv_shape.h"

void host_im2col(void *ctx, const float *x, const struct conv_shape *s, int batch, float *cols);
void host_col2im(void *ctx, const float *dcols, const struct conv_shape *s, int batch, float *dx);
void host_channel_bias_act(void *ctx, float *y, const float *bias, int channels, size_t n,
			   int relu);
void host_maxpool(void *ctx, const float *x, const struct pool_shape *s, int batch, float *y,
		  int32_t *arg);
void host_maxpool_backward(void *ctx, const float *dy, const int32_t *arg,
			   const struct pool_shape *s, int batch, float *dx);
void host_transpose(void *ctx, const float *x, int rows, int cols, float *y);

#endif /* MNIST_DDP_CONV_HOST_H */
