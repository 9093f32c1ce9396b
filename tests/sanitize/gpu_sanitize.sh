#!/usr/bin/env bash
# gpu_sanitize.sh - mnist-train's CUDA backend under NVIDIA's compute-sanitizer:
# short runs of one model with graphs and without (--no-graph), SGD and AdamW,
# each of which must end with zero errors.
#
#   tests/sanitize/gpu_sanitize.sh TOOL MODEL MNIST_TRAIN DATA_DIR TOOLKIT_BIN MPIRUN [ARGS...]
#
# TOOL: memcheck, initcheck, racecheck or synccheck. MODEL: seed, mlp or lenet.
# DATA_DIR: MNIST_Data (train/, raw or .gz); the runs see no test set (no
# evaluation pass: only training steps are sanitized). TOOLKIT_BIN: where to look
# for compute-sanitizer besides PATH (the toolkit's bin/, from CMake; "none" or empty: none);
# COMPUTE_SANITIZER, when set, names the one to use.
# Each run: mpirun -n 1 compute-sanitizer --tool TOOL --report-api-errors no
# --error-exitcode 9 mnist-train --backend cuda --limit 64 --batch-size 16 --epochs 1
# (4 steps: a capture, then replays). NCCL's start-up makes four cudaFuncGetAttributes
# calls that fail by design ("no kernel image", its own kernels probed), which
# --report-api-errors no leaves out; every error in a kernel, a copy or a
# synchronization still counts.
#
# MNIST_SANITIZE_RUNS=one (the GPU-node kit's step sanitize, which must fit 2 minutes):
# one run instead of four, chosen by model so that the three models together cover
# both paths and both optimizers: seed --no-graph SGD, mlp graph AdamW, lenet graph
# SGD. MNIST_SANITIZE_LIMIT: training images per run (default 64: 4 steps of 16).
# MNIST_SANITIZE_RUN_TIMEOUT: seconds per run (default 150).
#
# Exit 0 pass; 1 fail (an error, a run that did not end, or GPUs present but
# unusable, as the GPU suite fails on them); 77 skipped with the reason: no
# usable GPU (no driver, no device) or no compute-sanitizer.
set -uo pipefail
if [ $# -lt 6 ]; then
	echo "usage: $0 memcheck|initcheck|racecheck|synccheck seed|mlp|lenet MNIST_TRAIN DATA_DIR TOOLKIT_BIN MPIRUN [ARGS...]" >&2
	exit 2
fi
TOOL=$1 MODEL=$2 TRAIN=$3 DATA=$4 TOOLKIT_BIN=$5
[ "$TOOLKIT_BIN" != none ] || TOOLKIT_BIN=""
shift 5
MPIRUN=("$@")
NAME="gpu_sanitize_${TOOL}_$MODEL"
RUN_TIMEOUT=${MNIST_SANITIZE_RUN_TIMEOUT:-150} # seconds per run (racecheck is the slow one)
case $TOOL in memcheck | initcheck | racecheck | synccheck) ;; *)
	echo "$NAME: unknown tool '$TOOL' (memcheck, initcheck, racecheck, synccheck)" >&2
	exit 2
	;;
esac
case $MODEL in seed | mlp | lenet) ;; *)
	echo "$NAME: unknown model '$MODEL' (seed, mlp, lenet)" >&2
	exit 2
	;;
esac
skip() {
	echo "SKIP $NAME: $*"
	exit 77
}
failures=0
fail() {
	echo "FAIL $NAME: $*" >&2
	failures=$((failures + 1))
}
[ -x "$TRAIN" ] || { echo "FAIL $NAME: $TRAIN is not built" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-sanitize.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The training set alone (no sibling test/): no evaluation pass.
mkdir -p "$tmp/data/train"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
	if [ -e "$DATA/train/$f" ]; then
		ln -s "$(readlink -f "$DATA/train/$f")" "$tmp/data/train/$f"
	elif [ -e "$DATA/train/$f.gz" ]; then
		ln -s "$(readlink -f "$DATA/train/$f.gz")" "$tmp/data/train/$f.gz"
	else
		echo "FAIL $NAME: no $DATA/train/$f (raw or .gz): run scripts/get-mnist.sh" >&2
		exit 1
	fi
done
LIMIT=${MNIST_SANITIZE_LIMIT:-64}
args=(--data "$tmp/data/train" --model "$MODEL" --limit "$LIMIT" --batch-size 16 --epochs 1 --log-every 1)
variants=("graph sgd" "no-graph sgd" "graph adamw" "no-graph adamw")
if [ "${MNIST_SANITIZE_RUNS:-all}" = one ]; then
	case $MODEL in seed) variants=("no-graph sgd") ;; mlp) variants=("graph adamw") ;; lenet) variants=("graph sgd") ;; esac
fi

# A usable GPU? mnist-train's own verdict (--backend auto), as the GPU suite takes it.
timeout -k 10 120 "${MPIRUN[@]}" -n 1 "$TRAIN" "${args[@]}" --backend auto >"$tmp/probe.out" 2>&1
if grep -q 'backend auto: using cuda' "$tmp/probe.out"; then
	echo "# device: $(grep -m1 -o 'backend cuda ([^)]*)' "$tmp/probe.out")"
elif grep -q 'WARNING: GPUs are present but unusable' "$tmp/probe.out"; then
	echo "FAIL $NAME: GPUs present but unusable: $(grep -m1 'WARNING: GPUs' "$tmp/probe.out")" >&2
	exit 1
elif line=$(grep -m1 'backend auto: using host, because' "$tmp/probe.out"); then
	skip "no usable GPU (${line#*because })"
else
	echo "FAIL $NAME: mnist-train --backend auto did not say which backend it chose:" >&2
	sed 's/^/    /' "$tmp/probe.out" >&2
	exit 1
fi

sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer 2>/dev/null)}
for d in "$TOOLKIT_BIN" /usr/local/cuda/bin; do
	[ -n "$sanitizer" ] || [ -z "$d" ] || [ ! -x "$d/compute-sanitizer" ] || sanitizer=$d/compute-sanitizer
done
[ -n "$sanitizer" ] || skip "compute-sanitizer not found (PATH, ${TOOLKIT_BIN:-no toolkit bin/}, /usr/local/cuda/bin)"

# The tool's closing line when it found nothing.
if [ "$TOOL" = racecheck ]; then
	clean='RACECHECK SUMMARY: 0 hazards displayed \(0 errors'
else
	clean='ERROR SUMMARY: 0 errors'
fi
for variant in "${variants[@]}"; do
	read -r graph opt <<<"$variant"
	extra=(--optimizer "$opt")
	[ "$graph" = graph ] || extra+=(--no-graph)
	log=$tmp/$graph-$opt.out
	start=$SECONDS
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n 1 "$sanitizer" --tool "$TOOL" --report-api-errors no \
		--error-exitcode 9 "$TRAIN" "${args[@]}" --backend cuda "${extra[@]}" >"$log" 2>&1
	rc=$?
	took=$((SECONDS - start))
	what="$TOOL $MODEL $graph $opt"
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		fail "$what: did not end within ${RUN_TIMEOUT} s"
		tail -n 20 "$log" | sed 's/^/    /' >&2
	elif [ $rc -ne 0 ] || ! grep -Eq "$clean" "$log" || ! grep -q '^summary: .* backend=cuda ' "$log"; then
		fail "$what: status $rc (9: the sanitizer found errors), its summary: $(grep -E 'SUMMARY' "$log" | tail -n 1)"
		grep -E '^=========' "$log" | head -n 60 | sed 's/^/    /' >&2
	else
		echo "ok: $what: $(grep -E 'SUMMARY' "$log" | tail -n 1 | sed 's/^=* *//'), ${took} s, $(grep -o 'steps_per_epoch=[0-9]*' "$log")"
	fi
done
if [ "$failures" -gt 0 ]; then
	echo "FAIL $NAME: $failures of ${#variants[@]} runs not clean" >&2
	exit 1
fi
if [ ${#variants[@]} -eq 4 ]; then
	echo "PASS $NAME: 4 runs (graph and --no-graph, SGD and AdamW), no error"
else
	echo "PASS $NAME: 1 run (${variants[0]}, $((LIMIT / 16)) steps; MNIST_SANITIZE_RUNS=one), no error"
fi
