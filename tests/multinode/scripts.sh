#!/usr/bin/env bash
# tests/multinode/scripts.sh - run_mpirun_1.sh and run_mpirun_2.sh against a
# stand-in mpirun that records what it was given: the command line they
# build, the environment the ranks get, pass-through of mpirun and trainer
# arguments, and the refusals of what mpirun cannot check itself (status 2,
# one message, mpirun never started). What mpirun reports itself (unknown
# hosts, too few slots) is checked against the real mpirun in namespaces.sh.
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
# shellcheck source=checks.sh
source "$src/tests/multinode/checks.sh"
checks_tmp scripts


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
	mkdir -p "$dir/log_output/1/rank.9" "$dir/data" && echo old >"$dir/log_output/1/rank.9/stdout"
	rc=0
	out=$(cd "$dir" && FAKE_DIR=$dir MPIRUN=$tmp/mpirun TRAINER=${TRAINER-$tmp/mnist-train} \
		DATA_PATH=${DATA_PATH-$dir/data} \
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
launch run_mpirun_1.sh 127.0.0.1:2,localhost:3 --mca btl tcp,self -x FOO=1 -- --epochs 3 --lr 0.5
if expect_ok "-H launch"; then
	has_seq -H 127.0.0.1:2,localhost:3 --output-filename log_output --merge-stderr-to-stdout -x DATA_PATH \
		${root_flag[@]+"${root_flag[@]}"} ||
		fail "-H launch: not 'mpirun -H ... --output-filename log_output --merge-stderr-to-stdout -x DATA_PATH${root_flag:+ ${root_flag[*]}}': $argv"
	[[ $argv != *$'\n-n\n'* ]] || fail "-H launch: -n given although NP is not set (mpirun starts one rank per slot): $argv"
	has_seq --mca btl tcp,self -x FOO=1 "$tmp/mnist-train" --epochs 3 --lr 0.5 ||
		fail "-H launch: mpirun and trainer arguments not passed through in order: $argv"
	[[ $envs == *old_logs=gone* ]] || fail "-H launch: the old log_output was not cleared: $envs"
	[[ $envs == *"DATA_PATH="*/data* ]] || fail "-H launch: DATA_PATH not exported: $envs"
	pass "run_mpirun_1.sh HOSTS: mpirun -H HOSTS --output-filename log_output --merge-stderr-to-stdout, arguments passed through"
fi
NP=4 launch run_mpirun_1.sh 127.0.0.1:4
expect_ok "NP" && { has_seq -n 4 -H 127.0.0.1:4 || fail "NP=4: $argv"; }
HOSTS=127.0.0.1:3,localhost launch run_mpirun_1.sh -n 2
expect_ok "HOSTS variable" && { has_seq -H 127.0.0.1:3,localhost && has_seq -n 2 "$tmp/mnist-train" || fail "HOSTS variable and -n passed to mpirun: $argv"; }
FAKE_RC=3 launch run_mpirun_1.sh localhost:1
((rc == 3)) && pass "mpirun's status is the script's (3)" || fail "mpirun's status 3 became $rc"
launch run_mpirun_1.sh localhost:1 -- --help
expect_ok "trainer --help" && { [[ $argv == *$'\n--help' ]] || fail "'-- --help' not passed to the trainer: $argv"; }

# ---- network selection --------------------------------------------------------
MNIST_NET=eth7 launch run_mpirun_1.sh localhost:1
if expect_ok "MNIST_NET"; then
	if has_seq --mca btl_tcp_if_include eth7 --mca oob_tcp_if_include eth7 -x NCCL_SOCKET_IFNAME &&
		[[ $envs == *"NCCL_SOCKET_IFNAME==eth7"* ]]; then
		pass "MNIST_NET=eth7: btl_tcp_if_include, oob_tcp_if_include and NCCL_SOCKET_IFNAME (=eth7, exact) all set"
	else
		fail "MNIST_NET=eth7 not applied to MPI and NCCL: $argv / $envs"
	fi
fi
launch run_mpirun_1.sh localhost:1
[[ $argv != *if_include* && $envs == *"NCCL_SOCKET_IFNAME=<unset>"* ]] || fail "without MNIST_NET the network is still pinned: $argv"

# ---- hostfile launch ------------------------------------------------------------
hf=$tmp/hostfile.good
printf '127.0.0.1 slots=2\nlocalhost slots=3\n' >"$hf"
launch run_mpirun_2.sh "$hf" -x BAR=2 -- --epochs 1
if expect_ok "hostfile launch" && has_seq --hostfile "$hf" --output-filename log_output --merge-stderr-to-stdout &&
	has_seq -x BAR=2 "$tmp/mnist-train" --epochs 1 && [[ $argv != *$'\n-H\n'* ]]; then
	pass "run_mpirun_2.sh HOSTFILE: mpirun --hostfile HOSTFILE, arguments passed through"
else
	fail "run_mpirun_2.sh HOSTFILE: $argv"
fi
HOSTFILE=$hf NP=1 launch run_mpirun_2.sh
expect_ok "HOSTFILE variable" && { has_seq -n 1 --hostfile "$hf" || fail "HOSTFILE and NP variables: $argv"; }

# ---- refusals: what mpirun cannot know -------------------------------------------
expect_refused "no hosts" "no hosts" run_mpirun_1.sh
expect_refused "no hosts, only mpirun arguments" "no hosts" run_mpirun_1.sh -n 2
expect_refused "no hostfile" "no hostfile" run_mpirun_2.sh
expect_refused "no hostfile, only arguments" "no hostfile" run_mpirun_2.sh -- --epochs 1
DATA_PATH=$tmp/no-such-dir expect_refused "missing DATA_PATH" "DATA_PATH=$tmp/no-such-dir is not a directory" \
	run_mpirun_1.sh localhost:1
DATA_PATH=$tmp/no-such-dir expect_refused "missing DATA_PATH (hostfile)" "is not a directory" run_mpirun_2.sh "$hf"

checks_done "all launch-script checks passed"
