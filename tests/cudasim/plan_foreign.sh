#!/usr/bin/env bash
# plan_foreign.sh - a given plan (--gpu-plan-from) is followed only where it was measured:
# on the simulated CUDA backend, a plan for another GPU or another cuBLAS is set aside on
# every rank (each op measured anew, rank 0 choosing for all), and an op the plan runs a way
# this GPU does not offer is measured anew alone; a plan for this GPU is followed.
#
#   tests/cudasim/plan_foreign.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- MODEL BATCH [TRAIN_ARGS...]
#
# A first run (1 rank) measures a plan; copies of its --metrics file name another device,
# another library, or, for one op, a way that does not exist. Runs given them, every
# device of one name (CUDASIM_DEVICE_NAMES=same, as a box of one GPU model): the plan as
# measured is followed at 1 and 2 ranks (every op "gpu-plan-from"); another device's at 1
# and 2 ranks and another library's at 2 are not (no op "gpu-plan-from", every op
# "measured", rank 0 says why); the unknown way's op alone is measured. Then devices of
# different names (the default): at 2 ranks a plan for rank 0's device is not followed
# either, since rank 1's differs, and rank 0 names rank 1. A record that is no plan (an op
# without its key) is bad input on every rank (exit 2). Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 5 "MODEL BATCH [TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
MODEL=$1 BATCH=$2
shift 2
checks_begin
TRAIN_DATA=$(train_only)

run() { # NAME RANKS NAMES [ARGS...]
	local name=$1 ranks=$2 names=$3
	shift 3
	if ! timeout 200 "${MPIRUN[@]}" -n "$ranks" -x CUDASIM_DEVICE_NAMES="$names" "$TRAIN" \
		--backend cuda --model "$MODEL" --batch-size "$BATCH" --data "$TRAIN_DATA" \
		--limit $((BATCH * ranks * 4)) --epochs 1 --log-every 1000 \
		--metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train exited with an error"
		cat "$TMP/$name.err"
	fi
	echo "  $name: $(grep '^summary:' "$TMP/$name.out")"
}

# variant FROM TO FIELD VALUE: TO.jsonl is FROM.jsonl with its last gpu_plan record's FIELD
# set (FIELD "way": the first op's chosen way).
variant() {
	python3 - "$TMP/$1.jsonl" "$TMP/$2.jsonl" "$3" "$4" <<'PY'
import json, sys
src, dst, field, value = sys.argv[1:]
recs = [json.loads(l) for l in open(src)]
plan = [r for r in recs if r.get("event") == "gpu_plan"][-1]
if field == "way":
    plan["ops"][0]["chosen"] = value
else:
    plan[field] = value
with open(dst, "w") as f:
    for r in recs:
        f.write(json.dumps(r) + "\n")
PY
}

# sources NAME: each op of NAME's gpu_plan record as "SHAPE=SOURCE", one a line.
sources() {
	python3 -c 'import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"]
for o in (recs[-1]["ops"] if recs else []):
    print("%s %s=%s" % (o["op"], o["shape"], o["source"]))' "$TMP/$1.jsonl"
}

# measured_anew NAME FROM WHY: NAME's run followed none of FROM's plan, measured every op,
# and rank 0 said WHY (a fixed string) and that it measured a new plan.
measured_anew() {
	local name=$1 from=$2 why=$3
	local n_ops got
	n_ops=$(sources "$from" | wc -l)
	got=$(sources "$name")
	[ "$n_ops" -gt 0 ] && [ "$(grep -c '=measured$' <<<"$got")" -eq "$n_ops" ] &&
		! grep -q '=gpu-plan-from$' <<<"$got" ||
		fail "$name: expected all $n_ops ops measured anew, got: $(tr '\n' ';' <<<"$got")"
	grep -qF -- "$why" "$TMP/$name.err" && grep -q 'measuring a new plan' "$TMP/$name.err" ||
		fail "$name: rank 0 did not say '$why ...: measuring a new plan': $(cat "$TMP/$name.err")"
}

run base 1 same "$@"
[ "$(sources base | wc -l)" -gt 0 ] || fail "base: no gpu_plan record with ops"
first_op=$(python3 -c 'import json, sys
print([r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"][-1]["ops"][0]["shape"])' "$TMP/base.jsonl")
variant base device device "NVIDIA A100-SXM4-80GB"
variant base library library "cublasLt 120000"
variant base way way "lt.no-such-way"
variant base rank0 device "$(python3 -c 'import json, sys
print([r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"][-1]["device"])' "$TMP/base.jsonl" |
	sed 's/^cudasim device (/cudasim device 0 (/')"

for ranks in 1 2; do
	run same_$ranks "$ranks" same --gpu-plan-from "$TMP/base.jsonl" "$@"
	why=$(follows_plan same_$ranks base) || fail "same_$ranks: did not follow a plan for this GPU: $why"
	run device_$ranks "$ranks" same --gpu-plan-from "$TMP/device.jsonl" "$@"
	measured_anew device_$ranks base "the plan is for NVIDIA A100-SXM4-80GB, rank 0's GPU is cudasim device"
done
run library_2 2 same --gpu-plan-from "$TMP/library.jsonl" "$@"
measured_anew library_2 base "the plan is for cublasLt 120000, rank 0's is cublasLt"

run way_2 2 same --gpu-plan-from "$TMP/way.jsonl" "$@"
got=$(sources way_2)
grep -qxF -- "$first_op=measured" <<<"$(sed 's/^[^ ]* //' <<<"$got")" ||
	fail "way_2: the op whose way does not exist ($first_op) was not measured anew: $(tr '\n' ';' <<<"$got")"
[ "$(grep -c '=gpu-plan-from$' <<<"$got")" -eq $(($(wc -l <<<"$got") - 1)) ] ||
	fail "way_2: the other ops did not follow the plan: $(tr '\n' ';' <<<"$got")"
grep -q 'as lt.no-such-way, which this GPU does not offer; planned anew' "$TMP/way_2.err" ||
	fail "way_2: rank 0 did not name the way it lacks: $(cat "$TMP/way_2.err")"

# A record that is JSON but no plan (an op lacking its key): bad input on every rank, exit 2,
# the message naming the file and its line; nothing trained.
python3 -c 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
plan = [r for r in recs if r.get("event") == "gpu_plan"][-1]
del plan["ops"][0]["key"]
print(json.dumps(plan))' "$TMP/base.jsonl" >"$TMP/damaged.jsonl"
timeout 200 "${MPIRUN[@]}" -n 2 -x CUDASIM_DEVICE_NAMES=same "$TRAIN" --backend cuda --model "$MODEL" \
	--batch-size "$BATCH" --data "$TRAIN_DATA" --limit $((BATCH * 8)) --epochs 1 \
	--gpu-plan-from "$TMP/damaged.jsonl" "$@" >"$TMP/damaged.out" 2>"$TMP/damaged.err"
rc=$?
[ $rc -eq 2 ] || fail "damaged: exit status $rc, expected 2: $(cat "$TMP/damaged.err")"
n=$(grep -c "damaged.jsonl line 1: the plan's op 0: \"key\" is missing" "$TMP/damaged.err")
[ "$n" -eq 2 ] || fail "damaged: expected the message once on each of 2 ranks, got $n: $(cat "$TMP/damaged.err")"
! grep -q '^summary:' "$TMP/damaged.out" || fail "damaged: it trained: $(cat "$TMP/damaged.out")"

# Devices named apart: rank 0's is the plan's, rank 1's is not.
run mixed_2 2 per-device --gpu-plan-from "$TMP/rank0.jsonl" "$@"
measured_anew mixed_2 base "rank 1's GPU is cudasim device 1"

[ $failures -eq 0 ] && echo "PASS plan_foreign $MODEL b$BATCH"
exit $((failures > 0))
