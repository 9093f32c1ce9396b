# torch_common.sh - what the tests against PyTorch share (sourced after script_args.sh, by
# test_torch_adamw.sh and test_torch_clip.sh): PYTHON, the reference trainer REF, one
# OpenBLAS thread, the skip (status 77, with the reason) without PyTorch, the scratch folder
# TMP (KEEP_TMP=1 keeps it), the data TRAIN_DATA and fail MESSAGE, which counts one failure.
PYTHON=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=$ROOT/bench/reference/train_ref.py
export OPENBLAS_NUM_THREADS=1

if ! "$PYTHON" -c "import torch" 2>/dev/null; then
	echo "SKIP: PyTorch is not installed for $PYTHON (apt-get install python3-torch; scripts/test.sh does)"
	exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-torch.XXXXXX") || exit 1
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
# Both tests train full batches of the first 4000 images (--limit 4000) and compare losses,
# never a test accuracy: TRAIN_DATA holds those 4000 and has no test/ beside it
# (tests/e2e/subset.sh), so neither trainer reads the whole 47 MB file or scores the 10,000
# test images (mnist-train after each of its 101 or 201 one-step epochs).
. "$(dirname "$0")/subset.sh"
mnist_subset "$DATA" "$TMP/data" 4000 || exit 1
TRAIN_DATA=$TMP/data/train
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

# ref_args NAME ARGS...: the arguments of bench/reference/train_ref.py for the reference run
# NAME, run by run_refs. run_refs: every such run, in the order given, in one Python
# (tests/run_scripts.py: each its own __main__, as "python3 train_ref.py ARGS" would run), its
# output in $TMP/NAME.log; fail for each that failed. PyTorch, a second of CPU to import, is
# imported once instead of once a run.
REFS=()
ref_args() {
	local name=$1
	shift
	printf '%s\0' "$REF" "$@" >"$TMP/$name.args"
	REFS+=("$name")
}
run_refs() {
	timeout -k 10 600 "$PYTHON" "$ROOT/tests/run_scripts.py" "$TMP" "${REFS[@]}"
	local name
	for name in "${REFS[@]}"; do
		[ "$(cat "$TMP/$name.rc" 2>/dev/null)" = 0 ] ||
			fail "train_ref.py ($name) failed: $(tail -3 "$TMP/$name.log" 2>/dev/null)"
	done
}
