#!/usr/bin/env bash
# run_mpirun_1.sh - start mnist-train on several nodes with `mpirun -H`, as the
# seed tutorial's run_mpirun_1.sh does (2 nodes x 8 ranks by default):
#
#   export DATA_PATH=./MNIST_Data/train/
#   bash run_mpirun_1.sh 192.168.0.1:8,192.168.0.2:8 -- --epochs 10
#
# DATA_PATH is exported to every rank, each rank's output (stderr merged) goes
# to log_output/1/rank.N/stdout, an old log_output is removed first, and
# --allow-run-as-root is added for root. Hosts, slots and the rank count are
# checked before mpirun starts, so a typo ends with one message and status 2
# instead of a hang. run_mpirun_2.sh (the hostfile launch) runs this script
# with --hostfile. Set-up and troubleshooting: docs/multi-node.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog=${_MNIST_LAUNCHER:-run_mpirun_1.sh}

usage() {
	if [[ $prog == run_mpirun_2.sh ]]; then
		cat <<EOF
Usage: bash run_mpirun_2.sh [HOSTFILE] [-n NP] [MPIRUN_ARGS...] [-- TRAINER_ARGS...]

Start mnist-train on the nodes listed in HOSTFILE (default \$HOSTFILE, else
./hostfile), one "HOST slots=N" line per node, as the seed's run_mpirun_2.sh.
EOF
	else
		cat <<EOF
Usage: bash run_mpirun_1.sh [HOSTS] [-n NP] [-H HOSTS | --hostfile FILE]
                            [MPIRUN_ARGS...] [-- TRAINER_ARGS...]

Start mnist-train on several nodes through mpirun, as the seed's run_mpirun_1.sh.

  HOSTS, -H HOSTS   nodes and slots (ranks per node): HOST:SLOTS,HOST:SLOTS
                    (default \$HOSTS, else the seed's DEVICE1_IP:8,DEVICE2_IP:8,
                    placeholders to replace with your nodes' addresses)
  --hostfile FILE   read the nodes from FILE instead (see ./hostfile)
EOF
	fi
	cat <<EOF
  -n NP             number of ranks (default \$NP, else every slot: 16 for the
                    seed's 2 nodes x 8)
  MPIRUN_ARGS       passed to mpirun as given (e.g. --mca btl tcp,self, -x VAR)
  -- TRAINER_ARGS   passed to mnist-train (e.g. -- --epochs 1 --batch-size 64)
  -h, --help        this text

Environment:
  DATA_PATH       training data, the same path on every node
                  (default ./MNIST_Data/train/); exported to every rank
  MNIST_NET       network interface(s) for all job traffic, e.g. eth1: sets MPI's
                  btl_tcp_if_include and oob_tcp_if_include and NCCL_SOCKET_IFNAME
  TRAINER         the program, the same path on every node
                  (default $here/build/mnist-train)
  LOG_DIR         output directory (default log_output): LOG_DIR/1/rank.N/stdout
  MNIST_SSH_OPTS  ssh options for starting the remote daemons (default
                  "-o BatchMode=yes -o ConnectTimeout=10": fail, never wait for a
                  password); empty leaves mpirun's own; unused when an rsh
                  agent or its arguments are set (--mca plm_rsh_agent ...)
  MNIST_HOST_CHECK 0 skips the check that every host name resolves
  MPIRUN          the mpirun program (default mpirun)

Exit status: mpirun's (the trainer's: 0 done, 1 failure, 2 bad input), or 2
when the arguments, hosts or hostfile are wrong.
EOF
}

fail() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 2
}

is_count() { [[ $1 =~ ^[1-9][0-9]{0,5}$ ]]; }

# ---- arguments ------------------------------------------------------------
hosts=${HOSTS:-DEVICE1_IP:8,DEVICE2_IP:8}
hostfile=""
np=${NP:-}
have_H=0
mpi_args=()
trainer_args=()
first=1
while (($#)); do
	arg=$1
	case $arg in
	--)
		shift
		trainer_args=("$@")
		break
		;;
	-h | --help)
		usage
		exit 0
		;;
	-n | -np | --np | -H | -host | --host | -hostfile | --hostfile | -machinefile | --machinefile)
		(($# >= 2)) || fail "$arg needs a value (see --help)"
		case $arg in
		-n | -np | --np) np=$2 ;;
		-H | -host | --host)
			hosts=$2
			have_H=1
			;;
		*) hostfile=$2 ;;
		esac
		shift 2
		;;
	*)
		if ((first)) && [[ $arg != -* ]]; then
			hosts=$arg
			have_H=1
		else
			mpi_args+=("$arg")
		fi
		shift
		;;
	esac
	first=0
done

has_mpi_arg() { # has_mpi_arg PATTERN: any pass-through argument matching the glob
	local a
	for a in ${mpi_args[@]+"${mpi_args[@]}"}; do
		# shellcheck disable=SC2053
		[[ $a == $1 ]] && return 0
	done
	return 1
}

if [[ -n $hostfile ]] && ((have_H)); then
	fail "give the nodes either with -H/HOSTS or with --hostfile, not both"
fi
if [[ -n $np ]] && ! is_count "$np"; then
	fail "-n/NP: '$np' is not a rank count (a positive integer)"
fi

# ---- nodes and slots ------------------------------------------------------
node_names=()
total_slots=0
slots_known=1

add_node() { # add_node WHERE HOST SLOTS (SLOTS empty: unknown)
	local where=$1 host=$2 slots=$3
	[[ -n $host ]] || fail "$where: empty host name"
	[[ $host =~ ^[A-Za-z0-9._:@%-]+$ ]] || fail "$where: '$host' is not a host name or address"
	if [[ -z $slots ]]; then
		slots_known=0
	else
		is_count "$slots" || fail "$where: slots '$slots' for $host is not a positive integer"
		total_slots=$((total_slots + slots))
	fi
	node_names+=("$host")
}

if [[ -n $hostfile ]]; then
	[[ -f $hostfile && -r $hostfile ]] || fail "hostfile '$hostfile' does not exist or cannot be read"
	lineno=0
	while IFS= read -r line || [[ -n $line ]]; do
		lineno=$((lineno + 1))
		line=${line%%#*}
		# "slots = 8" is "slots=8"
		line=$(printf '%s' "$line" | sed -E 's/[[:space:]]*=[[:space:]]*/=/g')
		read -r -a words <<<"$line"
		((${#words[@]})) || continue
		where="$hostfile line $lineno"
		host=${words[0]}
		[[ $host != *=* ]] || fail "$where: expected 'HOST slots=N', found '${words[0]}' where the host name goes"
		slots=""
		max=""
		for w in "${words[@]:1}"; do
			case $w in
			slots=* | count=* | cpu=*)
				slots=${w#*=}
				[[ -n $slots ]] || fail "$where: '$w' has no value (expected 'HOST slots=N')"
				;;
			max_slots=* | max-slots=* | slots_max=* | slots-max=*)
				max=${w#*=}
				[[ -n $max ]] || fail "$where: '$w' has no value"
				;;
			*=*) ;; # other Open MPI keys: mpirun judges them
			*) fail "$where: unexpected '$w' (expected 'HOST slots=N')" ;;
			esac
		done
		add_node "$where" "$host" "$slots"
		if [[ -n $max ]]; then
			is_count "$max" || fail "$where: max_slots '$max' is not a positive integer"
			[[ -z $slots ]] || ((max >= slots)) || fail "$where: max_slots=$max is less than slots=$slots"
		fi
	done <"$hostfile"
	((${#node_names[@]})) || fail "hostfile '$hostfile' lists no hosts (one 'HOST slots=N' line per node)"
else
	IFS=',' read -r -a entries <<<"$hosts"
	((${#entries[@]})) || fail "-H/HOSTS is empty (expected HOST:SLOTS,HOST:SLOTS)"
	[[ $hosts != *, && $hosts != ,* && $hosts != *,,* ]] || fail "-H/HOSTS '$hosts': empty entry (expected HOST:SLOTS,HOST:SLOTS)"
	for e in "${entries[@]}"; do
		if [[ $e == *:* ]]; then
			[[ -n ${e##*:} ]] || fail "-H entry '$e': slots missing after ':'"
			add_node "-H entry '$e'" "${e%:*}" "${e##*:}"
		else
			add_node "-H entry '$e'" "$e" 1 # mpirun's default for -H
		fi
	done
fi

# Every host must resolve here: mpirun starts the remote daemons from here.
resolves() {
	local h=$1 alias
	[[ $h == localhost ]] && return 0
	timeout 10 getent ahosts "$h" >/dev/null 2>&1 && return 0
	# An ssh alias (Host ... HostName ... in ~/.ssh/config) resolves through its HostName.
	alias=$(timeout 5 ssh -G "$h" 2>/dev/null | awk '$1 == "hostname" { print $2; exit }') || true
	[[ -n $alias && $alias != "$h" ]] && timeout 10 getent ahosts "$alias" >/dev/null 2>&1
}
for h in "${node_names[@]}"; do
	case $h in
	DEVICE1_IP | DEVICE2_IP | DEVICE1 | DEVICE2)
		fail "host '$h' is the seed's placeholder: give your nodes' addresses (-H HOST:SLOTS,..., HOSTS=..., or edit the hostfile)"
		;;
	esac
done
if [[ ${MNIST_HOST_CHECK:-1} != 0 ]]; then
	for h in "${node_names[@]}"; do
		resolves "$h" ||
			fail "unknown host '$h': it does not resolve here (check the name, /etc/hosts or DNS; MNIST_HOST_CHECK=0 skips this check)"
	done
fi

if [[ -z $np ]]; then
	((slots_known)) || fail "some hosts have no slots=N, so the rank count is unknown: give -n NP (or NP=...)"
	np=$total_slots
fi
if ((slots_known)) && ((np > total_slots)) && ! has_mpi_arg --oversubscribe && ! has_mpi_arg -oversubscribe; then
	fail "$np ranks asked for, but the hosts give only $total_slots slot$( ((total_slots == 1)) || echo s): lower -n/NP, add slots, or pass --oversubscribe"
fi

# ---- environment ----------------------------------------------------------
trainer=${TRAINER:-$here/build/mnist-train}
[[ -x $trainer ]] || fail "trainer '$trainer' is missing or not executable: build it (cmake -S . -B build && cmake --build build -j) or set TRAINER; it must be at the same path on every node"

log_dir=${LOG_DIR:-log_output}
case $log_dir in
"" | / | . | .. | "$HOME" | "$here") fail "LOG_DIR '$log_dir' would remove more than the logs: name a directory of its own" ;;
esac

export DATA_PATH=${DATA_PATH:-./MNIST_Data/train/}

mpirun=${MPIRUN:-mpirun}
cmd=("$mpirun" -n "$np")
if [[ -n $hostfile ]]; then
	cmd+=(--hostfile "$hostfile")
else
	cmd+=(-H "$hosts")
fi
cmd+=(--output-filename "$log_dir" --merge-stderr-to-stdout)
if [[ $(id -u) == 0 ]] && ! has_mpi_arg --allow-run-as-root && ! has_mpi_arg -allow-run-as-root; then
	cmd+=(--allow-run-as-root)
fi

if [[ -n ${MNIST_NET:-} ]]; then
	[[ $MNIST_NET != */* ]] || fail "MNIST_NET='$MNIST_NET': give interface names (e.g. eth1), not a subnet: NCCL_SOCKET_IFNAME takes names only (docs/multi-node.md)"
	[[ $MNIST_NET =~ ^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$ ]] || fail "MNIST_NET='$MNIST_NET' is not an interface name or a comma-separated list of them"
	export NCCL_SOCKET_IFNAME="=$MNIST_NET" # '=': exact names, as MPI takes them
	cmd+=(--mca btl_tcp_if_include "$MNIST_NET" --mca oob_tcp_if_include "$MNIST_NET" -x NCCL_SOCKET_IFNAME)
fi

ssh_opts=${MNIST_SSH_OPTS--o BatchMode=yes -o ConnectTimeout=10}
# Only for mpirun's own ssh: not when an rsh agent or its arguments are set
# (plm_rsh_agent and its synonyms orte_rsh_agent, pls_rsh_agent), here or in the environment.
if [[ -n $ssh_opts ]] && ! has_mpi_arg '*rsh_agent*' && ! has_mpi_arg '*rsh_args*' &&
	! env | grep -qE '^OMPI_MCA_[a-z]+_rsh_(agent|args)='; then
	cmd+=(--mca plm_rsh_args "$ssh_opts")
fi

cmd+=(-x DATA_PATH)
cmd+=(${mpi_args[@]+"${mpi_args[@]}"} "$trainer" ${trainer_args[@]+"${trainer_args[@]}"})

# ---- run ------------------------------------------------------------------
rm -rf -- "$log_dir"
printf '%s: DATA_PATH=%s' "$prog" "$DATA_PATH" >&2
printf ' %q' "${cmd[@]}" >&2
printf '\n' >&2
rc=0
"${cmd[@]}" || rc=$?
printf '%s: mpirun exited with status %d; each rank'"'"'s log is %s/1/rank.N/stdout on its node\n' \
	"$prog" "$rc" "$log_dir" >&2
exit "$rc"
