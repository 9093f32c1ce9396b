# script_args.sh - the arguments every mnist-train test script takes (sourced):
#   script.sh MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]
# sets TRAIN (mnist-train), DATA (MNIST_Data with train/ and test/) and MPIRUN
# (an array: mpirun and its options), or prints the usage and exits 1.

if [ $# -lt 3 ]; then
	echo "usage: $0 MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]" >&2
	exit 1
fi
TRAIN=$1
DATA=$2
shift 2
MPIRUN=("$@")
