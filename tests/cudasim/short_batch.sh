#!/usr/bin/env bash
# short_batch.sh - the epoch's short last batch beside launches of several steps
# (--graph-steps), and the images a run counts, on the simulated CUDA backend at 1 rank.
#
#   tests/cudasim/short_batch.sh TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- [TRAIN_ARGS...]
#
# The seed model, --limit 404 at batch 32: 13 steps an epoch, 12 full and a last of 20
# images; 2 epochs, --log-every 10, --gpu-plan heuristic (the plan is not what is checked
# here). The default --graph-steps 8 runs each epoch's steps 1-8 and 9-10 as launches, and
# then 11 and 12 apart: a launch replays a graph of full batches, so the short batch must
# never join one (host/train/launch.c), or its 12 missing rows are trained on (or the step
# reads past the epoch's shard). The run must be bitwise the --graph-steps 1 run's
# (param_crc32, final_loss, loss lines). Both, and a --backend host run of the same flags,
# must count images=808 (the 2 x 404 images trained; a launch of n steps trains n batches),
# with images_per_second images / train_seconds, and each --metrics step record's
# images_per_second x elapsed the images trained up to and including that step. Exit 0
# pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/mpirun_args.sh"
train_args 3 "[TRAIN_ARGS...]" "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
checks_begin
TRAIN_DATA=$(train_only) # the runs compare the trained model: no test set to score
LIMIT=404 BATCH=32 EPOCHS=2

run() { # NAME ARGS...
	local name=$1
	shift
	if ! timeout 150 "${MPIRUN[@]}" -n 1 "$TRAIN" --model seed --data "$TRAIN_DATA" --limit $LIMIT \
		--batch-size $BATCH --epochs $EPOCHS --log-every 10 --gpu-plan heuristic \
		--metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train exited with an error"
		sed 's/^/    /' "$TMP/$name.err"
	fi
	echo "  $name: $(grep '^summary:' "$TMP/$name.out")"
}

# images NAME [records]: images=808, at images / train_seconds a second; with "records", its
# --metrics step records' images_per_second x elapsed the images trained through each step
# (not the host backend's: its elapsed, microseconds, is too short for the printed figures).
# Prints what differs.
images() {
	python3 - "$TMP/$1.out" "$TMP/$1.jsonl" $LIMIT $BATCH $EPOCHS "${2:-}" <<'PY'
import json, sys
out, metrics, limit, batch, epochs, records = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]), sys.argv[6]
steps = -(-limit // batch)
summ = [l.split() for l in open(out) if l.startswith("summary:")]
if not summ:
    sys.exit("no summary line")
f = dict(w.split("=", 1) for w in summ[0][1:])
bad = []
if int(f["images"]) != epochs * limit:
    bad.append("images=%s, expected %d (%d epochs x %d images)" % (f["images"], epochs * limit, epochs, limit))
ips, secs = float(f["images_per_second"]), float(f["train_seconds"])
# train_seconds is printed to the millisecond (the host backend's run may print 0.000).
if secs > 0.001 and not (int(f["images"]) / (secs + 0.0005) * 0.999 <= ips <= int(f["images"]) / (secs - 0.0005) * 1.001):
    bad.append("images_per_second=%s is not images=%s / train_seconds=%s" % (f["images_per_second"], f["images"], f["train_seconds"]))
recs = [r for r in map(json.loads, open(metrics)) if "global_step" in r and "loss" in r] if records else []
if records and len(recs) < 4:
    bad.append("%d step records in --metrics, expected at least 4" % len(recs))
for r in recs:
    e, s = divmod(r["global_step"], steps)
    want = e * limit + (limit if s == steps - 1 else (s + 1) * batch)
    got = r["images_per_second"] * r["elapsed"]
    # images_per_second to 0.1, elapsed to the microsecond
    if abs(got - want) > 0.5 + want * (0.05 / max(r["images_per_second"], 1) + 5e-7 / max(r["elapsed"], 1e-9)):
        bad.append("global step %d: images_per_second %s x elapsed %s = %.1f images, trained %d" %
                   (r["global_step"], r["images_per_second"], r["elapsed"], got, want))
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
}

run eight --backend cuda "$@"
run single --backend cuda --graph-steps 1 "$@"
run host --backend host "$@"
for k in param_crc32 final_loss; do
	[ -n "$(field single $k)" ] && [ "$(field eight $k)" = "$(field single $k)" ] ||
		fail "eight: $k=$(field eight $k) with --graph-steps 8, $(field single $k) with 1 (the short last batch in a launch of full ones?)"
done
[ "$(grep 'loss is' "$TMP/eight.out")" = "$(grep 'loss is' "$TMP/single.out")" ] ||
	fail "eight: its loss lines differ from --graph-steps 1's"
[ "$(field host steps_per_epoch)" = 13 ] || fail "host: steps_per_epoch=$(field host steps_per_epoch), expected 13"
for name in eight single host; do
	why=$(images $name $([ $name = host ] || echo records)) || fail "$name: $why"
	[ "$(field $name images)" = "$(field host images)" ] ||
		fail "$name: images=$(field $name images), the host backend's run of the same flags $(field host images)"
done

[ $failures -eq 0 ] && echo "PASS short_batch"
exit $((failures > 0))
