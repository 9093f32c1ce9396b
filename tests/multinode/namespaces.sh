#!/usr/bin/env bash
# tests/multinode/namespaces.sh - a two-node cluster on one machine, started
# through run_mpirun_1.sh (-H) and run_mpirun_2.sh (hostfile).
#
#   bash tests/multinode/namespaces.sh TRAINER SOURCE_DIR MNIST_DATA_DIR [MPIRUN]
#   (registered by tests/cmake/60-multinode.cmake: ctest -L multinode)
#
# The cluster: network namespace HUB holds a bridge; NODE1 (10.77.0.1) and
# NODE2 (10.77.0.2) each hold one end of a veth pair ("mnet0") whose other end
# is a bridge port, so every byte between the nodes crosses the bridge. Each
# node has its own host name (a UTS namespace). mpirun runs on node 1, as a
# user runs it on the first node; an rsh agent stands in for ssh and runs the
# remote daemon inside node 2's namespace. Only addresses inside these
# namespaces are used; nothing outside them is contacted.
#
# Checked, for 2 nodes x 2 ranks:
#   - both launch styles finish, each rank's log_output file holds the seed's
#     "epoch: E, step: S, loss is L" lines, identical to a single-node 4-rank
#     run with the same seed, and rank 0's param_crc32 and test_accuracy equal
#     that run's;
#   - the bridge port of node 2 carried at least the gradient allreduce
#     traffic (interface byte counters), and node 2 was started by the agent;
#   - rank 0 printed the placement of both nodes;
#   - --exact (issue 44): the same job on 2 nodes x 2 ranks and on 1 rank ends
#     at one param_crc32 and test_accuracy;
#   - the same data path holding different data on node 2 is refused at
#     start-up: every rank exits 2, rank 0 names the ranks and the checksum;
#   - a wrong hostfile or host list (unknown host, bad slots, more ranks than
#     slots, a node that does not answer) ends with a message, under a timeout.
#
# The cluster is tests/multinode/cluster.sh's: needs root, else skipped (77)
# with the reason; everything it makes is removed on exit, failure or interrupt.
set -uo pipefail

readonly SEED_PARAMS=7850 # --model seed: Dense 784 -> 10, weights and biases
readonly TRAIN_ARGS=(--epochs 1 --limit 4096 --seed 5)
readonly RUN_TIMEOUT=120 # seconds for one launch; a hang fails the test

# shellcheck source=cluster.sh
source "$(dirname "$0")/cluster.sh"
cluster_args "$@"
train_dir=$data/train
labels=$(ls "$train_dir"/train-labels-idx1-ubyte "$train_dir"/train-labels-idx1-ubyte.gz 2>/dev/null | head -n 1)
[[ -n $labels ]] || fatal "no train-labels-idx1-ubyte[.gz] in $train_dir: scripts/get-mnist.sh fetches it"
cluster_init multinode
cluster_up 2

# mpi_yield_when_idle 1: the hostfile's 2 slots a node are 4 ranks on however few cores the
# machine has, and Open MPI, not seeing them oversubscribed, would have a waiting rank spin
# without giving its core to the rank it waits for (5.5 s of CPU to 2.4, 16 s to 9 of wall,
# under load on 2 cores; every result unchanged).
# shellcheck disable=SC2054 # commas belong to the values
mpi_common=(--mca plm_rsh_agent "$agent" --mca btl tcp,self --mca pml ob1
	--bind-to none --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1)

# ---- reference: one node, 4 ranks --------------------------------------------
mkdir -p "$tmp/ref"
run_timed "$RUN_TIMEOUT" "$tmp/ref/out" "$on_node" 1 env DATA_PATH="$train_dir/" \
	OPENBLAS_NUM_THREADS=1 "$mpirun_bin" --allow-run-as-root --oversubscribe --bind-to none \
	-n 4 -x DATA_PATH -x OPENBLAS_NUM_THREADS --output-filename "$tmp/ref/log_output" \
	--merge-stderr-to-stdout "$trainer" "${TRAIN_ARGS[@]}"
ref_summary=$(grep -h '^summary: ' "$tmp/ref/log_output/1/rank.0/stdout" 2>/dev/null)
if ((rc != 0)) || [[ -z $ref_summary ]]; then
	cat "$tmp/ref/out" "$tmp"/ref/log_output/1/rank.*/stdout >&2 2>/dev/null
	fatal "the single-node reference run failed (status $rc)"
fi
ref_crc=$(field param_crc32 "$ref_summary")
ref_acc=$(field test_accuracy "$ref_summary")
steps=$(field steps_per_epoch "$ref_summary")
pass "reference, 1 node x 4 ranks: test_accuracy=$ref_acc param_crc32=$ref_crc steps_per_epoch=$steps"

# hostfile_run DIR TRAINER_ARGS...: run_mpirun_2.sh on node 1 in DIR with DIR/hostfile, over
# the cluster's subnet; the launcher's output in DIR/out, its status in $rc.
hostfile_run() {
	local dir=$1
	shift
	(cd "$dir" && run_timed "$RUN_TIMEOUT" "$dir/out" "$on_node" 1 \
		env TRAINER="$trainer" DATA_PATH="$train_dir/" \
		bash "$src/run_mpirun_2.sh" ./hostfile "${mpi_common[@]}" \
		--mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" -- "$@"
		exit "$rc")
	rc=$?
}

# The seed's lines of one rank's log, in order.
loss_lines() {
	grep -E '^epoch: [0-9]+, step: [0-9]+, loss is ' "$1" 2>/dev/null
}

# check_run NAME DIR: the checks every good two-node run must pass.
check_run() {
	local name=$1 dir=$2 r log lines expect summary crc acc tx rx min
	if ((rc != 0)); then
		fail "$name: launcher exited with status $rc (want 0)"
		sed 's/^/    /' "$dir/out" >&2
		for log in "$dir"/log_output/1/rank.*/stdout; do
			[[ -f $log ]] && sed "s|^|    $log: |" "$log" >&2
		done
		return
	fi
	for r in 0 1 2 3; do
		log=$dir/log_output/1/rank.$r/stdout
		if [[ ! -f $log ]]; then
			fail "$name: rank $r wrote no log_output/1/rank.$r/stdout"
			continue
		fi
		lines=$(loss_lines "$log")
		expect=$(loss_lines "$tmp/ref/log_output/1/rank.$r/stdout")
		if [[ -z $lines ]] || ! grep -qE '^epoch: 0, step: 0, loss is [0-9]' <<<"$lines"; then
			fail "$name: rank $r's log has no seed lines ('epoch: 0, step: 0, loss is ...')"
		elif [[ $lines != "$expect" ]]; then
			fail "$name: rank $r's loss lines differ from the single-node run"
			diff <(echo "$expect") <(echo "$lines") | sed 's/^/    /' >&2
		fi
	done
	log=$dir/log_output/1/rank.0/stdout
	summary=$(grep -h '^summary: ' "$log" 2>/dev/null)
	crc=$(field param_crc32 "$summary")
	acc=$(field test_accuracy "$summary")
	if [[ -z $summary ]]; then
		fail "$name: rank 0 printed no summary line"
	elif [[ $crc != "$ref_crc" || $acc != "$ref_acc" ]]; then
		fail "$name: param_crc32=$crc test_accuracy=$acc, single node: param_crc32=$ref_crc test_accuracy=$ref_acc"
	else
		pass "$name: 4 ranks' seed lines and param_crc32=$crc test_accuracy=$acc equal the single-node run"
	fi
	if grep -q 'placement: 4 ranks on 2 hosts' "$log" &&
		grep -q 'placement: mn-node1: ranks 0-1 on cpu' "$log" &&
		grep -q 'placement: mn-node2: ranks 2-3 on cpu' "$log"; then
		pass "$name: rank 0 printed the placement (mn-node1: ranks 0-1, mn-node2: ranks 2-3)"
	else
		fail "$name: rank 0's placement lines are missing or wrong:"
		grep 'placement' "$log" | sed 's/^/    /' >&2
	fi
	if grep -qx '10.77.0.2' "$tmp/agent.log" 2>/dev/null; then
		pass "$name: node 2's daemon was started through the rsh agent"
	else
		fail "$name: the rsh agent never started node 2"
	fi
	# Node 2 must receive node 1's gradient sum and send its own every step.
	tx=$((tx_after - tx_before))
	rx=$((rx_after - rx_before))
	min=$((steps * SEED_PARAMS * 4))
	if ((tx >= min && rx >= min)); then
		pass "$name: node 2's bridge port carried $tx bytes to and $rx bytes from node 2 (at least $min each)"
	else
		fail "$name: node 2's bridge port carried $tx bytes to and $rx bytes from node 2; the gradients alone need $min each way"
	fi
}

# ---- launch 1: run_mpirun_1.sh -H, network chosen by MNIST_NET ----------------
mkdir -p "$tmp/h"
: >"$tmp/agent.log"
tx_before=$(port_bytes 2 tx) rx_before=$(port_bytes 2 rx)
(cd "$tmp/h" && run_timed "$RUN_TIMEOUT" "$tmp/h/out" "$on_node" 1 \
	env TRAINER="$trainer" DATA_PATH="$train_dir/" MNIST_NET=mnet0 \
	bash "$src/run_mpirun_1.sh" 10.77.0.1:2,10.77.0.2:2 "${mpi_common[@]}" -- "${TRAIN_ARGS[@]}"
	exit "$rc")
rc=$?
tx_after=$(port_bytes 2 tx) rx_after=$(port_bytes 2 rx)
check_run "run_mpirun_1.sh 10.77.0.1:2,10.77.0.2:2 (MNIST_NET=mnet0)" "$tmp/h"
grep -q -- '--mca btl_tcp_if_include mnet0 --mca oob_tcp_if_include mnet0 -x NCCL_SOCKET_IFNAME' "$tmp/h/out" ||
	fail "run_mpirun_1.sh did not pin the network to MNIST_NET=mnet0"

# ---- launch 2: run_mpirun_2.sh HOSTFILE, network chosen by mpirun args --------
mkdir -p "$tmp/hf"
cat >"$tmp/hf/hostfile" <<'EOF'
# the test cluster
10.77.0.1 slots=2
10.77.0.2 slots=2   # node 2
EOF
: >"$tmp/agent.log"
tx_before=$(port_bytes 2 tx) rx_before=$(port_bytes 2 rx)
hostfile_run "$tmp/hf" "${TRAIN_ARGS[@]}"
tx_after=$(port_bytes 2 tx) rx_after=$(port_bytes 2 rx)
check_run "run_mpirun_2.sh hostfile (2 x slots=2, $SUBNET)" "$tmp/hf"

# ---- --exact: 2 nodes x 2 ranks end at 1 rank's bits (issue 44) ---------------
# The same job at 1 rank on node 1 and at 2 x 2 ranks through run_mpirun_2.sh:
# one param_crc32 (and so one test_accuracy), bit for bit (docs/exact.md).
readonly EXACT_ARGS=(--exact --global-batch 96 --micro-batch 8 --limit 960 --epochs 1 --seed 5)
mkdir -p "$tmp/x1" "$tmp/x4"
run_timed "$RUN_TIMEOUT" "$tmp/x1/out" "$on_node" 1 env DATA_PATH="$train_dir/" \
	OPENBLAS_NUM_THREADS=1 "$mpirun_bin" --allow-run-as-root --bind-to none -n 1 \
	-x DATA_PATH -x OPENBLAS_NUM_THREADS "$trainer" "${EXACT_ARGS[@]}"
x1_summary=$(grep -h '^summary: ' "$tmp/x1/out")
cp "$tmp/hf/hostfile" "$tmp/x4/hostfile"
hostfile_run "$tmp/x4" "${EXACT_ARGS[@]}"
x4_summary=$(grep -h '^summary: ' "$tmp/x4/log_output/1/rank.0/stdout" 2>/dev/null)
x1_crc=$(field param_crc32 "$x1_summary") x4_crc=$(field param_crc32 "$x4_summary")
if ((rc == 0)) && [[ -n $x1_crc && $x4_crc == "$x1_crc" ]] &&
	[[ $(field test_accuracy "$x4_summary") == "$(field test_accuracy "$x1_summary")" ]] &&
	grep -q 'placement: mn-node2: ranks 2-3 on cpu' "$tmp/x4/log_output/1/rank.0/stdout"; then
	pass "--exact: 2 nodes x 2 ranks (run_mpirun_2.sh) param_crc32=$x4_crc, 1 rank on node 1 the same"
else
	fail "--exact: 2 nodes x 2 ranks: status $rc, param_crc32=${x4_crc:-none}; 1 rank: param_crc32=${x1_crc:-none}"
	cat "$tmp/x1/out" "$tmp/x4/out" 2>/dev/null | tail -n 20 | sed 's/^/    /' >&2
fi

# ---- different data on node 2: refused by every rank with status 2 -----------
mkdir -p "$tmp/bad"
# node 2's labels: the same file with its first label changed (still 0..9)
gzip -dcf "$labels" >"$tmp/bad/labels" || fatal "cannot copy $labels"
first=$(od -An -tu1 -j 8 -N 1 "$tmp/bad/labels" | tr -d ' ')
printf "\\$(printf '%03o' $(((first + 1) % 10)))" |
	dd of="$tmp/bad/labels" bs=1 seek=8 conv=notrunc status=none
cat >"$tmp/bad/trainer" <<EOF
#!/bin/sh
# the trainer, recording each rank's exit status
$(printf '%q' "$trainer") "\$@"
rc=\$?
echo \$rc >$(printf '%q' "$tmp/bad")/status.\$OMPI_COMM_WORLD_RANK
exit \$rc
EOF
chmod +x "$tmp/bad/trainer"
# bad_data_run DIR TRAINER MPIRUN_ARGS...: 2 x 2 ranks, node 2 seeing the changed labels.
bad_data_run() {
	local dir=$1 prog=$2
	shift 2
	mkdir -p "$dir"
	(cd "$dir" && run_timed "$RUN_TIMEOUT" "$dir/out" "$on_node" 1 \
		env TRAINER="$prog" DATA_PATH="$train_dir/" \
		NODE2_BIND_SRC="$tmp/bad/labels" NODE2_BIND_DST="$labels" \
		bash "$src/run_mpirun_1.sh" 10.77.0.1:2,10.77.0.2:2 "${mpi_common[@]}" "$@" \
		-- "${TRAIN_ARGS[@]}"
		exit "$rc")
	rc=$?
}
# With mpirun told not to end the job at the first failure, every rank's own status shows.
bad_data_run "$tmp/bad/each" "$tmp/bad/trainer" --mca orte_abort_on_non_zero_status 0
statuses=$(for r in 0 1 2 3; do cat "$tmp/bad/status.$r" 2>/dev/null || echo none; done | tr '\n' ' ')
logs=$tmp/bad/each/log_output/1
if ((rc != 124)) && [[ $statuses == "2 2 2 2 " ]] &&
	grep -q 'start-up check: ranks 2-3 on mn-node2 differ from rank 0 on mn-node1: train_crc32=' "$logs/rank.0/stdout" &&
	grep -q 'rank 1 on mn-node1: start-up check failed: stopping because ranks 2-3 differ from rank 0 in train_crc32' "$logs/rank.1/stdout" &&
	grep -q 'rank 2 on mn-node2: start-up check failed: this rank differs from rank 0 in train_crc32' "$logs/rank.2/stdout" &&
	grep -q 'rank 3 on mn-node2: start-up check failed: this rank differs from rank 0 in train_crc32' "$logs/rank.3/stdout" &&
	! grep -q '^epoch: ' "$logs"/rank.*/stdout; then
	pass "different data on node 2: refused before training, every rank exited 2, rank 0 named ranks 2-3 and train_crc32"
else
	fail "different data on node 2: rank statuses: $statuses(want 2 2 2 2), launcher status $rc, or messages missing:"
	cat "$tmp/bad/each/out" 2>/dev/null | sed 's/^/    /' >&2
fi
# As launched by default, the launcher's status is the ranks' 2.
bad_data_run "$tmp/bad/default" "$trainer"
if ((rc == 2)); then
	pass "different data on node 2: run_mpirun_1.sh exited with status 2"
else
	fail "different data on node 2: run_mpirun_1.sh exited with status $rc (want 2)"
	sed 's/^/    /' "$tmp/bad/default/out" >&2
fi

# ---- wrong hosts: a message and a non-zero status, never a hang ---------------
# wrong_case NAME WANT_STATUS MESSAGE HOSTFILE_TEXT LAUNCHER ARGS...
#   HOSTFILE_TEXT goes to ./hostfile; WANT_STATUS "nonzero" accepts any failure.
wrong_case() {
	local name=$1 want=$2 message=$3 text=$4
	shift 4
	local dir
	dir=$(mktemp -d "$tmp/wrong.XXXX")
	printf '%b' "$text" >"$dir/hostfile"
	(cd "$dir" && run_timed 60 "$dir/out" "$on_node" 1 \
		env TRAINER="$trainer" DATA_PATH="$train_dir/" bash "$@" "${mpi_common[@]}" -- "${TRAIN_ARGS[@]}"
		exit "$rc")
	rc=$?
	if ((rc == 124)); then
		fail "$name: still running after 60 s (a hang)"
	elif [[ $want == nonzero && $rc == 0 ]] || [[ $want != nonzero && $rc != "$want" ]]; then
		fail "$name: status $rc, want $want"
		sed 's/^/    /' "$dir/out" >&2
	elif ! grep -qF -- "$message" "$dir/out"; then
		fail "$name: status $rc but no message '$message':"
		sed 's/^/    /' "$dir/out" >&2
	else
		pass "$name: status $rc, \"$(grep -m1 -F -- "$message" "$dir/out" | cut -c1-150)\""
	fi
}
# What the launch scripts leave to mpirun: it must say so and fail, never hang.
wrong_case "hostfile with an unknown host" nonzero "ORTE was unable to reliably start one or more daemons" \
	'10.77.0.1 slots=2\nno-such-node.invalid slots=2\n' "$src/run_mpirun_2.sh" ./hostfile
wrong_case "more ranks than slots" nonzero "There are not enough slots available in the system" \
	'10.77.0.1 slots=2\n10.77.0.2 slots=2\n' "$src/run_mpirun_2.sh" ./hostfile -n 6
wrong_case "hostfile with a node that does not answer" nonzero "ORTE was unable to reliably start one or more daemons" \
	'10.77.0.1 slots=2\n10.77.0.9 slots=2\n' "$src/run_mpirun_2.sh" ./hostfile
wrong_case "no hostfile given" 2 "no hostfile" '' "$src/run_mpirun_2.sh"

checks_done "all multi-node checks passed"
