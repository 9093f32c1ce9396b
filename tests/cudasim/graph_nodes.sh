#!/usr/bin/env bash
# graph_nodes.sh - how many nodes one captured training step holds, per model,
# on the simulated CUDA backend: the figure GPU speed work moves, bounded here
# so that a change which adds a launch to the step fails CI.
#
#   tests/cudasim/graph_nodes.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL BOUND [TRAIN_ARGS...]
#
# Runs mnist-train (the simulated build) with --backend cuda on 1 rank, then on
# 2, for a few steps of MODEL, and reads graph_nodes= from each summary. The
# 1-rank count must be at least 1 and at most BOUND; the 2-rank count must be
# the 1-rank count plus one (the gradients' allreduce, the only collective of a
# step). A --no-graph run must say graph_nodes=0. With GRAPH_NODES_ONE_RANK=1
# only the 1-rank run (those two checks do not depend on the model: one model
# makes them). Prints the counts; exit 0 pass, 1 fail.
#
# The simulator records one node per kernel launch, per collective and per
# cuBLASLt or cuBLAS call (two for a split-K GEMM whose reduction is a kernel
# of its own, as the H100 showed): what cudaGraphGetNodes counts on a GPU for
# the same calls, as far as the libraries launch one kernel per call.
set -uo pipefail
if [ $# -lt 5 ]; then
	echo "usage: $0 TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL BOUND [TRAIN_ARGS...]" >&2
	exit 1
fi
TRAIN=$1 DATA=$2
shift 2
MPIRUN=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	MPIRUN+=("$1")
	shift
done
[ $# -gt 0 ] && shift
MODEL=$1 BOUND=$2
shift 2
ARGS=("$@")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0

nodes() { # RANKS NAME ARGS...: prints graph_nodes of the run's summary
	local ranks=$1 name=$2
	shift 2
	if ! timeout 150 "${MPIRUN[@]}" -n "$ranks" "$TRAIN" --backend cuda --model "$MODEL" \
		--data "$DATA/train" --test-data "$DATA/test" --limit 256 --epochs 1 \
		"${ARGS[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		echo "FAIL: $MODEL $name: mnist-train exited with an error" >&2
		cat "$TMP/$name.err" >&2
		return 1
	fi
	local summary
	summary=$(grep '^summary:' "$TMP/$name.out")
	echo "  $name: $summary" >&2
	local n
	n=$(tr ' ' '\n' <<<"$summary" | sed -n 's/^graph_nodes=//p')
	if [ -z "$n" ]; then
		echo "FAIL: $MODEL $name: no graph_nodes= on the summary line" >&2
		return 1
	fi
	echo "$n"
}

one=$(nodes 1 one_rank) || exit 1
echo "graph_nodes $MODEL ${ARGS[*]}: 1 rank $one (bound $BOUND)"
if [ "$one" -lt 1 ] || [ "$one" -gt "$BOUND" ]; then
	echo "FAIL: $MODEL: $one nodes in one step at 1 rank, more than the bound $BOUND (or none)"
	status=1
fi
if [ "${GRAPH_NODES_ONE_RANK:-0}" = 1 ]; then
	[ $status -eq 0 ] && echo "PASS graph_nodes $MODEL"
	exit $status
fi
two=$(nodes 2 two_ranks) || exit 1
none=$(nodes 1 no_graph --no-graph) || exit 1
echo "graph_nodes $MODEL: 2 ranks $two, --no-graph $none"
if [ "$two" -ne $((one + 1)) ]; then
	echo "FAIL: $MODEL: $two nodes at 2 ranks; expected $((one + 1)), the 1-rank step and one allreduce"
	status=1
fi
if [ "$none" -ne 0 ]; then
	echo "FAIL: $MODEL: --no-graph reports graph_nodes=$none, not 0"
	status=1
fi
[ $status -eq 0 ] && echo "PASS graph_nodes $MODEL"
exit $status
