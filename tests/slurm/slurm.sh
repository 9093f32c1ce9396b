#!/usr/bin/env bash
# tests/slurm/slurm.sh - mnist-train under Slurm, on a Slurm cluster that the
# test starts on the namespace cluster of tests/multinode/cluster.sh and
# always stops (tests/slurm/slurm_cluster.sh).
#
#   bash tests/slurm/slurm.sh CASE TRAINER SOURCE_DIR MNIST_DATA_DIR [MPIRUN]
#   (registered by tests/cmake/65-slurm.cmake: ctest -L slurm)
#
# CASE, with the commands of docs/multi-node.md's Slurm section:
#   one-node   a one-node cluster: `srun -n 2 --mpi=pmix`, `salloc -n 2 mpirun`
#              and `sbatch --nodes=1 --ntasks-per-node=2 scripts/slurm/train.sbatch`
#              each train and print the summary, and each param_crc32 and
#              test_accuracy equal `mpirun -n 2`'s; the job script writes one
#              file per task (rank.%t.out), rank 0's ending with the summary;
#              `srun --mpi=none` (no PMIx) and `--mpi=pmi2` stop in MPI_Init
#              with Open MPI's message instead of training.
#   two-nodes  two nodes: `srun -N 2 --ntasks-per-node=2 --mpi=pmix` equals
#              `mpirun -n 4` on one node bit for bit (every rank's loss lines,
#              param_crc32, test_accuracy); the start-up line says 4 ranks on
#              2 nodes and the placement names both nodes; node 2's bridge port
#              carried the gradients; the same result from `salloc -N 2
#              --ntasks-per-node=2 mpirun` and through the job script
#              (`MNIST_NET=mnet0 sbatch --nodes=2 --ntasks-per-node=2`), which
#              gives every task MNIST_NET's interface for MPI and NCCL; with
#              --exact (issue 44), srun -N 2 x 2 tasks ends at `mpirun -n 1`'s
#              param_crc32 and test_accuracy.
#   failures   the job script on one node, training without end: kill -9 of
#              task 1 ends the whole job within 15 s, failed, srun naming task 1;
#              SIGSTOP of task 1 with --timeout 3: rank 0 prints the deadline
#              message and the job ends within 15 s, the stopped task gone.
#   cudasim    TRAINER is the CUDA simulator's mnist-train (tests/cudasim; its
#              driver stand-in in TRAINER's directory's driver/): the CUDA backend
#              under srun, where tasks have SLURM_* variables and none of the
#              OMPI_* ones mpirun gives its ranks (only those of the caller's
#              own environment, which srun passes on). Two nodes x 2 tasks,
#              every GPU visible: each task trains on its local rank's device
#              (SLURM_LOCALID), rank 0's NCCL id reaches every rank, and the
#              result equals mpirun -n 4's; one node with
#              --gpus-per-task=1: each task sees the one GPU Slurm gave it
#              (CUDA_VISIBLE_DEVICES) and uses it; two tasks on one visible GPU
#              are refused (shared-gpu), as under mpirun. Simulated, not a GPU.
# Every case ends by stopping the daemons and checking that none of them, and
# no step or task, is left running; a leftover fails the test.
#
# Needs root (namespaces; the daemons run as root): otherwise skipped (77)
# with the reason. Slurm itself must be installed (slurm-wlm, munge:
# scripts/test.sh installs them); a missing package fails the test and says which.
set -uo pipefail

readonly SEED_PARAMS=7850 # --model seed: Dense 784 -> 10, weights and biases
readonly TRAIN_ARGS=(--epochs 1 --limit 4096 --seed 5)
readonly RUN_TIMEOUT=120 # seconds for one launch; a hang fails the test
job_trainer="" job_env=() # what submit gives the job script besides the defaults

if (($# < 4)); then
	echo "usage: $0 one-node|two-nodes|failures|cudasim TRAINER SOURCE_DIR MNIST_DATA_DIR [MPIRUN]" >&2
	exit 2
fi
case_name=$1
shift
# shellcheck source=tests/multinode/cluster.sh
source "$(dirname "$0")/../multinode/cluster.sh"
# shellcheck source=tests/slurm/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh"
cluster_args "$@"
job_script=$src/scripts/slurm/train.sbatch
# Every task and rank, srun's and mpirun's, yields its core while it waits: the cluster's
# nodes declare more CPUs than the machine has, and Open MPI, not seeing the ranks
# oversubscribed, would have a waiting rank spin without giving its core to the rank it waits
# for (two-nodes: 3.7 s of CPU to 1.9 side by side under load on 2 cores). Exported here, it
# is the caller's environment that srun passes on. Not for cudasim (the simulator's tests are
# measured and tuned apart, tests/cmake/4x-*.cmake; its check of the tasks' OMPI_* names
# allows the caller's).
export OPENBLAS_NUM_THREADS=1
[[ $case_name == cudasim ]] || export OMPI_MCA_mpi_yield_when_idle=1

# ---- helpers --------------------------------------------------------------------

# on1 CMD...: CMD on node 1, where the tests launch and submit from.
on1() { "$on_node" 1 "$@"; }

# launch OUT CMD...: CMD on node 1 (stdout and stderr to OUT), its status in $rc;
# 124 or 137 when it was still running after RUN_TIMEOUT s and had to be stopped.
# (Not cluster.sh's run_timed: its reap would take the Slurm daemons too.)
launch() {
	local out=$1
	shift
	rc=0
	timeout -k 5 "$RUN_TIMEOUT" "$on_node" 1 "$@" >"$out" 2>&1 || rc=$?
}

# reference NAME RANKS ARGS...: mnist-train under mpirun on node 1; output in $tmp/NAME.out.
reference() {
	local name=$1 n=$2
	shift 2
	launch "$tmp/$name.out" "$mpirun_bin" --allow-run-as-root \
		--oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS -n "$n" "$@"
	if ((rc != 0)) || ! grep -q '^summary: ' "$tmp/$name.out"; then
		sed 's/^/    /' "$tmp/$name.out" >&2
		fatal "$name: the mpirun -n $n reference run failed (status $rc)"
	fi
	pass "$name: mpirun -n $n: $(summary_of "$tmp/$name.out" | cut -d' ' -f2-4) param_crc32=$(field param_crc32 "$(summary_of "$tmp/$name.out")")"
}

summary_of() { grep -h '^summary: ' "$@" 2>/dev/null | head -n 1; }

# same_result NAME OUTPUT REFERENCE_OUTPUT: the run's summary has the reference's
# rank count, param_crc32, test_accuracy and final_loss.
same_result() {
	local name=$1 got want k bad=""
	got=$(summary_of "$2")
	want=$(summary_of "$3")
	if [[ -z $got ]]; then
		fail "$name: no summary line; output:"
		tail -n 20 "$2" | sed 's/^/    /' >&2
		return 1
	fi
	for k in ranks param_crc32 test_accuracy final_loss; do
		[[ $(field "$k" "$got") == "$(field "$k" "$want")" ]] ||
			bad+=" $k=$(field "$k" "$got") (mpirun: $(field "$k" "$want"))"
	done
	if [[ -n $bad ]]; then
		fail "$name: differs from mpirun:$bad"
		return 1
	fi
	pass "$name: ranks=$(field ranks "$got") param_crc32=$(field param_crc32 "$got") test_accuracy=$(field test_accuracy "$got"), as mpirun"
}

# make_task_wrapper: $tmp/task, the trainer after writing its environment, as
# Slurm gave it, to $tmp/env.JOBID.TASK.
make_task_wrapper() {
	cat >"$tmp/task" <<EOF
#!/bin/sh
env >$(printf '%q' "$tmp")/env.\$SLURM_JOB_ID.\$SLURM_PROCID
exec $(printf '%q' "$trainer") "\$@"
EOF
	chmod +x "$tmp/task"
}

# submit NAME SBATCH_ARGS... -- TRAINER_ARGS...: sbatch of the job script from
# $tmp/NAME (its submit and working directory), with TRAINER=$job_trainer (default
# the trainer) and the VAR=VALUE of job_env[] in its environment; sets $job.
submit() {
	local name=$1 sb=() out
	shift
	while (($#)) && [[ $1 != -- ]]; do
		sb+=("$1")
		shift
	done
	(($#)) && shift
	mkdir -p "$tmp/$name"
	out=$(cd "$tmp/$name" && on1 env TRAINER="${job_trainer:-$trainer}" DATA_PATH="$data/train/" \
		${job_env[@]+"${job_env[@]}"} sbatch --parsable "${sb[@]}" "$job_script" "$@" 2>&1)
	job=${out%%;*}
	if ! [[ $job =~ ^[0-9]+$ ]]; then
		fail "$name: sbatch refused the job script: $out"
		job=""
		return 1
	fi
}

# job_exit ID: the job's final state and exit code, "STATE EXIT:SIGNAL".
job_exit() {
	local show
	show=$(on1 scontrol show job "$1" 2>/dev/null)
	echo "$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$show") $(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$show")"
}

# The seed's lines of a log, in order.
loss_lines() { grep -E '^epoch: [0-9]+, step: [0-9]+, loss is ' "$1" 2>/dev/null; }

# task_pid JOB TASK: the pid of that task's mnist-train (any node of the cluster).
task_pid() {
	local ns p env
	for ns in "${node_ns[@]:1}"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			[[ $(cat "/proc/$p/comm" 2>/dev/null) == "${trainer##*/}" ]] || continue
			# Read whole, then matched: "tr | grep -q" fails under pipefail when grep
			# stops reading before tr has written a large environment (SIGPIPE).
			env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
			if grep -qx "SLURM_JOB_ID=$1" <<<"$env" && grep -qx "SLURM_PROCID=$2" <<<"$env"; then
				echo "$p"
				return 0
			fi
		done
	done
	return 1
}

# wait_for SECONDS CMD...: poll CMD every 0.1 s; 1 when it never succeeds.
wait_for() {
	local t limit=$(($1 * 10))
	shift
	for ((t = 0; t < limit; t++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

now() { date +%s.%N; }
since() { awk -v t="$1" -v n="$(now)" 'BEGIN { printf "%.1f", n - t }'; }

# ---- cases ----------------------------------------------------------------------

case_one_node() {
	cluster_up 1
	slurm_up 1
	local args=(--data "$data/train" "${TRAIN_ARGS[@]}")
	reference ref 2 "$trainer" "${args[@]}"

	launch "$tmp/srun.out" srun -n 2 --mpi=pmix "$trainer" "${args[@]}"
	((rc == 0)) || fail "srun -n 2 --mpi=pmix: status $rc"
	same_result "srun -n 2 --mpi=pmix" "$tmp/srun.out" "$tmp/ref.out"

	# Without PMIx (srun --mpi=list lacking pmix, or MpiDefault=none and no --mpi),
	# and with PMI-2, which Debian's Open MPI lacks: the ranks stop in MPI_Init
	# with Open MPI's message, never train alone.
	local mpi
	for mpi in none pmi2; do
		launch "$tmp/no-$mpi.out" srun -n 2 --mpi=$mpi "$trainer" "${args[@]}"
		if ((rc != 0)) && grep -q 'direct launched using "srun"' "$tmp/no-$mpi.out" &&
			! grep -q '^summary: ' "$tmp/no-$mpi.out"; then
			pass "srun -n 2 --mpi=$mpi: status $rc, Open MPI: \"$(grep -m1 -o 'The application appears to have been direct launched using "srun",' "$tmp/no-$mpi.out")\" and no training"
		else
			fail "srun -n 2 --mpi=$mpi: status $rc, not Open MPI's refusal:"
			tail -n 8 "$tmp/no-$mpi.out" | sed 's/^/    /' >&2
		fi
	done

	launch "$tmp/salloc.out" salloc -n 2 "$mpirun_bin" --allow-run-as-root \
		--bind-to none -x OPENBLAS_NUM_THREADS "$trainer" "${args[@]}"
	((rc == 0)) || fail "salloc -n 2 mpirun: status $rc"
	same_result "salloc -n 2 mpirun" "$tmp/salloc.out" "$tmp/ref.out"
	grep -q 'salloc: Granted job allocation' "$tmp/salloc.out" ||
		fail "salloc -n 2 mpirun: salloc did not say it was granted an allocation"

	submit sbatch --nodes=1 --ntasks-per-node=2 -- "${TRAIN_ARGS[@]}" || return
	if ! slurm_wait_job "$job" "$RUN_TIMEOUT"; then
		fail "sbatch train.sbatch: job $job still $(slurm_job_state "$job") after $RUN_TIMEOUT s"
		return
	fi
	local logs=$tmp/sbatch/log_output/$job state
	state=$(job_exit "$job")
	if [[ $state != "COMPLETED 0:0" ]]; then
		fail "sbatch train.sbatch: job $job ended $state (want COMPLETED 0:0)"
		sed 's/^/    /' "$tmp/sbatch/slurm-$job.out" >&2
	fi
	if [[ -f $logs/rank.0.out && -f $logs/rank.1.out ]] && loss_lines "$logs/rank.1.out" >/dev/null &&
		grep -q 'mnist-train .*: 2 ranks on 1 node' "$logs/rank.0.out"; then
		pass "sbatch train.sbatch: one file per task (log_output/$job/rank.0.out, rank.1.out), loss lines in each, rank 0's stderr in its file"
	else
		fail "sbatch train.sbatch: per-task files missing or incomplete: $(echo "$logs"/*)"
	fi
	same_result "sbatch train.sbatch (1 node x 2 tasks)" "$logs/rank.0.out" "$tmp/ref.out"
}

case_two_nodes() {
	cluster_up 2
	slurm_up 2
	# Each node has a /dev/shm of its own, as a machine has (slurm_cluster.sh, slurm_start):
	# each task sees its own node's mark only, and the host's /dev/shm none.
	local shm
	# shellcheck disable=SC2016 # expanded by the task's sh
	launch "$tmp/shm.out" srun -N 2 --ntasks-per-node=1 \
		sh -c 'touch "/dev/shm/mnddp-mark.$(hostname)" && ls /dev/shm'
	shm=$(sort "$tmp/shm.out" | tr '\n' ' ')
	if ((rc == 0)) && [[ $shm == "mnddp-mark.mn-node1 mnddp-mark.mn-node2 " ]] &&
		! compgen -G "/dev/shm/mnddp-mark.*" >/dev/null; then
		pass "srun -N 2: each node has a /dev/shm of its own (each task saw its node's mark only)"
	else
		fail "srun -N 2: the nodes' /dev/shm are not their own: status $rc, the tasks saw '$shm'; the host's: $(compgen -G "/dev/shm/mnddp-mark.*" | tr '\n' ' ')"
		rm -f /dev/shm/mnddp-mark.*
	fi
	local args=(--data "$data/train" "${TRAIN_ARGS[@]}") r
	reference ref 4 --output-filename "$tmp/ref.log" "$trainer" "${args[@]}"

	local tx rx min
	tx=$(port_bytes 2 tx) rx=$(port_bytes 2 rx)
	launch "$tmp/srun.out" srun -N 2 --ntasks-per-node=2 --mpi=pmix \
		--output="$tmp/srun.%t.out" "$trainer" "${args[@]}"
	((rc == 0)) || fail "srun -N 2 --ntasks-per-node=2 --mpi=pmix: status $rc"
	tx=$(($(port_bytes 2 tx) - tx)) rx=$(($(port_bytes 2 rx) - rx))
	min=$(($(field steps_per_epoch "$(summary_of "$tmp/ref.out")") * SEED_PARAMS * 4))
	if ((tx >= min && rx >= min)); then
		pass "srun -N 2: node 2's bridge port carried $tx bytes to and $rx bytes from node 2 (the gradients: at least $min each way)"
	else
		fail "srun -N 2: node 2's bridge port carried $tx bytes to and $rx bytes from node 2; the gradients alone need $min each way"
	fi
	same_result "srun -N 2 --ntasks-per-node=2 --mpi=pmix" "$tmp/srun.0.out" "$tmp/ref.out"
	local differ=""
	for r in 0 1 2 3; do
		if [[ -z $(loss_lines "$tmp/srun.$r.out") ||
			$(loss_lines "$tmp/srun.$r.out") != "$(loss_lines "$tmp/ref.log/1/rank.$r/stdout")" ]]; then
			differ+=" $r"
		fi
	done
	if [[ -z $differ ]]; then
		pass "srun -N 2: every rank's loss lines equal mpirun -n 4's on one node"
	else
		fail "srun -N 2: the loss lines of rank(s)$differ differ from mpirun -n 4's (or are missing)"
	fi
	if grep -q 'mnist-train .*: 4 ranks on 2 nodes' "$tmp/srun.0.out" &&
		grep -q 'placement: mn-node1: ranks 0-1 on cpu' "$tmp/srun.0.out" &&
		grep -q 'placement: mn-node2: ranks 2-3 on cpu' "$tmp/srun.0.out"; then
		pass "srun -N 2: rank 0's start-up line says 4 ranks on 2 nodes, placement mn-node1: ranks 0-1, mn-node2: ranks 2-3"
	else
		fail "srun -N 2: rank 0's start-up and placement lines:"
		grep 'mnist-train' "$tmp/srun.0.out" | sed 's/^/    /' >&2
	fi

	# --exact (issue 44): srun -N 2 x 2 tasks ends at one rank's bits.
	local exact=(--data "$data/train" --exact --global-batch 96 --micro-batch 8 --limit 960
		--epochs 1 --seed 5)
	reference exact1 1 "$trainer" "${exact[@]}"
	launch "$tmp/srun-exact.out" srun -N 2 --ntasks-per-node=2 --mpi=pmix "$trainer" "${exact[@]}"
	local x1 x4
	x1=$(summary_of "$tmp/exact1.out") x4=$(summary_of "$tmp/srun-exact.out")
	if ((rc == 0)) && [[ $(field ranks "$x4") == 4 && -n $(field param_crc32 "$x1") &&
		$(field param_crc32 "$x4") == "$(field param_crc32 "$x1")" &&
		$(field test_accuracy "$x4") == "$(field test_accuracy "$x1")" ]]; then
		pass "srun -N 2 --ntasks-per-node=2 --exact: param_crc32=$(field param_crc32 "$x4"), mpirun -n 1's"
	else
		fail "srun -N 2 --ntasks-per-node=2 --exact: status $rc, param_crc32=$(field param_crc32 "$x4"); mpirun -n 1: $(field param_crc32 "$x1")"
		tail -n 20 "$tmp/srun-exact.out" | sed 's/^/    /' >&2
	fi

	# mpirun in a 2-node allocation: its daemon on node 2 started by srun.
	launch "$tmp/salloc.out" salloc -N 2 --ntasks-per-node=2 "$mpirun_bin" --allow-run-as-root \
		--bind-to none -x OPENBLAS_NUM_THREADS "$trainer" "${args[@]}"
	((rc == 0)) || fail "salloc -N 2 --ntasks-per-node=2 mpirun: status $rc"
	if same_result "salloc -N 2 --ntasks-per-node=2 mpirun" "$tmp/salloc.out" "$tmp/ref.out" &&
		! grep -q 'mnist-train .*: 4 ranks on 2 nodes' "$tmp/salloc.out"; then
		fail "salloc -N 2 mpirun: the start-up line does not say 4 ranks on 2 nodes"
	fi

	# The job script on 2 nodes, the network named by MNIST_NET.
	make_task_wrapper
	job_trainer=$tmp/task job_env=(MNIST_NET=mnet0)
	submit sbatch2 --nodes=2 --ntasks-per-node=2 -- "${TRAIN_ARGS[@]}" || return
	job_trainer="" job_env=()
	if ! slurm_wait_job "$job" "$RUN_TIMEOUT"; then
		fail "sbatch train.sbatch on 2 nodes: job $job still $(slurm_job_state "$job") after $RUN_TIMEOUT s"
		return
	fi
	same_result "MNIST_NET=mnet0 sbatch --nodes=2 --ntasks-per-node=2 train.sbatch" \
		"$tmp/sbatch2/log_output/$job/rank.0.out" "$tmp/ref.out"
	local net_bad=""
	for r in 0 1 2 3; do
		grep -qx 'OMPI_MCA_btl_tcp_if_include=mnet0' "$tmp/env.$job.$r" 2>/dev/null &&
			grep -qx 'NCCL_SOCKET_IFNAME==mnet0' "$tmp/env.$job.$r" || net_bad+=" $r"
	done
	if [[ -z $net_bad ]]; then
		pass "MNIST_NET=mnet0: the job script gave every task OMPI_MCA_btl_tcp_if_include=mnet0 and NCCL_SOCKET_IFNAME==mnet0"
	else
		fail "MNIST_NET=mnet0: task(s)$net_bad lack OMPI_MCA_btl_tcp_if_include=mnet0 or NCCL_SOCKET_IFNAME==mnet0"
	fi
}

# killed_job NAME SIGNAL TRAINER_ARGS...: the job script, 1 node x 2 tasks training
# without end; SIGNAL to task 1 once rank 0 logs a loss. Sets job, t0, logs, victim.
killed_job() {
	local name=$1 sig=$2
	shift 2
	submit "$name" --nodes=1 --ntasks-per-node=2 -- --limit 10000 --log-every 50 \
		--epochs 100000 "$@" || return 1
	logs=$tmp/$name/log_output/$job
	if ! wait_for 60 grep -qs "loss is" "$logs/rank.0.out"; then
		fail "$name: job $job did not start training within 60 s ($(slurm_job_state "$job"))"
		return 1
	fi
	victim=$(task_pid "$job" 1) || {
		fail "$name: task 1's mnist-train not found"
		return 1
	}
	t0=$(now)
	kill "-$sig" "$victim"
}

case_failures() {
	cluster_up 1
	slurm_up 1
	local out elapsed state

	if killed_job kill KILL --timeout 60; then
		if slurm_wait_job "$job" 15; then
			elapsed=$(since "$t0")
			state=$(job_exit "$job")
			out=$tmp/kill/slurm-$job.out
			if [[ $state == FAILED* ]] && grep -q 'srun: error: mn-node1: task 1: Killed' "$out"; then
				pass "kill -9 of task 1: job $job ended in $elapsed s, $state, srun: \"$(grep -m1 'task 1: Killed' "$out")\""
			else
				fail "kill -9 of task 1: job $job ended $state (want FAILED) in $elapsed s; its output:"
				sed 's/^/    /' "$out" >&2
			fi
		else
			fail "kill -9 of task 1: job $job still $(slurm_job_state "$job") 15 s later"
		fi
	fi

	if killed_job stop STOP --timeout 3; then
		if slurm_wait_job "$job" 15; then
			elapsed=$(since "$t0")
			state=$(job_exit "$job")
			local line
			line=$(grep -E -m1 '^rank 0 on mn-node1: allreduce at epoch [0-9]+ step [0-9]+ not complete after 3 s$' "$logs/rank.0.out")
			if [[ -n $line && $state == FAILED* ]]; then
				pass "SIGSTOP of task 1 (--timeout 3): job $job ended in $elapsed s, $state; rank 0: \"$line\""
			else
				fail "SIGSTOP of task 1: job $job ended $state in $elapsed s; rank 0's deadline message: '${line:-none}'"
				tail -n 5 "$logs/rank.0.out" "$tmp/stop/slurm-$job.out" | sed 's/^/    /' >&2
			fi
			if wait_for 10 eval "! kill -0 $victim 2>/dev/null"; then
				pass "SIGSTOP of task 1: the stopped task is gone"
			else
				fail "SIGSTOP of task 1: the stopped task (pid $victim) still exists after its job ended"
			fi
		else
			fail "SIGSTOP of task 1: job $job still $(slurm_job_state "$job") 15 s later"
		fi
	fi
}

case_cudasim() {
	local driver_dir
	driver_dir=$(dirname "$trainer")/driver
	[[ -e $driver_dir/libcuda.so.1 ]] ||
		fatal "'$trainer' is not the CUDA simulator's mnist-train: no $driver_dir/libcuda.so.1"
	cluster_up 2
	slurm_up 2
	export LD_LIBRARY_PATH=$driver_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	local args=(--data "$data/train" --backend cuda --limit 640 --epochs 1 --seed 3) r
	make_task_wrapper

	# The simulated nodes have 4 GPUs each, as Slurm's Gres=gpu:4 says.
	export CUDASIM_DEVICES=4
	reference ref 4 -x LD_LIBRARY_PATH -x CUDASIM_DEVICES "$trainer" "${args[@]}"
	launch "$tmp/all.out" srun -N 2 --ntasks-per-node=2 --mpi=pmix "$tmp/task" "${args[@]}"
	((rc == 0)) || fail "cudasim, srun -N 2 --ntasks-per-node=2: status $rc"
	# What Open MPI's launcher gives each rank (OMPI_COMM_WORLD_*, OMPI_MCA_* of its
	# daemon) must be absent. srun passes on the caller's own environment, so OMPI_*
	# variables exported where the test runs (OMPI_ALLOW_RUN_AS_ROOT, say) reach the
	# tasks too: those are allowed, any other OMPI_* variable is not.
	local env_bad="" e own extra
	own=$(env | grep '^OMPI_' | sort)
	# launcher_vars FILE: the OMPI_* names in FILE (an `env` output) that are not the caller's.
	launcher_vars() {
		comm -23 <(grep '^OMPI_' "$1" | sort) <(printf '%s\n' "$own") | cut -d= -f1 | tr '\n' ' '
	}
	# The control: a rank of mpirun's has such variables, and the check sees them.
	on1 "$mpirun_bin" --allow-run-as-root -n 1 env >"$tmp/mpirun-env" 2>&1
	extra=$(launcher_vars "$tmp/mpirun-env")
	if [[ $extra == *OMPI_COMM_WORLD_LOCAL_RANK* ]]; then
		pass "cudasim: the control, a rank started by mpirun, has launcher variables ($(wc -w <<<"$extra") OMPI_*, OMPI_COMM_WORLD_LOCAL_RANK among them)"
	else
		fail "cudasim: the control, a rank started by mpirun, shows no OMPI_COMM_WORLD_LOCAL_RANK: '$extra'"
	fi
	for r in 0 1 2 3; do
		e=$(compgen -G "$tmp/env.*.$r" | head -n 1)
		if [[ -z $e ]]; then
			env_bad+=" $r (no environment recorded)"
			continue
		fi
		grep -qx "SLURM_LOCALID=$((r % 2))" "$e" ||
			env_bad+=" $r ($(grep '^SLURM_LOCALID=' "$e" || echo 'no SLURM_LOCALID'), want $((r % 2)))"
		extra=$(launcher_vars "$e")
		[[ -z $extra ]] || env_bad+=" $r (${extra% })"
	done
	if [[ -z $env_bad ]]; then
		pass "cudasim, srun: every task had SLURM_LOCALID (0, 1 on each node) and no OMPI_* variable but the $(grep -c . <<<"$own") of the caller's environment"
	else
		fail "cudasim, srun: task(s)$env_bad: want SLURM_LOCALID = local rank and no OMPI_* variable an Open MPI launcher sets"
	fi
	if grep -q 'placement: mn-node1: ranks 0-1; rank 0 on cuda:0 cudasim device 0 .*, rank 1 on cuda:1 cudasim device 1 ' "$tmp/all.out" &&
		grep -q 'placement: mn-node2: ranks 2-3; rank 2 on cuda:0 cudasim device 0 .*, rank 3 on cuda:1 cudasim device 1 ' "$tmp/all.out" &&
		[[ $(field backend "$(summary_of "$tmp/all.out")") == cuda ]]; then
		pass "cudasim, srun -N 2: backend=cuda, each task on its local rank's GPU (ranks 2-3 on mn-node2's GPUs 0 and 1)"
	else
		fail "cudasim, srun -N 2: the tasks are not each on their local rank's GPU:"
		grep -E 'placement|backend|^summary' "$tmp/all.out" | sed 's/^/    /' >&2
	fi
	same_result "cudasim, srun -N 2 --ntasks-per-node=2 --mpi=pmix (simulated CUDA, NCCL id by MPI_Bcast)" \
		"$tmp/all.out" "$tmp/ref.out"

	# --gpus-per-task=1 while another job holds GPUs 0 and 1 of node 1: Slurm gives
	# the two tasks two other GPUs, one each (CUDA_VISIBLE_DEVICES), and each task
	# trains on the GPU it was given, not on its local rank's.
	local blocker cvd=() job1
	blocker=$(on1 sbatch --parsable -N 1 -n 1 -w mn-node1 --gpus=2 --output=/dev/null --wrap 'sleep 300')
	# shellcheck disable=SC2016 # evaluated by wait_for, each time
	if ! [[ $blocker =~ ^[0-9]+$ ]] || ! wait_for 30 eval '[[ $(slurm_job_state "$blocker") == RUNNING ]]'; then
		fail "cudasim: a job holding 2 GPUs did not start: '$blocker' $(slurm_job_state "$blocker")"
	fi
	reference ref2 2 -x LD_LIBRARY_PATH -x CUDASIM_DEVICES "$trainer" "${args[@]}"
	rm -f "$tmp"/env.*
	launch "$tmp/one.out" srun -N 1 -n 2 --overcommit -w mn-node1 --gpus-per-task=1 --mpi=pmix \
		"$tmp/task" "${args[@]}"
	((rc == 0)) || fail "cudasim, srun --gpus-per-task=1: status $rc"
	job1=$(sed -n 's/^SLURM_JOB_ID=//p' "$tmp"/env.*.0 2>/dev/null | head -n 1)
	for r in 0 1; do
		cvd[r]=$(sed -n 's/^CUDA_VISIBLE_DEVICES=//p' "$tmp/env.$job1.$r" 2>/dev/null)
	done
	if [[ ${cvd[0]} =~ ^[23]$ && ${cvd[1]} =~ ^[23]$ && ${cvd[0]} != "${cvd[1]}" ]] &&
		grep -q "placement: mn-node1: ranks 0-1; rank 0 on cuda:0 cudasim device ${cvd[0]} .*, rank 1 on cuda:0 cudasim device ${cvd[1]} " "$tmp/one.out"; then
		pass "cudasim, srun --gpus-per-task=1: Slurm gave tasks 0 and 1 CUDA_VISIBLE_DEVICES=${cvd[0]} and ${cvd[1]}, and each trained on that GPU, its cuda:0"
	else
		fail "cudasim, srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES of tasks 0, 1: '${cvd[0]:-}' '${cvd[1]:-}' (want 2 and 3), or not the GPUs used:"
		grep -E 'placement' "$tmp/one.out" | sed 's/^/    /' >&2
	fi
	same_result "cudasim, srun --gpus-per-task=1" "$tmp/one.out" "$tmp/ref2.out"
	on1 scancel "$blocker"
	slurm_wait_job "$blocker" 30 || fail "cudasim: the job holding 2 GPUs did not end after scancel"

	# One GPU for a job of two tasks (--gpus=1): both would use it, and are refused.
	launch "$tmp/shared.out" srun -N 1 -n 2 --gpus=1 --mpi=pmix --kill-on-bad-exit=1 "$trainer" "${args[@]}"
	if ((rc == 1)) && grep -q 'local ranks 0 and 1 on mn-node[12] would share GPU' "$tmp/shared.out"; then
		pass "cudasim, srun -n 2 --gpus=1: status 1, \"$(grep -m1 -o 'local ranks 0 and 1 .*would share GPU [^ ]*' "$tmp/shared.out")\""
	else
		fail "cudasim, srun -n 2 --gpus=1: status $rc, no shared-GPU refusal:"
		tail -n 8 "$tmp/shared.out" | sed 's/^/    /' >&2
	fi
}

cluster_init "slurm-$case_name"
case $case_name in
one-node) case_one_node ;;
two-nodes) case_two_nodes ;;
failures) case_failures ;;
cudasim) case_cudasim ;;
*) fatal "unknown case '$case_name' (one-node, two-nodes, failures, cudasim)" ;;
esac
slurm_down

checks_done "all Slurm checks passed ($case_name)"
