#!/usr/bin/env bash
# mutants_host.sh - plant bugs in the host program (host/: the training loop,
# I/O, MPI, the configuration), the host backend (cpu/) and the shared
# per-element math (include/elem.h) one at a time, and check that the tests
# catch each: a kill score for the suites that run the host program. Too slow
# for the default suite (a rebuild and a test run per mutant); run it by hand
# after changing those files or their tests:
#
#   tests/mutants_host.sh [--list] [--keep] [NAME...]
#
# Each mutant below is one exact text replacement in one file (the text must
# occur exactly once, else the mutant is reported as not applied: a stale list
# never passes for a good score). The machinery is tests/cudasim/mutants.sh's
# (tests/mutants_common.sh): the tracked and unignored tree copied into a
# scratch directory, built there once with the CUDA toolkit (the simulated
# module, build/cudasim/libmnist-cuda.so, loads into a CUDA-enabled
# mnist-train) and without -Werror, the unmutated suite run once (it must
# pass), then per mutant the pristine file restored, the replacement applied,
# everything rebuilt (target all: a change to host/ or cpu/ reaches
# mnist_core and so mnist-train, its simulated copy build/cudasim/mnist-train
# (target mnist-train-cudasim), every unit test and the MPI programs; one to
# include/elem.h also recompiles cuda/, the simulated module and the real
# one), and ctest run on the tests most likely to kill it first, then the
# rest of -L 'unit|mpi|e2e|reliability|cudasim', stopping at the first
# failure. Left out, for time: the labels multinode, slurm, build, kit, gpu
# and bench (where a test of these also carries a label above, it runs). The
# worktree itself is never edited.
#
# Prints "killed", "SURVIVED", "NOT APPLIED" or "DID NOT BUILD" per mutant
# (with the killing test), then the kill score; exits 0 only when every
# mutant was applied, built and killed. NAME...: only those mutants. --list:
# print the mutants and exit. --keep: keep the scratch directory (its path
# is printed; logs in logs/). MNIST comes from the worktree's MNIST_Data.
set -uo pipefail

ME=mutants_host.sh
. "$(dirname "$0")/mutants_common.sh"

# ---- the mutants ------------------------------------------------------------------
T=host/train/train.c L=host/train/launch.c ST=host/train/step.c SA=host/train/sampler.c
SC=host/train/schedule.c R=host/train/resume.c
CC=host/io/checkpoint_compat.c CR=host/io/checkpoint_read.c CW=host/io/checkpoint_write.c
I=host/io/idx.c RP=host/io/report.c CF=host/config.c DL=host/dist/deadline.c
DI=host/dist/dist.c
BH=cpu/backend_host.c GH=cpu/gemm_host.c GS=cpu/gemm_small.c E=include/elem.h
CD=cpu/conv_direct_body.h

# The gradient's mean over ranks: folded into the loss's scale (step.c) for training, a
# division after the sum in the host backend's allreduce for callers that ask for the mean.
mutant loss-scale-without-ranks $ST \
	'1.0f / ((float)rows * (float)(fold ? s->ranks : 1))' '1.0f / (float)rows' \
	'mpi_dp_equiv_2'
mutant allreduce-mean-not-divided $BH \
	'float inv = 1.0f / (float)h->size;' 'float inv = 1.0f;' \
	'bench_allreduce_correct'
# The sampler: rank r's shard is global positions r, r + N, ...; --drop-last keeps full
# batches only; the padding of the last batch wraps to the permutation's start.
mutant shard-contiguous $SA \
	'long pos = (long)s->rank + (long)s->size * j;' 'long pos = (long)s->rank * s->shard_len + j;' \
	'test_sampler|mpi_dp_equiv_2'
mutant drop-last-keeps-short-batch $SA \
	'		s->steps = s->shard_len / batch;' '		s->steps = (s->shard_len + batch - 1) / batch;' \
	'test_sampler'
mutant padding-repeats-last-example $SA \
	'out[j] = s->perm[pos < s->n ? pos : pos % s->n];' 'out[j] = s->perm[pos < s->n ? pos : s->n - 1];' \
	'test_sampler'
# The learning-rate schedule: warm-up from lr / warmup at step 0; cosine over the steps
# after the warm-up; each epoch's table from its global step.
mutant warmup-starts-at-zero $SC \
	'(double)(t + 1) / (double)s->warmup' '(double)t / (double)s->warmup' \
	'test_schedule'
mutant cosine-ignores-warmup $SC \
	'(double)(t - s->warmup) / (double)(s->total - s->warmup)' '(double)t / (double)s->total' \
	'test_schedule'
mutant schedule-restarts-each-epoch $T \
	'schedule_fill(&r->sched, (long long)epoch * r->smp.steps, r->smp.steps, r->host_lr);' \
	'schedule_fill(&r->sched, 0, r->smp.steps, r->host_lr);' \
	'mpi_dp_equiv_2'
# The optimizers: SGD's momentum, AdamW's bias correction by the update count.
mutant sgd-momentum-ignored $BH \
	$'\tif (momentum != 0.0f)\n\t\tsgd_momentum(' $'\tif (0)\n\t\tsgd_momentum(' \
	'test_ops|mnist_train_sim_seed_cuda_vs_host_2'
mutant adamw-bias-correction-one-ahead $BH \
	'counters->updates, h));' 'counters->updates + 1, h));' \
	'test_ops|mnist_train_sim_mlp_adamw_cuda_vs_host_2'
# --clip-grad-norm: the scale skipped by the host backend; PyTorch's 1e-6 dropped from the
# coefficient (the shared math: it shows at norms near 1e-6's scale, test_ops's small ones).
mutant clip-scale-skipped $BH \
	$'\tif (clip_scales_elem(coef))\n\t\tclip_scale(g, n, coef);' $'\tif (0)\n\t\tclip_scale(g, n, coef);' \
	'test_ops|e2e_clip_2'
mutant clip-epsilon-dropped $E \
	'float coef = max_norm / (norm + 1e-6f);' 'float coef = max_norm / norm;' \
	'test_ops'
# The loss's gradient without its scale (1 / rows): the shared math, so cuda/ rebuilds too.
mutant xent-gradient-unscaled $E \
	'return scale * (p - (is_label ? 1.0f : 0.0f));' 'return p - (is_label ? 1.0f : 0.0f);' \
	'test_ops|test_gradcheck'
# The host backend's gradient ops: GEMM operands, the bias gradient, ReLU's mask, max-pool.
mutant gemm-small-b-transpose-crossed $GS \
	'return r->trans_b ? r->b[(size_t)j * r->ldb + p]' 'return r->trans_b ? r->b[(size_t)p * r->ldb + j]' \
	'test_ops'
mutant gemm-small-beta-dropped $GS \
	'c[l] = alpha * acc[l] + beta * c[l];' 'c[l] = alpha * acc[l];' \
	'test_ops'
mutant blas-b-transpose-dropped $GH \
	'c.trans_b ? CblasTrans : CblasNoTrans, c.m' 'CblasNoTrans, c.m' \
	'test_ops|test_gradcheck'
mutant bias-gradient-wrong-side $GH \
	'if (!r->trans_a) { /* op(A) (m, k) times ones (k, 1) */' 'if (r->trans_a) { /* op(A) (m, k) times ones (k, 1) */' \
	'test_ops|test_gradcheck'
mutant relu-gradient-mask-dropped $GH \
	$'\tcase GEMM_EPILOGUE_DRELU:\n\t\trelu_backward_rows(r->c, r->act, r->ldc, r->m, r->n);' \
	$'\tcase GEMM_EPILOGUE_DRELU:\n\t\t(void)relu_backward_rows;' \
	'test_ops|test_gradcheck'
mutant pool-argmax-row-only $CD \
	'at[o] = (jj & take) | (at[o] & ~take);' 'at[o] = (jj / pk * pk & take) | (at[o] & ~take);' \
	'test_gradcheck|test_conv'
# The weight gradient's run of a row's pixels that read every tap: one pixel short; x's run
# found one vector late (the register-held load of dv_hold reading the wrong images).
mutant wgrad-row-run-short $CD \
	'len = (size_t)(last - ox) * nb;' 'len = (size_t)(last - ox - 1) * nb;' \
	'test_conv|test_gradcheck'
mutant wgrad-x-run-one-late $CD \
	'dvec v = dv_load(xp[t] + b0, DV);' 'dvec v = dv_load(xp[t] + b0 + DV * (b0 + DV < len), DV);' \
	'test_conv|test_gradcheck'
# The summary: images counted per rank; images_per_second over the training clock; the
# replicas' checksum over every parameter.
mutant summary-images-one-rank $T \
	'r->images += (long long)*rows * r->d->size * n;' 'r->images += (long long)*rows * n;' \
	'e2e_train'
mutant images-per-second-per-rank $RP \
	'(double)s->images / s->train_seconds : 0.0;' '(double)s->images / s->train_seconds / s->ranks : 0.0;' \
	'test_report|e2e_train'
mutant param-crc-short $T \
	'crc32_bytes(0, params, n * sizeof(float));' 'crc32_bytes(0, params, (n - 1) * sizeof(float));' \
	'host_gaps_param_crc'
mutant test-shard-short $T \
	'return count > rank ? (count - rank + size - 1) / size : 0;' 'return count > rank ? (count - rank) / size : 0;' \
	'test_sampler|e2e_train'
# --eval-every N: after epochs N, 2N, ... (counted from 1).
mutant eval-every-epoch-from-zero $T \
	'return c->eval_every > 0 && (epoch + 1) % c->eval_every == 0;' \
	'return c->eval_every > 0 && epoch % c->eval_every == 0;' \
	'e2e_eval_every'
# Checkpoints: the position resumed at, --save-every, the CRC, a field written and checked.
mutant resume-at-epoch-start $T \
	'int first = epoch == r.rs.epoch ? r.rs.step : 0;' 'int first = 0;' \
	'reliability_resume'
mutant resume-epoch-end-repeated $CC \
	'p.next_epoch = (int)(global_step / steps_per_epoch);' 'p.next_epoch = p.epoch;' \
	'test_checkpoint|reliability_resume'
mutant save-every-ignored $R \
	'(c->save_every > 0 && global_step % c->save_every == 0)' '(c->save_every < 0 && global_step % c->save_every == 0)' \
	'test_checkpoint_dir|reliability_resume'
mutant checkpoint-crc-unchecked $CR \
	$'\tif (crc != want)\n' $'\tif (crc != want && 0)\n' \
	'test_checkpoint|reliability_resume'
mutant checkpoint-examples-not-written $CW \
	$'meta_put(meta, "ranks", "%d", info->ranks) ||\n\t      meta_put(meta, "examples", "%d", info->examples) ||' \
	$'meta_put(meta, "ranks", "%d", info->ranks) ||' \
	'test_checkpoint|reliability_resume'
mutant checkpoint-data-crc-not-compared $CC \
	'if (ck->train_crc32 != run->train_crc32)' 'if (0)' \
	'test_checkpoint|reliability_resume'
# The data: the IDX magic, and images and labels that disagree in count.
mutant idx-magic-unchecked $I \
	$'\tif (magic == k->magic)\n\t\treturn STATUS_OK;' $'\tif (1)\n\t\treturn STATUS_OK;' \
	'test_idx_malformed|e2e_bad_input'
mutant idx-count-mismatch-accepted $I \
	'if (image_count != label_count) {' 'if (image_count < label_count) {' \
	'test_idx_malformed|e2e_bad_input'
# The configuration: an integer's range, a half-open float range (exit 2 on bad values).
mutant config-integer-below-range $CF \
	'if (errno || end == s || *end || (double)v < lo || (double)v > hi)' \
	'if (errno || end == s || *end || (double)v < lo - 1 || (double)v > hi)' \
	'test_config|e2e_bad_input'
mutant config-open-upper-bound-closed $CF \
	'(s->where & SETTING_HI_OPEN ? v >= s->hi : v > s->hi)' 'v > s->hi' \
	'test_config|e2e_bad_input'
# MNIST_DDP_HOST_ISA: a value that names no kernel path taken as "no cap" again.
mutant host-isa-any-value $CF \
	'if (isa && *isa && strcmp(isa, "avx512")' 'if (0 && isa && *isa && strcmp(isa, "avx512")' \
	'e2e_bad_input'
# The collective deadline's watchdog never firing.
mutant deadline-never-fires $DL \
	'if (!w->stop && expires && clock_ns() > expires)' 'if (!w->stop && expires && clock_ns() < 0)' \
	'reliability_stop|test_deadline'
# The end of the job (MPI_Finalize) outside the deadline: a rank frozen there holds the rest.
mutant finalize-without-deadline $DI \
	'deadline_arm(d->watch, "end of the job (MPI_Finalize)", 0);' '(void)0;' \
	'reliability_stop_at_end'
# dist_init's Open MPI defaults, read back through MPI_T: never set, or set over the user's.
mutant mpi-defaults-not-set $DI \
	'setenv(var, p->value, 0);' '(void)var;' \
	'mpi_tuning_default'
mutant mpi-defaults-override-user $DI \
	'setenv(var, p->value, 0);' 'setenv(var, p->value, 1);' \
	'mpi_tuning_user_value_kept'
# Three gaps of --graph-steps (host/train/launch.c, train.c): a launch whose end is placed
# one step after a due --save-every checkpoint (the checkpoint never written); a launch that
# takes in the epoch's short last batch (replayed as a full one); images counted one step a
# launch (the summary's images= and images_per_second under launches of several steps).
# Each passed the rest of the suite; tests/e2e/test_host_gaps.sh (tests/cmake/71-host-gaps.cmake)
# catches them, as it does a param_crc32 over all but the last parameter.
mutant graph-steps-save-due-one-late $L \
	'long long done = (long long)epoch * l->smp->steps + step + 1;' \
	'long long done = (long long)epoch * l->smp->steps + step + 2;' \
	'mnist_train_sim_checkpoint_launches_2'
mutant graph-steps-short-batch-in-launch $L \
	$' &&\n\t       sampler_batch_rows(l->smp, step + n) == l->st->batch)' ')' \
	'mnist_train_sim_short_batch_1'
mutant graph-steps-images-one-step-a-launch $T \
	'r->images += (long long)*rows * r->d->size * n;' 'r->images += (long long)*rows * r->d->size;' \
	'mnist_train_sim_short_batch_1|mnist_train_sim_checkpoint_launches_2'

# Found by tests/cudasim/checkpoint_launches.sh's author: the launch's end one step early
# (at 1 rank the launches' power-of-two lengths hide it; at 2 ranks, 16 steps an epoch, not),
# checkpoints due only at the epoch's end, and a measured plan kept only when one was given
# (every checkpoint without it: a resume measures anew, silently).
mutant graph-steps-save-due-one-early $L \
	'long long done = (long long)epoch * l->smp->steps + step + 1;' \
	'long long done = (long long)epoch * l->smp->steps + step;' \
	'mnist_train_sim_checkpoint_launches_2'
mutant graph-steps-save-due-at-epoch-end $L \
	'|| resume_save_due(l->rs, done);' '|| done % l->smp->steps == 0;' \
	'mnist_train_sim_checkpoint_launches_2'
mutant checkpoint-plan-only-when-given $T \
	$'\tgpu_plan_keep(r->be, r->d, r->rs.run.gpu_plan, sizeof(r->rs.run.gpu_plan));' \
	$'\tif (r->rs.plan_from[0])\n\t\tgpu_plan_keep(r->be, r->d, r->rs.run.gpu_plan, sizeof(r->rs.run.gpu_plan));' \
	'mnist_train_sim_checkpoint_launches_2'

# The epoch line (issue 46): every rank's loss lines in the mean, the ones of this epoch only,
# the test score after the epoch it belongs to; the progress line where mpirun's terminal is,
# and never into --output-filename's files; an ambiguous prefix named as such.
mutant epoch-line-rank-0-only $T \
	$'\t\tn += each[i].n;\n' $'\t\tn += each[i].n;\n\t\tbreak;\n' \
	'e2e_epoch_line'
mutant epoch-line-losses-not-reset $T \
	$'\tr->ep = (struct epoch_tally){.t0 = run_elapsed(r, clock_seconds()), .images0 = r->images,\n\t\t\t\t     .epoch = -1};' \
	$'\tr->ep.t0 = run_elapsed(r, clock_seconds());\n\tr->ep.images0 = r->images;\n\tr->ep.epoch = -1;' \
	'e2e_epoch_line'
mutant epoch-line-score-of-no-epoch $T \
	'epoch_report(&r, test && eval_due(c, epoch) ? eval_pause(&r, test, epoch) : NAN);' \
	'epoch_report(&r, test ? eval_pause(&r, test, epoch) : NAN);' \
	'e2e_epoch_line|e2e_eval_every'
mutant progress-not-where-mpirun-is $RP \
	'return !(files && files[0]) && proc_fd_is_tty(getppid(), 2);' \
	'return !(files && files[0]) && proc_fd_is_tty(getppid(), 1) && 0;' \
	'e2e_epoch_line'
mutant progress-into-output-files $RP \
	'return !(files && files[0]) && proc_fd_is_tty(getppid(), 2);' \
	'return (files != NULL || 1) && proc_fd_is_tty(getppid(), 2);' \
	'e2e_epoch_line'
mutant ambiguous-prefix-as-unknown $CF \
	'	if (matches > 1)' '	if (matches > 1 && 0)' \
	'test_config|e2e_bad_input'

mutants_chosen
mutants_scratch host cpu include/elem.h
mutants_configure all
mutants_baseline 'unit|mpi|e2e|reliability|cudasim'
mutants_run 'unit|mpi|e2e|reliability|cudasim' all
