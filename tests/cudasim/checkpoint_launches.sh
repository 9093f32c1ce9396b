#!/usr/bin/env bash
# checkpoint_launches.sh - checkpoints of a run that measured its own plan, saved inside
# launches of several steps (--graph-steps), on the simulated CUDA backend at 2 ranks, and a
# --resume from one of them.
#
#   tests/cudasim/checkpoint_launches.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- [TRAIN_ARGS...]
#
# One run of the seed model, 2 ranks x batch 32, --limit 1024 (16 steps an epoch), 2 epochs,
# the default --gpu-plan measure and --graph-steps 8, --log-every 10, --checkpoint-dir with
# --save-every 5 --keep 0. Checkpoints are due after global steps 5, 10, 15, 16 (the epoch's
# end), 20, 25, 30 and 32, most of them inside what would otherwise be one launch of 8 steps
# (a launch must end at each: host/train/launch.c); every one must be written, under its
# name, and no other. Its gpu_plan record must say it measured its ops (no plan was given),
# and every checkpoint must hold that plan (metadata gpu_plan: each op's key and way). Then
# --resume from the mid-epoch ckpt-0-5 without --gpu-plan-from: the resumed run must run
# every op the way the checkpoint names (its gpu_plan record: source "checkpoint", the way
# the first run chose; nothing measured anew), write the due checkpoints still ahead of it,
# log the same losses, and end bitwise where the uninterrupted run ended (param_crc32,
# final_loss). The resume tests of train_sim.sh and side_stream.sh follow a plan given by
# --gpu-plan-from, which a checkpoint without the measured plan would pass. Both runs'
# images= must be the images they trained (steps x 32 x 2 ranks; a launch of n steps counts
# n batches), and images_per_second images / train_seconds. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 3 "[TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
checks_begin
TRAIN_DATA=$(train_only) # the runs compare the trained model: no test set to score
RANKS=2 BATCH=32 LIMIT=1024 EPOCHS=2 STEPS=16

run() { # NAME ARGS...
	local name=$1
	shift
	if ! timeout 150 "${MPIRUN[@]}" -n $RANKS -x CUDASIM_DEVICE_NAMES=same "$TRAIN" --backend cuda \
		--model seed --data "$TRAIN_DATA" --limit $LIMIT --batch-size $BATCH --epochs $EPOCHS \
		--log-every 10 --save-every 5 --keep 0 --metrics "$TMP/$name.jsonl" "$@" \
		>"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train exited with an error"
		sed 's/^/    /' "$TMP/$name.err"
	fi
	echo "  $name: $(grep '^summary:' "$TMP/$name.out")"
}

# saved DIR WANT: DIR holds exactly the checkpoints WANT names (global steps, "E-G" each).
saved() {
	local dir=$1 want=$2 got
	got=$(cd "$dir" 2>/dev/null && ls ckpt-*.safetensors 2>/dev/null |
		sed 's/^ckpt-\(.*\)\.safetensors$/\1/' | sort -t- -k2,2n | tr '\n' ' ' | sed 's/ $//')
	[ "$got" = "$want" ] || fail "$(basename "$dir"): checkpoints written after '$got', expected '$want' (every --save-every 5 and epoch end, each inside or at the end of a launch)"
}

# images NAME STEPS: NAME's summary counts STEPS x batch x ranks images, at that many per second.
images() {
	local name=$1 want=$(($2 * BATCH * RANKS)) got ips secs
	got=$(field "$name" images) ips=$(field "$name" images_per_second) secs=$(field "$name" train_seconds)
	[ "$got" = "$want" ] || fail "$name: images=$got, expected $want ($2 steps x $BATCH x $RANKS ranks)"
	# train_seconds is printed to the millisecond: images / (seconds +- 0.0005), 0.1% more slack.
	awk -v i="$got" -v r="$ips" -v s="$secs" 'BEGIN { exit !(s > 0.001 && r >= i / (s + 0.0005) * 0.999 &&
		r <= i / (s - 0.0005) * 1.001) }' ||
		fail "$name: images_per_second=$ips is not images=$got / train_seconds=$secs"
}

# plan_check NAME FROM SOURCE: NAME's gpu_plan record has ops, each of source SOURCE; with FROM
# (a run's name) each op of FROM's record met and run the way FROM chose. Prints what differs.
plan_check() {
	python3 - "$TMP/$1.jsonl" "${2:+$TMP/$2.jsonl}" "$3" <<'PY'
import json, sys
def plan(path):
    recs = [r for r in map(json.loads, open(path)) if r.get("event") == "gpu_plan"]
    return {o["key"]: o for o in recs[-1]["ops"]} if recs else {}
ran, source = plan(sys.argv[1]), sys.argv[3]
bad = ["no gpu_plan record with ops"] if not ran else []
bad += ["%s: %s (%s)" % (o["shape"], o["chosen"], o["source"]) for o in ran.values() if o["source"] != source]
if sys.argv[2]:
    for key, o in plan(sys.argv[2]).items():
        r = ran.get(key)
        if r is None or r["chosen"] != o["chosen"]:
            bad.append("%s: ran %s, the first run chose %s" % (o["shape"], r and r["chosen"], o["chosen"]))
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
}

# kept NAME CKPT: the checkpoint's metadata gpu_plan holds NAME's plan, each op's key and way.
kept() {
	python3 - "$TMP/$1.jsonl" "$2" <<'PY'
import json, struct, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "gpu_plan"]
want = {o["key"]: o["chosen"] for o in recs[-1]["ops"]} if recs else {}
with open(sys.argv[2], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n)).get("__metadata__", {})
if "gpu_plan" not in meta:
    sys.exit("no gpu_plan in its metadata")
got = {o["key"]: o["chosen"] for o in json.loads(meta["gpu_plan"])["ops"]}
if not want or got != want:
    sys.exit("its plan %s, the run's %s" % (got, want))
PY
}

# Every rank's loss lines (each rank logs its own; mpirun interleaves them) as "EPOCH STEP
# LOSS", sorted, from global step FROM on.
losses() { # NAME FROM
	sed -nE 's/^epoch: ([0-9]+), step: ([0-9]+), loss is (.*)$/\1 \2 \3/p' "$TMP/$1.out" |
		awk -v from="$2" -v s=$STEPS '$1 * s + $2 >= from' | sort
}

run full --checkpoint-dir "$TMP/ck" "$@"
saved "$TMP/ck" "0-5 0-10 0-15 0-16 1-20 1-25 1-30 1-32"
why=$(plan_check full "" measured) || fail "full: measured no plan of its own (--gpu-plan measure): $why"
for f in "$TMP"/ck/ckpt-*.safetensors; do
	why=$(kept full "$f" 2>&1) || fail "$(basename "$f"): does not hold the plan its run measured: $why"
done
images full $((EPOCHS * STEPS))

if [ ! -f "$TMP/ck/ckpt-0-5.safetensors" ]; then
	fail "resumed: not run: full wrote no ckpt-0-5 to resume from"
else
	run resumed --checkpoint-dir "$TMP/ck2" --resume "$TMP/ck/ckpt-0-5.safetensors" "$@"
	grep -q 'resuming from .*ckpt-0-5.safetensors .*continuing at epoch 0 step 5' "$TMP/resumed.err" ||
		fail "resumed: rank 0 does not say it continues at epoch 0 step 5"
	why=$(plan_check resumed full checkpoint) ||
		fail "resumed: did not run the checkpoint's plan (its ops not all of source \"checkpoint\", the way measured): $why"
	! grep -q 'measuring a new plan\|planned anew' "$TMP/resumed.err" ||
		fail "resumed: planned anew: $(grep -m1 'measuring a new plan\|planned anew' "$TMP/resumed.err")"
	for k in param_crc32 final_loss; do
		[ -n "$(field full $k)" ] && [ "$(field resumed $k)" = "$(field full $k)" ] ||
			fail "resumed: $k=$(field resumed $k) after --resume from ckpt-0-5, the uninterrupted run $(field full $k)"
	done
	[ "$(losses resumed 5)" = "$(losses full 5)" ] || fail "resumed: its loss lines differ from the uninterrupted run's"
	saved "$TMP/ck2" "0-10 0-15 0-16 1-20 1-25 1-30 1-32"
	images resumed $((EPOCHS * STEPS - 5))
fi

[ $failures -eq 0 ] && echo "PASS checkpoint_launches"
exit $((failures > 0))
