#!/usr/bin/env bash
# run_mpirun_2.sh - mnist-train on the nodes of a hostfile, as the seed
# tutorial's run_mpirun_2.sh:
#
#   export DATA_PATH=./MNIST_Data/train/
#   bash run_mpirun_2.sh ./hostfile [MPIRUN_ARGS...] [-- TRAINER_ARGS...]
#
# HOSTFILE (the first argument, else $HOSTFILE) holds one "HOST slots=N" line
# per node (see ./hostfile); one rank per slot unless NP is set. Each rank's
# output goes to log_output/1/rank.N/stdout. DATA_PATH (default
# ./MNIST_Data/train/) is exported to every rank and an old log_output
# removed (scripts/mpirun-env.sh, shared by both launch scripts).
# MNIST_NET=IFACE picks the network; TRAINER the program (default
# build/mnist-train, the same path on every node). docs/multi-node.md.
# MAX_RESTARTS=N restarts a failed job from its newest checkpoint, on the
# nodes that still answer, each attempt logging to log_output/attempt-K/
# (scripts/restart.sh, docs/reliability.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nodes_var=HOSTFILE
nodes_what="a hostfile (one 'HOST slots=N' line per node, as in ./hostfile)"
source "$here/scripts/mpirun-env.sh"

cmd=("$mpirun" ${NP:+-n "$NP"} --hostfile "$nodes" --output-filename log_output --merge-stderr-to-stdout
	"${mpi_opts[@]}" ${mpi_args[@]+"${mpi_args[@]}"} "$trainer" ${trainer_args[@]+"${trainer_args[@]}"})
((max_restarts == 0)) || restart_job "${cmd[@]}" # MAX_RESTARTS=N: attempts, then exits (scripts/restart.sh)
echo "$launcher: ${cmd[*]}" >&2
exec "${cmd[@]}"
