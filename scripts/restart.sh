# restart.sh - sourced by scripts/mpirun-env.sh: the launch scripts' opt-in
# restarts from the newest checkpoint (docs/reliability.md, "Restarting
# automatically").
#
#   MAX_RESTARTS=2 bash run_mpirun_1.sh HOSTS [MPIRUN_ARGS...] -- --checkpoint-dir DIR [TRAINER_ARGS...]
#
# MAX_RESTARTS=N (default 0: one attempt, and the launch script exec's mpirun
# as if this file did not exist) allows N restarts. An attempt that ends with a
# runtime failure (restart_retried) is followed, after RESTART_DELAY seconds
# (default 5), by a probe of each node of the job through mpirun's launch agent
# ("AGENT HOST true", at most RESTART_PROBE_TIMEOUT seconds, default 10) and
# another attempt on the nodes that answer, with --resume DIR (or from scratch,
# once, while DIR holds no checkpoint). When the nodes left have fewer slots
# than the job has ranks, it shrinks to the most ranks R' (at least MIN_RANKS,
# default 1) that divide the global batch G = ranks x --batch-size, each with
# --batch-size G/R', so the checkpoint resumes (docs/reliability.md, "Another
# rank count"). Nodes once dropped stay dropped. Attempt K logs to
# log_output/attempt-K/: mpirun's 1/rank.N/stdout, mpirun.stderr (a copy of
# mpirun's stderr) and, for a shrunk hostfile job, the hostfile it ran on.
#
# Reads (set by mpirun-env.sh): launcher, nodes, nodes_var, mpi_args,
#        trainer_args, NP, and MAX_RESTARTS, MIN_RANKS, RESTART_DELAY,
#        RESTART_PROBE_TIMEOUT from the environment.
# Provides: restart_check (sets max_restarts; with restarts, checks what they
#        need, else status 2 and one message), restart_job CMD... (the attempts;
#        exits with 0, 2, 1 when the restarts are used up or impossible, or
#        another status of mpirun's that is not a runtime failure).

readonly restart_batch_default=32 # mnist-train's --batch-size default (host/config.c)

restart_refuse() {
	echo "$launcher: $*" >&2
	exit 2
}

# restart_retried STATUS: does an attempt that ended with STATUS count as a
# runtime failure, worth a restart? Every status but these:
#   0        success
#   2        bad usage, configuration or input (the trainer's, on every rank):
#            the same command would fail the same way
#   126, 127 mpirun could not be run (not executable, not found)
# mpirun's own statuses for a lost rank or node vary with what it noticed
# first (measured with Open MPI 4.1: 1 for a rank's runtime failure or a
# collective past --timeout, 137 for a rank killed by SIGKILL, 205 "ORTE has
# lost communication with a remote daemon", 9 or 255 "ORTE was unable to
# reliably start one or more daemons" when a node's daemon and its launch
# agent die), so they are all retried; a launch that fails before the first
# checkpoint is retried from scratch only once.
restart_retried() {
	(($1 != 0 && $1 != 2 && $1 != 126 && $1 != 127))
}

# restart_trainer_flag NAME: the value of the last --NAME V or --NAME=V among
# the trainer's arguments in $flag_value; status 1 when there is none.
restart_trainer_flag() {
	local i found=1
	for ((i = 0; i < ${#trainer_args[@]}; i++)); do
		case ${trainer_args[i]} in
		"--$1")
			flag_value=${trainer_args[i + 1]-}
			found=0
			i=$((i + 1))
			;;
		"--$1="*)
			flag_value=${trainer_args[i]#*=}
			found=0
			;;
		esac
	done
	return "$found"
}

# restart_is_np ARG: is ARG one of mpirun's names for the rank count?
restart_is_np() { [[ $1 == -n || $1 == --n || $1 == -np || $1 == --np || $1 == -c ]]; }

# The job's nodes, in order: node_host[i], node_slots[i], node_entry[i] (its
# HOSTS entry or hostfile line, for the command of a shrunk job).
restart_nodes() {
	local entry line slots re='slots[[:space:]]*=[[:space:]]*([0-9]+)'
	node_host=() node_slots=() node_entry=()
	if [[ $nodes_var == HOSTS ]]; then
		IFS=, read -ra entries <<<"$nodes"
		for entry in ${entries[@]+"${entries[@]}"}; do
			[[ $entry =~ ^([^:]+)(:([0-9]+))?$ ]] ||
				restart_refuse "HOSTS entry '$entry': restarts need each entry as HOST or HOST:SLOTS"
			node_host+=("${BASH_REMATCH[1]}")
			node_slots+=("${BASH_REMATCH[3]:-1}") # mpirun -H: one slot per entry without a count
			node_entry+=("$entry")
		done
	else
		[[ -f $nodes && -r $nodes ]] || restart_refuse "hostfile '$nodes' cannot be read: restarts read it to know the nodes"
		while IFS= read -r line || [[ -n $line ]]; do
			line=${line%%#*}
			read -r line <<<"$line" # trim
			[[ -n $line ]] || continue
			[[ $line =~ $re ]] ||
				restart_refuse "hostfile '$nodes', line '$line': restarts need slots=N on every line (the rank count of a shrunk job is counted from them)"
			slots=${BASH_REMATCH[1]}
			node_host+=("${line%%[[:space:]]*}")
			node_slots+=("$((10#$slots))")
			node_entry+=("$line")
		done <"$nodes"
	fi
	((${#node_host[@]})) || restart_refuse "no nodes in ${nodes_var,,} '$nodes'"
}

# The launch agent mpirun uses (--mca plm_rsh_agent, OMPI_MCA_plm_rsh_agent,
# else Open MPI's default "ssh : rsh"): the first alternative found, as
# mpirun takes it, in restart_agent[].
restart_agent_find() {
	local i value=${OMPI_MCA_plm_rsh_agent:-${OMPI_MCA_orte_rsh_agent:-ssh : rsh}} alt
	for ((i = 0; i + 2 < ${#mpi_args[@]}; i++)); do
		case ${mpi_args[i]} in
		--mca | -mca | --gmca | -gmca)
			if [[ ${mpi_args[i + 1]} == plm_rsh_agent || ${mpi_args[i + 1]} == orte_rsh_agent ]]; then
				value=${mpi_args[i + 2]}
			fi
			;;
		esac
	done
	restart_agent=()
	IFS=: read -ra alts <<<"$value"
	for alt in "${alts[@]}"; do
		read -ra restart_agent <<<"$alt"
		((${#restart_agent[@]})) && command -v "${restart_agent[0]}" >/dev/null && break
		restart_agent=()
	done
	((${#restart_agent[@]})) || restart_refuse "the launch agent '$value' (plm_rsh_agent) is not found: restarts probe the nodes with it"
	[[ ${restart_agent[0]##*/} != ssh ]] ||
		restart_agent+=(-o BatchMode=yes -o ConnectTimeout="$restart_probe_timeout")
}

# restart_check: MAX_RESTARTS read; with restarts, what they need checked.
restart_check() {
	local value
	max_restarts=${MAX_RESTARTS:-0}
	[[ $max_restarts =~ ^[0-9]+$ ]] ||
		restart_refuse "MAX_RESTARTS=$max_restarts: expected a whole number of restarts (0, the default: none)"
	max_restarts=$((10#$max_restarts))
	((max_restarts)) || return 0
	for value in "MIN_RANKS=${MIN_RANKS:-1}" "RESTART_PROBE_TIMEOUT=${RESTART_PROBE_TIMEOUT:-10}"; do
		[[ ${value#*=} =~ ^[1-9][0-9]*$ ]] || restart_refuse "$value: expected a whole number, at least 1"
	done
	[[ ${RESTART_DELAY:-5} =~ ^[0-9]+$ ]] ||
		restart_refuse "RESTART_DELAY=$RESTART_DELAY: expected a whole number of seconds"
	restart_min_ranks=$((10#${MIN_RANKS:-1}))
	restart_probe_timeout=$((10#${RESTART_PROBE_TIMEOUT:-10}))
	restart_delay=$((10#${RESTART_DELAY:-5}))
	if ! restart_trainer_flag checkpoint-dir || [[ -z $flag_value ]]; then
		restart_refuse "MAX_RESTARTS=$max_restarts needs --checkpoint-dir DIR among the trainer's arguments" \
			"(after --): each restart resumes from the newest checkpoint there"
	fi
	restart_ckpt_dir=$flag_value
	restart_nodes
	restart_agent_find
	# The job's rank count: NP, else mpirun's own -n, else one per slot.
	local i
	restart_ranks=${NP:-}
	for ((i = 0; i + 1 < ${#mpi_args[@]}; i++)); do
		restart_is_np "${mpi_args[i]}" && restart_ranks=${mpi_args[i + 1]}
	done
	if [[ -z $restart_ranks ]]; then
		restart_ranks=0
		for value in "${node_slots[@]}"; do restart_ranks=$((restart_ranks + value)); done
	fi
	restart_batch=$restart_batch_default
	restart_trainer_flag batch-size && restart_batch=$flag_value
	# Values mpirun or the trainer will refuse themselves (status 2, not retried).
	if ! [[ $restart_ranks =~ ^[1-9][0-9]*$ && $restart_batch =~ ^[1-9][0-9]*$ ]]; then
		restart_ranks=0 restart_batch=0
	fi
	return 0
}

# restart_newest: the name of the newest checkpoint in the checkpoint
# directory (the highest global step), or nothing.
restart_newest() {
	ls -A "$restart_ckpt_dir" 2>/dev/null |
		sed -n 's/^ckpt-[0-9]*-\([0-9]*\)\.safetensors$/\1 &/p' | sort -n | tail -n 1 | cut -d' ' -f2
}

# restart_reason DIR: why the attempt logged in DIR ended, in a few words.
restart_reason() {
	local dir=$1 err=$1/mpirun.stderr line
	line=$(sed -n 's/.*process rank \([0-9]*\) with PID [0-9]* on node \([^ ]*\) exited on signal \([^.]*\).*/rank \1 on node \2 exited on signal \3/p' "$err" 2>/dev/null | head -n 1)
	if [[ -z $line ]] && grep -q 'ORTE has lost communication with a remote daemon' "$err" 2>/dev/null; then
		line="mpirun lost contact with the daemon on node $(sed -n 's/.*Remote daemon: .* on node \([^ ]*\).*/\1/p' "$err" | head -n 1)"
	fi
	if [[ -z $line ]] && grep -q 'unable to reliably start one or more daemons' "$err" 2>/dev/null; then
		line="a node's daemon died or did not start: 'ORTE was unable to reliably start one or more daemons'"
	fi
	[[ -n $line ]] || line=$(cat "$dir"/1/rank.*/stdout 2>/dev/null | grep -m 1 -E '^rank [0-9]+ on [^ ]+: ')
	[[ -n $line ]] || line=$(sed -n 's/.*Exit code: *\([0-9]*\).*/a rank exited with status \1/p' "$err" 2>/dev/null | head -n 1)
	if [[ -z $line ]] && grep -q 'a non-zero exit code' "$err" 2>/dev/null; then
		line="a rank exited with a non-zero status"
	fi
	[[ -n $line ]] || line="no message from mpirun or the ranks"
	echo "${line:0:200}"
}

# restart_probe: which of the current nodes (restart_up[i] = 1) still answer.
# The launch node itself is not asked (mpirun starts nothing there through the agent).
restart_probe() {
	local i pids=() here_names
	here_names=" localhost 127.0.0.1 ::1 $(hostname 2>/dev/null) $(hostname -s 2>/dev/null) $(hostname -I 2>/dev/null) "
	for i in "${!node_host[@]}"; do
		((restart_up[i])) || continue
		[[ $here_names != *" ${node_host[i]} "* ]] || continue
		timeout -k 2 "$restart_probe_timeout" "${restart_agent[@]}" "${node_host[i]}" true </dev/null >/dev/null 2>&1 &
		pids[i]=$!
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}" || restart_up[i]=0
	done
}

# restart_stop SIGNAL NUMBER: the launcher was signalled: end mpirun, stop.
restart_stop() {
	echo "$launcher: stopped by SIG$1${restart_pid:+: ending mpirun}" >&2
	if [[ -n ${restart_pid:-} ]]; then
		kill -TERM "$restart_pid" 2>/dev/null
		wait "$restart_pid"
	fi
	exit $((128 + $2))
}

# restart_command K: attempt K's command in restart_cmd: the launch script's
# (restart_base) with this attempt's ranks (-n), nodes, log directory and,
# on a restart, --batch-size and --resume.
restart_command() {
	local dir=log_output/attempt-$1 i arg nodes_done=0 log_done=0 shrunk=0
	local trainer_at=$((${#restart_base[@]} - ${#trainer_args[@]} - 1))
	((restart_now_ranks == restart_ranks)) || shrunk=1
	restart_cmd=("${restart_base[0]}")
	((!shrunk)) || restart_cmd+=(-n "$restart_now_ranks")
	for ((i = 1; i < trainer_at; i++)); do
		arg=${restart_base[i]}
		if ((shrunk)) && restart_is_np "$arg"; then
			i=$((i + 1)) # the option and its value
		elif ((!nodes_done)) && [[ ($arg == -H || $arg == --hostfile) && ${restart_base[i + 1]} == "$nodes" ]]; then
			restart_cmd+=("$arg" "$restart_where")
			nodes_done=1 i=$((i + 1))
		elif ((!log_done)) && [[ $arg == --output-filename && ${restart_base[i + 1]} == log_output ]]; then
			restart_cmd+=("$arg" "$dir")
			log_done=1 i=$((i + 1))
		else
			restart_cmd+=("$arg")
		fi
	done
	restart_cmd+=("${restart_base[trainer_at]}")
	for ((i = 0; i < ${#trainer_args[@]}; i++)); do
		arg=${trainer_args[i]}
		if [[ ($arg == --resume && -n $restart_resume) || ($arg == --batch-size && $shrunk == 1) ]]; then
			i=$((i + 1))
		elif ! [[ ($arg == --resume=* && -n $restart_resume) || ($arg == --batch-size=* && $shrunk == 1) ]]; then
			restart_cmd+=("$arg")
		fi
	done
	((!shrunk)) || restart_cmd+=(--batch-size "$restart_now_batch")
	[[ -z $restart_resume ]] || restart_cmd+=(--resume "$restart_ckpt_dir")
}

# restart_place K WHAT: attempt K's nodes and ranks, from the nodes that
# answer (restart_now_ranks, restart_now_batch, restart_where, and
# restart_shown, restart_lost for the restart line); exits with status 1
# and says why (WHAT: how the last attempt ended) when the job cannot go on.
restart_place() {
	local k=$1 what=$2 i n slots=0 alive=() global=$((restart_ranks * restart_batch))
	restart_probe
	restart_shown=() restart_lost=()
	for i in "${!node_host[@]}"; do
		if ((restart_up[i])); then
			slots=$((slots + node_slots[i]))
			alive+=("${node_entry[i]}")
			restart_shown+=("${node_host[i]}:${node_slots[i]}")
		elif ((!restart_dropped[i])); then
			restart_lost+=("${node_host[i]}")
			restart_dropped[i]=1
		fi
	done
	if ((${#restart_lost[@]} == 0)); then
		if [[ $restart_where != "$nodes" && $nodes_var == HOSTFILE ]]; then # a shrunk hostfile, carried on
			cp "$restart_where" "log_output/attempt-$k/hostfile" || exit 1
			restart_where=log_output/attempt-$k/hostfile
		fi
		return 0
	fi
	what+="; $(IFS=,; echo "${restart_lost[*]}") no longer answer(s)"
	if ((restart_ranks == 0)); then
		echo "$launcher: $what, and the rank count or --batch-size is not a whole number: giving up" >&2
		exit 1
	fi
	if ((slots < restart_min_ranks)); then
		echo "$launcher: $what: $slots slots left, fewer than MIN_RANKS=$restart_min_ranks: giving up" >&2
		exit 1
	fi
	n=$((slots < restart_ranks ? slots : restart_ranks))
	while ((n >= restart_min_ranks && global % n)); do n=$((n - 1)); done
	if ((n < restart_min_ranks)); then
		echo "$launcher: $what: no rank count from MIN_RANKS=$restart_min_ranks to $slots divides the global batch $global ($restart_ranks ranks x --batch-size $restart_batch): giving up" >&2
		exit 1
	fi
	if ((n != restart_ranks)) && restart_trainer_flag grad-reduce && [[ $flag_value == sum ]]; then
		echo "$launcher: $what: fewer ranks cannot resume with --grad-reduce sum (its gradient scales with the rank count): giving up" >&2
		exit 1
	fi
	restart_now_ranks=$n restart_now_batch=$((global / n))
	if [[ $nodes_var == HOSTS ]]; then
		restart_where=$(IFS=,; echo "${alive[*]}")
	else
		restart_where=log_output/attempt-$k/hostfile
		printf '%s\n' "${alive[@]}" >"$restart_where" || exit 1
	fi
}

# restart_job CMD...: CMD (the launch script's mpirun command) as attempt 1,
# then the restarts; exits.
restart_job() {
	set +e # every status is looked at here
	local attempts=$((max_restarts + 1)) k=1 status dir what newest scratch=0 i from
	restart_base=("$@")
	restart_now_ranks=$restart_ranks restart_now_batch=$restart_batch
	restart_where=$nodes restart_resume="" restart_pid=""
	restart_up=() restart_dropped=()
	for i in "${!node_host[@]}"; do restart_up[i]=1 restart_dropped[i]=0; done
	trap 'restart_stop HUP 1' HUP
	trap 'restart_stop INT 2' INT
	trap 'restart_stop TERM 15' TERM
	while :; do
		dir=log_output/attempt-$k
		mkdir -p "$dir" || exit 1
		restart_command "$k"
		echo "$launcher: ${restart_cmd[*]}" >&2
		# mpirun's stderr through tee: to the terminal and into the attempt's directory,
		# where restart_reason reads it. tee finishes a moment after mpirun: it is waited
		# for (up to 5 s, in case a stray process of the job still holds the pipe), or under
		# load the reason read below could miss mpirun's last lines.
		exec {restart_err}> >(tee "$dir/mpirun.stderr" >&2)
		tee_pid=${!:-} # bash 4.4 and later; before, tee is not waited for
		"${restart_cmd[@]}" 2>&"$restart_err" &
		restart_pid=$!
		wait "$restart_pid"
		status=$?
		restart_pid=""
		exec {restart_err}>&-
		for _ in {1..50}; do
			[[ -n $tee_pid ]] && kill -0 "$tee_pid" 2>/dev/null || break
			sleep 0.1
		done
		if ((status == 0)); then
			((k == 1)) || echo "$launcher: attempt $k of $attempts finished" >&2
			exit 0
		elif ((status == 2)); then
			echo "$launcher: attempt $k of $attempts ended with status 2 (bad usage, configuration or input): not restarting" >&2
			exit 2
		elif ! restart_retried "$status"; then
			echo "$launcher: attempt $k of $attempts ended with status $status (mpirun could not be run): not restarting" >&2
			exit "$status"
		fi
		sleep "$restart_delay" &
		wait $!
		what="attempt $k of $attempts ended with status $status ($(restart_reason "$dir"))"
		if ((k == attempts)); then
			echo "$launcher: $what: MAX_RESTARTS=$max_restarts restarts used up, giving up (logs in log_output/attempt-1 .. attempt-$k)" >&2
			exit 1
		fi
		newest=$(restart_newest)
		if [[ -z $newest ]] && ((scratch++)); then # the second time
			echo "$launcher: $what before any checkpoint was written in $restart_ckpt_dir, as did the restart from scratch: giving up" >&2
			exit 1
		fi
		k=$((k + 1))
		mkdir -p "log_output/attempt-$k" || exit 1
		restart_place "$k" "$what"
		restart_resume=$newest from="from scratch (no checkpoint in $restart_ckpt_dir yet)"
		[[ -z $newest ]] || from="resuming from $restart_ckpt_dir (newest: $newest)"
		echo "$launcher: restart $((k - 1)) of $max_restarts: $what;" \
			"attempt $k of $attempts on $(IFS=,; echo "${restart_shown[*]}")${restart_lost[*]:+ ($(IFS=,; echo "${restart_lost[*]}") not answering)}:" \
			"$restart_now_ranks ranks x --batch-size $restart_now_batch (global batch $((restart_now_ranks * restart_now_batch))), $from;" \
			"logs in log_output/attempt-$k" >&2
	done
}
