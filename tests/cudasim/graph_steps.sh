#!/usr/bin/env bash
# graph_steps.sh - several training steps per graph launch (--graph-steps) on the
# simulated CUDA backend: the same model bitwise, the groups the loop promises,
# and the modelled step (cudasim.h rule 10) shorter than one launch a step.
#
#   tests/cudasim/graph_steps.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL
#
# 20 steps of MODEL at batch 32, --log-every 10, with --metrics (each launch
# synchronised at its end, as bench/train times a GPU). Reports after steps 0,
# 10 and 19 end launches, so the default --graph-steps 8 runs step 0 uncaptured,
# then 1-10 as 8 + 2 and 11-19 as 8 + 1: the run records a graph of one step,
# then of 8 and of 2, and CUDASIM_GRAPH_REPORT must show exactly those, their
# kernels of the program 1, 8 and 2 times one step's. --graph-steps 3 with
# --log-every 8 runs 1-8 as 3 + 3 + 2 (a length neither a power of two nor the
# most is rounded down to one) and records 1, 3, 2; --graph-steps 1 one graph;
# --no-graph none. Every run ends at the same param_crc32, final loss and loss
# lines; the metrics' step_times event counts 20 steps; the modelled step of
# the default is below that of --graph-steps 1, and a run of 4 steps (2 of them
# setting it up) models about the same step as one of 20. Then 2 ranks: the default and
# --graph-steps 1 bitwise the same (the allreduce of every step inside the
# groups), also with --log-every 10 on one rank and 4 on the other (launches of
# 2: graphs of 1 and 2 steps). Bad values: --graph-steps 0 or 65, and --graph-steps with
# --no-graph, exit 2 naming the flag. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 4 "MODEL" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
MODEL=$1
checks_begin
TRAIN_DATA=$(train_only) # the runs compare the trained model and the graphs: no test set to score

run() { # RANKS NAME ARGS...
	local ranks=$1 name=$2
	shift 2
	CUDASIM_GRAPH_REPORT=1 timeout 150 "${MPIRUN[@]}" -n "$ranks" "$TRAIN" --backend cuda \
		--model "$MODEL" --data "$TRAIN_DATA" --limit "${LIMIT:-$((640 * ranks))}" --batch-size 32 --epochs 1 \
		--log-every "${LOG_EVERY:-10}" --gpu-plan heuristic --metrics "$TMP/$name.jsonl" "$@" \
		>"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		fail "$name: mnist-train $* exited with status $rc"
		sed 's/^/    /' "$TMP/$name.err"
	fi
	grep '^summary:' "$TMP/$name.out" | head -n 1 | sed 's/^/  '"$name"': /'
}
# The graphs a run instantiated, but the backend's start-up probes (cuda/backend_cuda_start.cu)
# of programmatic dependent launch (two kernels of ours, no library call) and of a fork to a
# second stream and its join (four kernels of ours).
PROBES='^cudasim: graph instantiated: (2 nodes, 2|4 nodes, 4) kernels of the program, 0 library'
step_graphs() { # NAME
	grep '^cudasim: graph instantiated' "$TMP/$1.err" | grep -Ev "$PROBES"
}
expect_graphs() { # NAME LENGTHS...: graphs of these many steps, in this order
	local name=$1 got one
	shift
	# Every rank records the same graphs; their lines interleave: each length once, in order.
	got=$(step_graphs "$name" | sed -n 's/^cudasim: graph instantiated: [0-9]* nodes, \([0-9]*\) kernels of the program.*/\1/p' |
		{ if [ "${name#two_}" != "$name" ]; then awk '!seen[$0]++'; else cat; fi; } |
		tr '\n' ' ' | sed 's/ $//')
	one=${got%% *}
	local want=""
	for n in "$@"; do want="$want $((n * one))"; done
	want=${want# }
	if [ -z "$one" ] || [ "$one" -lt 1 ] || [ "$got" != "$want" ]; then
		fail "$name: graphs instantiated with '$got' kernels of the program, expected '$want' (graphs of $* steps)"
	else
		echo "  $name: graphs of $* steps ($got kernels of the program)"
	fi
}

run 1 eight
LOG_EVERY=8 run 1 three --graph-steps 3
run 1 single --graph-steps 1
run 1 plain --no-graph
expect_graphs eight 1 8 2
expect_graphs three 1 3 2
expect_graphs single 1
[ -n "$(step_graphs plain)" ] && fail "plain: --no-graph instantiated a graph"
[ "$(grep -Ec "$PROBES" "$TMP/plain.err")" = 2 ] ||
	fail "plain: not the two start-up probes (graphs of 2 and of 4 kernels of ours)"

want=$(field single param_crc32)
[ -n "$want" ] || fail "single: no param_crc32 on the summary"
for name in eight three plain; do
	[ "$(field $name param_crc32)" = "$want" ] && [ "$(field $name final_loss)" = "$(field single final_loss)" ] ||
		fail "$name: param_crc32=$(field $name param_crc32) final_loss=$(field $name final_loss), --graph-steps 1 $want $(field single final_loss)"
done
for name in eight plain; do # (three logs every 8 steps)
	[ "$(grep 'loss is' "$TMP/$name.out")" = "$(grep 'loss is' "$TMP/single.out")" ] ||
		fail "$name: its loss lines differ from --graph-steps 1's (a report inside a launch?)"
done
for name in eight three single; do
	steps=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if "step_times" in l]
print(r[-1]["steps"] if r else "")' "$TMP/$name.jsonl")
	[ "$steps" = 20 ] || fail "$name: the metrics' step_times event counts '$steps' steps, expected 20"
done
grouped=$(field eight sim_step_us) alone=$(field single sim_step_us)
if awk -v g="$grouped" -v a="$alone" 'BEGIN { exit !(g + 0 > 0 && g + 0 < a + 0) }'; then
	echo "  modelled step: $grouped us with --graph-steps 8, $alone us with 1"
else
	fail "the modelled step with --graph-steps 8 ($grouped us) is not below that with 1 ($alone us)"
fi
# 4 steps: the first measures the plan, the second records the graph (neither is in the
# median), the third is a plain replay, the last downloads its loss for the report.
LIMIT=128 run 1 short --graph-steps 1
short=$(field short sim_step_us)
if awk -v s="$short" -v a="$alone" 'BEGIN { exit !(s + 0 > 0 && s + 0 < 1.5 * a) }'; then
	echo "  modelled step of a 4-step run: $short us (20 steps: $alone us)"
else
	fail "the modelled step of a 4-step run, $short us, is not within 1.5x of a 20-step run's $alone us: the run's set-up is in the median"
fi

run 2 two_eight
run 2 two_single --graph-steps 1
[ -n "$(field two_single param_crc32)" ] && [ "$(field two_eight param_crc32)" = "$(field two_single param_crc32)" ] ||
	fail "2 ranks: --graph-steps 8 ended at param_crc32=$(field two_eight param_crc32), 1 at $(field two_single param_crc32)"
expect_graphs two_eight 1 8 2
# --log-every per rank (each prints its own lines): launches end where either rank reads its
# loss (the multiples of gcd(10, 4) = 2), the same groups on both ranks, so no hang.
# (Open MPI names each rank's number in OMPI_COMM_WORLD_RANK.)
CUDASIM_GRAPH_REPORT=1 timeout 150 "${MPIRUN[@]}" -n 2 bash -c 'exec "$@" --log-every $((OMPI_COMM_WORLD_RANK ? 4 : 10))' \
	rank "$TRAIN" --backend cuda --model "$MODEL" --data "$TRAIN_DATA" --limit 1280 --batch-size 32 --epochs 1 \
	--gpu-plan heuristic >"$TMP/two_mixed.out" 2>"$TMP/two_mixed.err" ||
	{ fail "two_mixed: --log-every 10 on rank 0, 4 on rank 1, exited with an error"; cat "$TMP/two_mixed.err"; }
grep '^summary:' "$TMP/two_mixed.out" | head -n 1 | sed 's/^/  two_mixed: /'
[ "$(field two_mixed param_crc32)" = "$(field two_single param_crc32)" ] ||
	fail "two_mixed: param_crc32=$(field two_mixed param_crc32), --graph-steps 1 $(field two_single param_crc32)"
expect_graphs two_mixed 1 2

bad() { # NAME PATTERN ARGS...: exit status 2 and PATTERN on stderr
	local name=$1 pattern=$2
	shift 2
	timeout 60 "${MPIRUN[@]}" -n 1 "$TRAIN" --backend cuda --data "$TRAIN_DATA" --limit 64 "$@" \
		>"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	[ "$rc" -eq 2 ] || fail "$name: mnist-train $* exited with status $rc, expected 2"
	grep -qE -- "$pattern" "$TMP/$name.err" || { fail "$name: no message matching '$pattern'"; cat "$TMP/$name.err"; }
}
bad zero '--graph-steps' --graph-steps 0
bad too_many '--graph-steps' --graph-steps 65
bad no_graph '--graph-steps.*(--no-graph)' --graph-steps 4 --no-graph

[ "$failures" -eq 0 ] && echo "PASS graph_steps $MODEL" && exit 0
exit 1
