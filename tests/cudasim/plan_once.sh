#!/usr/bin/env bash
# plan_once.sh - one model's plan measured once on the simulated CUDA backend, for the
# tests that run on a measured plan without testing the measurement (a ctest fixture:
# LeNet-5's, mnist_train_sim_plan_lenet, followed by mnist_train_sim_side_stream_lenet and
# mnist_train_sim_step_time_lenet through PLAN_FROM). Measuring LeNet-5's plan costs
# about 6 s of CPU on the simulator; each of those tests measured the same plan itself.
#
#   tests/cudasim/plan_once.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- OUT MODEL BATCH [TRAIN_ARGS...]
#
# Runs mnist-train (the simulated build) with --backend cuda on 1 rank, graph replay, the
# default launch (programmatic dependent launch, a second stream: as the tests that follow
# it run), --gpu-plan measure, for one step of MODEL at BATCH, with --metrics OUT. OUT is
# removed first, so a stale plan never passes. The run must finish and OUT hold one
# gpu_plan record whose every op rank 0 measured ("measured"), each choice among its
# candidates. The plan depends on the model, the batch, the device and the launch, not on
# the steps run (a run of 20 steps measures the same one). Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 6 "OUT MODEL BATCH [TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
OUT=$1 MODEL=$2 BATCH=$3
shift 3
checks_begin
TRAIN_DATA=$(train_only) # the plan is what is kept: no test set to score
rm -f "$OUT"
mkdir -p "$(dirname "$OUT")"
if ! timeout 150 "${MPIRUN[@]}" -n 1 "$TRAIN" --backend cuda --model "$MODEL" --batch-size "$BATCH" \
	--data "$TRAIN_DATA" --limit "$BATCH" --epochs 1 --log-every 1000 --gpu-plan measure \
	--metrics "$OUT" "$@" >"$TMP/out" 2>"$TMP/err"; then
	echo "FAIL: $MODEL b$BATCH: mnist-train exited with an error"
	cat "$TMP/err"
	rm -f "$OUT"
	exit 1
fi
grep '^summary:' "$TMP/out"
if ! why=$(python3 - "$OUT" <<'PY'
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"]
if len(recs) != 1 or not recs[0]["ops"]:
    sys.exit("%d gpu_plan records, expected one with ops" % len(recs))
bad = []
for op in recs[0]["ops"]:
    names = [c["name"] for c in op["candidates"]]
    if op["source"] != "measured" or op["chosen"] not in names:
        bad.append("%s %s: %s (%s), candidates %s" % (op["op"], op["shape"], op["chosen"], op["source"], names))
if bad:
    sys.exit("; ".join(bad))
print("%d ops measured; launch: %s" % (len(recs[0]["ops"]), recs[0].get("launch")))
PY
); then
	echo "FAIL: $MODEL b$BATCH: the plan in $OUT: $why"
	rm -f "$OUT"
	exit 1
fi
echo "plan $MODEL b$BATCH: $why"
echo "PASS plan_once $MODEL b$BATCH: $OUT"
