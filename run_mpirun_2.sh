#!/usr/bin/env bash
# run_mpirun_2.sh - start mnist-train on the nodes of a hostfile, as the seed
# tutorial's run_mpirun_2.sh does:
#
#   export DATA_PATH=./MNIST_Data/train/
#   bash run_mpirun_2.sh ./hostfile -- --epochs 10
#
# HOSTFILE is the first argument (else $HOSTFILE, else ./hostfile next to this
# script): one "HOST slots=N" line per node. The rank count defaults to the
# sum of the slots. Everything else, the checks, DATA_PATH, log_output and the
# variables, is run_mpirun_1.sh's: see `bash run_mpirun_2.sh --help`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hostfile=${HOSTFILE:-}
if (($#)) && [[ $1 != -* ]]; then
	hostfile=$1
	shift
fi
hostfile=${hostfile:-$here/hostfile}

_MNIST_LAUNCHER=run_mpirun_2.sh exec bash "$here/run_mpirun_1.sh" --hostfile "$hostfile" "$@"
