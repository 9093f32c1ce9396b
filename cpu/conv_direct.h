/*
 * conv_direct.h - the host backend's direct convolution kernels
 * (cpu/conv_direct.c), each built for AVX-512, AVX2 and the baseline ISA in
 * one binary and chosen at run time (host_isa()), as OpenBLAS chooses its
 * kernels. Layouts are include/conv_shape.h's (batch innermost).
 */
#ifndef MNIST_DDP_CONV_DIRECT_H
#define MNIST_DDP_CONV_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "conv_shape.h"

enum host_isa {
	HOST_ISA_GENERIC, /* the baseline x86-64 (SSE2), or any other CPU */
	HOST_ISA_AVX2,    /* x86-64-v3: AVX2 and FMA */
	HOST_ISA_AVX512,  /* x86-64-v4: AVX-512 F, BW, DQ, VL */
};

/*
 * The ISA the kernels run on: the best the CPU has, or a lower one named by
 * the environment variable MNIST_DDP_HOST_ISA (generic, avx2 or avx512; a
 * higher one than the CPU has changes nothing; mnist-train refuses any other
 * value, host/config.c), read once. For testing the lower paths on a machine
 * that would not choose them.
 */
enum host_isa host_isa(void);
/* The widest the CPU has, whatever MNIST_DDP_HOST_ISA says (cpu/blas_info.c's advice). */
enum host_isa host_cpu_isa(void);
const char *host_isa_name(enum host_isa isa);

/*
 * dx (c, h, w, batch) = the convolution's transpose applied to
 * dz (oc, oh, ow, batch) with weights w (oc, c*k*k): for each input pixel,
 * the sum over output channels, then taps ky, kx ascending, of
 * w * dz at the output pixel that tap reads it from.
 */
void conv_direct_input_grad(const float *w, const float *dz, const struct conv_shape *s, int oc,
			    int batch, float *dx);

/*
 * dw (oc, c*k*k) = dz (oc, oh*ow*batch) times the im2col matrix of
 * x (c, h, w, batch) transposed, without the matrix: for each weight, the sum
 * over output pixels and images of dz * x at the pixel its tap reads (0 in
 * the padding).
 */
void conv_direct_weight_grad(const float *dz, const float *x, const struct conv_shape *s, int oc,
			     int batch, float *dw);

/*
 * y (oc, ph, pw, batch) and arg = the max-pool ps of relu(conv(x, w) + b):
 * include/backend.h's conv_forward without the im2col matrix, for
 * batch-innermost y. Each output pixel the sum over taps (ci, ky, kx)
 * ascending, a tap in the padding adding w * 0.
 */
void conv_direct_forward(const float *x, const float *w, const float *b, const struct conv_shape *s,
			 const struct pool_shape *ps, int oc, int batch, float *y, int32_t *arg);

#endif /* MNIST_DDP_CONV_DIRECT_H */
