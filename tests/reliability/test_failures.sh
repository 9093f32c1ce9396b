#!/usr/bin/env bash
# test_failures.sh - a job with a failing rank ends clearly and soon.
#
#   tests/reliability/test_failures.sh CASE build/mnist-train MNIST_Data mpirun --allow-run-as-root ...
#
# CASE:
#   kill       kill -9 of rank 1 mid-run (checkpoints every 20 steps): mpirun ends
#              within 10 s, non-zero, naming rank 1; every checkpoint left is
#              valid and --resume DIR continues from the newest without a warning.
#   kill-writer kill -9 of rank 0 while it writes a checkpoint every step: the
#              same, and no torn file under a ckpt- name (only a hidden
#              temporary file may be left).
#   stop       SIGSTOP of rank 1 on 3 ranks with --timeout 3: every other rank
#              prints "rank R on HOST: allreduce at epoch E step S not complete
#              after 3 s" and the job ends non-zero within 15 s; the stopped
#              rank is gone afterwards. A control with --timeout 0 (no deadline)
#              must still be hanging after 6 s.
#   stop-at-end rank 1 of 2 stops itself (SIGSTOP) as it enters MPI_Finalize,
#              after the summary (STOP_AT_END_LIB, tests/reliability/stop_at_end.c,
#              under LD_PRELOAD), with --timeout 3: rank 0, whose MPI_Finalize
#              waits for every rank, prints "rank 0 on HOST: end of the job
#              (MPI_Finalize) not complete after 3 s" after its summary and the
#              job ends non-zero within 15 s; the stopped rank is gone afterwards.
#   nonfinite  an mlp with --lr 1e4 diverges: the run stops with status 1 and
#              "rank R on HOST: loss is nan at epoch E step S"; with
#              --allow-nonfinite the same run finishes (status 0). With
#              checkpoints every step and the loss checked only every 1000 steps,
#              the parameter check stops it before a non-finite checkpoint is
#              written: every checkpoint left holds finite numbers.
# Exit 0 pass, 1 fail.
set -uo pipefail
CASE=${1:-}
shift
. "$(dirname "$0")/common.sh"
PYTHON=${PYTHON:-/usr/bin/python3}
READER="$(dirname "$0")/read_checkpoint.py"

# start NAME NRANKS ARGS...: mnist-train under mpirun (and MPI_EXTRA, its options) in the
# background; sets MP (mpirun's pid).
MPI_EXTRA=()
start() {
	local name=$1 n=$2
	shift 2
	"${MPIRUN[@]}" "${MPI_EXTRA[@]}" -n "$n" --output-filename "$TMP/$name.log" "$TRAIN" --data "$DATA/train" "$@" \
		>"$TMP/$name.out" 2>&1 &
	MP=$!
	cleanup_hooks+=("kill -9 $MP 2>/dev/null")
}

# finish_within NAME SECONDS: wait for mpirun; sets RC and ELAPSED (from T0); kills it when late.
finish_within() {
	local deadline
	deadline=$(awk -v t="$T0" -v s="$2" 'BEGIN { printf "%.3f", t + s }')
	while kill -0 "$MP" 2>/dev/null; do
		if awk -v n="$(now)" -v d="$deadline" 'BEGIN { exit !(n > d) }'; then
			fail "$1: mpirun still running $2 s after the fault; killing it"
			kill -9 "$MP" 2>/dev/null
			pkill -9 -P "$MP" 2>/dev/null
			break
		fi
		sleep 0.05
	done
	wait "$MP"
	RC=$?
	ELAPSED=$(awk -v t="$T0" -v n="$(now)" 'BEGIN { printf "%.1f", n - t }')
}

# stopped_rank_gone NAME PID: the stopped rank's process is gone within 10 s of mpirun's end.
stopped_rank_gone() {
	if [ -n "$2" ] && ! wait_for 10 eval "! kill -0 $2 2>/dev/null"; then
		fail "$1: the stopped rank $2 still exists 10 s after mpirun ended"
	fi
}

# ckpt_count DIR: how many ckpt-*.safetensors are there.
ckpt_count() { find "$1" -maxdepth 1 -name 'ckpt-*.safetensors' 2>/dev/null | wc -l; }
has_ckpts() { [ "$(ckpt_count "$1")" -ge "$2" ]; }

# all_valid DIR: every checkpoint in DIR passes the independent reader (finite values too).
all_valid() {
	local f bad=0
	for f in "$1"/ckpt-*.safetensors; do
		if ! "$PYTHON" "$READER" "$f" >"$TMP/reader.out" 2>&1 || ! grep -q 'finite=1' "$TMP/reader.out"; then
			fail "$f is not a valid, finite checkpoint: $(cat "$TMP/reader.out")"
			bad=1
		fi
	done
	return $bad
}

# resume_check NAME DIR: --resume DIR continues from the newest checkpoint, with no warning.
resume_check() {
	local newest epoch
	newest=$(ls "$2" | grep '^ckpt-' | sort -t- -k3 -n | tail -1)
	epoch=$(echo "$newest" | cut -d- -f2)
	run "$1_resume" 2 "${ARGS[@]}" --epochs $((epoch + 2)) --resume "$2"
	if expect_ok "$1_resume"; then
		if grep -q 'warning: skipping' "$TMP/$1_resume.out"; then
			fail "$1: --resume warned about a checkpoint: $(grep -m1 'warning' "$TMP/$1_resume.out")"
		elif ! grep -q "resuming from $2/$newest" "$TMP/$1_resume.out"; then
			fail "$1: did not resume from the newest, $newest"
		else
			ok "$1: --resume continued from the newest checkpoint, $newest, and finished"
		fi
	fi
}

case "$CASE" in
kill | kill-writer)
	victim=1
	every=20
	[ "$CASE" = kill-writer ] && victim=0 && every=1
	ARGS=(--model mlp --hidden 128 --limit 10000 --log-every 50 --timeout 60
		--checkpoint-dir "$TMP/ck" --save-every "$every" --keep 3)
	start run 2 "${ARGS[@]}" --epochs 100000
	wait_for 60 has_ckpts "$TMP/ck" 2 || fail "$CASE: no checkpoints after 60 s"
	sleep 0.5
	pid=$(rank_pid "$MP" "$victim") || fail "$CASE: rank $victim's process not found"
	T0=$(now)
	[ -n "${pid:-}" ] && kill -9 "$pid"
	finish_within "$CASE" 10
	if [ "$RC" -ne 0 ] && grep -q "process rank $victim with PID .* exited on signal 9" "$TMP/run.out"; then
		ok "$CASE: kill -9 of rank $victim ended the job in ${ELAPSED} s with status $RC, naming rank $victim and its node: $(grep -o "process rank $victim.*" "$TMP/run.out" | head -1)"
	else
		fail "$CASE: after kill -9 of rank $victim: status $RC in ${ELAPSED} s; output:"
		tail -15 "$TMP/run.out" | sed 's/^/    /' >&2
	fi
	all_valid "$TMP/ck" && ok "$CASE: all $(ckpt_count "$TMP/ck") checkpoints left are valid (independent reader, checksums, finite)"
	torn=$(find "$TMP/ck" -name '.ckpt-*' | wc -l)
	echo "info: $torn hidden temporary file(s) left by the killed writer (ignored by --resume)"
	resume_check "$CASE" "$TMP/ck"
	left=$(find "$TMP/ck" -name '.ckpt-*')
	[ -z "$left" ] && ok "$CASE: the next run with the same --checkpoint-dir removed the temporary files" ||
		fail "$CASE: temporary files still there after the next run: $left"
	;;
stop)
	ARGS=(--limit 10000 --log-every 50 --epochs 100000)
	start run 3 "${ARGS[@]}" --timeout 3
	wait_for 60 grep -q 'loss is' "$TMP/run.log/1/rank.0/stdout" 2>/dev/null || fail "stop: training did not start within 60 s"
	pid=$(rank_pid "$MP" 1) || fail "stop: rank 1's process not found"
	T0=$(now)
	[ -n "${pid:-}" ] && kill -STOP "$pid"
	cleanup_hooks+=("kill -9 ${pid:-0} 2>/dev/null")
	finish_within stop 15
	re='^rank %d on [^ ]+: allreduce at epoch [0-9]+ step [0-9]+ not complete after 3 s$'
	for r in 0 2; do
		line=$(grep -E "$(printf "$re" $r)" "$TMP/run.log/1/rank.$r/stderr" 2>/dev/null | head -1)
		[ -n "$line" ] && ok "stop: rank $r printed '$line'" ||
			fail "stop: rank $r did not print the deadline message; its stderr: $(cat "$TMP/run.log/1/rank.$r/stderr" 2>/dev/null | tail -3)"
	done
	if [ "$RC" -ne 0 ]; then
		ok "stop: the job ended ${ELAPSED} s after SIGSTOP of rank 1 (--timeout 3), status $RC"
	else
		fail "stop: status 0 after a stopped rank"
	fi
	stopped_rank_gone stop "${pid:-}"
	# Control: without a deadline the same fault is a hang (what --timeout prevents).
	start ctl 2 "${ARGS[@]}" --timeout 0
	wait_for 60 grep -q 'loss is' "$TMP/ctl.log/1/rank.0/stdout" 2>/dev/null
	pid=$(rank_pid "$MP" 1)
	kill -STOP "$pid"
	sleep 6
	if kill -0 "$MP" 2>/dev/null; then
		ok "control: with --timeout 0 the job still hangs 6 s after the SIGSTOP"
	else
		fail "control: with --timeout 0 the job ended by itself; the test cannot tell the deadline works"
	fi
	# End it as a failure would: mpirun sees its rank killed, stops the others and
	# removes what the job left (Open MPI's shared-memory segments in /dev/shm
	# among it; a kill -9 of mpirun itself left them behind).
	kill -9 "$pid" 2>/dev/null
	wait_for 10 eval "! kill -0 $MP 2>/dev/null" || kill -9 "$MP" 2>/dev/null
	wait "$MP" 2>/dev/null
	;;
stop-at-end)
	lib=${STOP_AT_END_LIB:-}
	[ -f "$lib" ] || { fail "stop-at-end: STOP_AT_END_LIB ('$lib') is not a file"; exit 1; }
	MPI_EXTRA=(-x "LD_PRELOAD=$lib" -x STOP_AT_END_RANK=1)
	T0=$(now)
	start run 2 --limit 2000 --epochs 1 --timeout 3
	is_stopped() { pid=$(rank_pid "$MP" 1) && grep -q '^State:[[:space:]]*T' "/proc/$pid/status"; }
	if wait_for 60 is_stopped; then
		ok "stop-at-end: rank 1 (pid $pid) stopped itself entering MPI_Finalize"
		cleanup_hooks+=("kill -9 $pid 2>/dev/null")
	else
		fail "stop-at-end: rank 1 never stopped (is $lib loaded?)"
	fi
	finish_within stop-at-end 15
	out0="$TMP/run.log/1/rank.0"
	re='^rank 0 on [^ ]+: end of the job \(MPI_Finalize\) not complete after 3 s$'
	line=$(grep -E "$re" "$out0/stderr" 2>/dev/null | head -1)
	if [ -n "$line" ] && grep -q '^summary: ' "$out0/stdout" 2>/dev/null; then
		ok "stop-at-end: rank 0 printed its summary, then '$line'"
	else
		fail "stop-at-end: rank 0's summary and deadline message expected; its stderr: $(tail -3 "$out0/stderr" 2>/dev/null)"
	fi
	if [ "$RC" -eq 1 ]; then
		ok "stop-at-end: the job ended ${ELAPSED} s after it started (--timeout 3), status 1"
	else
		fail "stop-at-end: status $RC, expected the deadline's 1"
	fi
	stopped_rank_gone stop-at-end "${pid:-}"
	;;
nonfinite)
	ARGS=(--model mlp --hidden 32 --lr 1e4 --limit 5000 --epochs 2 --log-every 10 --timeout 60)
	run diverge 2 "${ARGS[@]}"
	line=$(grep -E -m1 '^rank [0-9]+ on [^ ]+: loss is (nan|inf) at epoch [0-9]+ step [0-9]+: training diverged' "$TMP/diverge.out")
	if [ "$RC" -eq 1 ] && [ -n "$line" ] && ! grep -q '^summary' "$TMP/diverge.out"; then
		ok "nonfinite: stopped with status 1: '$line'"
	else
		fail "nonfinite: status $RC (expected 1), message '${line:-none}'"
		tail -8 "$TMP/diverge.out" | sed 's/^/    /' >&2
	fi
	run allow 2 "${ARGS[@]}" --allow-nonfinite
	if expect_ok allow; then
		ok "--allow-nonfinite: the same run finished (final_loss=$(field allow final_loss))"
	fi
	run diverge_ckpt 2 "${ARGS[@]}" --log-every 1000 --checkpoint-dir "$TMP/ck" --save-every 1 --keep 0
	line=$(grep -E -m1 '^rank 0 on [^ ]+: parameter [0-9]+ is not finite after epoch [0-9]+ step [0-9]+' "$TMP/diverge_ckpt.out")
	if [ "$RC" -eq 1 ] && [ -n "$line" ]; then
		ok "nonfinite with checkpoints: stopped before saving: '$line'"
	else
		fail "nonfinite with checkpoints: status $RC, message '${line:-none}'"
	fi
	n=$(ckpt_count "$TMP/ck")
	[ "$n" -gt 0 ] && all_valid "$TMP/ck" && ok "nonfinite: the $n checkpoints written before are all finite"
	;;
*)
	echo "usage: $0 kill|kill-writer|stop|stop-at-end|nonfinite MNIST_TRAIN DATA_DIR MPIRUN..." >&2
	exit 1
	;;
esac
finish
