#!/usr/bin/env bash
# test_host_gaps.sh - checks of the training loop that no other test makes,
# each a bug tests/mutants_host.sh plants and the rest of the suite missed.
#
#   tests/e2e/test_host_gaps.sh MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- CASE
#
# CASE, on the simulated CUDA backend (MNIST_TRAIN build/cudasim/mnist-train,
# MPIRUN with the simulator's environment), where launches of several steps
# replay one captured graph (--graph-steps, host/train/launch.c):
#   graph-save-every   1 rank, 20 steps, --save-every 3, --log-every 100: the
#                      launches end where checkpoints are due, so every one is
#                      written (global steps 3, 6, ..., 18 and the epoch's end,
#                      20), as with --graph-steps 1.
#   graph-short-batch  1 rank, --limit 404 -b 32: 13 steps an epoch, the last
#                      of 20 rows, for 2 epochs. The default --graph-steps 8
#                      and --graph-steps 1 end bitwise the same (param_crc32,
#                      final_loss): the short batch is never replayed as a full
#                      one; images= is 808 in both (every step of a launch
#                      counted, the short one by its rows).
# and on the host backend (MNIST_TRAIN build/mnist-train):
#   param-crc          2 ranks, one epoch, --checkpoint-dir: the summary's
#                      param_crc32 is the CRC-32 of every parameter, as the final
#                      checkpoint holds them (its parameter tensors, in their
#                      data order, the flat buffer's).
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

# same NAME OTHER KEY...: the two runs' summaries agree on each KEY.
same() {
	local a=$1 b=$2 key
	shift 2
	for key in "$@"; do
		[ "$(field "$a" "$key")" = "$(field "$b" "$key")" ] ||
			fail "$a: $key=$(field "$a" "$key"), $b: $key=$(field "$b" "$key"): expected the same"
	done
}

SIM=(--backend cuda --model seed --batch-size 32 --log-every 100 --gpu-plan heuristic)
case $CASE in
graph-save-every)
	want="ckpt-0-12.safetensors ckpt-0-15.safetensors ckpt-0-18.safetensors ckpt-0-20.safetensors ckpt-0-3.safetensors ckpt-0-6.safetensors ckpt-0-9.safetensors "
	for steps in 8 1; do
		run "launch$steps" 1 "${SIM[@]}" --limit 640 --epochs 1 --graph-steps "$steps" \
			--save-every 3 --keep 0 --checkpoint-dir "$TMP/ckpt$steps" || continue
		got=$(cd "$TMP/ckpt$steps" && ls ckpt-* 2>/dev/null | sort | tr '\n' ' ')
		[ "$got" = "$want" ] ||
			fail "--graph-steps $steps --save-every 3: checkpoints '$got', expected '$want'"
	done
	[ $failures -gt 0 ] || ok "--save-every 3 with launches of up to 8 steps and of 1: every due checkpoint written"
	;;
graph-short-batch)
	for steps in 8 1; do
		run "launch$steps" 1 "${SIM[@]}" --limit 404 --epochs 2 --graph-steps "$steps" || continue
		[ "$(field "launch$steps" images)" = 808 ] ||
			fail "--graph-steps $steps: images=$(field "launch$steps" images), expected 808 (2 epochs of 404)"
		[ "$(field "launch$steps" steps_per_epoch)" = 13 ] ||
			fail "--graph-steps $steps: steps_per_epoch=$(field "launch$steps" steps_per_epoch), expected 13"
	done
	same launch8 launch1 param_crc32 final_loss
	[ $failures -gt 0 ] || ok "launches of 8 and of 1 step around a short last batch: the same run, images=808"
	;;
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
	echo "usage: $0 MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...] -- graph-save-every|graph-short-batch|param-crc" >&2
	exit 1
	;;
esac
[ $failures -eq 0 ] || { echo "FAIL: $failures check(s) failed"; exit 1; }
echo "PASS host_gaps $CASE"
