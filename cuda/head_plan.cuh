/*
 * head_plan.cuh - the plan of a training step's head (struct head_req in
 * include/backend.h: the top dense layer's forward, the loss, the layer's
 * input gradient), chosen as the GEMMs' are (cuda/gemm_lt.cuh: timed on the
 * device, the heuristic's first, or a checkpoint's by name) between two ways:
 * "separate", the three ops one after another (each GEMM the way its own plan
 * chose, the loss kernel between), and "fused", one launch of
 * kernels_head (cuda/kernels.cu) where the request fits it.
 */
#ifndef MNIST_DDP_HEAD_PLAN_CUH
#define MNIST_DDP_HEAD_PLAN_CUH

#include "backend.h"
#include "gemm_lt.cuh"

struct head_plan;

/* One backend's head plans, in the order met. */
struct cuda_head {
	struct head_plan *plans;
	struct plan_op *reports; /* plans[i]'s report: reports[i] */
	int n_plans, cap_plans;
};

/* ->head on g's stream: its GEMMs' plans and its own made the first time its problem is met. */
void cuda_head_run(struct cuda_head *hd, struct cuda_gemm *g, const struct head_req *r);

/* Forget every plan. */
void cuda_head_forget(struct cuda_head *hd);

#endif /* MNIST_DDP_HEAD_PLAN_CUH */
