#!/usr/bin/env bash
# test_eval_every.sh - which epochs --eval-every N >= 2 scores, on one backend.
#
#   tests/e2e/test_eval_every.sh BACKEND MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]
#
# BACKEND is passed as --backend (host, or cuda with the simulator's build:
# tests/cmake/45-cudasim.cmake). 2 ranks, 10 steps per epoch, --eval-every 3:
#   7 epochs   scores after epochs 2 and 5 (from 0, as the loss lines count), not
#              after the last (6): it is not due, and the summary scores it anyway;
#              each score right after its epoch's loss lines; --metrics gets one
#              eval event per score, at global steps 30 and 60
#   6 epochs   scores after 2 and 5; the last epoch's score is the summary's
#   resumed    from the 6-epoch run's checkpoint after epoch 3: scores after 5
#              only (epochs count from the start of training, not of this run)
#   at the end resumed from the checkpoint after epoch 5 (nothing left to
#              train): no epoch score, only the summary's
# A change that scores off by one, every epoch, or the last epoch against the
# rule fails here. Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -lt 4 ]; then
	echo "usage: $0 BACKEND MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]" >&2
	exit 1
fi
BACKEND=$1
shift
. "$(dirname "$0")/../script_args.sh"
RUN_TIMEOUT=150

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-eval-every.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# run NAME ARGS...: 2 ranks, rank 0's stdout in $TMP/NAME.0, everything in $TMP/NAME.out.
run() {
	local name=$1
	shift
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n 2 --output-filename "$TMP/$name/log" \
		"$TRAIN" --backend "$BACKEND" --data "$DATA/train" --limit 640 --batch-size 32 \
		--log-every 5 --eval-every 3 "$@" >"$TMP/$name.out" 2>&1
	local rc=$?
	[ "$rc" -eq 0 ] || { fail "$name: mnist-train $* exited with status $rc:"; sed 's/^/    /' "$TMP/$name.out" >&2; }
	cp "$TMP/$name/log/1/rank.0/stdout" "$TMP/$name.0" 2>/dev/null || : >"$TMP/$name.0"
}
scored() { # NAME: the epochs rank 0 scored, space-separated
	sed -nE 's/^epoch: ([0-9]+), test accuracy is .*/\1/p' "$TMP/$1.0" | tr '\n' ' ' | sed 's/ $//'
}
summary() { # NAME KEY
	grep '^summary:' "$TMP/$1.0" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
expect_scored() { # NAME EXPECTED WHY
	local got
	got=$(scored "$1")
	[ "$got" = "$2" ] || fail "$1: --eval-every 3 scored after epochs '$got', expected '$2' ($3)"
}
# The line before each score is its own epoch's last loss line (step 5), and the line after
# it (if any) the next epoch's first (step 0); steps as EPOCH:STEP.
expect_in_place() { # NAME
	local bad
	bad=$(grep -E '^epoch: [0-9]+, (step|test accuracy)' "$TMP/$1.0" | awk '
		/test accuracy/ { e = $2 + 0; if (prev != e ":5") print "epoch " e "\x27s score after step " prev; want = e + 1; next }
		{ cur = ($2 + 0) ":" ($4 + 0)
		  if (want != "" && cur != want ":0") print "epoch " want - 1 "\x27s score before step " cur
		  want = ""; prev = cur }')
	[ -z "$bad" ] || fail "$1: a score not right after its epoch's loss lines: $bad"
}

run seven --epochs 7 --metrics "$TMP/seven.jsonl"
expect_scored seven "2 5" "after every 3rd epoch from 0; the last epoch, 6, is not due"
expect_in_place seven
events=$(sed -nE 's/.*"event": "eval", "epoch": ([0-9]+), "global_step": ([0-9]+),.*/\1@\2/p' \
	"$TMP/seven.jsonl" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')
[ "$events" = "2@30 5@60" ] || fail "seven: --metrics eval events (epoch@global_step) '$events', expected '2@30 5@60'"
[ "$(summary seven backend)" = "$BACKEND" ] || fail "seven: the summary says backend=$(summary seven backend), not $BACKEND"
[ "$(summary seven epochs)" = 7 ] && [ -n "$(summary seven test_accuracy)" ] &&
	[ "$(summary seven test_accuracy)" != nan ] || fail "seven: no summary with a test accuracy"
! grep -q 'test accuracy' "$TMP/seven/log/1/rank.1/stdout" 2>/dev/null ||
	fail "seven: rank 1 printed a test accuracy line (rank 0's job)"

run six --epochs 6 --checkpoint-dir "$TMP/ck" --keep 0
expect_scored six "2 5" "the last epoch, 5, is due"
expect_in_place six
last=$(sed -nE 's/^epoch: 5, test accuracy is (.*)/\1/p' "$TMP/six.0")
[ -n "$last" ] && [ "$last" = "$(summary six test_accuracy)" ] ||
	fail "six: the last epoch's score '$last' is not the summary's test_accuracy=$(summary six test_accuracy)"

run resumed --epochs 6 --resume "$TMP/ck/ckpt-3-40.safetensors"
expect_scored resumed "5" "resumed after epoch 3: epochs 4 and 5 run, 5 is due"
[ "$(summary resumed param_crc32)" = "$(summary six param_crc32)" ] && [ -n "$(summary six param_crc32)" ] ||
	fail "resumed: param_crc32=$(summary resumed param_crc32), the uninterrupted run's $(summary six param_crc32)"

run at_end --epochs 6 --resume "$TMP/ck/ckpt-5-60.safetensors"
expect_scored at_end "" "nothing left to train: no epoch ran, only the summary scores"
[ -n "$(summary at_end test_accuracy)" ] && [ "$(summary at_end test_accuracy)" = "$(summary six test_accuracy)" ] ||
	fail "at_end: summary test_accuracy=$(summary at_end test_accuracy), the finished run's $(summary six test_accuracy)"

if [ $failures -eq 0 ]; then
	ok "--eval-every 3 on --backend $BACKEND: epochs 2 and 5 of 7 (not the last), 2 and 5 of 6 (the last = the summary's), 5 after a resume past 3, none when resumed at the end; metrics events at global steps 30 and 60"
	exit 0
fi
exit 1
