#!/usr/bin/env bash
# mutants.sh - plant bugs in the CUDA backend one at a time and check that
# the simulator suite (ctest -L cudasim) catches each: a kill score for the
# simulator and the GPU suite together (with, where a mutant names it among its
# first tests, test_kernels_host: cuda/kernels.cu compiled for the CPU). Too slow for the default suite (a
# rebuild and a test run per mutant); run it by hand after changing the
# simulator, the GPU suite or cuda/ (docs/gpu.md):
#
#   tests/cudasim/mutants.sh [--list] [--keep] [NAME...]
#
# Each mutant below is one exact text replacement in one file of cuda/ (the
# text must occur exactly once, else the mutant is reported as not applied:
# a stale list never passes for a good score). The source tree is copied
# (git's tracked and unignored files) into a scratch directory, built there
# once with the CUDA toolkit (mnist-train-cudasim is a copy of a CUDA-enabled
# mnist-train; one architecture, to save time) and without -Werror (a mutant
# may leave a variable unused), and the suite is run once unmutated: it must
# pass, or nothing can be concluded. Then for each mutant: the pristine file
# is restored (from cuda/ as copied at the start: the worktree may change
# meanwhile), the replacement applied, the simulated module and the test
# programs rebuilt (never nvcc: mutants touch cuda/ only, which the host
# program does not compile), and
# ctest runs the tests most likely to kill it first, then the rest of
# -L cudasim, stopping at the first failure. The worktree itself is never
# edited.
#
# Prints "killed", "SURVIVED", "NOT APPLIED" or "DID NOT BUILD" per mutant
# (with the killing test), then the kill score; exits 0 only when every
# mutant was applied, built and killed. NAME...: only those mutants. --list:
# print the mutants and exit. --keep: keep the scratch directory (its path
# is printed; logs in logs/). MNIST comes from the worktree's MNIST_Data.
set -uo pipefail

ME=mutants.sh
. "$(dirname "$0")/../mutants_common.sh"

# ---- the mutants ------------------------------------------------------------------
B=cuda/backend_cuda.cu BG=cuda/backend_cuda_graph.cu S=cuda/backend_cuda_start.cu K=cuda/kernels.cu P=cuda/probe.cu L=cuda/gemm_lt.cu LT=cuda/gemm_cublaslt.cu
Q=cuda/plan.cu N=cuda/kernel_launch.cuh
F=cuda/fastdiv.h C=cuda/kernels_conv.cu CP=cuda/kernels_conv_patch.cu G=cuda/kernels_gemm.cu BS=cuda/block_sums.cuh
H=cuda/head_plan.cu
E=cuda/kernels_head.cu D=cuda/kernels_dense.cu X=cuda/kernels_loss.cuh

mutant mean-as-sum $B \
	'op == REDUCE_SUM ? ncclSum : ncclAvg' 'op == REDUCE_SUM ? ncclSum : ncclSum' \
	'gpu_allreduce_sim_2'
mutant pageable-copy-before-deadline-wait $B \
	$'\tcuda_wait(c);\n\tif (bytes == 0)\n\t\treturn;\n\tCUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, c->stream));\n\tCUDA_CHECK(cudaStreamSynchronize(c->stream));' \
	$'\tif (bytes == 0)\n\t\treturn;\n\tCUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, c->stream));\n\tcuda_wait(c);' \
	'gpu_deadline_sim_hung_peer_2|gpu_deadline_sim_2'
mutant a-transpose-inverted $LT \
	'cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;' \
	'cublasOperation_t ta = c.trans_a ? CUBLAS_OP_N : CUBLAS_OP_T;' \
	'gpu_ops_sim'
mutant wrong-lda $LT \
	'c.trans_a ? c.m : c.k, c.lda)' 'c.trans_a ? c.m : c.k, c.lda + 1)' \
	'gpu_ops_sim'
mutant alloc-not-zeroed $B \
	$'\tCUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c->stream));\n\treturn p;' \
	$'\treturn p;' \
	'gpu_ops_sim|gpu_train_step_sim_2'
mutant capture-outcome-not-agreed $BG \
	$'\treturn bad < 0;\n}' $'\treturn ok;\n}' \
	'gpu_graph_sim_capture_fails_on_rank1_2|gpu_graph_sim_capture_begin_fails_on_rank1_2'
mutant cublas-on-legacy-stream $S \
	'brc = cublasSetStream(c->gemm.blas, c->stream);' 'brc = CUBLAS_STATUS_SUCCESS;' \
	'gpu_ops_sim_no_cublaslt'
mutant cublaslt-on-legacy-stream $L \
	'g->workspace_bytes, stream));' 'g->workspace_bytes, NULL));' \
	'gpu_ops_sim'
mutant deadline-never-fires $B \
	'if (waited >= c->timeout)' 'if (waited < 0.0)' \
	'gpu_deadline_sim_hung_peer_2'
mutant sgd-skips-last-element $K \
	$'\t\tif (i >= n) {\n\t\t\tgather_item(&next, rows, (size_t)cursor, i - n);\n\t\t\tcontinue;' \
	$'\t\tif (i + 1 >= n) {\n\t\t\tgather_item(&next, rows, (size_t)cursor, i - n);\n\t\t\tcontinue;' \
	'gpu_ops_sim'
# --clip-grad-norm's norm: the fold started before every part is written (a barrier gone),
# and the scale launched over half the gradients.
mutant clip-fold-without-barrier $K \
	$'\t\tpart[c] = sum;\n\t}\n\t__syncthreads();' $'\t\tpart[c] = sum;\n\t}' \
	'test_kernels_host|gpu_ops_sim'
mutant clip-scale-half $K \
	'size_t live = clip_scales_elem(coef) ? n : 0;' 'size_t live = clip_scales_elem(coef) ? n / 2 : 0;' \
	'test_kernels_host|gpu_ops_sim|mnist_train_sim_clip_1'
mutant block-of-2048-threads cuda/kernels.h \
	'#define KERNEL_BLOCK 256u' '#define KERNEL_BLOCK 2048u' \
	'gpu_ops_sim'
mutant broadcast-root-ignored $B \
	'ncclBroadcast(buf, buf, n, ncclFloat, root,' 'ncclBroadcast(buf, buf, n, ncclFloat, 0,' \
	'gpu_allreduce_sim_2'
mutant replay-not-pending $BG \
	$'\tif (g->collective)\n\t\tcuda_note_collective(c, g->collective);' $'\t(void)cuda_note_collective;' \
	'gpu_deadline_sim_replay_2|mnist_train_sim_replay_hang_timeout_2'
mutant free-without-deadline-wait $B \
	$'\tif (c->pending.what)\n\t\tcuda_wait(c);\n\tCUDA_CHECK(cudaFree(p));' $'\tCUDA_CHECK(cudaFree(p));' \
	'gpu_deadline_sim_free_2'
mutant tf32-math $S \
	'cublasSetMathMode(c->gemm.blas, CUBLAS_DEFAULT_MATH)' 'cublasSetMathMode(c->gemm.blas, CUBLAS_TF32_TENSOR_OP_MATH)' \
	'gpu_ops_sim_no_cublaslt'
mutant tf32-compute-type $LT \
	'g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F' 'CUBLAS_COMPUTE_32F_FAST_TF32' \
	'gpu_ops_sim'
# More, cheap to plant.
mutant no-warm-up $S \
	$'\twarm_up(c);\n' $'\n' \
	'gpu_deadline_sim_no_warm_up_2'
mutant gather-label-of-batch-row $K \
	'g->y[row] = (int32_t)g->labels[e];' 'g->y[row] = (int32_t)g->labels[row];' \
	'gpu_ops_sim'
mutant every-rank-on-device-0 $P \
	'*device = count == 1 ? 0 : d->local_rank;' '*device = 0;' \
	'gpu_graph_sim_2'
# Issue 22: every launch checked, in the product and on the simulator alike.
mutant launch-unchecked $N \
	$'__VA_ARGS__);     \\\n\t\tCUDA_CHECK_LAUNCH(#kernel);' $'__VA_ARGS__);     \\\n\t\t(void)0;' \
	'cudasim_launch_check_grid_0_caught_1|cudasim_launch_check_block_2048_caught_1|cudasim_launch_check_image_caught_1'
mutant wait-ignores-async-error $B \
	$'\t\t\tcheck_nccl_async(c);\n\t\t\twaited = clock_seconds() - start;' \
	$'\t\t\twaited = clock_seconds() - start;' \
	'mnist_train_sim_peer_gone_async_error_2'
# Issue 21: the fused step.
mutant counters-not-moved $X \
	$'\t\tx->counters->step += 1;\n' $'\n' \
	'gpu_ops_sim|mnist_train_sim_graph_nodes_seed'
mutant loss-relu-gate-dropped $X \
	'd[lane] = x->relu ? relu_backward_elem(g, v) : g;' 'd[lane] = g;' \
	'gpu_ops_sim'
# Issue 25: measured plans.
mutant checkpoint-plan-ignored $Q \
	'const struct plan_preset *preset = preset_for(g, rep->key);' 'const struct plan_preset *preset = NULL;' \
	'mnist_train_sim_seed_cuda_vs_host_2|gpu_plan_sim'
mutant given-plan-source-lost $Q \
	'"%s", in->ops[i].source);' '"%s", "measured");' \
	'mnist_train_sim_side_stream_mlp|gpu_plan_sim'
mutant first-run-screen-without-slack $Q \
	'us > PLAN_SLOW_FACTOR * best + PLAN_SLOW_SLACK_US;' 'us > PLAN_SLOW_FACTOR * best;' \
	'mnist_train_sim_plan_host_submit'
mutant first-run-not-reported $Q \
	$'\tg->first_us = us;\n' '' \
	'mnist_train_sim_plan_host_submit'
mutant bias-gradient-kernel-not-run $L \
	$'\t\tkernels_bias_grad(stream, NULL, r->a, r->lda, r->trans_a, r->m, r->k, r->bias_grad);' $'\t\t(void)0;' \
	'gpu_plan_sim'
mutant bias-gradient-block-not-run $L \
	$'\t\tkernels_bias_grad_block(stream, NULL, r->a, r->lda, r->trans_a, r->m, r->k,\n\t\t\t\t\tr->bias_grad);' $'\t\t(void)0;' \
	'gpu_plan_sim'
# Cooperative kernels: a barrier taken out. The simulator runs a block's threads in
# descending order between barriers, so lane 0's write comes after the others' reads; a
# tree reduction without its barriers comes out right in that order (each thread's upper
# partner has finished), and only the unit tests' ascending runner (test_kernels_host,
# cuda/kernels.cu compiled for the CPU, built here with the simulated programs) sees it.
mutant loss-barrier-after-max-dropped $X \
	$'\t\tsh->row_max[group] = m;\n\t}\n\t__syncthreads();' $'\t\tsh->row_max[group] = m;\n\t}' \
	'gpu_ops_sim'
mutant bias-gradient-tree-barrier-dropped $BS \
	$'\t\t\tpart[threadIdx.x] += part[threadIdx.x + half * b->lanes];\n\t\t__syncthreads();' \
	$'\t\t\tpart[threadIdx.x] += part[threadIdx.x + half * b->lanes];' \
	'test_kernels_host|gpu_plan_sim'
# Our GEMM split over k: the last chunk's sums dropped in the reduce.
mutant ksplit-last-chunk-dropped $G \
	'live && l < (size_t)g.chunks;' 'live && l + 1 < (size_t)g.chunks;' \
	'gpu_plan_sim'
# Its chunks' sums, a thread per micro-tile: the last slice's sums left out where slices meet; a
# tile overwritten while read; the tile's loader (the one-t-a-thread path the backend's
# geometry takes) decoding every value's pixel from the tile's first column, or leaving the
# last row of each batch it loads unstored.
mutant ksplit-micro-slice-dropped $G \
	'for (int sl = 1; sl < slices; sl++)' 'for (int sl = 1; sl < slices - 1; sl++)' \
	'test_kernels_host|gpu_plan_sim'
mutant ksplit-micro-tile-barrier-dropped $G \
	$'\t\t\t\t\t\trow_sum[p] += with_bias ? av[p] : 0.0f;\n\t\t\t\t\t}\n\t\t\t\t}\n\t\t\t\t__syncthreads();' \
	$'\t\t\t\t\t\trow_sum[p] += with_bias ? av[p] : 0.0f;\n\t\t\t\t\t}\n\t\t\t\t}' \
	'test_kernels_host|gpu_plan_sim'
mutant ksplit-loader-pixel-of-tile $G \
	$'\t\tp = ksplit_pixel_of(g, l);' $'\t\tp = ksplit_pixel_of(g, l0);' \
	'test_kernels_host|gpu_plan_sim'
mutant ksplit-loader-batch-row-unstored $G \
	$'\t\tfor (int q = 0; q < KSPLIT_LOAD_BATCH; q++)\n\t\t\tif (row + q * step < rows)' \
	$'\t\tfor (int q = 0; q < KSPLIT_LOAD_BATCH - 1; q++)\n\t\t\tif (row + q * step < rows)' \
	'test_kernels_host|gpu_plan_sim'
# Our GEMM whole in one kernel: the ReLU's gradient not applied; the bias gradient's last step of k lost;
# a load batch storing its first value of B everywhere; a 2 x 2 block's last output summing a wrong column.
mutant tile-load-batch-first-only $G \
	'tb[r * pitch + t] = vb[q];' 'tb[r * pitch + t] = vb[0];' \
	'test_kernels_host'
mutant tile-micro-column-crossed $G \
	'					s11 += a1 * b1;' '					s11 += a1 * b0;' \
	'test_kernels_host'
mutant tile-drelu-dropped $G \
	$'\t\t\telse if (g.epilogue == GEMM_EPILOGUE_DRELU)\n\t\t\t\tv = relu_backward_elem(v, g.act[(size_t)i * g.ldc + j]);' '' \
	'test_kernels_host|gpu_plan_sim'
mutant tile-bias-grad-last-step-dropped $G \
	$'\t\t\tif (with_bias)\n\t\t\t\tfor (int o = (int)threadIdx.x; o < T; o += (int)blockDim.x) {' \
	$'\t\t\tif (with_bias && l0 + K < g.k)\n\t\t\t\tfor (int o = (int)threadIdx.x; o < T; o += (int)blockDim.x) {' \
	'test_kernels_host|gpu_plan_sim'
# The weight gradients on a second stream: no fork (the branch does not wait for what it
# reads; captured, the capture fails); the step's head fused: its bias left out.
mutant side-stream-fork-missing $B \
	$'\tCUDA_CHECK(cudaStreamWaitEvent(c->side.stream, c->fork, 0));\n' '' \
	'mnist_train_sim_side_stream_mlp'
mutant head-fused-without-bias $E \
	'bias_act_elem(sum, h.b[j], h.relu);' 'bias_act_elem(sum, 0.0f, h.relu);' \
	'test_kernels_host|gpu_plan_sim'
mutant head-batch-sums-crossed $E \
	'acc[j] += xv[u] * wv[u][j];' 'acc[j] += xv[u] * wv[u ^ 1][j];' \
	'test_kernels_host'
mutant head-batch-input-grad-without-relu $E \
	'h->dx[at] = h->act ? relu_backward_elem(v, av[u]) : v;' 'h->dx[at] = v;' \
	'test_kernels_host'
mutant head-batch-tail-skipped $E \
	$'\tfor (; k < h->in; k += lanes) {\n\t\tfloat xv = xr[k];' $'\tfor (; k < 0; k += lanes) {\n\t\tfloat xv = xr[k];' \
	'test_kernels_host'
mutant dense-head-lane-sum-short $D \
	$'for (int t = 0; t < (int)COOP_LANES; t++)\n\t\t\t\tsum += p[t];' $'for (int t = 0; t < (int)COOP_LANES - 1; t++)\n\t\t\t\tsum += p[t];' \
	'test_kernels_host|gpu_plan_sim'
mutant dense-head-without-relu-gradient $D \
	'v = st->drelu ? relu_backward_elem(acc[i][r], xs[r * in + k])' 'v = 0 ? relu_backward_elem(acc[i][r], xs[r * in + k])' \
	'test_kernels_host|gpu_plan_sim'
mutant dense-head-rows-past-the-batch $D \
	'(int)((size_t)x->rows - row0) : R;' '(int)((size_t)x->rows - row0) + 1 : R;' \
	'test_kernels_host'
mutant dense-head-weight-grads-first $H \
	$'\t\tkernels_dense_head(g->stream, NULL, r, dense_rows[way - HEAD_DENSE]);\n\t\tweight_grads(r, sink, grouped);' $'\t\tweight_grads(r, sink, grouped);\n\t\tkernels_dense_head(g->stream, NULL, r, dense_rows[way - HEAD_DENSE]);' \
	'gpu_plan_sim'
mutant dense-head-pool-ungated $D \
	'pool->dz[at] = pool_relu_backward_elem(v, y, best, ky, kx, p->k);' 'pool->dz[at] = pool_relu_backward_elem(v, 1.0f, best, ky, kx, p->k);' \
	'test_kernels_host|gpu_plan_sim'
mutant dense-wgrad-last-warp-only $D \
	'sum += sh.part[w][c][lane];' 'sum = sh.part[w][c][lane];' \
	'test_kernels_host|gpu_plan_sim'
mutant dense-wgrad-before-its-input $H \
	'int ready = 1;' 'int ready = 2;' \
	'gpu_plan_sim'
mutant relu-gradient-without-its-mask $L \
	'return mask_written(g, r->relu_mask) ? CUBLASLT_EPILOGUE_DRELU' 'return 1 ? CUBLASLT_EPILOGUE_DEFAULT' \
	'mnist_train_sim_graph_nodes_mlp'
mutant conv-cols-not-written $C \
	'a.total = (uint32_t)(windows + n_cols);' 'a.total = (uint32_t)windows;' \
	'gpu_ops_sim'
# The forward's patch kernel: a window's pixels read from the patch transposed; the last
# group's channels past the stage's taken for channels of it; the im2col matrix not written
# after it where the weight gradient reads it (cuda/conv_plan.cu).
mutant conv-patch-pixel-transposed $CP \
	'float v = patch[ky + dy][kx + dx];' 'float v = patch[ky + dx][kx + dy];' \
	'test_kernels_host|gpu_plan_sim'
mutant conv-patch-group-short $CP \
	$'\t\t\tif (o >= a.oc)\n\t\t\t\tcontinue;\n\t\t\tfloat best' $'\t\t\tif (o >= a.oc + 1)\n\t\t\t\tcontinue;\n\t\t\tfloat best' \
	'test_kernels_host|gpu_plan_sim'
mutant conv-patch-cols-not-written cuda/conv_plan.cu \
	$'\t\t\tif (c->cols)\n\t\t\t\tkernels_conv_im2col' $'\t\t\tif (0)\n\t\t\t\tkernels_conv_im2col' \
	'gpu_plan_sim'
mutant conv-patch-next-channel-unloaded $CP \
	$'if (ci + 1 < a.s.c)\n\t\t\t\tpatch_load' $'if (ci + 2 < a.s.c)\n\t\t\t\tpatch_load' \
	'test_kernels_host|gpu_plan_sim'
mutant conv-patch-images-of-one-warp $CP \
	'return (int)(q->c * 32u + i % 32u);' 'return (int)(q->c * 64u + i % 32u);' \
	'test_kernels_host|gpu_plan_sim'
mutant conv-backward-patch-next-channel-unloaded $CP \
	$'if (o + 1 < oc)\n\t\t\t\tpatch_load' $'if (o + 2 < oc)\n\t\t\t\tpatch_load' \
	'test_kernels_host|gpu_plan_sim'
mutant conv-backward-patch-tap-mirrored $CP \
	'float v = patch[dy - ky + K - 1][dx - kx + K - 1];' 'float v = patch[dy + ky][dx - kx + K - 1];' \
	'test_kernels_host|gpu_plan_sim'
mutant conv-backward-patch-row-skip-shifted $CP \
	'if (ky >= k || !((at.rows_in >> (K - 1 - ky)) & pix_mask))' 'if (ky >= k || !((at.rows_in >> (K - ky)) & pix_mask))' \
	'test_kernels_host|gpu_plan_sim'
# The convolutions' index arithmetic (cuda/fastdiv.h): a multiplier one too large.
mutant fastdiv-multiplier-off-by-one $F \
	'/ d + 1);' '/ d + 2);' \
	'test_kernels_host|gpu_ops_sim'
# The input gradient by pool window: the window's maximum at its first pixel always.
mutant conv-backward-data-first-pixel $C \
	'int32_t best = below_arg[i];' 'int32_t best = 0;' \
	'test_kernels_host|gpu_ops_sim'
mutant nccl-at-one-rank $B \
	$'\tif (n == 0 || c->dist->size == 1)\n\t\treturn;\n\tNCCL_CHECK(ncclAllReduce(' \
	$'\tif (n == 0)\n\t\treturn;\n\tNCCL_CHECK(ncclAllReduce(' \
	'mnist_train_sim_graph_nodes_seed'
mutant sum-scaled-as-mean $B \
	'ncclAllReduce(buf, buf, n, ncclFloat, op == REDUCE_SUM' 'ncclAllReduce(buf, buf, n, ncclFloat, op != REDUCE_SUM' \
	'gpu_allreduce_sim_2'
# Issue 26: a bug only the time model sees (every result the same, every kernel one
# thread per block, so each thread walks 256 times the items): the modelled step's bounds.
mutant one-thread-per-block $K \
	'return kernel_geom_sized(n, KERNEL_BLOCK);' 'return kernel_geom_sized(n, 1);' \
	'mnist_train_sim_step_time_seed|mnist_train_sim_step_time_mlp'

# Issue 45: what a plan, --profile and cuBLASLt's ReLU mask leave unchecked. Every rank runs
# rank 0's choice: rank 1 left on the heuristic's ways (the choice not shared), or every rank
# given rank 1's unmeasured choice (the broadcast's root wrong; rank 0's record then names a
# way slower than its fastest).
mutant plan-choice-not-shared $S \
	'c->plan.share = d->size > 1 ? cuda_share_choice : NULL;' 'c->plan.share = NULL;' \
	'gpu_train_step_sim_2'
mutant plan-choice-from-rank-1 cuda/backend_cuda_plan.cu \
	'MPI_BYTE, 0, c->dist->comm));' 'MPI_BYTE, 1, c->dist->comm));' \
	'gpu_train_step_sim_2'
# --profile's per-op times: every weight gradient sent beside whatever the request says, so the
# profile's in-order request shows it at ~0 us, its time charged to the op that joins it.
mutant profile-weight-grad-beside $B \
	'if (!r->beside || !c->side_on) {' 'if (!r->bias_grad || !c->side_on) {' \
	'mnist_train_sim_profile'
# --verbose's plan table: each op's row naming its first candidate, not the way chosen.
mutant plan-table-first-candidate cuda/plan_json.c \
	'fprintf(f, TABLE_ROW_US, op, o->source, us, o->chosen);' 'fprintf(f, TABLE_ROW_US, op, o->source, us, o->cand[0].name);' \
	'mnist_train_sim_profile'
# The ReLU bit mask's leading dimension D's rows, against cublasLt.h's multiple of 128: the
# simulator refuses it, and the plan quietly loses cuBLASLt's ways that keep the mask.
mutant relu-mask-ld-of-the-rows $LT \
	'int64_t ld = ((int64_t)c.m + 127) / 128 * 128;' 'int64_t ld = (int64_t)c.m;' \
	'mnist_train_sim_profile'

mutants_chosen
mutants_scratch cuda
SIM=(mnist-cuda-sim test_cudasim_rules cudasim_nccl_rules cudasim_launch_check gpu_ops_sim gpu_plan_sim
	gpu_train_parity_sim gpu_graph_sim gpu_allreduce_sim gpu_deadline_sim gpu_train_step_sim allreduce_sim
	test_kernels_host)
mutants_configure "${SIM[@]}" mnist-train-cudasim
mutants_baseline cudasim
mutants_run cudasim "${SIM[@]}"
