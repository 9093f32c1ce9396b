#!/usr/bin/env bash
# train_sim.sh - mnist-train on the simulated CUDA backend (mnist-train-cudasim,
# tests/cudasim) under a real mpirun, against the host backend from the same
# seed on the same real MNIST subset.
#
#   tests/cudasim/train_sim.sh TRAIN DATA_DIR RANKS MPIRUN [MPIRUN_ARGS...] -- [TRAIN_ARGS...]
#
# Three runs: --backend cuda (each full batch replayed from a captured
# graph), --backend cuda --no-graph, --backend host. The two cuda runs must
# end with bitwise the same model (param_crc32), final loss and test
# accuracy; the cuda run must say backend=cuda and name the simulated device,
# and reach the host run's test accuracy within 0.01. Exit 0 pass, 1 fail.
set -uo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 TRAIN DATA_DIR RANKS MPIRUN [MPIRUN_ARGS...] -- [TRAIN_ARGS...]" >&2
	exit 1
fi
TRAIN=$1 DATA=$2 RANKS=$3
shift 3
MPIRUN=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	MPIRUN+=("$1")
	shift
done
[ $# -gt 0 ] && shift
ARGS=("$@")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

run() { # NAME ARGS...
	local name=$1
	shift
	if ! timeout 150 "${MPIRUN[@]}" -n "$RANKS" "$TRAIN" --data "$DATA/train" --test-data "$DATA/test" \
		"${ARGS[@]}" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
		fail "$name: mnist-train $* exited with an error"
		cat "$TMP/$name.err"
	fi
	grep '^summary:' "$TMP/$name.out" | sed 's/^/  '"$name"': /'
}
field() { # NAME KEY
	grep '^summary:' "$TMP/$1.out" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

run graph --backend cuda
run plain --backend cuda --no-graph
run host --backend host
for k in param_crc32 final_loss test_accuracy; do
	[ "$(field graph $k)" = "$(field plain $k)" ] && [ -n "$(field graph $k)" ] ||
		fail "$k: captured $(field graph $k), plain $(field plain $k): capture changed the run"
done
[ "$(field graph backend)" = cuda ] || fail "the cuda run says backend=$(field graph backend)"
grep -q 'backend cuda (cudasim device' "$TMP/graph.err" ||
	fail "the cuda run does not name the simulated device on rank 0's stderr"
if ! awk -v a="$(field graph test_accuracy)" -v b="$(field host test_accuracy)" \
	'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 0.01) }'; then
	fail "test accuracy: cuda $(field graph test_accuracy), host $(field host test_accuracy) (limit 0.01)"
fi
if [ $failures -eq 0 ]; then
	echo "PASS train_sim: captured and plain runs identical, accuracy within 0.01 of the host's"
	exit 0
fi
exit 1
