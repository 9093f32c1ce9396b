/*
 * conv_plan.cuh - the convolution stages' plans (cuda/conv_plan.cu): a
 * stage's forward (with the im2col matrix a training step keeps) and its
 * input gradient each run one of several ways, chosen as the GEMMs' are
 * (cuda/plan.cu: timed on the device, the heuristic's first, or a
 * checkpoint's by name): the direct kernels of cuda/kernels_conv.cu, or the
 * convolution summed by a GEMM (one candidate per way cuda/gemm_lt.cu lists
 * for it) between kernels that prepare and finish it.
 */
#ifndef MNIST_DDP_CONV_PLAN_CUH
#define MNIST_DDP_CONV_PLAN_CUH

#include "backend.h"
#include "gemm_lt.cuh"

/* ->conv_forward on g's stream: planned the first time its problem is met when cols is given. */
void cuda_conv_forward_run(struct cuda_gemm *g, const struct conv_stage *s, const float *x,
			   const float *w, const float *b, float *y, int32_t *arg, float *cols);

/* ->conv_backward_data on g's stream, planned the first time its problem is met. */
void cuda_conv_input_grad_run(struct cuda_gemm *g, const struct conv_stage *s, const float *w,
			      const float *dz, const struct conv_stage *below,
			      const float *below_y, const int32_t *below_arg, float *dz_below);

#endif /* MNIST_DDP_CONV_PLAN_CUH */
