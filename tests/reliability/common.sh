# common.sh - helpers for the reliability tests (sourced, not run).
#
# The caller sets TRAIN (mnist-train), DATA (MNIST_Data with train/ and test/)
# and MPIRUN (an array: mpirun and its options) from its arguments:
#   script.sh MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]
# Every mpirun is bounded by timeout(1); a hang is a failure, never a wait.

# With BACKEND_ARG=1 set by the caller, a first argument comes before those:
#   script.sh host|cuda MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]
# and sets BACKEND.
if [ -n "${BACKEND_ARG:-}" ]; then
	BACKEND=${1:-}
	case "$BACKEND" in
	host | cuda) shift ;;
	*)
		echo "usage: $0 host|cuda MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]" >&2
		exit 1
		;;
	esac
fi
. "$(dirname "$0")/../script_args.sh"
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
export OPENBLAS_NUM_THREADS=1

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

if [ ! -e "$DATA/train/train-images-idx3-ubyte" ] && [ ! -e "$DATA/train/train-images-idx3-ubyte.gz" ]; then
	echo "FAIL: real MNIST not found under $DATA/train: run scripts/get-mnist.sh" \
		"(or configure with -DMNIST_DATA_DIR=DIR); this test does not skip" >&2
	exit 1
fi
if [ ! -x "$TRAIN" ]; then
	echo "FAIL: $TRAIN is not an executable (build mnist-train first)" >&2
	exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-rel.XXXXXX") || exit 1
cleanup_hooks=()
cleanup() {
	for h in "${cleanup_hooks[@]}"; do eval "$h"; done
	rm -rf "$TMP"
}
trap cleanup EXIT

# run NAME NRANKS ARGS...: mnist-train under mpirun, output (stdout and stderr
# merged) in $TMP/NAME.out; sets RC (124/137: it did not finish in time).
run() {
	local name=$1 n=$2
	shift 2
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n "$n" "$TRAIN" --data "$DATA/train" "$@" \
		>"$TMP/$name.out" 2>&1
	RC=$?
}

# runr NAME NRANKS ARGS...: run, each rank's output also in $TMP/NAME/log/1/rank.R/; rank0
# NAME stdout|stderr: rank 0's.
runr() {
	local name=$1 saved=("${MPIRUN[@]}")
	MPIRUN+=(--output-filename "$TMP/$name/log")
	run "$@"
	MPIRUN=("${saved[@]}")
}
rank0() { cat "$TMP/$1/log/1/rank.0/$2" 2>/dev/null; }

# expect_ok NAME: the last run finished with status 0 and a summary line.
expect_ok() {
	if [ "$RC" -ne 0 ]; then
		fail "$1: exit status $RC, expected 0; output:"
		sed 's/^/    /' "$TMP/$1.out" | tail -30 >&2
		return 1
	fi
	if ! grep -q '^summary: ' "$TMP/$1.out"; then
		fail "$1: no summary line"
		return 1
	fi
	return 0
}

# field NAME KEY: a value from NAME's summary line.
field() {
	grep '^summary: ' "$TMP/$1.out" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# rank_pid MPIRUN_PID RANK: the pid of that rank among mpirun's children.
rank_pid() {
	local p env
	for p in $(pgrep -P "$1"); do
		# Read whole, then matched: "tr | grep -q" can fail under pipefail (SIGPIPE).
		env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
		if grep -qx "OMPI_COMM_WORLD_RANK=$2" <<<"$env"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# wait_for SECONDS COMMAND...: poll every 0.1 s until COMMAND succeeds; 1 on timeout.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	while ! "$@"; do
		[ "$SECONDS" -ge "$deadline" ] && return 1
		sleep 0.1
	done
	return 0
}

# now: seconds since the epoch, with fractions.
now() { date +%s.%N; }

finish() {
	if [ "$failures" -ne 0 ]; then
		echo "$failures check(s) failed" >&2
		exit 1
	fi
	echo "all checks passed"
	exit 0
}
