# mpirun-env.sh - sourced by run_mpirun_1.sh and run_mpirun_2.sh: what both
# launches share, and the checks mpirun cannot make itself (unknown hosts and
# too few slots are mpirun's to report).
#
# Reads: here (the script's directory), nodes_var (the
#        variable that may name the nodes: HOSTS or HOSTFILE), nodes_what
#        (what they are, for the message), and the arguments.
# Sets:  launcher (the script's name), nodes (the first argument unless it is an option, else $nodes_var),
#        mpi_args and trainer_args (the arguments before and after "--"),
#        mpirun, trainer, and mpi_opts (root, network choice, DATA_PATH);
#        max_restarts and restart_job from scripts/restart.sh (MAX_RESTARTS).
launcher=${0##*/}
nodes=${!nodes_var:-}
if (($#)) && [[ $1 != -* ]]; then
	nodes=$1
	shift
fi
if [[ -z $nodes ]]; then
	echo "$launcher: no ${nodes_var,,}: give $nodes_what as the first argument or in $nodes_var" >&2
	exit 2
fi
mpi_args=()
while (($#)) && [[ $1 != -- ]]; do
	mpi_args+=("$1")
	shift
done
(($#)) && shift
trainer_args=("$@")

export DATA_PATH=${DATA_PATH:-./MNIST_Data/train/}
if [[ ! -d $DATA_PATH ]]; then
	echo "$launcher: DATA_PATH=$DATA_PATH is not a directory here: export DATA_PATH=DIR," \
		"the MNIST training directory, at the same path on every node (scripts/get-mnist.sh fetches it)" >&2
	exit 2
fi
source "$here/scripts/restart.sh"
restart_check
mpirun=${MPIRUN:-mpirun}
trainer=${TRAINER:-$here/build/mnist-train}
mpi_opts=(-x DATA_PATH)
[[ $(id -u) != 0 ]] || mpi_opts+=(--allow-run-as-root)
# MNIST_NET=eth1: all job traffic (MPI's and NCCL's) on that interface.
if [[ -n ${MNIST_NET:-} ]]; then
	export NCCL_SOCKET_IFNAME="=$MNIST_NET" # "=": exact names, as MPI takes them
	mpi_opts+=(--mca btl_tcp_if_include "$MNIST_NET" --mca oob_tcp_if_include "$MNIST_NET"
		-x NCCL_SOCKET_IFNAME)
fi
rm -rf log_output
