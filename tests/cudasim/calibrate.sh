#!/usr/bin/env bash
# calibrate.sh - the simulator's time model (tests/cudasim/cudasim.h, rule 10)
# against the project's H100 runs: the CUDA backend of each measured commit
# (092b1c6, 2026-11-25; c143872, 2026-11-26; b3a229a, 2026-11-27), built against this tree's
# simulator, predicts the median step of every cell the H100 measured, and the
# table says predicted beside measured (docs/benchmarks.md holds its output).
#
#   tests/cudasim/calibrate.sh [WORK_DIR]
#
# For each commit: `git archive` of that commit into WORK_DIR/COMMIT, its
# tests/cudasim/ replaced by this tree's (the simulator and its time model;
# the sim_*.cc wrappers include that commit's own cuda/*.cu, unchanged), the
# simulator's new source files added to its CMake list, then its
# mnist-train-cudasim target built (its own host program, its own CUDA
# backend). Each cell: mnist-train --backend cuda, one rank, graph replay,
# --metrics (each step synchronised at its end, as bench/train timed the H100),
# CUDASIM_TIME_REPORT=1: the median interval between graph launches on the
# modelled clock, and the ops of one replay, longest first (WORK_DIR/COMMIT-
# MODEL-bBATCH.txt). Steps per cell: 20 (seed, mlp), 4 (LeNet-5, whose
# simulation is slow on a CPU); the model has no noise, so few steps suffice.
# A commit whose launches may run several steps (--graph-steps) and whose
# sim_step_us leaves the run's set-up out: its summary's sim_step_us over 20
# steps, --log-every 100 (as bench/train), instead.
#
# Environment: JOBS (build parallelism, default 2), MPIRUN (default mpirun),
# DATA (default MNIST_Data/train of this tree), COMMITS (a subset of the
# commits, oldest first). Takes about 20 minutes on 2 cores the first time.
# Exit 0 when every cell is within 2x of its measurement and LeNet-5 at batch
# 256 is at least 5x slower at c143872 than at 092b1c6; 1 otherwise (b3a229a's
# LeNet-5 is not: docs/benchmarks.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${1:-$ROOT/build-calibrate}
JOBS=${JOBS:-2}
MPIRUN=${MPIRUN:-mpirun}
DATA=${DATA:-$ROOT/MNIST_Data/train}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$WORK"

# Measured medians (us, graph replay, synchronised per step, rank 0, one H100):
# shared/gpu-runs/2026-11-25-h100/README.md and 2026-11-26-h100/bench-train-quick.md.
declare -A MEASURED=(
	[092b1c6-seed-32]=31.4 [092b1c6-seed-256]=41.7 [092b1c6-mlp-32]=72.6
	[092b1c6-mlp-256]=102 [092b1c6-lenet-32]=160 [092b1c6-lenet-256]=407
	[c143872-seed-32]=35.3 [c143872-seed-256]=45.4 [c143872-mlp-32]=65.1
	[c143872-mlp-256]=100.1 [c143872-lenet-32]=782 [c143872-lenet-256]=5410
	[b3a229a-seed-32]=22.5 [b3a229a-seed-256]=35.9 [b3a229a-mlp-32]=66.9
	[b3a229a-mlp-256]=83.0 [b3a229a-lenet-32]=186.1 [b3a229a-lenet-256]=527.6
)
# The commits, oldest first (COMMITS: a subset, in that order).
read -r -a COMMITS <<<"${COMMITS:-092b1c6 c143872 b3a229a}"

build() { # COMMIT
	local c=$1 dir=$WORK/$1
	if [ ! -x "$dir/build/cudasim/mnist-train" ] || [ "$ROOT/tests/cudasim" -nt "$dir/.stamp" ] ||
		[ -n "$(find "$ROOT/tests/cudasim" -newer "$dir/.stamp" 2>/dev/null | head -1)" ]; then
		if [ ! -f "$dir/src/CMakeLists.txt" ]; then
			mkdir -p "$dir/src"
			git -C "$ROOT" archive "$c" | tar -x -C "$dir/src"
		fi
		# This tree's simulator, timestamps kept (a rebuild compiles what changed).
		rm -rf "$dir/src/tests/cudasim"
		cp -rp "$ROOT/tests/cudasim" "$dir/src/tests/cudasim"
		# 092b1c6's kernels.cu took KERNEL_LAUNCH from the stand-in header of its day (a
		# queued launch, no check): the same, as this tree's stand-in raw launch.
		if ! grep -q 'KERNEL_LAUNCH_ON(kernel' "$dir/src/cuda/kernels.cu"; then
			sed -i 's|^#include "../../cuda/kernels.cu"|#define KERNEL_LAUNCH(kernel, geom, stream, ...) KERNEL_LAUNCH_ON(kernel, geom, stream, __VA_ARGS__)\n#include "../../cuda/kernels.cu"|' \
				"$dir/src/tests/cudasim/sim_kernels.cc"
		fi
		# The simulator's sources that commit's CMake list does not name (a source file
		# added to the simulator later goes here too).
		local cm=$dir/src/tests/cmake/45-cudasim.cmake
		grep -q 'timing.cc' "$cm" ||
			sed -i 's|\${MNIST_CUDASIM_DIR}/nccl.cc)|${MNIST_CUDASIM_DIR}/nccl.cc ${MNIST_CUDASIM_DIR}/timing.cc)|' "$cm"
		grep -q 'cublaslt.cc' "$cm" ||
			sed -i 's|\${MNIST_CUDASIM_DIR}/nccl.cc |${MNIST_CUDASIM_DIR}/nccl.cc ${MNIST_CUDASIM_DIR}/cublaslt.cc |' "$cm"
		[ -f "$dir/build/CMakeCache.txt" ] || cmake -S "$dir/src" -B "$dir/build" >"$dir/configure.log" 2>&1
		cmake --build "$dir/build" -j"$JOBS" --target mnist-train-cudasim >"$dir/build.log" 2>&1 || {
			echo "calibrate: the build of $c failed: $dir/build.log" >&2
			tail -20 "$dir/build.log" >&2
			exit 1
		}
		touch "$dir/.stamp"
	fi
}

cell() { # COMMIT MODEL BATCH -> prints the modelled step (us)
	local c=$1 m=$2 b=$3 steps=20 log=1000 out=$WORK/$1-$2-b$3.txt summary=
	# Launches of several steps, the set-up left out of sim_step_us: the summary's figure.
	grep -q set_up_count "$WORK/$c/src/cuda/backend_cuda_ctx.cuh" 2>/dev/null && summary=1 log=100
	[ "$m" = lenet ] && [ -z "$summary" ] && steps=4
	"$MPIRUN" -n 1 -x LD_LIBRARY_PATH="$WORK/$c/build/cudasim/driver" -x CUDASIM_TIME_REPORT=1 \
		"$WORK/$c/build/cudasim/mnist-train" --backend cuda --model "$m" --batch-size "$b" \
		--limit $((b * steps)) --epochs 1 --log-every "$log" --data "$DATA" \
		--metrics "$WORK/$c-$m-b$b.jsonl" >"$out" 2>&1 || {
		echo "calibrate: $c $m b$b failed: $out" >&2
		tail -5 "$out" >&2
		exit 1
	}
	if [ -n "$summary" ]; then
		sed -n 's/^summary:.* sim_step_us=\([0-9.]*\).*/\1/p' "$out"
	else
		sed -n 's/^cudasim time: step_us=\([0-9.]*\).*/\1/p' "$out"
	fi
}

for c in "${COMMITS[@]}"; do
	build "$c"
done
declare -A PRED
ok=1
head="| model, batch" rule="|---"
for c in "${COMMITS[@]}"; do
	head="$head | $c measured | $c predicted | ratio"
	rule="$rule|---|---|---"
done
echo "$head |"
echo "$rule|"
for m in seed mlp lenet; do
	for b in 32 256; do
		row="| $m, $b"
		for c in "${COMMITS[@]}"; do
			p=$(cell "$c" "$m" "$b")
			PRED[$c-$m-$b]=$p
			meas=${MEASURED[$c-$m-$b]}
			r=$(awk -v p="$p" -v m="$meas" 'BEGIN { printf "%.2f", p / m }')
			flag=$(awk -v r="$r" 'BEGIN { print (r >= 0.5 && r <= 2.0) ? "" : " **off**" }')
			[ -n "$flag" ] && ok=0
			row="$row | $meas | $p | $r$flag"
		done
		echo "$row |"
	done
done
if [ -n "${PRED[092b1c6-lenet-256]:-}" ] && [ -n "${PRED[c143872-lenet-256]:-}" ]; then
	slow=$(awk -v a="${PRED[092b1c6-lenet-256]}" -v b="${PRED[c143872-lenet-256]}" 'BEGIN { printf "%.1f", b / a }')
	echo
	echo "LeNet-5 at batch 256, c143872 over 092b1c6: predicted ${slow}x, measured $(awk 'BEGIN { printf "%.1f", 5410 / 407 }')x"
	awk -v s="$slow" 'BEGIN { exit !(s >= 5) }' || ok=0
fi
echo
echo "Where the time goes (one replayed step, modelled): $WORK/COMMIT-MODEL-bBATCH.txt"
[ "$ok" = 1 ]
