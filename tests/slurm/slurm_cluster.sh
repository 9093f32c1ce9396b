# shellcheck shell=bash
# tests/slurm/slurm_cluster.sh - sourced after tests/multinode/cluster.sh by
# the Slurm tests: a Slurm cluster on the namespace cluster's nodes, started
# and always stopped by the test.
#
#   source tests/multinode/cluster.sh
#   source tests/slurm/slurm_cluster.sh
#   cluster_init slurm; cluster_up 2
#   slurm_up 2                  # munged, slurmctld on node 1, a slurmd on nodes 1..N
#   "$on_node" 1 srun -n 2 --mpi=pmix ...   # clients on node 1, SLURM_CONF exported
#   slurm_down                  # stop the daemons, check nothing is left (also on exit)
#
# The cluster: munged (as the munge user, its own key and socket in $tmp/munge)
# in the hub's namespace; slurmctld in node 1's namespace (SlurmctldHost
# mn-node1, 10.77.0.1); slurmd -N mn-nodeI in node I's namespace and UTS
# namespace (NodeAddr 10.77.0.I), CPUs=2 and four GPUs (Gres=gpu:4: device
# nodes in $tmp, copies of /dev/null that nothing opens, so that --gpus-per-task
# works as on a GPU cluster: Slurm gives each task its CUDA_VISIBLE_DEVICES).
# Its ports are Slurm's defaults, inside the namespaces, so nothing outside can
# clash with them; its state, spool, logs and configuration are in $tmp/slurm;
# no job accounting. The daemons run with the host's /sys (nsenter, not ip
# netns exec, which mounts a /sys without cgroups that slurmd refuses to start
# on).
#
# Provides: slurm_up, slurm_down, slurm_job_state, slurm_wait_job, slurm_logs,
# and SLURM_CONF (exported), slurm_dir.

slurm_pids=()   # the daemons: slurmd's, slurmctld, munged (stopped in reverse order)
slurm_names=()

# slurm_start NAME WHERE CMD...: a daemon in the foreground of a background job,
# in the hub's namespace (WHERE "hub") or in node WHERE's, with that node's name,
# the host's /sys, a TmpFS of its own (Slurm's PMIx plugin keeps per-step
# directories there, under names that would clash between nodes) and a /dev/shm
# of its own, as a machine has: Open MPI's shared-memory transport names its
# segments there by host name, job and local rank, and under srun the job comes
# from Slurm's job number, so two clusters' job 1 on their mn-node1 (two Slurm
# tests side by side) would share segments and crash each other's ranks. Its pid
# is recorded: the daemon's own, as nsenter, unshare and sh exec.
slurm_start() {
	local name=$1 where=$2
	shift 2
	if [[ $where == hub ]]; then
		nsenter --net="/run/netns/$hub" "$@" >"$slurm_dir/$name.out" 2>&1 &
	else
		mkdir -p "$slurm_dir/tmpfs" "$slurm_dir/tmpfs.mn-node$where"
		# shellcheck disable=SC2016 # expanded by that sh
		nsenter --net="/run/netns/${node_ns[where]}" unshare --uts --mount sh -c \
			'hostname "$0" && mount --bind "$1" "$2" && mount -t tmpfs -o mode=1777 shm /dev/shm &&
			 shift 2 && exec "$@"' "mn-node$where" \
			"$slurm_dir/tmpfs.mn-node$where" "$slurm_dir/tmpfs" "$@" >"$slurm_dir/$name.out" 2>&1 &
	fi
	slurm_pids+=($!)
	slurm_names+=("$name")
}

# slurm_up N: the cluster on nodes 1..N of cluster_up; waits until sinfo shows N idle nodes.
slurm_up() {
	local n=$1 i tool
	for tool in munged slurmctld slurmd srun sbatch salloc sinfo scontrol nsenter setpriv; do
		command -v "$tool" >/dev/null ||
			fatal "'$tool' is not installed: the Slurm tests need Debian's slurm-wlm and munge (scripts/test.sh installs them: MNIST_DDP_SETUP=test bash scripts/setup.sh)"
	done
	id munge >/dev/null 2>&1 || fatal "no 'munge' user: install Debian's munge package"
	slurm_dir=$tmp/slurm
	mkdir -p "$slurm_dir/state" "$slurm_dir/dev" || fatal "cannot make $slurm_dir"
	cleanup_hooks+=(slurm_down)

	# munged runs as the munge user, which must reach its socket through $tmp.
	local m=$tmp/munge
	chmod 711 "$tmp"
	mkdir -p "$m" && chmod 755 "$m"
	dd if=/dev/urandom of="$m/munge.key" bs=128 count=1 status=none || fatal "cannot write a munge key"
	chmod 400 "$m/munge.key"
	chown -R munge:munge "$m" || fatal "cannot give $m to the munge user"
	slurm_start munged hub setpriv --reuid munge --regid munge --init-groups \
		munged --foreground --socket="$m/munge.socket" --key-file="$m/munge.key" \
		--log-file="$m/munged.log" --pid-file="$m/munged.pid" --seed-file="$m/munged.seed"

	for i in 0 1 2 3; do
		mknod "$slurm_dir/dev/gpu$i" c 1 3 || fatal "cannot make the stand-in GPU device nodes"
	done
	export SLURM_CONF=$slurm_dir/slurm.conf
	{
		echo "# the test cluster of tests/slurm/slurm_cluster.sh"
		echo "ClusterName=mnistddp"
		echo "SlurmctldHost=mn-node1(10.77.0.1)"
		echo "SlurmctldPort=6817"
		echo "SlurmdPort=6818"
		echo "SlurmUser=root"
		echo "AuthType=auth/munge"
		echo "AuthInfo=socket=$m/munge.socket"
		echo "CredType=cred/munge"
		echo "StateSaveLocation=$slurm_dir/state"
		echo "SlurmdSpoolDir=$slurm_dir/spool/%n"
		echo "TmpFS=$slurm_dir/tmpfs"
		echo "SlurmctldPidFile=$slurm_dir/slurmctld.pid"
		echo "SlurmdPidFile=$slurm_dir/slurmd.%n.pid"
		echo "SlurmctldLogFile=$slurm_dir/slurmctld.log"
		echo "SlurmdLogFile=$slurm_dir/slurmd.%n.log"
		echo "ProctrackType=proctrack/linuxproc"
		echo "TaskPlugin=task/none"
		echo "SelectType=select/cons_tres"
		echo "SelectTypeParameters=CR_Core"
		echo "SchedulerType=sched/builtin"
		echo "MpiDefault=none"
		echo "ReturnToService=2"
		echo "AccountingStorageType=accounting_storage/none"
		echo "JobAcctGatherType=jobacct_gather/none"
		echo "JobCompType=jobcomp/none"
		echo "SwitchType=switch/none"
		echo "MailProg=/bin/true"
		echo "GresTypes=gpu"
		for ((i = 1; i <= n; i++)); do
			echo "NodeName=mn-node$i NodeAddr=10.77.0.$i CPUs=2 Gres=gpu:4 State=UNKNOWN"
		done
		echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
	} >"$SLURM_CONF"
	echo "Name=gpu File=$slurm_dir/dev/gpu[0-3]" >"$slurm_dir/gres.conf"

	slurm_start slurmctld 1 slurmctld -D -f "$SLURM_CONF"
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$slurm_dir/spool/mn-node$i"
		slurm_start "slurmd-mn-node$i" "$i" slurmd -D -N "mn-node$i" -f "$SLURM_CONF"
	done

	local idle="" t dead=""
	for ((t = 0; t < 300; t++)); do
		idle=$("$on_node" 1 sinfo -h -t idle -o '%D' 2>/dev/null)
		[[ $idle == "$n" ]] && break
		for i in "${!slurm_pids[@]}"; do
			kill -0 "${slurm_pids[i]}" 2>/dev/null || dead+=" ${slurm_names[i]}"
		done
		[[ -n $dead ]] && break
		sleep 0.1
	done
	if [[ $idle != "$n" ]]; then
		slurm_logs
		[[ -n $dead ]] && fatal "the Slurm cluster did not start:$dead exited (logs above)"
		fatal "the Slurm cluster is not up after 30 s: ${idle:-no} idle nodes of $n"
	fi
	pass "slurm: munged, slurmctld on mn-node1 and $n slurmd (mn-node1-$n, gpu:4 each): sinfo shows $n idle nodes"
}

# slurm_logs: the daemons' output and logs, for a failure's report.
slurm_logs() {
	local f
	for f in "$slurm_dir"/*.out "$slurm_dir"/*.log "$tmp/munge/munged.log"; do
		[[ -s $f ]] && tail -n 15 "$f" | sed "s|^|    ${f##*/}: |" >&2
	done
}

# slurm_job_state ID: the job's state (PENDING, RUNNING, COMPLETED, FAILED, ...).
slurm_job_state() {
	"$on_node" 1 scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# slurm_wait_job ID SECONDS: wait until the job has ended; 1 when it is still there after SECONDS.
slurm_wait_job() {
	local t
	for ((t = 0; t < $2 * 10; t++)); do
		case $(slurm_job_state "$1") in
		PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED) sleep 0.1 ;;
		*) return 0 ;;
		esac
	done
	return 1
}

# slurm_down: stop the daemons by pid, one after the other (the slurmd's, then
# slurmctld, then munged: each SIGTERM, and SIGKILL when still there after
# 10 s, which fails the test) and check that nothing is left running: no
# process (step daemon, task) in the cluster's namespaces. Runs once, also on exit.
slurm_down() {
	local i pid t ns before=$failures
	((${#slurm_pids[@]})) || return 0
	for ((i = ${#slurm_pids[@]} - 1; i >= 0; i--)); do
		pid=${slurm_pids[i]}
		kill -TERM "$pid" 2>/dev/null
		for ((t = 0; t < 200; t++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		if kill -0 "$pid" 2>/dev/null; then
			fail "slurm: ${slurm_names[i]} (pid $pid) still running 10 s after SIGTERM; killed"
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	done
	for ns in ${made_ns[@]+"${made_ns[@]}"}; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			fail "slurm: left running after the daemons stopped: $(ps -o pid=,args= -p "$pid" 2>/dev/null)"
			kill -KILL "$pid" 2>/dev/null
		done
	done
	if ((failures == before)); then
		pass "slurm: every slurmd, slurmctld and munged stopped; no process left in the cluster"
	fi
	slurm_pids=()
}
