# mpirun_args.sh - sourced by the simulator's mnist-train scripts (graph_nodes.sh,
# step_time.sh, train_sim.sh), whose arguments end "MPIRUN [MPIRUN_ARGS...] -- REST...".
#
#   split_mpirun "$@"; set -- "${AFTER[@]+"${AFTER[@]}"}"
#
# sets MPIRUN (an array: mpirun and its options, up to "--") and AFTER (what follows "--").
split_mpirun() {
	MPIRUN=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		MPIRUN+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	AFTER=("$@")
}
