#!/usr/bin/env bash
# test_valgrind.sh - a short 2-rank training run is clean under valgrind memcheck.
#
#   tests/reliability/test_valgrind.sh build/mnist-train MNIST_Data LEAK_CONTROL mpirun ...
#
# Four runs, each rank under memcheck (full leak check, definite,
# indirect and possible leaks are errors): training that saves checkpoints,
# then a run that resumes from them (the reader, the broadcast of the state,
# the deadline's nonblocking allreduce), one that starts from their parameters
# (--init-from) and one that scores them (--eval-only), these two at 1 rank (their reading
# is rank 0's; the broadcast is the resume's). Open MPI's own reports are suppressed
# by its openmpi-valgrind.supp and tests/reliability/valgrind-mpi.supp, which
# only name MPI's libraries; valgrind-loader.supp holds the one false report of
# the dynamic loader (a CUDA build's libcublasLt dlopen()s at start-up). Every rank must end with "ERROR SUMMARY: 0 errors".
# The runs read a copy of MNIST's first 400 training and 301 test images
# (tests/e2e/subset.sh): what memcheck checks is each code path, not how many
# images go through it, and under memcheck reading the whole 47 MB training file
# (188 MB as floats a rank) and scoring 10,000 test images cost more than the
# rest of a run (33 s of CPU for the test, 16 s now). 301 test images split
# unevenly over the 2 ranks' shards; --save-every 3 of a 7-step epoch, --keep 2,
# saves mid-epoch and prunes.
# Control: LEAK_CONTROL (an MPI program that leaks a block of its own) under
# the same suppressions must be reported, so the suppressions cannot be
# hiding mnist-train's errors. Exit 0 pass, 1 fail, 77 skipped (no valgrind).
set -uo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 MNIST_TRAIN DATA_DIR LEAK_CONTROL MPIRUN [MPIRUN_ARGS...]" >&2
	exit 1
fi
CONTROL=$3
set -- "$1" "$2" "${@:4}"
. "$(dirname "$0")/common.sh"
RUN_TIMEOUT=300

# A node without valgrind (a GPU node from a plain image, for example) skips:
# status 77, which ctest reports as skipped, never passed; scripts/test.sh
# installs it. VALGRIND names another valgrind (reliability_valgrind_missing_skips
# points it at nothing).
VALGRIND=${VALGRIND:-valgrind}
if ! command -v "$VALGRIND" >/dev/null; then
	echo "SKIP reliability_valgrind: valgrind not installed ('$VALGRIND' not found; Debian: apt-get install valgrind)"
	exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
SUPP=("--suppressions=$HERE/valgrind-mpi.supp" "--suppressions=$HERE/valgrind-loader.supp")
[ -f /usr/share/openmpi/openmpi-valgrind.supp ] && SUPP+=(--suppressions=/usr/share/openmpi/openmpi-valgrind.supp)
# shellcheck source=../e2e/subset.sh
. "$HERE/../e2e/subset.sh"
mnist_subset "$DATA" "$TMP/data" 400 301 || { fail "cannot copy MNIST's first images into $TMP/data"; finish; }
VG=("$VALGRIND" --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect,possible
	--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 --num-callers=40
	--track-fds=no "${SUPP[@]}")

# vg_run NAME ARGS...: RANKS (default 2) ranks under memcheck, one log per rank.
vg_run() {
	local name=$1 ranks=${RANKS:-2}
	shift
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n "$ranks" "${VG[@]}" \
		--log-file="$TMP/$name.vg.%q{OMPI_COMM_WORLD_RANK}" "$TRAIN" --data "$TMP/data/train" "$@" \
		>"$TMP/$name.out" 2>&1
	RC=$?
	local r clean=1
	for ((r = 0; r < ranks; r++)); do
		local log="$TMP/$name.vg.$r"
		if ! grep -q 'ERROR SUMMARY: 0 errors' "$log" 2>/dev/null; then
			clean=0
			fail "$name: rank $r has memcheck errors (or no log):"
			grep -E -A25 '^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|Source|[0-9,]+ .*(definitely|indirectly|possibly) lost)' \
				"$log" 2>/dev/null | head -60 | sed 's/^/    /' >&2
		fi
	done
	if [ "$RC" -ne 0 ]; then
		fail "$name: exit status $RC; output:"
		tail -15 "$TMP/$name.out" | sed 's/^/    /' >&2
	elif [ "$clean" -eq 1 ]; then
		ok "$name: $ranks rank(s) clean under memcheck ($(grep -h -o 'suppressed: [0-9]* from [0-9]*' "$TMP/$name.vg.0" | tail -1) on rank 0, all inside MPI)"
	fi
}

vg_run train --epochs 1 --log-every 2 --checkpoint-dir "$TMP/ck" --save-every 3 --keep 2
vg_run resume --epochs 2 --log-every 2 --checkpoint-dir "$TMP/ck" --resume "$TMP/ck"
grep -q 'resuming from' "$TMP/resume.out" || fail "resume: did not resume"
grep -q '^summary: .*test_images=301' "$TMP/resume.out" || fail "resume: did not score the 301 test images"
# What reads a checkpoint's parameters alone runs on rank 0: one rank each (half the CPU).
RANKS=1 vg_run init_from --epochs 1 --log-every 2 --init-from "$TMP/ck"
grep -q -- '--init-from: the parameters of' "$TMP/init_from.out" || fail "init_from: did not start from the checkpoint"
RANKS=1 vg_run eval_only --eval-only "$TMP/ck"
grep -q -- '--eval-only: scoring' "$TMP/eval_only.out" || fail "eval_only: did not score the checkpoint"

# Control: a leak of our own is still reported under the same suppressions.
timeout -k 10 120 "${MPIRUN[@]}" -n 1 "${VG[@]}" --log-file="$TMP/control.vg" "$CONTROL" \
	>"$TMP/control.out" 2>&1
if grep -q 'definitely lost: 4,242 bytes in 1 blocks' "$TMP/control.vg" &&
	grep -q 'leak_control_block' "$TMP/control.vg"; then
	ok "control: a 4242-byte leak of the program's own is reported under the same suppressions"
else
	fail "control: the leak of leak_control was not reported; the suppressions hide too much:"
	grep -E 'lost|ERROR SUMMARY' "$TMP/control.vg" | sed 's/^/    /' >&2
fi
finish
