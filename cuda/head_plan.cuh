/*
 * head_plan.cuh - the plan of a training step's head (struct head_req in
 * include/backend.h: the dense stages at the top, their forwards, the loss,
 * their input and weight gradients), chosen as the GEMMs' are
 * (cuda/plan.cu: timed on the device, the heuristic's first, or a
 * checkpoint's by name) among (cuda/ways.cu): "separate", every op one after another (each
 * GEMM the way its own plan chose, the loss kernel between); "fused", the
 * top's forward, loss and input gradient as one launch of kernels_head, the
 * stages under it as GEMMs; "dense.rN", every stage's forward, the loss and
 * every input gradient as one launch of kernels_dense_head, N rows a block
 * (cuda/kernels_dense.cu), where the request fits them; and each of these with
 * "+wgrad": the dense stages' weight gradients as one launch of
 * kernels_dense_wgrad on the second stream, where every one of them may go
 * there. Otherwise the weight gradients are GEMMs (each its own plan), sent
 * as soon as their inputs are there. Candidates are timed with their weight
 * gradients sent as the step sends them, the second stream joined at the end.
 */
#ifndef MNIST_DDP_HEAD_PLAN_CUH
#define MNIST_DDP_HEAD_PLAN_CUH

#include "backend.h"
#include "gemm_lt.cuh"

/*
 * ->head on g's stream: its GEMMs' plans and its own made the first time its
 * problem is met; its weight gradients sent to gemm(ctx, ...), the backend's
 * GEMM op (which may run them on a second stream), where the way has them,
 * or, grouped in one kernel, to beside(ctx, run, arg), which calls run with
 * the stream to queue it on (the second, once what the first holds is done);
 * a candidate is timed so, joined by join(ctx) at its end.
 */
void cuda_head_run(struct cuda_gemm *g, const struct head_req *r,
		   void (*gemm)(void *ctx, const struct gemm_req *r),
		   void (*beside)(void *ctx, void (*run)(cudaStream_t stream, void *arg), void *arg),
		   void (*join)(void *ctx), void *ctx);

#endif /* MNIST_DDP_HEAD_PLAN_CUH */
