#!/usr/bin/env bash
# train.sh - the main job on a fresh machine: set up (scripts/setup.sh), then the
# seed's data-parallel run, `mpirun -n RANKS build/mnist-train`, on the default
# backend (host without a GPU). Extra arguments go to mnist-train.
#
#   bash scripts/train.sh                 (RANKS=2 by default)
#   RANKS=4 bash scripts/train.sh --epochs 1
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

RANKS=${RANKS:-2}
mpi_args=(-n "$RANKS")
[ "$(id -u)" -ne 0 ] || mpi_args+=(--allow-run-as-root)
[ "$RANKS" -le "$(nproc)" ] || mpi_args+=(--oversubscribe)
export DATA_PATH=./MNIST_Data/train/
set -x
mpirun "${mpi_args[@]}" build/mnist-train "$@"
