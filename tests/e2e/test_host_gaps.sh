#!/usr/bin/env bash
# test_host_gaps.sh - checks of the training loop that no other test makes,
# each a bug tests/mutants_host.sh plants and the rest of the suite missed.
#
#   tests/e2e/test_host_gaps.sh MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- CASE
#
# CASE, on the host backend (MNIST_TRAIN build/mnist-train):
#   param-crc          2 ranks, one epoch, --checkpoint-dir: the summary's
#                      param_crc32 is the CRC-32 of every parameter, as the final
#                      checkpoint holds them (its parameter tensors, in their
#                      data order, the flat buffer's).
# (The gaps of launches of several steps, checkpoints due inside one, the short last batch,
# images=, are checked by tests/cudasim/checkpoint_launches.sh and short_batch.sh.)
# Every run reads real MNIST (a subset, --limit) without its test set. Exit 0
# pass, 1 fail (every failure is printed). The helpers (checks_begin, fail,
# field, train_only) are the simulator scripts' (tests/cudasim/mpirun_args.sh).
set -uo pipefail

. "$(dirname "$0")/../cudasim/mpirun_args.sh"
train_args 4 "CASE" "$@"
CASE=${AFTER[0]:-}
RUN_TIMEOUT=150
checks_begin
TRAIN_ONLY=$(train_only)
ok() { echo "ok: $*"; }

# run NAME RANKS ARGS...: mnist-train under mpirun, the output in $TMP/NAME.out; 0 on success.
run() {
	local name=$1 ranks=$2
	shift 2
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n "$ranks" "$TRAIN" --data "$TRAIN_ONLY" "$@" \
		>"$TMP/$name.out" 2>&1
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		fail "$name: mnist-train $* exited with status $rc; its output:"
		sed 's/^/    /' "$TMP/$name.out"
		return 1
	fi
}

case $CASE in
param-crc)
	if run crc 2 --model seed --limit 256 --batch-size 32 --epochs 1 --checkpoint-dir "$TMP/ckpt"; then
		ckpt=$TMP/ckpt/ckpt-0-4.safetensors
		mine=$(python3 - "$ckpt" <<'PY'
import json, struct, sys, zlib
blob = open(sys.argv[1], "rb").read()
(hlen,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + hlen])
header.pop("__metadata__")
params = sorted(v["data_offsets"] for k, v in header.items() if not k.startswith("optimizer."))
at = 0
for begin, end in params:
    if begin != at:
        sys.exit(f"{sys.argv[1]}: the parameter tensors are not one run of bytes from the data's start")
    at = end
print(f"{zlib.crc32(blob[8 + hlen:8 + hlen + at]) & 0xFFFFFFFF:08x}")
PY
		)
		if [ -z "$mine" ] || [ "$mine" != "$(field crc param_crc32)" ]; then
			fail "param_crc32=$(field crc param_crc32), but the final checkpoint's parameters give '$mine'"
		else
			ok "param_crc32=$mine: the CRC-32 of the final checkpoint's parameters"
		fi
	fi
	;;
*)
	echo "usage: $0 MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- param-crc" >&2
	exit 1
	;;
esac
[ $failures -eq 0 ] || { echo "FAIL: $failures check(s) failed"; exit 1; }
echo "PASS host_gaps $CASE"
