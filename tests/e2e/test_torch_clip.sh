#!/usr/bin/env bash
# test_torch_clip.sh - mnist-train's --clip-grad-norm against PyTorch's
# torch.nn.utils.clip_grad_norm_, step by step, from the same state.
#
#   PYTHON=/usr/bin/python3 tests/e2e/test_torch_clip.sh build/mnist-train MNIST_Data mpirun ...
#
# Full-batch training (1 rank, --limit 4000 --batch-size 4000: every step sees
# the same 4000 images, so the two trainers' different shuffles do not matter)
# of the linear model with SGD (lr 0.1), L2 weight decay 0.01 (which both add
# after clipping) and --clip-grad-norm 0.2, a bound the gradients' norm exceeds
# on most of the steps (PyTorch counts them: 87 of the 100 when written) and
# not on the rest, so both sides of the bound are crossed.
#   1. mnist-train trains 1 step and saves a checkpoint;
#   2. mnist-train resumes from it for 100 more steps, logging every loss;
#   3. bench/reference/train_ref.py --init loads the same checkpoint into a
#      PyTorch model and trains 100 steps with clip_grad_norm_(params, 0.2)
#      before each torch.optim.SGD step.
# Every one of the 100 losses must agree within 1e-4 relative. A control runs
# the reference without clipping, which must leave that bound within its 20
# steps (so the comparison sees the clipping), and the reference must have
# clipped on at least half of the steps. Without PyTorch (Debian's
# python3-torch) the test is skipped (status 77) with the reason. KEEP_TMP=1
# keeps the runs' files. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/../script_args.sh"
. "$(dirname "$0")/torch_common.sh"
STEPS=100
CLIP=0.2

HYPER=(--model linear --lr 0.1 --weight-decay 0.01 --limit 4000 --batch-size 4000 --log-every 1)
COMMON=("${HYPER[@]}" --clip-grad-norm "$CLIP")
if ! timeout -k 10 120 "${MPIRUN[@]}" -n 1 "$TRAIN" --data "$TRAIN_DATA" "${COMMON[@]}" --epochs 1 \
	--checkpoint-dir "$TMP/ck" >"$TMP/first.out" 2>&1 || [ ! -f "$TMP/ck/ckpt-0-1.safetensors" ]; then
	fail "mnist-train did not save ckpt-0-1.safetensors after 1 step:"
	tail -20 "$TMP/first.out" >&2
	exit 1
fi
CKPT=$TMP/ck/ckpt-0-1.safetensors
timeout -k 10 180 "${MPIRUN[@]}" -n 1 "$TRAIN" --data "$TRAIN_DATA" "${COMMON[@]}" --epochs $((STEPS + 1)) \
	--resume "$CKPT" --metrics "$TMP/ours.jsonl" >"$TMP/ours.out" 2>&1 ||
	fail "mnist-train --resume for $STEPS steps failed: $(tail -3 "$TMP/ours.out")"
reference() { # NAME STEPS [ARGS...]
	local name=$1 steps=$2
	shift 2
	ref_args "$name" --data "$TRAIN_DATA" "${HYPER[@]}" --epochs "$steps" \
		--threads 1 --init "$CKPT" --metrics "$TMP/$name.jsonl" "$@"
}
reference torch "$STEPS" --clip-grad-norm "$CLIP"
# The control leaves the bound at step 1 (measured): its first 20 steps show it, at a fifth of
# the reference's CPU (compare_losses.py --control compares the steps both logged).
reference control 20
run_refs

clipped=$(grep '^summary:' "$TMP/torch.log" | tr ' ' '\n' | sed -n 's/^clipped_steps=//p')
if [ -z "$clipped" ] || [ "$clipped" -lt $((STEPS / 2)) ]; then
	fail "PyTorch clipped on '${clipped}' of the $STEPS steps, expected most: --clip-grad-norm $CLIP does not test clipping"
else
	echo "ok: PyTorch's clip_grad_norm_ scaled the gradients on $clipped of the $STEPS steps (bound $CLIP)"
fi
# compare_losses.py: the losses step by step (its text says what passes).
CMP=("$PYTHON" "$(dirname "$0")/compare_losses.py" "$TMP/ours.jsonl")
"${CMP[@]}" "$TMP/torch.jsonl" "$STEPS" "$STEPS SGD steps with --clip-grad-norm $CLIP, mnist-train vs clip_grad_norm_ + torch.optim.SGD from the same checkpoint" ||
	failures=$((failures + 1))
"${CMP[@]}" "$TMP/control.jsonl" "$STEPS" "PyTorch without clipping against mnist-train with --clip-grad-norm $CLIP" --control ||
	failures=$((failures + 1))
[ "$failures" -eq 0 ] && echo "all checks passed" && exit 0
exit 1
