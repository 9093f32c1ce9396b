#!/usr/bin/env bash
# run_mpirun_1.sh - mnist-train on several nodes with `mpirun -H`, as the seed
# tutorial's run_mpirun_1.sh:
#
#   export DATA_PATH=./MNIST_Data/train/
#   bash run_mpirun_1.sh 192.168.0.1:8,192.168.0.2:8 [MPIRUN_ARGS...] [-- TRAINER_ARGS...]
#
# HOSTS (the first argument, else $HOSTS) is HOST:SLOTS,...; one rank per slot
# unless NP is set. Each rank's output goes to log_output/1/rank.N/stdout.
# DATA_PATH (default ./MNIST_Data/train/) is exported to every rank and an
# old log_output removed (scripts/mpirun-env.sh, shared by both launch
# scripts). MNIST_NET=IFACE picks the network; TRAINER the program (default
# build/mnist-train, the same path on every node). docs/multi-node.md.
# MAX_RESTARTS=N restarts a failed job from its newest checkpoint, on the
# nodes that still answer, each attempt logging to log_output/attempt-K/
# (scripts/restart.sh, docs/reliability.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nodes_var=HOSTS
nodes_what="HOST:SLOTS,HOST:SLOTS (e.g. 192.168.0.1:8,192.168.0.2:8)"
source "$here/scripts/mpirun-env.sh"

cmd=("$mpirun" ${NP:+-n "$NP"} -H "$nodes" --output-filename log_output --merge-stderr-to-stdout
	"${mpi_opts[@]}" ${mpi_args[@]+"${mpi_args[@]}"} "$trainer" ${trainer_args[@]+"${trainer_args[@]}"})
((max_restarts == 0)) || restart_job "${cmd[@]}" # MAX_RESTARTS=N: attempts, then exits (scripts/restart.sh)
echo "$launcher: ${cmd[*]}" >&2
exec "${cmd[@]}"
