#!/usr/bin/env bash
# gpu_sanitize.sh - mnist-train's CUDA backend under NVIDIA's compute-sanitizer:
# short runs of one model with graphs and without (--no-graph), SGD and AdamW,
# each of which must end with zero errors.
#
#   tests/sanitize/gpu_sanitize.sh TOOL MODEL MNIST_TRAIN DATA_DIR TOOLKIT_BIN MPIRUN [ARGS...]
#
# TOOL: memcheck, initcheck, racecheck or synccheck. MODEL: seed, mlp, lenet (GEMM plan
# --gpu-plan heuristic: cuBLASLt's first choice, nothing timed) or lenet-measure (LeNet-5
# with --gpu-plan measure: every way to run each GEMM and convolution is launched and timed
# at the first step, among them the project's cooperative kernels 
# gemm_ksplit_micro_kernel, bias_grad_block_kernel and head_kernel (the step's head fused)
# and the convolutions' patch kernel and GEMM
# ways, which run nowhere else). DATA_DIR: MNIST_Data (train/, raw or
# .gz); the runs see no test set (no evaluation pass: only training steps are sanitized).
# TOOLKIT_BIN: where to look for compute-sanitizer besides PATH (the toolkit's bin/, from
# CMake; "none" or empty: none); COMPUTE_SANITIZER, when set, names the one to use.
#
# Each run: mpirun -n 1 env CUDA_MODULE_LOADING=LAZY compute-sanitizer --tool TOOL
# --report-api-errors no --error-exitcode 9 --target-processes application-only
# [--kernel-name kns=... for each of the project's kernels] mnist-train --backend cuda
# --gpu-plan heuristic|measure --limit 64 --batch-size 16 --epochs 1 (4 steps: a capture,
# then replays). NCCL's start-up makes four cudaFuncGetAttributes calls that fail by design
# ("no kernel image", its own kernels probed), which --report-api-errors no leaves out;
# every error in a kernel, a copy or a synchronization still counts.
#
# Why these options (NVIDIA's Compute Sanitizer manual, docs.nvidia.com/compute-sanitizer/
# ComputeSanitizer, and the CUDA Programming Guide's "Lazy Loading"): on one H100 (2026-11-27)
# a 4-step LeNet-5 run (--gpu-plan heuristic) took 102 s under racecheck and 108 s under
# memcheck with 0.3-20 s of training: the rest is start-up and exit (presumably NCCL's and
# cuBLAS's modules loaded and instrumented; not yet measured apart), and with --gpu-plan
# measure the ~200 GEMM candidates timed at the first step, cuBLAS's kernels instrumented,
# did not end in 230 s. So:
#  - --kernel-name: "Compute Sanitizer tools support filtering the choice of kernels which
#    should be checked. When a filter is specified, only kernels matching the filter will be
#    checked" (Specifying Filters; key kns: a substring of the mangled name; the option may
#    be given several times, a kernel matching any is checked). Given here as kns=<length>
#    <name> for each __global__ of cuda/*.cu (the mangled name _Z19softmax_xent_kernel8...
#    holds "19softmax_xent_kernel": no other library's kernel matches it). Used where only
#    the project's kernels can be at fault: racecheck and synccheck always (shared-memory
#    hazards and barrier misuse are a kernel's own, cuBLAS's and NCCL's are NVIDIA's), and
#    every tool on lenet-measure (the candidates cuBLAS times run unchecked). memcheck and
#    initcheck on seed, mlp and lenet check every kernel: cuBLAS's and NCCL's kernels read
#    and write this program's buffers with the sizes and leading dimensions it passes.
#  - CUDA_MODULE_LOADING=LAZY: lazy loading "reduces program initialization time by waiting
#    to load CUDA modules until they are needed" (Programming Guide, Lazy Loading; the
#    default on Linux since CUDA 12.2, set here so an environment's EAGER cannot undo it),
#    and "will also help lower the memory footprint of the tools, both for host and device
#    memory" (the manual, Memory Footprint): 16 runs share one GPU.
#  - --target-processes application-only: "Select which processes are to be tracked by
#    compute-sanitizer: The root application process, or the root application and all its
#    child processes" (default all): mnist-train alone is sanitized.
#  - Not used: --lazy-patching is not among the options of the manual's table (2025 and
#    later); --check-* turn checks off (e.g. --check-api-memory-access no), which would hide
#    errors; memcheck's compile-time patching (nvcc -fdevice-sanitize=memcheck) needs a
#    separate build of the CUDA module.
#
# MNIST_SANITIZE_RUNS=one (the GPU-node kit's step sanitize, which must fit its 300 s):
# one run instead of four, chosen by model so that the models together cover both paths
# and both optimizers: seed --no-graph SGD, mlp graph AdamW, lenet graph SGD, lenet-measure
# --no-graph AdamW. MNIST_SANITIZE_LIMIT: training images per run (default 64: 4 steps of
# 16). MNIST_SANITIZE_RUN_TIMEOUT: seconds per run (default 280). MNIST_SANITIZE_KERNELS:
# the project's kernels, comma-separated (default: every __global__ of cuda/*.cu beside
# this script); the filter must name softmax_xent_kernel (every step's loss, shared memory
# and __syncthreads) and, for lenet-measure, gemm_ksplit_micro_kernel,
# bias_grad_block_kernel, head_kernel, dense_head_kernel, conv_patch_kernel and
# conv_backward_patch_kernel, or the test fails: a renamed
# kernel would otherwise go unchecked.
#
# Exit 0 pass; 1 fail (an error, a run that did not end, a filter missing a kernel, or GPUs
# present but unusable, as the GPU suite fails on them); 77 skipped with the reason: no
# usable GPU (no driver, no device) or no compute-sanitizer.
set -uo pipefail
if [ $# -lt 6 ]; then
	echo "usage: $0 memcheck|initcheck|racecheck|synccheck seed|mlp|lenet|lenet-measure MNIST_TRAIN DATA_DIR TOOLKIT_BIN MPIRUN [ARGS...]" >&2
	exit 2
fi
TOOL=$1 MODEL=$2 TRAIN=$3 DATA=$4 TOOLKIT_BIN=$5
[ "$TOOLKIT_BIN" != none ] || TOOLKIT_BIN=""
shift 5
MPIRUN=("$@")
NAME="gpu_sanitize_${TOOL}_${MODEL//-/_}"
RUN_TIMEOUT=${MNIST_SANITIZE_RUN_TIMEOUT:-280} # seconds per run
case $TOOL in memcheck | initcheck | racecheck | synccheck) ;; *)
	echo "$NAME: unknown tool '$TOOL' (memcheck, initcheck, racecheck, synccheck)" >&2
	exit 2
	;;
esac
case $MODEL in
seed | mlp | lenet) model=$MODEL plan=heuristic ;;
lenet-measure) model=lenet plan=measure ;;
*)
	echo "$NAME: unknown model '$MODEL' (seed, mlp, lenet, lenet-measure)" >&2
	exit 2
	;;
esac
skip() {
	echo "SKIP $NAME: $*"
	exit 77
}
failures=0
fail() {
	echo "FAIL $NAME: $*" >&2
	failures=$((failures + 1))
}

# The kernel filter: the project's kernels only, for racecheck and synccheck and for
# lenet-measure; every kernel otherwise.
filter=()
what_checked="every kernel"
if [ "$TOOL" = racecheck ] || [ "$TOOL" = synccheck ] || [ "$plan" = measure ]; then
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/cuda
	from="every __global__ of $src/*.cu"
	if [ -n "${MNIST_SANITIZE_KERNELS:-}" ]; then
		kernels=$(tr ', ' '\n\n' <<<"$MNIST_SANITIZE_KERNELS" | sed '/^$/d' | sort -u)
		from="MNIST_SANITIZE_KERNELS"
	else
		# "static __global__ void softmax_xent_kernel(struct xent_req x)" -> softmax_xent_kernel
		kernels=$(cat "$src"/*.cu 2>/dev/null | grep -o '__global__[^;{]*(' |
			sed -E 's/^.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u)
	fi
	need=(softmax_xent_kernel)
	[ "$plan" = measure ] &&
		need+=(gemm_ksplit_micro_kernel bias_grad_block_kernel head_kernel
			dense_head_kernel conv_patch_kernel conv_backward_patch_kernel)
	for k in "${need[@]}"; do
		grep -qx "$k" <<<"$kernels" || {
			echo "FAIL $NAME: the kernel filter does not name $k (kernels: $(echo $kernels), from $from): renamed? it would go unchecked" >&2
			exit 1
		}
	done
	for k in $kernels; do filter+=(--kernel-name "kns=${#k}$k"); done
	what_checked="the project's $(wc -w <<<"$kernels") kernels only"
fi

[ -x "$TRAIN" ] || { echo "FAIL $NAME: $TRAIN is not built" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-sanitize.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The training set alone (no sibling test/): no evaluation pass.
# shellcheck source=../e2e/subset.sh
. "$(dirname "$0")/../e2e/subset.sh"
mnist_train_only "$DATA" "$tmp/data" || { echo "FAIL $NAME: no training set to link" >&2; exit 1; }
LIMIT=${MNIST_SANITIZE_LIMIT:-64}
args=(--data "$tmp/data/train" --model "$model" --limit "$LIMIT" --batch-size 16 --epochs 1 --log-every 1
	--gpu-plan "$plan")
variants=("graph sgd" "no-graph sgd" "graph adamw" "no-graph adamw")
if [ "${MNIST_SANITIZE_RUNS:-all}" = one ]; then
	case $MODEL in
	seed) variants=("no-graph sgd") ;;
	mlp) variants=("graph adamw") ;;
	lenet) variants=("graph sgd") ;;
	lenet-measure) variants=("no-graph adamw") ;;
	esac
fi

# A usable GPU? mnist-train's own verdict (--backend auto), as the GPU suite takes it.
timeout -k 10 60 "${MPIRUN[@]}" -n 1 "$TRAIN" "${args[@]}" --backend auto >"$tmp/probe.out" 2>&1
if grep -q 'backend auto: using cuda' "$tmp/probe.out"; then
	echo "# device: $(grep -m1 -o 'backend cuda ([^)]*)' "$tmp/probe.out")"
elif grep -q 'WARNING: GPUs are present but unusable' "$tmp/probe.out"; then
	echo "FAIL $NAME: GPUs present but unusable: $(grep -m1 'WARNING: GPUs' "$tmp/probe.out")" >&2
	exit 1
elif line=$(grep -m1 'backend auto: using host, because' "$tmp/probe.out"); then
	skip "no usable GPU (${line#*because })"
else
	echo "FAIL $NAME: mnist-train --backend auto did not say which backend it chose:" >&2
	sed 's/^/    /' "$tmp/probe.out" >&2
	exit 1
fi

sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer 2>/dev/null)}
for d in "$TOOLKIT_BIN" /usr/local/cuda/bin; do
	[ -n "$sanitizer" ] || [ -z "$d" ] || [ ! -x "$d/compute-sanitizer" ] || sanitizer=$d/compute-sanitizer
done
[ -n "$sanitizer" ] || skip "compute-sanitizer not found (PATH, ${TOOLKIT_BIN:-no toolkit bin/}, /usr/local/cuda/bin)"

# The tool's closing line when it found nothing.
if [ "$TOOL" = racecheck ]; then
	clean='RACECHECK SUMMARY: 0 hazards displayed \(0 errors'
else
	clean='ERROR SUMMARY: 0 errors'
fi
echo "# $TOOL, --gpu-plan $plan, $what_checked, CUDA_MODULE_LOADING=LAZY, ${RUN_TIMEOUT} s a run"
for variant in "${variants[@]}"; do
	read -r graph opt <<<"$variant"
	extra=(--optimizer "$opt")
	[ "$graph" = graph ] || extra+=(--no-graph)
	log=$tmp/$graph-$opt.out
	run=(env CUDA_MODULE_LOADING=LAZY "$sanitizer" --tool "$TOOL" --report-api-errors no
		--error-exitcode 9 --target-processes application-only "${filter[@]}"
		"$TRAIN" "${args[@]}" --backend cuda "${extra[@]}")
	echo "# run: ${run[*]}"
	start=$SECONDS
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n 1 "${run[@]}" >"$log" 2>&1
	rc=$?
	took=$((SECONDS - start))
	what="$TOOL $MODEL $graph $opt"
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		fail "$what: did not end within ${RUN_TIMEOUT} s"
		tail -n 20 "$log" | sed 's/^/    /' >&2
	elif [ $rc -ne 0 ] || ! grep -Eq "$clean" "$log" || ! grep -q '^summary: .* backend=cuda ' "$log"; then
		fail "$what: status $rc (9: the sanitizer found errors), its summary: $(grep -E 'SUMMARY' "$log" | tail -n 1)"
		grep -E '^=========' "$log" | head -n 60 | sed 's/^/    /' >&2
		grep -v '^=========' "$log" | tail -n 5 | sed 's/^/    /' >&2
	else
		echo "ok: $what: $(grep -E 'SUMMARY' "$log" | tail -n 1 | sed 's/^=* *//'), ${took} s, $(grep -o 'steps_per_epoch=[0-9]*' "$log"), train_seconds $(grep -o 'train_seconds=[0-9.]*' "$log" | cut -d= -f2)"
	fi
done
if [ "$failures" -gt 0 ]; then
	echo "FAIL $NAME: $failures of ${#variants[@]} runs not clean" >&2
	exit 1
fi
if [ ${#variants[@]} -eq 4 ]; then
	echo "PASS $NAME: 4 runs (graph and --no-graph, SGD and AdamW), no error"
else
	echo "PASS $NAME: 1 run (${variants[0]}, $((LIMIT / 16)) steps; MNIST_SANITIZE_RUNS=one), no error"
fi
