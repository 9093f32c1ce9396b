#!/usr/bin/env bash
# graph_nodes.sh - how many of the program's own kernels one captured training
# step holds, per model, on the simulated CUDA backend, bounded here so that a
# change which adds a launch of ours to the step fails CI. Library calls
# (cuBLASLt, cuBLAS, NCCL) are counted apart and not bounded: how many kernels
# a library call is, and whether a split-K plan with its reduction beats one
# without, is the library's and the plan's measurement's business (time is the
# figure; a bound on library nodes once forced a 13x slower plan).
#
#   tests/cudasim/graph_nodes.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL BOUND [TRAIN_ARGS...]
#
# The runs take cuBLASLt's heuristic plan (--gpu-plan heuristic: the epilogues fused
# where cuBLASLt offers them), so the count is the step's own structure; a measured
# plan may choose our epilogue kernels (bias_act, relu_backward, bias_grad), or a
# convolution as a GEMM between two kernels of ours (im2col, then the pool from z; col2im
# for its input gradient), where they are faster, and no bound here may forbid that.
#
# Runs mnist-train (the simulated build) with --backend cuda on 1 rank, then on
# 2, for a few steps of MODEL, and reads graph_nodes= from each summary and the
# simulator's count of the program's kernels in the captured step
# (CUDASIM_GRAPH_REPORT). The 1-rank kernels must be at least 1 and at most
# BOUND; the 2-rank step must hold the same kernels and one node more in all
# (the gradients' allreduce, the only collective of a step). A --no-graph run
# must say graph_nodes=0. With GRAPH_NODES_ONE_RANK=1 only the 1-rank run
# (those two checks do not depend on the model: one model makes them). Prints
# the counts; exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 5 "MODEL BOUND [TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
MODEL=$1 BOUND=$2
shift 2
ARGS=("$@")
checks_begin
TRAIN_DATA=$(train_only) # the step's nodes are what is counted: no test set to score
status=0

nodes() { # RANKS NAME ARGS...: prints graph_nodes of the run's summary
	local ranks=$1 name=$2
	shift 2
	if ! CUDASIM_GRAPH_REPORT=1 timeout 150 "${MPIRUN[@]}" -n "$ranks" "$TRAIN" --backend cuda --model "$MODEL" \
		--data "$TRAIN_DATA" --limit 256 --epochs 1 --gpu-plan heuristic \
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
	# The program's kernels in one training step's graph: the first one instantiated (the
	# run records one step alone before any group of steps, --graph-steps).
	local k
	k=$(sed -n 's/^cudasim: graph instantiated: [0-9]* nodes, \([0-9]*\) kernels of the program.*/\1/p' \
		"$TMP/$name.err" | head -n 1)
	echo "$n ${k:-0}"
}

read -r one one_k <<<"$(nodes 1 one_rank)" || exit 1
[ -n "$one" ] || exit 1
echo "graph_nodes $MODEL ${ARGS[*]}: 1 rank $one nodes, $one_k kernels of ours (bound $BOUND)"
if [ "$one_k" -lt 1 ] || [ "$one_k" -gt "$BOUND" ]; then
	echo "FAIL: $MODEL: $one_k kernels of ours in one step at 1 rank, more than the bound $BOUND (or none)"
	status=1
fi
if [ "${GRAPH_NODES_ONE_RANK:-0}" = 1 ]; then
	[ $status -eq 0 ] && echo "PASS graph_nodes $MODEL"
	exit $status
fi
read -r two two_k <<<"$(nodes 2 two_ranks)" || exit 1
read -r none _ <<<"$(nodes 1 no_graph --no-graph)" || exit 1
[ -n "$two" ] && [ -n "$none" ] || exit 1
echo "graph_nodes $MODEL: 2 ranks $two nodes, $two_k kernels of ours; --no-graph $none"
if [ "$two" -ne $((one + 1)) ] || [ "$two_k" -ne "$one_k" ]; then
	echo "FAIL: $MODEL: $two nodes ($two_k kernels of ours) at 2 ranks; expected $((one + 1)) ($one_k), the 1-rank step and one allreduce"
	status=1
fi
if [ "$none" -ne 0 ]; then
	echo "FAIL: $MODEL: --no-graph reports graph_nodes=$none, not 0"
	status=1
fi
[ $status -eq 0 ] && echo "PASS graph_nodes $MODEL"
exit $status
