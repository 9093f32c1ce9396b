#!/usr/bin/env bash
# side_stream.sh - the weight gradients on a second stream (cuda/backend_cuda.cu:
# cuda_gemm_op and cuda_join, gemm_req.beside) change nothing but the time: one model
# on the simulated CUDA backend, 1 rank, 16 steps, four ways, the same model at the end.
#
#   tests/cudasim/side_stream.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL BATCH [TRAIN_ARGS...]
#
# Runs: graph replay with the second stream (the default: the graph forks and joins, and
# the simulator replays its branches as late and as early as their dependencies allow, on
# alternate launches, cudasim.h rule 6); graph replay with --no-side-stream; --no-graph
# (forks and joins on the streams, run lazily, rule 2); --no-graph --no-side-stream. The
# first measures its plan, the others run it (--gpu-plan-from its --metrics file or, the
# last, the checkpoint the third saved; each must report every op so). With PLAN_FROM set
# (a --metrics file of the same model and batch: tests/cudasim/plan_once.sh's, measured
# once for the tests that follow it) the first follows that plan instead of measuring its
# own, and must report every op so; what the four runs compare is the same. Every
# run must end with the same param_crc32 and final loss, none may fall back from a failed
# capture, each gpu_plan record must say which streams it used, and the modelled step
# (rule 10: a graph's branches overlap) must be shorter with the second stream than
# without. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 5 "MODEL BATCH [TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
MODEL=$1 BATCH=$2
shift 2
checks_begin
TRAIN_DATA=$(train_only) # the runs compare the trained model: no test set to score
run() { # NAME [ARGS...]
	local name=$1
	shift
	if ! timeout 200 "${MPIRUN[@]}" -n 1 "$TRAIN" --backend cuda --model "$MODEL" --batch-size "$BATCH" \
		--data "$TRAIN_DATA" --limit $((BATCH * 16)) --epochs 1 --log-every 1000 \
		--metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train exited with an error"
		cat "$TMP/$name.err"
	fi
	echo "  $name: $(grep '^summary:' "$TMP/$name.out")"
	if grep -q 'CUDA graph .* failed' "$TMP/$name.err"; then
		fail "$name: a capture failed: $(grep -m1 'CUDA graph' "$TMP/$name.err")"
	fi
}

if [ -n "${PLAN_FROM:-}" ]; then
	cp "$PLAN_FROM" "$TMP/given.jsonl" || { echo "FAIL: PLAN_FROM=$PLAN_FROM cannot be read"; exit 1; }
	run side --gpu-plan-from "$TMP/given.jsonl" "$@"
	why=$(follows_plan side given) || fail "side did not follow PLAN_FROM's plan: $why"
else
	run side "$@"
fi
# The other three follow the first's plan: what differs between them is only the streams and
# the graph, and no plan is measured again (on the simulator most of a LeNet-5 run's time). Two
# read it from its --metrics file, the last from the checkpoint the one before saved at the
# epoch's end (which holds the plan it ran). Only the --no-graph runs save: a save's wait would
# be in the modelled step compared below.
run one --no-side-stream --gpu-plan-from "$TMP/side.jsonl" "$@"
run side_plain --no-graph --gpu-plan-from "$TMP/side.jsonl" --checkpoint-dir "$TMP/ck" "$@"
run one_plain --no-graph --no-side-stream --gpu-plan-from "$TMP/ck/ckpt-0-16.safetensors" "$@"
for name in one side_plain one_plain; do
	for k in param_crc32 final_loss; do
		[ -n "$(field side $k)" ] && [ "$(field $name $k)" = "$(field side $k)" ] ||
			fail "$k: $(field side $k) with the second stream, $(field $name $k) in $name"
	done
	why=$(follows_plan $name side) || fail "$name did not follow side's plan (--gpu-plan-from): $why"
done
case "$(launch_of side)" in
*"weight gradients on a second stream") ;;
*) fail "side: the gpu_plan record's launch says '$(launch_of side)', expected a second stream" ;;
esac
case "$(launch_of one)" in
*"one stream (--no-side-stream)") ;;
*) fail "one: the gpu_plan record's launch says '$(launch_of one)', expected one stream" ;;
esac
side=$(field side sim_step_us) one=$(field one sim_step_us)
if ! awk -v s="$side" -v o="$one" 'BEGIN { exit !(s + 0 > 0 && s + 0 < o + 0) }'; then
	fail "modelled step: $side us with the second stream, $one us without: expected shorter"
else
	echo "  modelled step: $side us with the second stream, $one us without"
fi
[ $failures -eq 0 ] && echo "PASS side_stream $MODEL b$BATCH"
exit $((failures > 0))
