#!/usr/bin/env bash
# test_init_from.sh - --init-from CHECKPOINT starts a new run from a checkpoint's
# parameters and nothing else.
#
#   tests/reliability/test_init_from.sh host|cuda build/mnist-train MNIST_Data mpirun --allow-run-as-root ...
#
# A 2-rank run trains an mlp (--hidden 64, momentum 0.9, 2 epochs of 2000 images, 32
# steps an epoch) and saves ckpt-1-64 at its end (global step 64; its velocity is not
# zero). Then, each at 2 ranks with --epochs 1:
#   tiny     --init-from DIR --lr 1e-30 (no momentum): every update is below half an ulp
#            of its parameter, so the run ends with bitwise the checkpoint's parameters:
#            param_crc32 and test_accuracy of the training run. Rank 0 names the file and
#            says it takes the parameters and nothing else; the run trains epoch 0 from
#            step 0, all of it (images=2000, loss lines of epoch 0 only), where a --resume
#            of that checkpoint would refuse --epochs 1 (it is at the end of epoch 1).
#            Control: the same run without --init-from ends elsewhere.
#   tune     --init-from FILE --lr 0.05 --momentum 0.9: trains (param_crc32 changes), and
#   zerov    the same from a copy of FILE whose velocity is zeroed (re-sealed): the same
#            param_crc32 bitwise, so the checkpoint's optimizer state is not taken (a
#            --resume from the two differs: tests/reliability/test_resume.sh).
#   adamw    --init-from FILE --optimizer adamw: accepted (a resume refuses another optimizer).
#   resumed  a fine-tuning run of 1 epoch with --checkpoint-dir, then --resume of its own
#            checkpoint (without --init-from) for a second epoch: bitwise the fine-tuning
#            run of 2 epochs straight, continuing at epoch 1 step 0.
# With cuda (the CUDA simulator's build: tests/cmake/45-cudasim.cmake) the checkpoint is the
# host backend's and only tiny and its control run, on --backend cuda: a checkpoint of either
# backend starts a run on the other, to the bit.
# A checkpoint of another model, a missing or damaged file, and --init-from with --resume
# are refused on every rank: tests/e2e/test_bad_input.sh.
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail
BACKEND_ARG=1 # the first argument: host or cuda (common.sh)
. "$(dirname "$0")/common.sh"

# loss_epochs NAME: the epochs of rank 0's loss lines, each once, in order.
loss_epochs() { rank0 "$1" stdout | sed -nE 's/^epoch: ([0-9]+), step: .*/\1/p' | uniq | tr '\n' ' ' | sed 's/ $//'; }
first_loss_line() { rank0 "$1" stdout | grep -m1 '^epoch: ' | sed -E 's/, loss is .*//'; }

BASE=(--backend host --model mlp --hidden 64 --limit 2000 --log-every 10 --timeout 60)
runr src 2 "${BASE[@]}" --momentum 0.9 --lr 0.05 --epochs 2 --checkpoint-dir "$TMP/ck"
expect_ok src || finish
CRC=$(field src param_crc32)
ACC=$(field src test_accuracy)
CK=$TMP/ck/ckpt-1-64.safetensors
[ -f "$CK" ] || { fail "src: no $CK: $(ls "$TMP/ck")"; finish; }

# ---- the parameters are the checkpoint's ---------------------------------------------------
[ "$BACKEND" = cuda ] && BASE=("${BASE[@]/#host/cuda}" --gpu-plan heuristic)
runr tiny 2 "${BASE[@]}" --lr 1e-30 --epochs 1 --init-from "$TMP/ck"
if expect_ok tiny; then
	[ "$(field tiny backend)" = "$BACKEND" ] || fail "tiny: backend=$(field tiny backend), expected $BACKEND"
	[ "$(field tiny param_crc32)" = "$CRC" ] && [ "$(field tiny test_accuracy)" = "$ACC" ] &&
		ok "--init-from DIR --lr 1e-30: the checkpoint's parameters bitwise (param_crc32=$CRC, test_accuracy=$ACC)" ||
		fail "tiny: param_crc32=$(field tiny param_crc32) test_accuracy=$(field tiny test_accuracy), the checkpoint's $CRC $ACC: the parameters were not loaded"
	rank0 tiny stderr | grep -qF "mnist-train: --init-from: the parameters of $CK (--model mlp --hidden 64, after epoch 1 step 31, global step 64) and nothing else: a new run from epoch 0 step 0 with this run's settings and a fresh optimizer state" ||
		fail "tiny: rank 0 does not say what it takes from $CK; its stderr: $(rank0 tiny stderr)"
	[ "$(first_loss_line tiny)" = "epoch: 0, step: 0" ] && [ "$(loss_epochs tiny)" = 0 ] &&
		[ "$(field tiny images)" = 2000 ] && [ "$(field tiny epochs)" = 1 ] ||
		fail "tiny: first loss line '$(first_loss_line tiny)', epochs '$(loss_epochs tiny)', images=$(field tiny images): expected epoch 0 from step 0, all 2000 images (the position is not taken)"
	! rank0 tiny stderr | grep -q "resuming from" || fail "tiny: says it resumes"
fi
runr fresh 2 "${BASE[@]}" --lr 1e-30 --epochs 1
if expect_ok fresh; then
	[ "$(field fresh param_crc32)" != "$CRC" ] && ok "control: without --init-from the same run ends elsewhere ($(field fresh param_crc32))" ||
		fail "control: a fresh run ends at the checkpoint's param_crc32 $CRC: the comparison above shows nothing"
fi

[ "$BACKEND" = cuda ] && finish

# ---- and nothing else: not the optimizer state ------------------------------------------------
/usr/bin/env python3 "$(dirname "$0")/zero_optimizer.py" "$CK" "$TMP/zerov.safetensors" || fail "could not build the zero-velocity copy"
TUNE=("${BASE[@]}" --momentum 0.9 --lr 0.05 --epochs 1)
runr tune 2 "${TUNE[@]}" --init-from "$CK"
runr zerov 2 "${TUNE[@]}" --init-from "$TMP/zerov.safetensors"
if expect_ok tune && expect_ok zerov; then
	got=$(field tune param_crc32)
	[ "$got" != "$CRC" ] || fail "tune: --lr 0.05 changed nothing (param_crc32=$got)"
	[ "$(first_loss_line tune)" = "epoch: 0, step: 0" ] && [ "$(loss_epochs tune)" = 0 ] ||
		fail "tune: loss lines of epochs '$(loss_epochs tune)' from '$(first_loss_line tune)', expected epoch 0 from step 0"
	[ "$(field zerov param_crc32)" = "$got" ] &&
		ok "--init-from FILE --lr 0.05 --momentum 0.9: trained (param_crc32=$got), the same from a copy with the velocity zeroed: the optimizer state is not taken" ||
		fail "zerov: param_crc32=$(field zerov param_crc32), from the real velocity $got: the checkpoint's optimizer state was taken"
fi
runr adamw 2 "${BASE[@]}" --optimizer adamw --lr 0.001 --epochs 1 --init-from "$CK"
expect_ok adamw && ok "--init-from an SGD checkpoint with --optimizer adamw: accepted (test_accuracy=$(field adamw test_accuracy))"

# ---- a fine-tuning run resumed from its own checkpoint ------------------------------------------
FT=("${BASE[@]}" --momentum 0.9 --lr 0.02)
runr ft_straight 2 "${FT[@]}" --epochs 2 --init-from "$CK"
runr ft_first 2 "${FT[@]}" --epochs 1 --init-from "$CK" --checkpoint-dir "$TMP/ft"
runr ft_resumed 2 "${FT[@]}" --epochs 2 --resume "$TMP/ft" --checkpoint-dir "$TMP/ft"
if expect_ok ft_straight && expect_ok ft_first && expect_ok ft_resumed; then
	rank0 ft_resumed stderr | grep -qF "resuming from $TMP/ft/ckpt-0-32.safetensors (after epoch 0 step 31, global step 32); continuing at epoch 1 step 0" ||
		fail "ft_resumed: no 'resuming from $TMP/ft/ckpt-0-32.safetensors ...; continuing at epoch 1 step 0'; rank 0's stderr: $(rank0 ft_resumed stderr)"
	[ "$(field ft_resumed param_crc32)" = "$(field ft_straight param_crc32)" ] &&
		ok "a fine-tuning run resumed from its own checkpoint: bitwise the 2 epochs straight ($(field ft_straight param_crc32))" ||
		fail "ft_resumed: param_crc32=$(field ft_resumed param_crc32), the straight fine-tuning run's $(field ft_straight param_crc32)"
fi
finish
