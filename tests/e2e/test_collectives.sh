#!/usr/bin/env bash
# test_collectives.sh - the host program's own collectives, end to end under a
# real mpirun: what each guarantees, checked by a run that a wrong version fails.
#
#   tests/e2e/test_collectives.sh build/mnist-train MNIST_Data mpirun --allow-run-as-root --oversubscribe
#
# 1. The test set is split over ranks that do not divide 10,000: one rank and
#    three ranks score the same parameters (a checkpoint resumed with nothing
#    left to train) and must report the same accuracy over exactly 10,000
#    images (test_images=10000); a shard of count/size instead of the ceiling
#    leaves an image unscored.
# 2. The final replica check: rank 1 changes one parameter by one ulp before
#    it (the test hook MNIST_DDP_TEST_PERTURB_RANK); the job must end with
#    "replicas diverged" and a non-zero status, and the same run without the
#    hook must pass.
# 3. The start-up collectives run under --timeout: rank 1 is stuck opening its
#    training images (a FIFO nobody writes), so rank 0 waits in the start-up
#    agreement; it must say so and the job must end within timeout + a few s.
set -uo pipefail

. "$(dirname "$0")/../script_args.sh"
for f in "$DATA/train/train-images-idx3-ubyte" "$DATA/test/t10k-images-idx3-ubyte"; do
	[ -e "$f" ] || [ -e "$f.gz" ] || {
		echo "FAIL: $f not found: run scripts/get-mnist.sh; this test does not skip" >&2
		exit 1
	}
done

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-coll.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# run NAME LIMIT_S MPIRUN_ARGS...: sets RC and OUT (the output file); never hangs.
run() {
	local name=$1 limit=$2
	shift 2
	OUT=$TMP/$name.out
	timeout -k 5 "$limit" "${MPIRUN[@]}" "$@" >"$OUT" 2>&1
	RC=$?
}
summary_key() { # summary_key FILE KEY
	grep -m1 '^summary:' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# ---- 1. 1 rank and 3 ranks score the same parameters over all 10,000 images -----
common=(--data "$DATA/train" --limit 1920 --epochs 1 --seed 3)
run train 120 -n 1 "$TRAIN" "${common[@]}" --batch-size 96 --checkpoint-dir "$TMP/ck"
if [ "$RC" -ne 0 ]; then
	fail "training 1 rank x batch 96 with a checkpoint: status $RC"
	sed 's/^/    /' "$OUT" >&2
else
	for n in 1 3; do
		run "score$n" 120 -n "$n" "$TRAIN" "${common[@]}" --batch-size $((96 / n)) \
			--checkpoint-dir "$TMP/ck" --resume "$TMP/ck"
		if [ "$RC" -ne 0 ]; then
			fail "scoring on $n rank(s): status $RC"
			sed 's/^/    /' "$OUT" >&2
		fi
	done
	a1=$(summary_key "$TMP/score1.out" test_accuracy) i1=$(summary_key "$TMP/score1.out" test_images)
	a3=$(summary_key "$TMP/score3.out" test_accuracy) i3=$(summary_key "$TMP/score3.out" test_images)
	if [ "$i1" = 10000 ] && [ "$i3" = 10000 ] && [ -n "$a1" ] && [ "$a1" = "$a3" ]; then
		ok "1 and 3 ranks score the same parameters: test_accuracy=$a1 over test_images=10000 both"
	else
		fail "1 rank: test_accuracy=$a1 test_images=$i1; 3 ranks: test_accuracy=$a3 test_images=$i3 (want equal, over 10000)"
	fi
fi

# ---- 2. the replica check fires when one replica differs --------------------------
short=(--data "$DATA/train" --limit 2000 --epochs 1)
run replicas 120 -n 2 "$TRAIN" "${short[@]}"
if [ "$RC" -eq 0 ] && ! grep -q "replicas diverged" "$OUT"; then
	ok "identical replicas pass the check"
else
	fail "identical replicas: status $RC"
	sed 's/^/    /' "$OUT" >&2
fi
run perturbed 120 -n 2 -x MNIST_DDP_TEST_PERTURB_RANK=1 "$TRAIN" "${short[@]}"
if [ "$RC" -ne 0 ] && grep -q "replicas diverged: parameter checksums differ across ranks" "$OUT" &&
	! grep -q '^summary:' "$OUT"; then
	ok "one replica off by one ulp: $(grep -m1 'replicas diverged' "$OUT" | cut -c1-120), status $RC"
else
	fail "one replica off by one ulp: status $RC, no divergence message or a summary printed"
	sed 's/^/    /' "$OUT" >&2
fi

# ---- 3. a rank stuck at start-up: the deadline ends the job ----------------------
mkdir -p "$TMP/stuck"
mkfifo "$TMP/stuck/train-images-idx3-ubyte"
ln -s "$(readlink -f "$DATA/train")/train-labels-idx1-ubyte" "$TMP/stuck/" 2>/dev/null || true
start=$(date +%s)
# --timeout 1: rank 1 never comes, so nothing but the deadline can end the job, whenever it
# fires; rank 0 spins in MPI while it waits (a core for each second).
run stuck 60 -n 1 "$TRAIN" "${short[@]}" --timeout 1 : \
	-n 1 "$TRAIN" "${short[@]}" --timeout 1 --data "$TMP/stuck"
took=$(($(date +%s) - start))
if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
	fail "a rank stuck at start-up: the job still ran after 60 s (no deadline)"
elif [ "$RC" -ne 0 ] && grep -q "rank 0 on .*: start-up agreement not complete after 1 s" "$OUT" &&
	[ "$took" -le 15 ]; then
	ok "a rank stuck at start-up: rank 0 said '$(grep -m1 'not complete after' "$OUT")' and the job ended in ${took} s"
else
	fail "a rank stuck at start-up: status $RC after ${took} s, without the deadline's message"
	sed 's/^/    /' "$OUT" >&2
fi

if [ "$failures" -ne 0 ]; then
	echo "$failures check(s) failed" >&2
	exit 1
fi
echo "all collective checks passed"
