#!/usr/bin/env bash
# test_eval_only.sh - --eval-only CHECKPOINT scores a saved model and trains nothing; a
# finished run resumed says so and trains nothing either.
#
#   tests/reliability/test_eval_only.sh BACKEND build/mnist-train MNIST_Data mpirun --allow-run-as-root ...
#
# A 2-rank run on the host trains an mlp (--hidden 32, momentum, 2 epochs of 2000 images)
# with a checkpoint after each epoch; its summary gives the test accuracy and param_crc32
# of the model it ends with, which its last checkpoint holds. Then, on --backend BACKEND:
#   host   --eval-only DIR (2 ranks, no --model: the model is the checkpoint's), FILE at 1
#          and 3 ranks, and DIR with --model mlp --hidden 32 given: each reports the
#          training run's test_accuracy and param_crc32, model=mlp, nothing trained
#          (epochs=0 steps_per_epoch=0 images=0 train_seconds=0.000 final_loss=nan epoch_loss=nan,
#          no loss line), and rank 0 names the file it scored. Control: --eval-only of
#          the first epoch's checkpoint reports another param_crc32, so the comparison
#          sees which parameters were scored. Rank 1 alone given --eval-only (an MPMD
#          launch): status 2 from the start-up check on both ranks, not a hang.
#          The finished run: --resume DIR with the same --epochs 2. Rank 0 says
#          "resuming from .../ckpt-1-64.safetensors (after epoch 1 step 31, global step
#          64)", then on the next line that the run is finished (all 2 epochs trained),
#          and never "continuing at epoch"; nothing trained (images=0, no loss line),
#          final_loss=nan (the training run's own is a number), the same test_accuracy
#          and param_crc32.
#   cuda   (the CUDA simulator's build: tests/cmake/45-cudasim.cmake) --eval-only DIR on
#          the simulated CUDA backend at 2 ranks: backend=cuda, the host run's
#          test_accuracy and param_crc32.
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail
BACKEND_ARG=1 # the first argument: host or cuda (common.sh)
. "$(dirname "$0")/common.sh"

TRAINING=(--backend host --model mlp --hidden 32 --momentum 0.9 --lr 0.05 --limit 2000
	--log-every 10 --timeout 60)
runr train 2 "${TRAINING[@]}" --epochs 2 --checkpoint-dir "$TMP/ck" --keep 0
expect_ok train || finish
ACC=$(field train test_accuracy)
CRC=$(field train param_crc32)
LAST=$TMP/ck/ckpt-1-64.safetensors
[ -f "$LAST" ] && [ -f "$TMP/ck/ckpt-0-32.safetensors" ] ||
	{ fail "train: checkpoints $(ls "$TMP/ck"), expected ckpt-0-32 and ckpt-1-64"; finish; }
[ -n "$ACC" ] && [ "$ACC" != nan ] || { fail "train: no test accuracy ($ACC)"; finish; }

# expect_scored NAME RANKS: NAME scored the training run's model and trained nothing.
expect_scored() {
	local name=$1 ranks=$2 k want
	expect_ok "$name" || return
	for k in test_accuracy param_crc32 model backend ranks epochs steps_per_epoch images train_seconds final_loss epoch_loss test_images; do
		case $k in
		test_accuracy) want=$ACC ;;
		param_crc32) want=$CRC ;;
		model) want=mlp ;;
		backend) want=$BACKEND ;;
		ranks) want=$ranks ;;
		epochs | steps_per_epoch | images) want=0 ;;
		train_seconds) want=0.000 ;;
		final_loss | epoch_loss) want=nan ;;
		test_images) want=10000 ;;
		esac
		[ "$(field "$name" $k)" = "$want" ] || fail "$name: $k=$(field "$name" $k), expected $want"
	done
	! grep -q '^epoch: ' "$TMP/$name.out" || fail "$name: a loss or score line; nothing should train"
	rank0 "$name" stderr | grep -qF "mnist-train: --eval-only: scoring $LAST (--model mlp --hidden 32, after epoch 1 step 31, global step 64); nothing is trained" ||
		fail "$name: rank 0 does not say which checkpoint it scores; its stderr: $(rank0 "$name" stderr)"
	return 0
}

if [ "$BACKEND" = cuda ]; then
	runr sim 2 --backend cuda --eval-only "$TMP/ck" --timeout 120
	expect_scored sim 2 && ok "--eval-only on the simulated CUDA backend, 2 ranks: test_accuracy=$ACC param_crc32=$CRC, the host run's"
	finish
fi

runr dir2 2 --backend host --eval-only "$TMP/ck"
expect_scored dir2 2 && ok "--eval-only DIR at 2 ranks, no --model: test_accuracy=$ACC param_crc32=$CRC, the training run's, nothing trained"
for n in 1 3; do
	runr "file$n" "$n" --backend host --eval-only "$LAST"
	expect_scored "file$n" "$n" && ok "--eval-only FILE at $n rank(s): the same"
done
runr given 2 --backend host --eval-only "$TMP/ck" --model mlp --hidden 32
expect_scored given 2 && ok "--eval-only with the checkpoint's --model and --hidden given: the same"
# Control: the first epoch's parameters are other parameters.
runr first 2 --backend host --eval-only "$TMP/ck/ckpt-0-32.safetensors"
if expect_ok first; then
	got=$(field first param_crc32)
	[ -n "$got" ] && [ "$got" != "$CRC" ] && ok "control: the first epoch's checkpoint scores other parameters ($got)" ||
		fail "control: --eval-only of ckpt-0-32 reports param_crc32=$got, the final model's: the comparison cannot tell which model was scored"
fi

# Rank 1 alone given --eval-only (MPMD): refused by the start-up check on both ranks, not a
# hang (the ranks' start-up collectives must not depend on the flag).
timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n 1 "$TRAIN" --data "$DATA/train" --backend host --limit 2000 \
	--epochs 1 : -n 1 "$TRAIN" --data "$DATA/train" --backend host --eval-only "$TMP/ck" >"$TMP/mpmd.out" 2>&1
RC=$?
if [ "$RC" -eq 2 ] && [ "$(grep -c 'start-up check failed' "$TMP/mpmd.out")" -eq 2 ] &&
	grep -q "start-up check: rank 1 on .* differs from rank 0 on .*eval_only=$TMP/ck (rank 0: \"\")" "$TMP/mpmd.out" &&
	! grep -q '^summary:' "$TMP/mpmd.out"; then
	ok "--eval-only on rank 1 only (MPMD): both ranks refuse with status 2, rank 0 naming eval_only"
else
	fail "--eval-only on rank 1 only: status $RC, expected 2 from the start-up check on both ranks:"
	tail -8 "$TMP/mpmd.out" | sed 's/^/    /' >&2
fi

# ---- a finished run resumed -------------------------------------------------------------
runr finished 2 "${TRAINING[@]}" --epochs 2 --resume "$TMP/ck"
if expect_ok finished; then
	err0=$(rank0 finished stderr)
	at=$(grep -nF "mnist-train: resuming from $LAST (after epoch 1 step 31, global step 64)" <<<"$err0" | cut -d: -f1)
	next=$(grep -nxF "mnist-train: the run is finished (all 2 epochs trained): nothing left to train, only the test set is scored" <<<"$err0" | cut -d: -f1)
	if [ -z "$at" ] || [ -z "$next" ] || [ "$next" -ne $((at + 1)) ]; then
		fail "finished: expected 'resuming from $LAST (after epoch 1 step 31, global step 64)' and, on the next line, 'the run is finished (all 2 epochs trained)...'; rank 0's stderr:"
		sed 's/^/    /' <<<"$err0" >&2
	fi
	! grep -q "continuing at epoch" <<<"$err0" || fail "finished: says 'continuing at epoch' though nothing is left to train"
	! grep -q '^epoch: ' "$TMP/finished.out" || fail "finished: a loss line; nothing should train"
	[ "$(field finished final_loss)" = nan ] || fail "finished: final_loss=$(field finished final_loss), expected nan (no step trained)"
	[ "$(field finished epoch_loss)" = nan ] || fail "finished: epoch_loss=$(field finished epoch_loss), expected nan (no epoch trained)"
	[ "$(field finished images)" = 0 ] || fail "finished: images=$(field finished images), expected 0"
	[ "$(field finished param_crc32)" = "$CRC" ] && [ "$(field finished test_accuracy)" = "$ACC" ] ||
		fail "finished: param_crc32=$(field finished param_crc32) test_accuracy=$(field finished test_accuracy), the checkpoint's are $CRC $ACC"
	loss=$(field train final_loss)
	awk -v l="$loss" 'BEGIN { exit !(l + 0 == l && l > 0) }' || fail "control: the training run's final_loss=$loss is not a number"
	[ "$failures" -eq 0 ] && ok "a finished run resumed: 'resuming from' then 'the run is finished (all 2 epochs trained)', no 'continuing at', final_loss=nan (the training run's: $loss)"
fi
finish
