# tests/multinode/cluster.sh - sourced by the tests that need several nodes on
# one machine (namespaces.sh, and the Slurm and restart tests): a cluster of
# network namespaces joined by a bridge, an rsh agent that stands in for ssh,
# and the helpers that keep a test from leaving anything behind.
#
#   source tests/multinode/cluster.sh
#   cluster_args "$@"           # TRAINER SOURCE_DIR MNIST_DATA_DIR [MPIRUN], checked
#   cluster_init NAME           # a temporary directory $tmp, traps that clean up
#   cluster_up 2                # nodes 10.77.0.1 .. 10.77.0.N
#   "$on_node" 1 CMD...         # run CMD on node 1 (its namespace, host name mn-node1)
#
# The cluster: namespace $hub holds a bridge; node i (namespace ${node_ns[i]},
# address 10.77.0.i, host name mn-nodei in a UTS namespace of its own) holds one
# end of a veth pair ("mnet0") whose other end ("p<i>") is a bridge port, so
# every byte between the nodes crosses the bridge. Only addresses inside these
# namespaces are used; nothing outside them is contacted.
#
# The rsh agent ($tmp/agent, for mpirun's --mca plm_rsh_agent) runs
# "AGENT [options] HOST COMMAND..." in HOST's namespace with HOST's name, as
# ssh would, and logs each HOST to $tmp/agent.log; an unknown host, or a node
# taken down by node_down, answers as an unreachable ssh does (status 255).
# With NODE2_BIND_SRC and NODE2_BIND_DST in its environment, node 2 sees SRC at
# path DST (a mount namespace of its own): the same path, different data.
#
# Needs root (network and mount namespaces); otherwise, or where the kernel
# cannot make namespaces, bridges or veth pairs, the test exits 77 (skipped)
# and says why. Everything made (namespaces, the processes inside them, $tmp)
# is removed on exit, failure or interrupt.
#
# Provides: SUBNET, what checks.sh provides (fail/pass/skip/fatal, checks_done), cluster_args, cluster_init,
# cluster_up, node_down, reap, run_timed (sets $rc), port_bytes, field, and
# the variables tmp, hub, node_ns[], on_node, agent.

readonly SUBNET=10.77.0.0/24
# shellcheck source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

# cluster_args TRAINER SOURCE_DIR MNIST_DATA_DIR [MPIRUN]: a cluster test's
# arguments, checked; sets trainer, src, data (MNIST_Data: train/ and test/)
# and mpirun_bin (default mpirun).
cluster_args() {
	if (($# < 3)); then
		echo "usage: $0 TRAINER SOURCE_DIR MNIST_DATA_DIR [MPIRUN]" >&2
		exit 2
	fi
	trainer=$(readlink -f "$1")
	src=$(readlink -f "$2")
	data=$(readlink -f "$3")
	mpirun_bin=${4:-mpirun}
	[[ -x $trainer ]] || fatal "trainer '$trainer' is not built"
	[[ -d $data/train && -d $data/test ]] ||
		fatal "MNIST is not in $data (train/ and test/): scripts/get-mnist.sh fetches it"
	command -v "$mpirun_bin" >/dev/null || fatal "mpirun '$mpirun_bin' not found"
}

made_ns=()
cleanup_hooks=()

# Kill what still runs inside our namespaces (a hung mpirun, its daemons, ranks).
reap() {
	local ns pid
	for ns in ${made_ns[@]+"${made_ns[@]}"}; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
	done
}
cluster_cleanup() {
	local ns hook
	for hook in ${cleanup_hooks[@]+"${cleanup_hooks[@]}"}; do
		"$hook"
	done
	reap
	for ns in ${made_ns[@]+"${made_ns[@]}"}; do
		ip netns del "$ns" 2>/dev/null
	done
	[[ -n ${tmp:-} ]] && rm -rf "$tmp"
}

# cluster_init NAME: root and tools checked (else skipped), $tmp made, traps set.
cluster_init() {
	[[ $(id -u) == 0 ]] || skip "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN); CI runs as root"
	local tool
	for tool in ip unshare timeout mount; do
		command -v "$tool" >/dev/null || skip "'$tool' is not installed"
	done
	checks_tmp "$1"
	trap cluster_cleanup EXIT # the namespaces and what runs in them too, then $tmp
}

make_ns() {
	ip netns add "$1" 2>"$tmp/err" ||
		skip "cannot create network namespace $1: $(cat "$tmp/err")"
	made_ns+=("$1")
	ip -n "$1" link set lo up
}

# cluster_up N: nodes 1..N on the bridge, the agent and $on_node written.
cluster_up() {
	local n=$1 i tag=mnddp$$
	hub=$tag-hub
	node_ns=("")
	make_ns "$hub"
	ip -n "$hub" link add br0 type bridge 2>"$tmp/err" ||
		skip "cannot create a bridge: $(cat "$tmp/err")"
	ip -n "$hub" link set br0 up
	: >"$tmp/nodes"
	for ((i = 1; i <= n; i++)); do
		node_ns[i]=$tag-n$i
		make_ns "${node_ns[i]}"
		ip -n "$hub" link add "p$i" type veth peer name mnet0 netns "${node_ns[i]}" 2>"$tmp/err" ||
			skip "cannot create a veth pair: $(cat "$tmp/err")"
		ip -n "$hub" link set "p$i" master br0 up || fatal "cannot attach p$i to the bridge"
		ip -n "${node_ns[i]}" addr add "10.77.0.$i/24" dev mnet0 || fatal "cannot address node $i"
		ip -n "${node_ns[i]}" link set mnet0 up || fatal "cannot bring node $i up"
		echo "10.77.0.$i ${node_ns[i]} mn-node$i" >>"$tmp/nodes"
	done
	unshare --uts true 2>/dev/null || skip "cannot make UTS namespaces (unshare --uts)"
	: >"$tmp/agent.log"
	agent=$tmp/agent
	{
		printf '#!/bin/bash\n'
		printf 'log=%q nodes=%q\n' "$tmp/agent.log" "$tmp/nodes"
		cat <<'EOF'
# rsh agent of the test cluster (tests/multinode/cluster.sh): runs COMMAND in
# HOST's namespace with HOST's node name, as ssh would on a real node.
while (($#)) && [[ $1 == -* ]]; do shift; done
host=$1
shift
echo "$host" >>"$log"
read -r _ ns name < <(awk -v h="$host" '$1 == h || $3 == h' "$nodes")
if [[ -z ${ns:-} || -e $nodes.down.$name ]]; then
	echo "ssh: connect to host $host port 22: No route to host" >&2
	exit 255
fi
bind_src="" bind_dst=""
if [[ $name == mn-node2 ]]; then
	bind_src=${NODE2_BIND_SRC:-} bind_dst=${NODE2_BIND_DST:-}
fi
exec ip netns exec "$ns" unshare --uts --mount sh -c '
	hostname "$1" || exit 255
	if [ -n "$2" ]; then mount --bind "$2" "$3" || exit 255; fi
	exec sh -c "$4"' agent "$name" "$bind_src" "$bind_dst" "$*"
EOF
	} >"$agent"
	chmod +x "$agent"
	# $on_node I CMD...: run CMD on node I (its namespace and host name).
	on_node=$tmp/on-node
	cat >"$on_node" <<EOF
#!/bin/sh
# on-node I CMD...: CMD on node I of the test cluster
ns=\$(awk -v i="10.77.0.\$1" '\$1 == i { print \$2 }' $(printf '%q' "$tmp/nodes"))
name=mn-node\$1
shift
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec "\$@"' "\$name" "\$@"
EOF
	chmod +x "$on_node"
	pass "cluster: $n nodes (10.77.0.1-$n, mn-node1-$n) on a bridge in $hub"
}

# node_down I: node I is lost: every process in it killed, its link down, and
# the agent answers for it as for an unreachable host.
node_down() {
	local pid
	: >"$tmp/nodes.down.mn-node$1"
	for pid in $(ip netns pids "${node_ns[$1]}" 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null
	done
	ip -n "${node_ns[$1]}" link set mnet0 down
}

# node_up I: node I back after node_down: its link up, the agent answering for
# it again (the processes it lost stay gone).
node_up() {
	rm -f "$tmp/nodes.down.mn-node$1"
	ip -n "${node_ns[$1]}" link set mnet0 up
}

# Byte counters of node I's bridge port (tx: towards the node, rx: from it).
port_bytes() {
	ip netns exec "$hub" cat "/sys/class/net/p$1/statistics/$2_bytes"
}

# run_timed LIMIT OUT CMD...: run CMD (output to OUT); status in $rc, 124 on a hang.
run_timed() {
	local limit=$1 out=$2
	shift 2
	rc=0
	timeout -k 5 "$limit" "$@" >"$out" 2>&1 || rc=$?
	if ((rc == 124 || rc == 137)); then
		reap # the launcher's children outlive a killed launcher
		rc=124
	fi
}

# field KEY LINE: the value of KEY=VALUE in a summary line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
