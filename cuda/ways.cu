/*
 * ways.cu - every way to run an op that plans: see cuda/ways.cuh. The order
 * is the order of each op's candidates; the H100's wins are in
 * docs/benchmarks.md and a GPU run's SUMMARY.txt ("ways by family"): a way
 * measured there that won nothing is removed after that run (issue 43).
 * Every candidate of every op of seed, mlp and LeNet-5 is run by name against
 * the host backend by tests/gpu/gpu_plan.c (label gpu, and on the simulator).
 */
#include "ways.cuh"

#define GPU_PLAN "tests/gpu/gpu_plan.c runs it by name against the host"

const struct way_entry way_registry[] = {
	/* A GEMM (cuda/gemm_lt.cu: gemm_way_run). */
	{PLAN_GEMM, "lt.<epilogue>.<algorithm>[+bg.gemv|kernel|block]",
	 "cublasLtMatmul with each algorithm its heuristic lists, the epilogue fused or, as "
	 "'plain', in kernels of ours (kernels_bias_act, kernels_relu_backward); an unfused bias "
	 "gradient by cublasSgemv against ones, our kernel, or our block reduction",
	 GPU_PLAN "; our kernels by test_kernels_host", gemm_list_lt},
	{PLAN_GEMM, "sgemm+bg.gemv (every unfused bias gradient where cuBLASLt has no algorithm)",
	 "cublasSgemm, the epilogue in kernels of ours", GPU_PLAN, gemm_list_sgemm},
	{PLAN_GEMM, "ksplit.cN.micro[.im2col]",
	 "ours, k split into N chunks, a thread per 4 x 4 outputs (kernels_gemm_ksplit, "
	 "cuda/kernels_gemm.cu); .im2col reads B from the convolution's input",
	 GPU_PLAN "; test_kernels_host (gemm_ksplit*)", gemm_list_ksplit},
	{PLAN_GEMM, "tile.k32, tile.k128",
	 "ours, whole in one kernel, k in steps of 32 or 128 (kernels_gemm_tile, "
	 "cuda/kernels_gemm.cu)",
	 GPU_PLAN "; test_kernels_host (gemm_tile*)", gemm_list_tile},

	/* A convolution stage's forward (cuda/conv_plan.cu: run_call). */
	{PLAN_CONV_FORWARD, "direct",
	 "a thread per pool window: conv, bias, ReLU, pool (kernels_conv_forward)",
	 GPU_PLAN "; test_kernels_host", conv_list_direct},
	{PLAN_CONV_FORWARD, "direct.patch, direct.patch.t64",
	 "a window's patch in registers, four output channels at once (kernels_conv_patch), "
	 "in the backend's blocks or of 64 threads",
	 GPU_PLAN "; test_kernels_host", conv_list_patch},
	{PLAN_CONV_FORWARD, "im2col+<a GEMM way>",
	 "the im2col matrix, the GEMM (any way above), then bias, ReLU and pool "
	 "(kernels_conv_im2col, kernels_conv_pool)",
	 GPU_PLAN, conv_list_gemm},

	/* A convolution stage's input gradient (cuda/conv_plan.cu: run_call). */
	{PLAN_CONV_INPUT_GRAD, "direct",
	 "a thread per window of the pool below (kernels_conv_backward_data)",
	 GPU_PLAN "; test_kernels_host", conv_list_direct},
	{PLAN_CONV_INPUT_GRAD, "direct.patch, direct.patch.t64",
	 "dz under a block of 2 x 2 input pixels in registers, three input channels at once "
	 "(kernels_conv_backward_patch)",
	 GPU_PLAN "; test_kernels_host", conv_list_patch},
	{PLAN_CONV_INPUT_GRAD, "<a GEMM way>+col2im",
	 "W^T dz by the GEMM, gathered back through the pool below (kernels_col2im_backward)",
	 GPU_PLAN, conv_list_gemm},

	/* A training step's head (cuda/head_plan.cu: run_way). */
	{PLAN_HEAD, "separate", "each op one after another: the GEMMs, the loss kernel",
	 GPU_PLAN " (eager and captured)", head_list_separate},
	{PLAN_HEAD, "fused", "the top's forward, loss and input gradient as one kernel "
	 "(kernels_head, cuda/kernels_head.cu)",
	 GPU_PLAN " (eager and captured); test_kernels_host", head_list_fused},
	{PLAN_HEAD, "dense.r1, dense.r2, dense.r4",
	 "every dense stage's forward, the loss and every input gradient as one kernel, N rows "
	 "a block (kernels_dense_head, cuda/kernels_dense.cu)",
	 GPU_PLAN " (eager and captured); test_kernels_host", head_list_dense},
	{PLAN_HEAD, "<each way above>+wgrad",
	 "its weight gradients as one kernel on the second stream (kernels_dense_wgrad)",
	 GPU_PLAN " (eager and captured); test_kernels_host", head_list_grouped},
};

const int way_registry_count = (int)(sizeof(way_registry) / sizeof(way_registry[0]));

void ways_list(int op, void *listing)
{
	for (int i = 0; i < way_registry_count; i++)
		if (way_registry[i].op == op)
			way_registry[i].list(listing);
}
