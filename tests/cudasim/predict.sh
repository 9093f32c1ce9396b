#!/usr/bin/env bash
# predict.sh - this tree's modelled H100 step (tests/cudasim/cudasim.h, rule 10) for
# the GPU matrix's cells: seed, mlp (512, 256) and LeNet-5 at batch 32 and 256, one
# rank, graph replay, each step synchronised (--metrics, as bench/train times a GPU),
# the plan measured on the modelled clock, 20 steps and --log-every 100 (bench/train's),
# so that launches of --graph-steps 8 make the median once the run's set-up is past (its
# intervals are not in sim_step_us); and one step op by op (--profile) per cell.
# A prediction, never a measurement: docs/benchmarks.md puts it beside the H100's.
#
#   tests/cudasim/predict.sh [BUILD_DIR [OUT_DIR [TRAIN_ARGS...]]]
#
# BUILD_DIR (default build/) must hold the simulated build (build/cudasim/mnist-train,
# a default build with the CUDA toolkit). Prints "MODEL bBATCH sim_step_us=X
# graph_nodes=N" per cell; OUT_DIR (default a temporary folder, removed) keeps each
# cell's metrics (gpu_plan, op_times) and profile table; TRAIN_ARGS go to every run (a
# change's flag, --no-pdl say, for the model without it). About 3 minutes on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
OUT=${2:-}
shift $(($# < 2 ? $# : 2))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -n "$OUT" ] || OUT=$TMP/out
mkdir -p "$OUT" "$TMP/data/train"
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The training files alone: no test set, no evaluation (the step is what is predicted).
ln -s "$ROOT/MNIST_Data/train"/* "$TMP/data/train/"
for cell in seed:32:20 seed:256:20 mlp:32:20 mlp:256:20 lenet:32:20 lenet:256:20; do
	IFS=: read -r model batch steps <<<"$cell"
	extra=()
	[ "$model" = mlp ] && extra=(--hidden 512,256)
	"${MPIRUN:-mpirun}" -n 1 -x LD_LIBRARY_PATH="$BUILD/cudasim/driver" "$BUILD/cudasim/mnist-train" \
		--backend cuda --model "$model" "${extra[@]}" --batch-size "$batch" \
		--limit $((batch * steps)) --epochs 1 --log-every 100 --data "$TMP/data/train" \
		--metrics "$OUT/$model-b$batch.jsonl" --profile "$@" >"$OUT/$model-b$batch.out" 2>&1
	echo "$model b$batch $(grep -o 'sim_step_us=[0-9.]*' "$OUT/$model-b$batch.out")" \
		"$(grep -o 'graph_nodes=[0-9]*' "$OUT/$model-b$batch.out")"
done
