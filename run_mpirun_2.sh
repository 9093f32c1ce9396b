#!/usr/bin/env bash
# run_mpirun_2.sh - mnist-train on the nodes of a hostfile, as the seed
# tutorial's run_mpirun_2.sh:
#
#   export DATA_PATH=./MNIST_Data/train/
#   bash run_mpirun_2.sh ./hostfile [MPIRUN_ARGS...] [-- TRAINER_ARGS...]
#
# HOSTFILE (the first argument, else $HOSTFILE) holds one "HOST slots=N" line
# per node (see ./hostfile); one rank per slot unless NP is set. Each rank's
# output goes to log_output/1/rank.N/stdout. MNIST_NET=IFACE picks the
# network; TRAINER the program (default build/mnist-train, the same path on
# every node). docs/multi-node.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
launcher=run_mpirun_2.sh
hostfile=${HOSTFILE:-}
if (($#)) && [[ $1 != -* ]]; then
	hostfile=$1
	shift
fi
if [[ -z $hostfile ]]; then
	echo "$launcher: no hostfile: give its path as the first argument or in HOSTFILE" \
		"(one 'HOST slots=N' line per node, as in ./hostfile)" >&2
	exit 2
fi
source "$here/scripts/mpirun-env.sh"

cmd=("$mpirun" ${NP:+-n "$NP"} --hostfile "$hostfile" --output-filename log_output --merge-stderr-to-stdout
	"${mpi_opts[@]}" ${mpi_args[@]+"${mpi_args[@]}"} "$trainer" ${trainer_args[@]+"${trainer_args[@]}"})
echo "$launcher: ${cmd[*]}" >&2
exec "${cmd[@]}"
