# mpirun_args.sh - sourced by the simulator's mnist-train scripts (graph_nodes.sh,
# graph_steps.sh, plan_lazy_load.sh, step_time.sh, train_sim.sh), whose arguments end
# "MPIRUN [MPIRUN_ARGS...] -- REST...".
#
#   split_mpirun "$@"; set -- "${AFTER[@]+"${AFTER[@]}"}"
#
# sets MPIRUN (an array: mpirun and its options, up to "--") and AFTER (what follows "--").
#
#   train_args MIN "REST USAGE" "$@"; set -- "${AFTER[@]+"${AFTER[@]}"}"
#
# for arguments "TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- REST...": at least MIN words,
# else the usage and exit 1; sets TRAIN and DATA, then splits the rest as split_mpirun.
split_mpirun() {
	MPIRUN=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		MPIRUN+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	AFTER=("$@")
}

train_args() {
	local min=$1 rest=$2
	shift 2
	if [ $# -lt "$min" ]; then
		echo "usage: $0 TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- $rest" >&2
		exit 1
	fi
	TRAIN=$1 DATA=$2
	shift 2
	split_mpirun "$@"
}
