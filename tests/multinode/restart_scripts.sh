#!/usr/bin/env bash
# tests/multinode/restart_scripts.sh - the launch scripts' restart policy
# (MAX_RESTARTS, scripts/restart.sh) against a stand-in mpirun, which records
# each attempt's arguments and ends with the statuses it is told, and a
# stand-in launch agent, which answers for some hosts and not for others: the
# refusals (status 2, one message, nothing started), which statuses are
# retried, the command of each attempt (log directory, --resume, a shrunk
# host list or hostfile with -n and --batch-size), the limits (restarts used
# up, once from scratch, MIN_RANKS, the global batch, --grad-reduce sum) and
# a signal to the launcher passed on to mpirun. The same policy on a real
# cluster with real faults: restart.sh.
#
#   bash tests/multinode/restart_scripts.sh SOURCE_DIR
#
# No network and no MPI: the hosts (10.99.0.x) are only ever given to the
# stand-ins.
set -uo pipefail

if (($# < 1)); then
	echo "usage: $0 SOURCE_DIR" >&2
	exit 2
fi
src=$(readlink -f "$1")
# shellcheck source=checks.sh
source "$src/tests/multinode/checks.sh"
checks_tmp restart-scripts


# The stand-in mpirun: attempt N writes its arguments to argv.N (one a line),
# with FAKE_CKPT=DIR leaves ckpt-0-<10 N>.safetensors there as if rank 0
# had saved, then sleeps FAKE_SLEEP seconds (noting a SIGTERM in "term") and
# exits with the N-th of FAKE_RCS (default 0).
cat >"$tmp/mpirun" <<'EOF'
#!/bin/bash
n=$(($(cat count 2>/dev/null || echo 0) + 1))
echo "$n" >count
printf '%s\n' "$@" >"argv.$n"
read -ra rcs <<<"${FAKE_RCS:-0}"
[[ -z ${FAKE_CKPT:-} ]] || : >"$FAKE_CKPT/ckpt-0-$((n * 10)).safetensors"
if [[ -n ${FAKE_SLEEP:-} ]]; then
	trap 'echo term >term; exit 143' TERM
	sleep "$FAKE_SLEEP" &
	wait
fi
if ((${rcs[n - 1]:-0} == 137)); then
	echo "mpirun noticed that process rank 3 with PID 99 on node 10.99.0.2 exited on signal 9 (Killed)." >&2
fi
exit "${rcs[n - 1]:-0}"
EOF
# The stand-in agent: "AGENT [options] HOST COMMAND": logs HOST to probed;
# the hosts in FAKE_DOWN answer as an unreachable ssh does (255).
cat >"$tmp/agent" <<'EOF'
#!/bin/bash
while [[ $1 == -* ]]; do shift; done
echo "$1" >>probed
[[ " ${FAKE_DOWN:-} " != *" $1 "* ]] || exit 255
EOF
printf '#!/bin/sh\nexit 0\n' >"$tmp/mnist-train"
chmod +x "$tmp/mpirun" "$tmp/agent" "$tmp/mnist-train"

# launch SCRIPT ARGS...: a launcher with restarts in a fresh directory $dir
# holding data/, ck/ and an old log_output; sets rc, out (stderr and stdout),
# attempts (how many times mpirun was started) and argv1, argv2, ... as
# space-joined lines.
launch() {
	local script=$1 i
	shift
	dir=$(mktemp -d "$tmp/run.XXXX")
	mkdir -p "$dir/log_output/1/rank.9" "$dir/data" "$dir/ck" && echo old >"$dir/log_output/1/rank.9/stdout"
	rc=0
	out=$(cd "$dir" && MPIRUN=$tmp/mpirun TRAINER=$tmp/mnist-train DATA_PATH=$dir/data RESTART_DELAY=${RESTART_DELAY-0} \
		timeout 60 bash "$src/$script" "$@" 2>&1) || rc=$?
	attempts=$(cat "$dir/count" 2>/dev/null || echo 0)
	for ((i = 1; i <= 4; i++)); do
		printf -v "argv$i" "%s" "$([[ ! -f $dir/argv.$i ]] || tr "\n" " " <"$dir/argv.$i")"
	done
}

expect_refused() { # expect_refused NAME MESSAGE SCRIPT ARGS...
	local name=$1 message=$2
	shift 2
	launch "$@"
	if ((rc != 2)); then
		fail "$name: status $rc, want 2: $out"
	elif ((attempts)); then
		fail "$name: mpirun was started anyway"
	elif [[ $out != *"$message"* ]]; then
		fail "$name: message '$out' does not say '$message'"
	elif (($(wc -l <<<"$out") != 1)); then
		fail "$name: more than one line of message: $out"
	elif [[ ! -f $dir/log_output/1/rank.9/stdout ]]; then
		fail "$name: the old log_output was removed before the refusal"
	else
		pass "$name: $out"
	fi
}

# expect NAME CONDITION DESCRIPTION: one check of the last launch.
expect() {
	if eval "$2"; then
		pass "$1: $3"
	else
		fail "$1: want $3; status $rc, $attempts attempt(s):"
		sed 's/^/    /' <<<"$out" >&2
	fi
}

agent=(--mca plm_rsh_agent "$tmp/agent")
hosts=10.99.0.1:2,10.99.0.2:2
printf '10.99.0.1 slots=3\n# the second node\n10.99.0.2 slots=1   # small\n' >"$tmp/hostfile"

# ---- refusals, before anything is started or removed -------------------------------
MAX_RESTARTS=2 expect_refused "restarts without --checkpoint-dir" \
	"MAX_RESTARTS=2 needs --checkpoint-dir DIR among the trainer's arguments" run_mpirun_1.sh "$hosts" -- --epochs 1
MAX_RESTARTS=two expect_refused "MAX_RESTARTS=two" "MAX_RESTARTS=two: expected a whole number" \
	run_mpirun_1.sh "$hosts" -- --checkpoint-dir ck
MAX_RESTARTS=1 MIN_RANKS=0 expect_refused "MIN_RANKS=0" "MIN_RANKS=0: expected a whole number, at least 1" \
	run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
MAX_RESTARTS=1 RESTART_DELAY=soon expect_refused "RESTART_DELAY=soon" "RESTART_DELAY=soon: expected a whole number of seconds" \
	run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
printf '10.99.0.1 slots=2\n10.99.0.2\n' >"$tmp/hostfile.noslots"
MAX_RESTARTS=1 expect_refused "hostfile line without slots" "line '10.99.0.2': restarts need slots=N on every line" \
	run_mpirun_2.sh "$tmp/hostfile.noslots" "${agent[@]}" -- --checkpoint-dir ck
MAX_RESTARTS=1 expect_refused "unreadable hostfile" "hostfile '$tmp/none' cannot be read" \
	run_mpirun_2.sh "$tmp/none" "${agent[@]}" -- --checkpoint-dir ck
MAX_RESTARTS=1 expect_refused "HOSTS entry with bad slots" "HOSTS entry '10.99.0.2:x': restarts need each entry as HOST or HOST:SLOTS" \
	run_mpirun_1.sh 10.99.0.1:2,10.99.0.2:x "${agent[@]}" -- --checkpoint-dir ck
MAX_RESTARTS=1 expect_refused "missing launch agent" "the launch agent '$tmp/no-agent' (plm_rsh_agent) is not found" \
	run_mpirun_1.sh "$hosts" --mca plm_rsh_agent "$tmp/no-agent" -- --checkpoint-dir ck

# ---- MAX_RESTARTS=0: one attempt, exactly as without it ------------------------------
MAX_RESTARTS=0 FAKE_RCS=1 launch run_mpirun_1.sh "$hosts" -- --checkpoint-dir ck
expect "MAX_RESTARTS=0" '((rc == 1 && attempts == 1)) && [[ $argv1 == *"--output-filename log_output --merge"* && ! -e $dir/log_output/attempt-1 ]]' \
	"one attempt, mpirun's status 1 passed on, logs in log_output/1 as without restarts"

# ---- same nodes: log directory and --resume --------------------------------------------
FAKE_RCS="137 0" FAKE_CKPT=ck MAX_RESTARTS=2 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck --resume old
want="restart 1 of 2: attempt 1 of 3 ended with status 137 (rank 3 on node 10.99.0.2 exited on signal 9 (Killed)); attempt 2 of 3 on $hosts: 4 ranks x --batch-size 32 (global batch 128), resuming from ck (newest: ckpt-0-10.safetensors); logs in log_output/attempt-2"
expect "same nodes" '((rc == 0 && attempts == 2)) && [[ $out == *"$want"* && $out == *"attempt 2 of 3 finished"* ]]' \
	"status 0 after one restart, '$want'"
expect "same nodes, commands" '[[ $argv1 == "-H $hosts --output-filename log_output/attempt-1 "*" --checkpoint-dir ck --resume old " &&
	$argv2 == "-H $hosts --output-filename log_output/attempt-2 "*" --checkpoint-dir ck --resume ck " ]]' \
	"attempt 1 as given but logging to log_output/attempt-1, attempt 2 to attempt-2 with --resume ck instead of --resume old"
expect "same nodes, probe" '[[ $(sort "$dir/probed" | tr "\n" " ") == "10.99.0.1 10.99.0.2 " ]]' \
	"both nodes probed through the configured agent"
expect "same nodes, stderr" '[[ $(cat "$dir/log_output/attempt-1/mpirun.stderr") == "mpirun noticed that process rank 3"* ]]' \
	"mpirun's stderr kept in log_output/attempt-1/mpirun.stderr"

# ---- statuses not retried -----------------------------------------------------------------
FAKE_RCS=2 FAKE_CKPT=ck MAX_RESTARTS=2 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
expect "status 2" '((rc == 2 && attempts == 1)) && [[ $out == *"attempt 1 of 3 ended with status 2 (bad usage, configuration or input): not restarting"* ]]' \
	"not restarted, status 2"
FAKE_RCS=127 FAKE_CKPT=ck MAX_RESTARTS=2 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
expect "status 127" '((rc == 127 && attempts == 1))' "not restarted, status 127 passed on"
for status in 1 9 205 255; do
	FAKE_RCS="$status 0" FAKE_CKPT=ck MAX_RESTARTS=1 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
	expect "status $status" '((rc == 0 && attempts == 2))' "restarted (a runtime failure, or mpirun losing a node)"
done

# ---- limits ---------------------------------------------------------------------------------
FAKE_RCS="1 1 1" FAKE_CKPT=ck MAX_RESTARTS=2 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
expect "restarts used up" '((rc == 1 && attempts == 3)) && [[ $out == *"attempt 3 of 3 ended with status 1 (no message from mpirun or the ranks): MAX_RESTARTS=2 restarts used up, giving up"* ]]' \
	"status 1 after 3 attempts, saying so"
FAKE_RCS="1 1 0" MAX_RESTARTS=3 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
expect "once from scratch" '((rc == 1 && attempts == 2)) && [[ $argv2 != *--resume* &&
	$out == *"from scratch (no checkpoint in ck yet)"* && $out == *"before any checkpoint was written in ck, as did the restart from scratch: giving up"* ]]' \
	"no checkpoint: one restart from scratch (no --resume), then status 1"

# ---- a node lost: shrinking -------------------------------------------------------------------
FAKE_RCS="205 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=1 launch run_mpirun_1.sh "$hosts" "${agent[@]}" \
	-- --checkpoint-dir ck --batch-size 16 --resume=old
want="attempt 2 of 2 on 10.99.0.1:2 (10.99.0.2 not answering): 2 ranks x --batch-size 32 (global batch 64), resuming from ck (newest: ckpt-0-10.safetensors)"
expect "-H, node lost" '((rc == 0 && attempts == 2)) && [[ $out == *"$want"* &&
	$argv2 == "-n 2 -H 10.99.0.1:2 --output-filename log_output/attempt-2 "*" --checkpoint-dir ck --batch-size 32 --resume ck " ]]' \
	"'$want', mpirun -n 2 -H 10.99.0.1:2, --batch-size 16 and --resume=old replaced"
OMPI_MCA_plm_rsh_agent=$tmp/agent FAKE_RCS="9 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=1 \
	launch run_mpirun_2.sh "$tmp/hostfile" -- --checkpoint-dir ck
expect "hostfile, node lost" '((rc == 0 && attempts == 2)) && [[ $argv2 == "-n 2 --hostfile log_output/attempt-2/hostfile "*" --batch-size 64 --resume ck " &&
	$(cat "$dir/log_output/attempt-2/hostfile") == "10.99.0.1 slots=3" ]]' \
	"4 ranks x 32 on 3 slots left: 2 ranks x 64 (3 does not divide 128), the agent from OMPI_MCA_plm_rsh_agent, log_output/attempt-2/hostfile holding node 1's line"
NP=2 FAKE_RCS="1 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=1 launch run_mpirun_2.sh "$tmp/hostfile" "${agent[@]}" -- --checkpoint-dir ck
expect "NP within the slots left" '((rc == 0 && attempts == 2)) && [[ $argv2 == "-n 2 --hostfile log_output/attempt-2/hostfile "*" --checkpoint-dir ck --resume ck " ]]' \
	"NP=2 fits node 1's 3 slots: the same ranks and --batch-size on node 1 alone"
MIN_RANKS=3 FAKE_RCS="1 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=1 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
expect "MIN_RANKS" '((rc == 1 && attempts == 1)) && [[ $out == *"10.99.0.2 no longer answer(s): 2 slots left, fewer than MIN_RANKS=3: giving up"* ]]' \
	"2 slots left under MIN_RANKS=3: status 1, saying so"
MIN_RANKS=2 NP=5 FAKE_RCS="1 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=1 \
	launch run_mpirun_1.sh 10.99.0.1:4,10.99.0.2:4 "${agent[@]}" -- --checkpoint-dir ck --batch-size 7
expect "no whole --batch-size" '((rc == 1 && attempts == 1)) && [[ $out == *"no rank count from MIN_RANKS=2 to 4 divides the global batch 35 (5 ranks x --batch-size 7): giving up"* ]]' \
	"global batch 35 on 4 slots, MIN_RANKS=2: status 1, saying so"
FAKE_RCS="1 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=1 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck --grad-reduce sum
expect "--grad-reduce sum" '((rc == 1 && attempts == 1)) && [[ $out == *"fewer ranks cannot resume with --grad-reduce sum"* ]]' \
	"no shrinking with a summed gradient: status 1, saying so"
FAKE_RCS="1 1 0" FAKE_CKPT=ck FAKE_DOWN=10.99.0.2 MAX_RESTARTS=2 launch run_mpirun_1.sh "$hosts" "${agent[@]}" -- --checkpoint-dir ck
expect "a lost node stays dropped" '((rc == 0 && attempts == 3)) && [[ $argv3 == "-n 2 -H 10.99.0.1:2 --output-filename log_output/attempt-3 "* ]] &&
	(($(grep -c . "$dir/probed") == 3))' "attempt 3 again on node 1 alone, node 2 not probed again"

# ---- a signal to the launcher ends mpirun, no restart --------------------------------------------
dir=$(mktemp -d "$tmp/run.XXXX")
mkdir -p "$dir/data"
(cd "$dir" && MPIRUN=$tmp/mpirun TRAINER=$tmp/mnist-train DATA_PATH=$dir/data FAKE_SLEEP=30 FAKE_RCS=1 MAX_RESTARTS=2 \
	exec bash "$src/run_mpirun_1.sh" "$hosts" "${agent[@]}" -- --checkpoint-dir ck >out 2>&1) &
launcher=$!
for ((i = 0; i < 100; i++)); do
	[[ -f $dir/argv.1 ]] && break
	sleep 0.1
done
sleep 0.5
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
if ((rc == 143)) && [[ -f $dir/term && $(cat "$dir/count") == 1 ]] && grep -q 'stopped by SIGTERM: ending mpirun' "$dir/out"; then
	pass "SIGTERM to the launcher: mpirun got SIGTERM, no restart, status 143"
else
	fail "SIGTERM to the launcher: status $rc (want 143), mpirun $([[ -f $dir/term ]] && echo got || echo "did not get") SIGTERM, $(cat "$dir/count" 2>/dev/null) attempt(s): $(cat "$dir/out")"
fi

checks_done "all restart-policy checks passed"
