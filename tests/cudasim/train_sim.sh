#!/usr/bin/env bash
# train_sim.sh - mnist-train on the simulated CUDA backend (mnist-train-cudasim,
# tests/cudasim) under a real mpirun, against the host backend from the same
# seed on the same real MNIST subset.
#
#   tests/cudasim/train_sim.sh TRAIN DATA_DIR RANKS MPIRUN [MPIRUN_ARGS...] -- [TRAIN_ARGS...]
#
# Runs of 2 epochs: --backend cuda (each full batch replayed from a captured
# graph, kernels by programmatic dependent launch, the weight gradients on a
# second stream, the graph's branches replayed in the simulator's alternating
# orders), --backend cuda --no-graph --no-pdl --no-side-stream, --backend host. The two cuda runs must end with bitwise the same
# model (param_crc32), final loss and test accuracy, and their gpu_plan
# records must say how they launched; the cuda run must say backend=cuda and name the simulated device,
# follow the host run's loss curve (every logged loss of rank 0 within
# 0.02 + 2% of the host's) and reach its test accuracy within 0.01. Then
# checkpoints: a cuda run of 1 epoch with --checkpoint-dir, on the first cuda run's plan
# (--gpu-plan-from its --metrics file; every op must say so), resumed by
# --resume for the second, must end bitwise where the uninterrupted cuda run
# ended. The plan (cuda/gemm_lt.cu): the cuda run's --metrics hold one gpu_plan
# record, every op with its candidates and the chosen one among them; the
# resumed run runs every op the way the checkpoint's plan names (source
# "checkpoint"), which is what makes it bitwise. Exit 0 pass, 1 fail.
set -uo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 TRAIN DATA_DIR RANKS MPIRUN [MPIRUN_ARGS...] -- [TRAIN_ARGS...]" >&2
	exit 1
fi
TRAIN=$1 DATA=$2 RANKS=$3
shift 3
. "$(dirname "$0")/mpirun_args.sh"
split_mpirun "$@"
set -- "${AFTER[@]+"${AFTER[@]}"}"
ARGS=("$@")
checks_begin

# The runs whose accuracy is compared score the test set; the checkpoint's two (first,
# resumed) are compared by param_crc32 alone, so they train on the training files alone.
TRAIN_DATA=$(train_only)
run() { # NAME ARGS...
	local name=$1 data=(--data "$DATA/train" --test-data "$DATA/test")
	shift
	case $name in first | resumed) data=(--data "$TRAIN_DATA") ;; esac
	if ! timeout 150 "${MPIRUN[@]}" -n "$RANKS" "$TRAIN" "${data[@]}" \
		--metrics "$TMP/$name.jsonl" "${ARGS[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train $* exited with an error"
		cat "$TMP/$name.err"
	fi
	grep '^summary:' "$TMP/$name.out" | sed 's/^/  '"$name"': /'
}

run graph --backend cuda --epochs 2
run plain --backend cuda --no-graph --no-pdl --no-side-stream --epochs 2
run host --backend host --epochs 2
# The first epoch on the cuda run's plan (--gpu-plan-from: rank 0 reads it, every rank runs it,
# a rank left to measure would wait for rank 0 at its deadline), which its checkpoint keeps.
run first --backend cuda --epochs 1 --checkpoint-dir "$TMP/ck" --gpu-plan-from "$TMP/graph.jsonl"
why=$(follows_plan first graph) || fail "first: did not follow the cuda run's plan (--gpu-plan-from): $why"
run resumed --backend cuda --epochs 2 --checkpoint-dir "$TMP/ck" --resume "$TMP/ck"
[ "$(field resumed param_crc32)" = "$(field graph param_crc32)" ] && [ -n "$(field graph param_crc32)" ] ||
	fail "resume: 1 epoch + --resume for the second ended at param_crc32=$(field resumed param_crc32), the uninterrupted run at $(field graph param_crc32)"
grep -q 'resuming from' "$TMP/resumed.err" || fail "resume: the resumed run does not say where it resumed from"
# The plan: "SOURCE..." per op of a run's gpu_plan record, after checking each op's choice.
plan_sources() { # NAME
	python3 - "$TMP/$1.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"gpu_plan"' in l]
recs = [r for r in recs if r.get("event") == "gpu_plan"]
if len(recs) != 1 or not recs[0]["ops"]:
    sys.exit("%d gpu_plan records (%s ops), expected one with ops" % (len(recs), recs and len(recs[0]["ops"])))
for op in recs[0]["ops"]:
    names = [c["name"] for c in op["candidates"]]
    if op["source"] != "checkpoint" and op["chosen"] not in names:
        sys.exit("gemm %s: chose %s, not among its %d candidates" % (op["shape"], op["chosen"], len(names)))
print(" ".join(sorted(set(op["source"] for op in recs[0]["ops"]))))
PY
}
src=$(plan_sources graph) || fail "plan: the cuda run's gpu_plan record: $src"
case " $src " in
*" measured "*) ;;
*) fail "plan: the cuda run's ops were planned '$src', expected measured (rank 0 times the candidates)" ;;
esac
src=$(plan_sources resumed) || fail "plan: the resumed run's gpu_plan record: $src"
[ "$(launch_of graph)" = "programmatic dependent launch; weight gradients on a second stream" ] ||
	fail "launch: the cuda run's gpu_plan record says '$(launch_of graph)', expected programmatic dependent launch (the simulated device is of compute capability 9.0) and a second stream"
[ "$(launch_of plain)" = "plain launches (--no-pdl); one stream (--no-side-stream)" ] ||
	fail "launch: the --no-pdl --no-side-stream run's gpu_plan record says '$(launch_of plain)'"
[ "$src" = checkpoint ] || fail "plan: the resumed run planned its ops '$src', expected every one from the checkpoint"
# Every rank's logged losses as "EPOCH STEP LOSS", each step's ranks in loss order (mpirun
# interleaves the ranks' lines differently from run to run).
losses() {
	sed -nE 's/^epoch: ([0-9]+), step: ([0-9]+), loss is (.*)$/\1 \2 \3/p' "$TMP/$1.out" |
		sort -k1,1n -k2,2n -k3,3g
}
if [ "$(losses graph | wc -l)" -lt 4 ] || [ "$(losses graph | cut -d' ' -f1,2)" != "$(losses host | cut -d' ' -f1,2)" ]; then
	fail "loss curve: the cuda and host runs logged different steps ($(losses graph | wc -l) and $(losses host | wc -l) lines)"
else
	far=$(paste -d' ' <(losses graph | cut -d' ' -f3) <(losses host | cut -d' ' -f3) |
		awk '{ d = $1 - $2; if (d < 0) d = -d; lim = 0.02 + 0.02 * ($2 < 0 ? -$2 : $2);
		       if (d > lim) { print NR ": cuda " $1 " host " $2; n++ } } END { exit n > 0 }') ||
		fail "loss curve: logged losses further than 0.02 + 2% from the host's: $far"
fi
for k in param_crc32 final_loss test_accuracy; do
	[ "$(field graph $k)" = "$(field plain $k)" ] && [ -n "$(field graph $k)" ] ||
		fail "$k: captured with programmatic dependent launch $(field graph $k), plain $(field plain $k): capture or the launches changed the run"
done
[ "$(field graph backend)" = cuda ] || fail "the cuda run says backend=$(field graph backend)"
grep -q 'backend cuda (cuda:0 cudasim device' "$TMP/graph.err" ||
	fail "the cuda run does not name the simulated device on rank 0's stderr"
if ! awk -v a="$(field graph test_accuracy)" -v b="$(field host test_accuracy)" \
	'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 0.01) }'; then
	fail "test accuracy: cuda $(field graph test_accuracy), host $(field host test_accuracy) (limit 0.01)"
fi
if [ $failures -eq 0 ]; then
	echo "PASS train_sim: captured (programmatic dependent launch, a second stream) and plain runs identical, loss curve and accuracy within tolerance of the host's, bitwise resume"
	exit 0
fi
exit 1
