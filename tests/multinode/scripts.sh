#!/usr/bin/env bash
# tests/multinode/scripts.sh - run_mpirun_1.sh and run_mpirun_2.sh against a
# stand-in mpirun that records what it was given: the command line they
# build, the environment the ranks get, pass-through of mpirun and trainer
# arguments, the usage message, and every refusal (status 2, one message,
# mpirun never started).
#
#   bash tests/multinode/scripts.sh SOURCE_DIR
#
# No network and no MPI: host names used here are numeric or localhost, which
# resolve without a name server.
set -uo pipefail

if (($# < 1)); then
	echo "usage: $0 SOURCE_DIR" >&2
	exit 2
fi
src=$(readlink -f "$1")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-scripts.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
pass() { echo "ok: $*"; }

# The stand-in mpirun: argv one per line, the ranks' environment, and whether
# the old log directory was still there when it started.
cat >"$tmp/mpirun" <<'EOF'
#!/bin/bash
printf '%s\n' "$@" >"$FAKE_DIR/argv"
{
	echo "DATA_PATH=${DATA_PATH-<unset>}"
	echo "NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME-<unset>}"
	if [[ -e log_output || -e ${LOG_DIR:-log_output} ]]; then echo "old_logs=present"; else echo "old_logs=gone"; fi
} >"$FAKE_DIR/env"
exit "${FAKE_RC:-0}"
EOF
chmod +x "$tmp/mpirun"
printf '#!/bin/sh\nexit 0\n' >"$tmp/mnist-train"
chmod +x "$tmp/mnist-train"

# launch SCRIPT ARGS...: run a launcher in a fresh directory; sets rc, out
# (its stderr and stdout), argv (mpirun's arguments, one line each, "" when
# mpirun was not started) and envs.
launch() {
	local script=$1
	shift
	local dir
	dir=$(mktemp -d "$tmp/run.XXXX")
	mkdir -p "$dir/log_output/1/rank.9" && echo old >"$dir/log_output/1/rank.9/stdout"
	rc=0
	out=$(cd "$dir" && FAKE_DIR=$dir MPIRUN=$tmp/mpirun TRAINER=${TRAINER-$tmp/mnist-train} \
		timeout 60 bash "$src/$script" "$@" 2>&1) || rc=$?
	argv=$(cat "$dir/argv" 2>/dev/null)
	envs=$(cat "$dir/env" 2>/dev/null)
}

# has_seq LINES...: argv holds these lines consecutively.
has_seq() {
	local want
	want=$(printf '%s\n' "$@")
	[[ $'\n'$argv$'\n' == *$'\n'$want$'\n'* ]]
}

expect_ok() { # expect_ok NAME: launched, status 0
	if ((rc != 0)) || [[ -z $argv ]]; then
		fail "$1: status $rc, mpirun ${argv:+started}${argv:-not started}: $out"
		return 1
	fi
	return 0
}

expect_refused() { # expect_refused NAME MESSAGE SCRIPT ARGS...
	local name=$1 message=$2
	shift 2
	launch "$@"
	if ((rc != 2)); then
		fail "$name: status $rc, want 2: $out"
	elif [[ -n $argv ]]; then
		fail "$name: mpirun was started anyway"
	elif [[ $out != *"$message"* ]]; then
		fail "$name: message '$out' does not say '$message'"
	elif (($(wc -l <<<"$out") != 1)); then
		fail "$name: more than one line of message: $out"
	else
		pass "$name: $out"
	fi
}

root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)

# ---- the seed's launches, with pass-through ---------------------------------
launch run_mpirun_1.sh -H 127.0.0.1:2,localhost:3 --mca btl tcp,self -x FOO=1 -- --epochs 3 --lr 0.5
if expect_ok "-H launch"; then
	has_seq -n 5 -H 127.0.0.1:2,localhost:3 --output-filename log_output --merge-stderr-to-stdout ${root_flag[@]+"${root_flag[@]}"} ||
		fail "-H launch: not 'mpirun -n 5 -H ... --output-filename log_output --merge-stderr-to-stdout${root_flag:+ ${root_flag[*]}}': $argv"
	has_seq -x DATA_PATH || fail "-H launch: DATA_PATH not exported to the ranks (-x DATA_PATH): $argv"
	has_seq --mca btl tcp,self -x FOO=1 "$tmp/mnist-train" --epochs 3 --lr 0.5 ||
		fail "-H launch: mpirun and trainer arguments not passed through in order: $argv"
	has_seq --mca plm_rsh_args "-o BatchMode=yes -o ConnectTimeout=10" ||
		fail "-H launch: ssh is not told to fail instead of prompting: $argv"
	[[ $envs == *"DATA_PATH=./MNIST_Data/train/"* ]] || fail "-H launch: DATA_PATH default is not the seed's: $envs"
	[[ $envs == *"old_logs=gone"* ]] || fail "-H launch: the old log_output was not removed first"
	[[ $out == *"mpirun"*"-n 5"* ]] || fail "-H launch: the command is not shown: $out"
	((failures)) || pass "-H launch: mpirun -n 5 -H ... --output-filename log_output --merge-stderr-to-stdout, DATA_PATH exported, arguments passed through, old logs removed"
fi

failures_before=$failures
launch run_mpirun_1.sh 127.0.0.1:4 -n 2
expect_ok "positional hosts" && { has_seq -n 2 -H 127.0.0.1:4 || fail "positional hosts and -n: $argv"; }
HOSTS=127.0.0.1:3,localhost NP=4 launch run_mpirun_1.sh
expect_ok "HOSTS and NP" && { has_seq -n 4 -H 127.0.0.1:3,localhost || fail "HOSTS and NP variables: $argv"; }
HOSTS=127.0.0.1:3,localhost launch run_mpirun_1.sh
expect_ok "slots default" && { has_seq -n 4 -H || fail "-n defaults to all slots (3 + 1 for a host without :N): $argv"; }
DATA_PATH=/data/mnist/train/ launch run_mpirun_1.sh -H localhost:1
expect_ok "DATA_PATH" && { [[ $envs == *"DATA_PATH=/data/mnist/train/"* ]] || fail "DATA_PATH not kept: $envs"; }
LOG_DIR=logs launch run_mpirun_1.sh -H localhost:1
expect_ok "LOG_DIR" && { has_seq --output-filename logs || fail "LOG_DIR not used: $argv"; }
FAKE_RC=3 launch run_mpirun_1.sh -H localhost:1
((rc == 3)) || fail "mpirun's status 3 is not the launcher's: $rc"
launch run_mpirun_1.sh -H localhost:1 --mca plm_rsh_agent /bin/false
expect_ok "own agent" && { [[ $argv != *plm_rsh_args* ]] || fail "plm_rsh_args added although an rsh agent was given: $argv"; }
launch run_mpirun_1.sh -H localhost:1 --mca orte_rsh_agent /bin/false
expect_ok "own agent (synonym)" && { [[ $argv != *plm_rsh_args* ]] || fail "plm_rsh_args added although orte_rsh_agent was given: $argv"; }
OMPI_MCA_plm_rsh_agent=/bin/false launch run_mpirun_1.sh -H localhost:1
expect_ok "own agent (environment)" && { [[ $argv != *plm_rsh_args* ]] || fail "plm_rsh_args added although OMPI_MCA_plm_rsh_agent is set: $argv"; }
MNIST_SSH_OPTS='' launch run_mpirun_1.sh -H localhost:1
expect_ok "MNIST_SSH_OPTS empty" && { [[ $argv != *plm_rsh_args* ]] || fail "MNIST_SSH_OPTS= still adds plm_rsh_args: $argv"; }
launch run_mpirun_1.sh -H localhost:1 -n 3 --oversubscribe
expect_ok "--oversubscribe" && { has_seq -n 3 || fail "--oversubscribe: $argv"; }
launch run_mpirun_1.sh -H localhost:1 -- --help
expect_ok "trainer --help" && { [[ $argv == *$'\n--help' ]] || fail "'-- --help' not passed to the trainer: $argv"; }
((failures == failures_before)) && pass "positional hosts, HOSTS, NP, DATA_PATH, LOG_DIR, slot defaults, mpirun's status, own rsh agent, --oversubscribe, trainer flags"

# ---- network selection --------------------------------------------------------
MNIST_NET=eth7 launch run_mpirun_1.sh -H localhost:1
if expect_ok "MNIST_NET"; then
	if has_seq --mca btl_tcp_if_include eth7 --mca oob_tcp_if_include eth7 -x NCCL_SOCKET_IFNAME &&
		[[ $envs == *"NCCL_SOCKET_IFNAME==eth7"* ]]; then
		pass "MNIST_NET=eth7: btl_tcp_if_include, oob_tcp_if_include and NCCL_SOCKET_IFNAME (=eth7, exact) all set"
	else
		fail "MNIST_NET=eth7 not applied to MPI and NCCL: $argv / $envs"
	fi
fi
launch run_mpirun_1.sh -H localhost:1
[[ $argv != *if_include* && $envs == *"NCCL_SOCKET_IFNAME=<unset>"* ]] || fail "without MNIST_NET the network is still pinned: $argv"
MNIST_NET=10.0.0.0/24 expect_refused "MNIST_NET subnet" "give interface names" run_mpirun_1.sh -H localhost:1

# ---- hostfile launch ------------------------------------------------------------
hf=$tmp/hostfile.good
cat >"$hf" <<'EOF'
# comment line

127.0.0.1 slots=2   # first node
localhost slots = 3 max_slots=4
EOF
launch run_mpirun_2.sh "$hf" -x BAR=2 -- --epochs 1
if expect_ok "hostfile launch" && has_seq -n 5 --hostfile "$hf" --output-filename log_output --merge-stderr-to-stdout &&
	has_seq -x BAR=2 "$tmp/mnist-train" --epochs 1 && [[ $argv != *$'\n-H\n'* ]]; then
	pass "run_mpirun_2.sh HOSTFILE: mpirun -n 5 (the slots) --hostfile HOSTFILE, arguments passed through"
else
	fail "run_mpirun_2.sh HOSTFILE: $argv"
fi
HOSTFILE=$hf launch run_mpirun_2.sh -n 1
expect_ok "HOSTFILE variable" && { has_seq -n 1 --hostfile "$hf" || fail "HOSTFILE variable: $argv"; }
printf '127.0.0.1\nlocalhost\n' >"$tmp/hostfile.noslots"
launch run_mpirun_2.sh "$tmp/hostfile.noslots" -n 6
expect_ok "hostfile without slots, -n given" && { has_seq -n 6 || fail "hostfile without slots: $argv"; }

# ---- usage --------------------------------------------------------------------
for s in run_mpirun_1.sh run_mpirun_2.sh; do
	launch "$s" --help
	if ((rc == 0)) && [[ -z $argv && $out == "Usage: bash $s"* && $out == *DATA_PATH* && $out == *MNIST_NET* && $out == *"-- TRAINER_ARGS"* ]]; then
		pass "$s --help: usage, status 0"
	else
		fail "$s --help: status $rc: $out"
	fi
done

# ---- refusals -----------------------------------------------------------------
expect_refused "seed placeholders" "placeholder" run_mpirun_1.sh
expect_refused "seed placeholder hostfile" "placeholder" run_mpirun_2.sh "$src/hostfile"
expect_refused "-n 0" "not a rank count" run_mpirun_1.sh -H localhost:2 -n 0
expect_refused "-n abc" "not a rank count" run_mpirun_1.sh -H localhost:2 -n abc
expect_refused "-n without value" "-n needs a value" run_mpirun_1.sh -H localhost:2 -n
expect_refused "more ranks than slots" "5 ranks asked for, but the hosts give only 3 slots" run_mpirun_1.sh -H 127.0.0.1:2,localhost -n 5
expect_refused "bad slots in -H" "slots 'x'" run_mpirun_1.sh -H localhost:x
expect_refused "empty slots in -H" "slots missing" run_mpirun_1.sh -H localhost:
expect_refused "empty -H entry" "empty entry" run_mpirun_1.sh -H localhost:1,,127.0.0.1:1
expect_refused "both -H and --hostfile" "not both" run_mpirun_1.sh -H localhost:1 --hostfile "$hf"
expect_refused "missing hostfile" "does not exist" run_mpirun_2.sh "$tmp/no-such-hostfile"
printf '# nothing\n\n' >"$tmp/hostfile.empty"
expect_refused "empty hostfile" "lists no hosts" run_mpirun_2.sh "$tmp/hostfile.empty"
printf 'localhost slots=2\n127.0.0.1 slots=0\n' >"$tmp/hostfile.zero"
expect_refused "hostfile slots=0" "line 2: slots '0'" run_mpirun_2.sh "$tmp/hostfile.zero"
printf 'localhost slots=\n' >"$tmp/hostfile.noval"
expect_refused "hostfile slots= without value" "line 1: 'slots=' has no value" run_mpirun_2.sh "$tmp/hostfile.noval"
printf 'slots=2\n' >"$tmp/hostfile.nohost"
expect_refused "hostfile line without host" "line 1: expected 'HOST slots=N'" run_mpirun_2.sh "$tmp/hostfile.nohost"
printf 'localhost 8\n' >"$tmp/hostfile.word"
expect_refused "hostfile stray word" "line 1: unexpected '8'" run_mpirun_2.sh "$tmp/hostfile.word"
printf 'localhost slots=4 max_slots=2\n' >"$tmp/hostfile.max"
expect_refused "hostfile max_slots below slots" "max_slots=2 is less than slots=4" run_mpirun_2.sh "$tmp/hostfile.max"
expect_refused "hostfile without slots and -n" "give -n NP" run_mpirun_2.sh "$tmp/hostfile.noslots"
expect_refused "bad host name" "is not a host name" run_mpirun_1.sh -H 'a;b:1'
TRAINER=$tmp/no-such-trainer expect_refused "missing trainer" "is missing or not executable" run_mpirun_1.sh -H localhost:1
LOG_DIR=/ expect_refused "LOG_DIR=/" "would remove more than the logs" run_mpirun_1.sh -H localhost:1

if ((failures)); then
	echo "$failures check(s) failed" >&2
	exit 1
fi
echo "all launch-script checks passed"
