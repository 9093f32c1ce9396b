#!/usr/bin/env bash
# step_time.sh - the modelled step of one model on the simulated CUDA backend
# (tests/cudasim/cudasim.h, rule 10: a modelled H100), bounded, so that a
# change which makes the step slower on the model, as c143872 made LeNet-5's
# 5x slower on the H100, fails CI.
#
#   tests/cudasim/step_time.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL BATCH BOUND_US [TRAIN_ARGS...]
#
# Runs mnist-train (the simulated build) with --backend cuda on 1 rank, graph
# replay, --metrics (each step synchronised at its end, as bench/train times a
# GPU), for 20 steps of MODEL at BATCH, and reads sim_step_us= from the
# summary: it must be there, a number, and at most BOUND_US. A step under half
# its bound is a note (the bound may come down). With PLAN_FROM set (a --metrics
# file of the same model and batch: tests/cudasim/plan_once.sh's, measured once for
# the tests that follow it) the run follows that plan (--gpu-plan-from) instead of
# measuring its own, and must report every op so: the modelled step is the same
# figure either way (the plan's measurement is left out of it). Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 6 "MODEL BATCH BOUND_US [TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
MODEL=$1 BATCH=$2 BOUND=$3
shift 3
checks_begin
TRAIN_DATA=$(train_only) # the step is what is measured: no test set to score
# Enough steps that, past the ones which set the run up (the plan's measurement, the
# capture of each launch length: their intervals are not in sim_step_us), launches of
# --graph-steps 8 make the median, as in bench/train's 300 steps.
steps=20
plan=()
if [ -n "${PLAN_FROM:-}" ]; then
	cp "$PLAN_FROM" "$TMP/given.jsonl" || { echo "FAIL: PLAN_FROM=$PLAN_FROM cannot be read"; exit 1; }
	plan=(--gpu-plan-from "$TMP/given.jsonl")
fi
if ! timeout 150 "${MPIRUN[@]}" -n 1 "$TRAIN" --backend cuda --model "$MODEL" --batch-size "$BATCH" \
	--data "$TRAIN_DATA" --limit $((BATCH * steps)) --epochs 1 --log-every 1000 \
	--metrics "$TMP/metrics.jsonl" "${plan[@]+"${plan[@]}"}" "$@" >"$TMP/out" 2>"$TMP/err"; then
	echo "FAIL: $MODEL b$BATCH: mnist-train exited with an error"
	cat "$TMP/err"
	exit 1
fi
if [ -n "${PLAN_FROM:-}" ] && ! why=$(follows_plan metrics given); then
	echo "FAIL: $MODEL b$BATCH: the run did not follow PLAN_FROM's plan: $why"
	exit 1
fi
summary=$(grep '^summary:' "$TMP/out")
echo "$summary"
us=$(tr ' ' '\n' <<<"$summary" | sed -n 's/^sim_step_us=//p')
if [ -z "$us" ] || ! awk -v u="$us" 'BEGIN { exit !(u + 0 > 0) }'; then
	echo "FAIL: $MODEL b$BATCH: no modelled step (sim_step_us='$us') on the summary line"
	exit 1
fi
echo "sim_step_us $MODEL b$BATCH: $us us (bound $BOUND us)"
if awk -v u="$us" -v b="$BOUND" 'BEGIN { exit !(u > b) }'; then
	echo "FAIL: $MODEL b$BATCH: the modelled step, $us us, is over its bound of $BOUND us"
	exit 1
fi
if awk -v u="$us" -v b="$BOUND" 'BEGIN { exit !(u < b / 2) }'; then
	echo "note: $MODEL b$BATCH: $us us is under half the bound $BOUND us: the bound may come down" \
		"(tests/cmake/45-cudasim.cmake)"
fi
echo "PASS sim_step_us $MODEL"
