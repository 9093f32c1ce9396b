#!/usr/bin/env bash
# test_run_quick.sh - scripts/gpu-node/run.sh's time limits, its quick and sanitize steps
# on a machine without a GPU, and quick with stand-ins for a GPU's programs.
#
#   tests/kit/test_run_quick.sh CMAKE
#
# 1. run.sh --limits: the default steps are env, build and quick, and their limits add
#    up to at most 360 s (a loan's first command, inside 6 minutes); the second command,
#    build and sanitize, at most 420 s (15 minutes less the machine's start, 2 minutes,
#    and the first command); sanitize <= 300 s, all <= 240 s; every step has a limit of
#    at most 600 s (one command).
# 2. run.sh quick sanitize with no GPU (KIT=none: the system's MPI, no kit; an
#    nvidia-smi that fails as it does without a driver, first on PATH, so that the
#    result is the same on a GPU machine): quick prints its limit at its start, each
#    of its parts (GPU suite, profile, matrix) says "no GPU" with nvidia-smi's reason
#    and is reported skipped, never passed; the step is SKIPPED, sanitize FAILED (a
#    step that sanitized nothing fails), run.sh exits 1, and SUMMARY.txt says all that.
# 3. quick where a GPU is listed, every program it runs a stand-in (nothing is checked on
#    a GPU here; this checks run.sh and summary.py): nvidia-smi listing one GPU; a build
#    directory that is a small ctest project with two tests labelled gpu (one passes,
#    one skips with 77 and its reason), a mnist-train whose --help has --profile and
#    which writes op_times and gpu_plan records to --metrics, and PYTHON standing in for
#    bench/train, writing a results file with a Goals table. quick passes, each part
#    passes, and SUMMARY.txt has the suite's counts and skip reason, each goal met or
#    missed with its figure, the slowest ops of each profiled run with their share, and
#    the plan chosen; the quick log has the first step's set-up of seed b32 with modules
#    loaded lazily and eagerly (CUDA_MODULE_LOADING=EAGER).
# 4. sanitize with the same stand-ins: all its tests at once, each run given the step's
#    time less its probe, MNIST_SANITIZE_RUNS=one; a failed test fails the step.
# A few seconds. Exit 0 pass, 1 fail.
set -uo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 CMAKE" >&2
	exit 1
fi
cmake_bin=$1
PATH=$(dirname "$cmake_bin"):$PATH # its ctest, for run.sh and ctest_summary.py
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-kit-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# 1. the limits
limits=$(cd "$root" && bash scripts/gpu-node/run.sh --limits) || fail "run.sh --limits exited $?"
echo "$limits" | sed 's/^/    /'
limit() { awk -v s="$1" '$1 == s { print $2 }' <<<"$limits"; }
read -r _ default_steps <<<"$(grep '^default ' <<<"$limits" | awk '{ $NF = ""; print }')"
[ "$default_steps" = "env build quick" ] && ok "default steps: $default_steps" ||
	fail "default steps '$default_steps', expected 'env build quick'"
sum=0
for s in $default_steps; do
	l=$(limit "$s")
	[ -n "$l" ] || { fail "no limit for step $s"; continue; }
	sum=$((sum + l))
done
[ "$sum" -le 360 ] && ok "env + build + quick = $sum s <= 360 s" || fail "env + build + quick = $sum s > 360 s"
grep -q "^default env build quick $sum\$" <<<"$limits" || fail "run.sh's own sum differs from $sum"
second=$(($(limit build) + $(limit sanitize)))
[ "$second" -le 420 ] && ok "build + sanitize = $second s <= 420 s" || fail "build + sanitize = $second s > 420 s"
for pair in all:240 sanitize:300; do
	s=${pair%:*} max=${pair#*:} l=$(limit "${pair%:*}")
	[ -n "$l" ] && [ "$l" -le "$max" ] && ok "$s: $l s <= $max s" || fail "$s: limit '$l', expected <= $max s"
done
while read -r s l; do
	[ "$s" = default ] || [ "$l" -le 600 ] || fail "$s: limit $l s > 600 s (one command)"
done <<<"$limits"

# 2. quick and sanitize without a GPU
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'SH'
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9
SH
chmod +x "$tmp/bin/nvidia-smi"
(cd "$root" && env -u CUDA_VISIBLE_DEVICES PATH="$tmp/bin:$PATH" KIT=none BUILD_DIR="$tmp/build" \
	RESULTS_DIR="$tmp/results" bash scripts/gpu-node/run.sh quick sanitize) >"$tmp/out" 2>&1
rc=$?
sed 's/^/    /' "$tmp/out"
[ "$rc" -eq 1 ] && ok "run.sh exited 1 (sanitize failed)" || fail "run.sh exited $rc, expected 1"
summary=$tmp/results/SUMMARY.txt
[ -s "$summary" ] || { fail "no SUMMARY.txt"; exit 1; }
expect() { # expect FILE REGEX WHAT
	if grep -Eq -- "$2" "$1"; then ok "$3"; else fail "$3: no line matching '$2' in $(basename "$1")"; fi
}
reason="nvidia-smi -L failed: NVIDIA-SMI has failed because it couldn't communicate"
expect "$tmp/out" '^== quick: limit [0-9]+ s' "quick prints its limit at its start"
expect "$tmp/out" '^== sanitize: limit 300 s' "sanitize prints its limit at its start"
expect "$tmp/out" '^quick: SKIPPED in [0-9]+ s: no GPU' "quick reported skipped, no GPU"
expect "$summary" "^no GPU \\(nvidia-smi -L failed: NVIDIA-SMI has failed" "the summary's second line: no GPU and why"
expect "$summary" '^  quick +[0-9]+ s +SKIPPED ' "summary: quick SKIPPED"
expect "$summary" '^  sanitize +300 s +FAILED \(1\) .*no GPU' "summary: sanitize FAILED, no GPU"
for p in gpu-suite profile matrix; do
	expect "$summary" "^  $p +SKIPPED +[0-9]+ s  no GPU" "summary: quick's $p SKIPPED, no GPU"
	expect "$tmp/results/quick.log" "^quick: $p: skipped: no GPU \\($reason" "quick.log: $p skipped with the reason"
done
if grep -Eq '^quick: [a-z-]+: passed|^quick: passed' "$tmp/out" "$tmp/results/quick.log" ||
	sed -n '/^quick:$/,/^[a-z]/p' "$summary" | grep -Eq '^  [a-z-]+ +passed'; then
	fail "something of quick is reported passed without a GPU"
else
	ok "nothing of quick reported passed"
fi
[ ! -e "$tmp/build" ] && ok "no build touched" || fail "quick without a GPU touched BUILD_DIR"

# 3. quick with stand-ins
cat >"$tmp/bin/nvidia-smi" <<'SH'
#!/bin/sh
echo "GPU 0: Stand-in GPU (UUID: GPU-00000000)"
SH
mkdir -p "$tmp/src"
cat >"$tmp/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.21)
project(stand_in NONE)
enable_testing()
add_test(NAME gpu_passes COMMAND sh -c "echo fine")
add_test(NAME gpu_skips COMMAND sh -c "echo 'SKIP gpu_skips: needs 2 GPUs, 1 visible'; exit 77")
add_test(NAME not_gpu COMMAND sh -c "exit 1")
add_test(NAME sanitize_env COMMAND sh -c "test \"$MNIST_SANITIZE_RUNS\" = one && test \"$MNIST_SANITIZE_RUN_TIMEOUT\" -ge 250")
set_tests_properties(gpu_passes gpu_skips PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
set_tests_properties(not_gpu sanitize_env PROPERTIES LABELS gpu-sanitize)
CMAKE
"$cmake_bin" -S "$tmp/src" -B "$tmp/fake" >/dev/null || { fail "cmake of the stand-in project"; exit 1; }
touch "$tmp/fake/libmnist-cuda.so"
cat >"$tmp/fake/mnist-train" <<'SH'
#!/bin/sh
[ "$1" = --help ] && { echo "  --profile   one more step op by op after the timed steps"; exit 0; }
model= batch= metrics=
while [ $# -gt 0 ]; do
	case $1 in --model) model=$2 ;; --batch-size) batch=$2 ;; --metrics) metrics=$2 ;; esac
	shift
done
echo "op    layer shape us share"
cat >"$metrics" <<JSON
{"event": "step_times", "median_us": 20, "max_ms": 150.5}
{"event": "op_times", "step_us": 200.0, "ops_us": 200.0, "ops": [{"layer": "fc1", "phase": "forward", "op": "gemm", "shape": "${batch}x784x10", "kernels": 1, "us": 150.0}, {"layer": "fc1", "phase": "loss", "op": "softmax", "shape": "${batch}x10", "kernels": 1, "us": 30.0}, {"layer": "", "phase": "", "op": "sgd", "shape": "7850", "kernels": 1, "us": 20.0}]}
{"event": "gpu_plan", "measure_ms": 9.7, "warm_ms": 120.5, "ops": [{"op": "fc1.fwd", "shape": "${batch}x784x10", "candidates": [{"name": "algo-a", "us": 9.5, "first_us": 21.0}, {"name": "algo-b", "us": 7.5, "first_us": 19.5}], "chosen": "algo-b"}]}
JSON
echo "summary: model=$model backend=cuda ranks=1"
SH
chmod +x "$tmp/fake/mnist-train"
cat >"$tmp/bin/fake-python" <<'SH'
#!/bin/sh
# bench/train's stand-in: a results file under --out-dir; its arguments in bench-args.
echo "$*" >"$(dirname "$0")/bench-args"
dir=
while [ $# -gt 0 ]; do
	[ "$1" = --out-dir ] && dir=$2
	shift
done
[ -n "$dir" ] || exit 2
mkdir -p "$dir"
cat >"$dir/2026-01-01-stand-in-quick.md" <<'MD'
# GPU matrix

## Step time (median / p95, microseconds)

| model | batch/rank | ranks | mnist-train graph | mnist-train graph, 1 step a launch | mnist-train graph, --no-pdl | mnist-train graph, --no-side-stream | mnist-train --no-graph | PyTorch eager | PyTorch CUDA graph | PyTorch inductor + CUDA graph | PyTorch best / mnist-train | kernels per step (graph nodes) |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
| seed | 32 | 1 | 8.5 / 9.0 | 15.0 / 16.0 | 10.5 / 11.0 | 9.5 / 10.0 | 30.0 / 31.0 | 60.0 / 61.0 | 40.0 / 41.0 | 50.0 / 51.0 | 4.71 (graph) | 6 |

## Goals (issues 21 and 25; issue 15's allreduce)

| goal | measured | verdict |
|---|---|---|
| seed, batch 32, 1 GPU: median step <= 10 us (graph) | 8.5 us | met |
| LeNet-5, batch 256, 1 GPU: median step <= 100 us (graph) | 5409.6 us | missed |
| (issue 15) the allreduce within 10% of a bare ncclAllReduce | - | not measured (bench/allreduce's table not run or not found) |

## Time to test accuracy (1 GPU)
MD
echo "bench/train: wrote $dir/2026-01-01-stand-in-quick.md"
SH
chmod +x "$tmp/bin/fake-python"
(cd "$root" && env -u CUDA_VISIBLE_DEVICES PATH="$tmp/bin:$PATH" KIT=none BUILD_DIR="$tmp/fake" \
	PYTHON="$tmp/bin/fake-python" RESULTS_DIR="$tmp/gpu" bash scripts/gpu-node/run.sh quick) >"$tmp/out3" 2>&1
rc=$?
sed 's/^/    /' "$tmp/out3"
[ "$rc" -eq 0 ] && ok "run.sh quick exited 0" || fail "run.sh quick exited $rc, expected 0"
summary=$tmp/gpu/SUMMARY.txt
expect "$summary" '^GPU: GPU 0: Stand-in GPU$' "summary: the GPU listed"
expect "$summary" '^  quick +[0-9]+ s +passed ' "summary: quick passed"
expect "$summary" '^  gpu-suite +passed +[0-9]+ s  2 tests: 1 passed, 0 failed, 1 skipped$' "summary: the suite's counts"
expect "$summary" '^      1 skipped: needs 2 GPUs, 1 visible$' "summary: the skip's reason"
expect "$summary" '^  profile +passed +[0-9]+ s  6 runs' "summary: 6 profile runs"
expect "$summary" '^  matrix +passed +[0-9]+ s  quick/bench-results/2026-01-01-stand-in-quick.md$' \
	"summary: the matrix's results file"
expect "$summary" '^  MET +seed, batch 32, 1 GPU: median step <= 10 us \(graph\): 8.5 us$' "summary: a goal met, its figure"
expect "$summary" '^  missed +LeNet-5, batch 256, 1 GPU: median step <= 100 us \(graph\): 5409.6 us$' \
	"summary: a goal missed, its figure"
expect "$summary" '^  not measured .*allreduce' "summary: a goal not measured"
expect "$summary" '^  seed b32 r1: graph 8.5 \| 1 step 15.0 \| no-pdl 10.5 \| no-side-stream 9.5 \| no-graph 30.0 \| best/ours 4.71$' \
	"summary: the median step of each column of ours, side by side"
expect "$summary" "^ +\(bench/allreduce's table not run or not found\)$" "summary: why not measured"
expect "$summary" '^  lenet b256 +step 200.0 us: fc1 forward gemm 150.0 us 75%; fc1 loss softmax 30.0 us 15%; sgd 20.0 us 10%$' \
	"summary: the slowest ops of lenet b256, with their share"
expect "$summary" '^  seed b32 +fc1.fwd algo-b 7.5 us$' "summary: the plan chosen"
expect "$tmp/gpu/quick.log" '^set-up: seed-b32.jsonl: first step 150.5 ms, the plan.s measurement 9.7 ms, its ops. first runs 120.5 ms$' \
	"quick: the first step's set-up, modules loaded lazily"
expect "$tmp/gpu/quick.log" '^set-up: seed-b32-eager.jsonl: first step 150.5 ms' \
	"quick: the same with CUDA_MODULE_LOADING=EAGER"
expect "$tmp/gpu/quick/plans.txt" '^fc1.fwd \[32x784x10\]: chosen algo-b of \[algo-a 9.5 us \(first run 21.0\), algo-b 7.5 us \(first run 19.5\)\]$' \
	"plans.txt: every candidate, its first run beside"
expect "$summary" '^  won: algo-b 6$' "summary: the way that won, in how many cells"
expect "$summary" '^  won nothing: algo-a \(timed 6\)$' "summary: the way that won nothing, to remove"
expect "$tmp/gpu/quick/ways.txt" '^algo-b: won in 6 cells \(lenet b256, lenet b32, mlp b256, mlp b32, seed b256, seed b32\), timed 6 times$' \
	"ways.txt: each way's cells"
expect "$summary" '^  first runs on the stream over their times \(us, 12 candidates\): min 11.5, median 12.0, max 12.0 ' \
	"summary: how much the host's submission adds to a first run"
expect "$tmp/bin/bench-args" ' --no-allreduce ' "the matrix on one GPU: no NCCL tables (nothing to reduce at 1 rank)"

# 3b. the same on a node of 2 GPUs: the matrix runs bench/allreduce's NCCL tables too.
cat >"$tmp/bin/nvidia-smi" <<'SH'
#!/bin/sh
echo "GPU 0: Stand-in GPU (UUID: GPU-00000000)"
echo "GPU 1: Stand-in GPU (UUID: GPU-00000001)"
SH
(cd "$root" && env -u CUDA_VISIBLE_DEVICES PATH="$tmp/bin:$PATH" KIT=none BUILD_DIR="$tmp/fake" \
	PYTHON="$tmp/bin/fake-python" RESULTS_DIR="$tmp/gpu2" bash scripts/gpu-node/run.sh quick) >"$tmp/out3b" 2>&1 ||
	{ sed 's/^/    /' "$tmp/out3b"; fail "run.sh quick on 2 stand-in GPUs did not exit 0"; }
if grep -q -- '--no-allreduce' "$tmp/bin/bench-args"; then
	fail "the matrix on 2 GPUs without its NCCL tables: $(cat "$tmp/bin/bench-args")"
else
	ok "the matrix on 2 GPUs runs the NCCL tables"
fi
cat >"$tmp/bin/nvidia-smi" <<'SH'
#!/bin/sh
echo "GPU 0: Stand-in GPU (UUID: GPU-00000000)"
SH

# 4. sanitize where a GPU is listed, the same stand-ins: every test labelled gpu-sanitize
# started at once, each run given the step's time less its probe (MNIST_SANITIZE_RUN_TIMEOUT
# at least 250 s of the 300), one run a test; a failed test fails the step.
(cd "$root" && env -u CUDA_VISIBLE_DEVICES PATH="$tmp/bin:$PATH" KIT=none BUILD_DIR="$tmp/fake" \
	PYTHON="$tmp/bin/fake-python" RESULTS_DIR="$tmp/gpu" bash scripts/gpu-node/run.sh sanitize) >"$tmp/out4" 2>&1
rc=$?
sed 's/^/    /' "$tmp/out4"
[ "$rc" -eq 1 ] && ok "run.sh sanitize exited 1 (a gpu-sanitize test failed)" || fail "run.sh sanitize exited $rc, expected 1"
expect "$tmp/gpu/sanitize.log" '^sanitize: 2 tests at once, (2[5-9][0-9]) s a run, stopped in [0-9]+ s$' \
	"sanitize: all tests at once, 250 s a run or more"
expect "$tmp/gpu/SUMMARY.txt" '^  sanitize +300 s +FAILED \(1\) ' "summary: sanitize FAILED"
# sanitize_env passes only where it sees MNIST_SANITIZE_RUNS=one and 250 s a run or more.
expect "$tmp/gpu/SUMMARY.txt" '^sanitize: 2 tests: 1 passed, 1 failed' \
	"summary: sanitize's counts (sanitize_env saw MNIST_SANITIZE_RUNS=one, >= 250 s a run; not_gpu failed)"
[ "$failures" -eq 0 ] || exit 1
echo "test_run_quick: all checks passed"
