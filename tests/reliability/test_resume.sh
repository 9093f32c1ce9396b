#!/usr/bin/env bash
# test_resume.sh - checkpoints and --resume through mnist-train under a real mpirun.
#
#   tests/reliability/test_resume.sh build/mnist-train MNIST_Data mpirun --allow-run-as-root --oversubscribe
#
# 1. The issue's case: the seed model, 2 epochs straight against 1 epoch, then
#    --resume DIR and 1 more: param_crc32 identical (the host backend is
#    deterministic, so the resumed run must be bitwise the straight one).
# 2. An mlp with momentum (so the optimizer state matters), checkpoints every
#    50 steps: resuming from the epoch-end checkpoint (DIR) and from a
#    mid-epoch one (FILE) both give the straight run's parameters bitwise. A
#    control resumes from the mid-epoch file with the velocity zeroed, which
#    must not.
# 3. Another rank count with the same global batch (4 ranks x 16 instead of
#    2 x 32) is accepted and trains to the same accuracy; 3 ranks x 32 is
#    refused with status 2 and a message naming the global batch.
# 4. The newest checkpoint truncated, or with one byte flipped: --resume DIR
#    warns, naming it, falls back to the previous one and still ends bitwise
#    equal to the straight run. The bad file given as --resume FILE: status 2
#    and a message naming it. A checkpoint of another configuration (--seed):
#    status 2 naming the difference. Ranks launched with different --resume
#    (MPMD): status 2 on both from the start-up check, not a hang. No
#    temporary file is left behind.
# 5. LeNet-5 with momentum, a cosine schedule and a warm-up: resumed
#    mid-epoch (FILE) and from the epoch end, bitwise equal to the straight
#    run; a control at a constant rate ends elsewhere (the rates matter);
#    another --epochs, or another schedule, is refused with status 2.
# 6. An mlp with AdamW and weight decay (moments and an update count to
#    carry): 1 + 1 epochs (DIR) and from mid-epoch (FILE) bitwise equal to 2
#    straight; controls: exp_avg zeroed ends elsewhere, an optimizer.step that
#    is not the global step is refused; the checkpoint resumed with
#    --optimizer sgd, and an SGD checkpoint with --optimizer adamw: status 2
#    naming --optimizer.
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail
. "$(dirname "$0")/common.sh"

COMMON=(--log-every 1000 --timeout 60)

# ---- 1. seed model, 2 epochs vs 1 + resume + 1 ---------------------------------
run seed_straight 2 "${COMMON[@]}" --epochs 2
expect_ok seed_straight && SEED_CRC=$(field seed_straight param_crc32)
run seed_first 2 "${COMMON[@]}" --epochs 1 --checkpoint-dir "$TMP/seed"
expect_ok seed_first
[ -f "$TMP/seed/ckpt-0-938.safetensors" ] || fail "seed: no ckpt-0-938.safetensors after epoch 0: $(ls -A "$TMP/seed")"
run seed_resumed 2 "${COMMON[@]}" --epochs 2 --checkpoint-dir "$TMP/seed" --resume "$TMP/seed"
if expect_ok seed_resumed; then
	got=$(field seed_resumed param_crc32)
	if [ "$got" = "${SEED_CRC:-none}" ]; then
		ok "seed model: 2 epochs straight and 1 + resume + 1 end bitwise equal (param_crc32=$got)"
	else
		fail "seed model: straight param_crc32=${SEED_CRC:-none}, resumed $got"
	fi
	grep -q "resuming from $TMP/seed/ckpt-0-938.safetensors (after epoch 0 step 937, global step 938); continuing at epoch 1 step 0" \
		"$TMP/seed_resumed.out" || fail "seed: no 'resuming from .../ckpt-0-938' line"
	[ "$(field seed_resumed images)" = 60000 ] || fail "seed: the resumed run trained $(field seed_resumed images) images, expected one epoch (60000)"
	[ -f "$TMP/seed/ckpt-1-1876.safetensors" ] || fail "seed: the resumed run saved no ckpt-1-1876.safetensors"
fi

# ---- 2. mlp with momentum, mid-epoch checkpoints ----------------------------------
# The runs of sections 2 to 6 train on the first 12000 or 3200 images and compare
# param_crc32: they read a copy of those (tests/e2e/subset.sh) without a test set, which saves
# reading 47 MB and scoring 10,000 images after each of some 70 epochs (half the test's CPU),
# and ends at the same bits. The two whose test accuracies are compared (mlp_straight,
# mlp_4ranks) score the whole test set (--test-data).
. "$(dirname "$0")/../e2e/subset.sh"
mnist_subset "$DATA" "$TMP/data12k" 12000 || fail "cannot copy the first 12000 images"
MLP=("${COMMON[@]}" --data "$TMP/data12k/train" --model mlp --hidden 32 --momentum 0.9 --lr 0.02 --limit 12000)
run mlp_straight 2 "${MLP[@]}" --epochs 2 --test-data "$DATA/test"
expect_ok mlp_straight && MLP_CRC=$(field mlp_straight param_crc32)
MLP_ACC=$(field mlp_straight test_accuracy)
run mlp_first 2 "${MLP[@]}" --epochs 1 --checkpoint-dir "$TMP/mlp" --save-every 50 --keep 0
expect_ok mlp_first
want="ckpt-0-100.safetensors ckpt-0-150.safetensors ckpt-0-188.safetensors ckpt-0-50.safetensors"
have=$(ls "$TMP/mlp" | sort | tr '\n' ' ' | sed 's/ $//')
[ "$have" = "$want" ] || fail "mlp: checkpoints '$have', expected '$want' (every 50 steps and the epoch end, 188 steps)"
run mlp_resumed_dir 2 "${MLP[@]}" --epochs 2 --resume "$TMP/mlp"
if expect_ok mlp_resumed_dir; then
	got=$(field mlp_resumed_dir param_crc32)
	[ "$got" = "${MLP_CRC:-none}" ] && ok "mlp + momentum: resumed from the epoch end (DIR), bitwise equal ($got)" ||
		fail "mlp: straight param_crc32=${MLP_CRC:-none}, resumed from DIR $got"
fi
cp -r "$TMP/mlp" "$TMP/mlp_mid"
run mlp_resumed_mid 2 "${MLP[@]}" --epochs 2 --resume "$TMP/mlp_mid/ckpt-0-100.safetensors" \
	--checkpoint-dir "$TMP/mlp_mid" --keep 0
if expect_ok mlp_resumed_mid; then
	got=$(field mlp_resumed_mid param_crc32)
	[ "$got" = "${MLP_CRC:-none}" ] && ok "mlp + momentum: resumed mid-epoch (FILE, epoch 0 step 100), bitwise equal ($got)" ||
		fail "mlp: straight param_crc32=${MLP_CRC:-none}, resumed from step 100 $got"
	grep -q "continuing at epoch 0 step 100" "$TMP/mlp_resumed_mid.out" || fail "mlp: mid-epoch resume did not continue at epoch 0 step 100"
	grep -q "warning: $TMP/mlp_mid holds 2 checkpoints newer than the one resumed from (newest: ckpt-0-188.safetensors)" \
		"$TMP/mlp_resumed_mid.out" || fail "mlp: no warning about the 2 newer checkpoints left in --checkpoint-dir"
	[ "$(field mlp_resumed_mid images)" = $(((188 - 100 - 1) * 64 + 32 + 188 * 64 - 32)) ] ||
		fail "mlp: mid-epoch resume trained $(field mlp_resumed_mid images) images"
fi
# Control: the same file with the velocity zeroed (re-sealed with a valid checksum) must differ.
/usr/bin/env python3 "$(dirname "$0")/zero_optimizer.py" "$TMP/mlp/ckpt-0-100.safetensors" "$TMP/zerov.safetensors" || fail "could not build the zero-velocity control"
run mlp_zero_velocity 2 "${MLP[@]}" --epochs 2 --resume "$TMP/zerov.safetensors"
if expect_ok mlp_zero_velocity; then
	got=$(field mlp_zero_velocity param_crc32)
	[ "$got" != "${MLP_CRC:-none}" ] && ok "control: the velocity zeroed gives other parameters ($got), so the comparison sees the optimizer state" ||
		fail "control: zeroing the velocity changed nothing: the test cannot see the optimizer state"
fi

# ---- 3. rank count ---------------------------------------------------------------
run mlp_4ranks 4 "${MLP[@]}" --batch-size 16 --epochs 2 --resume "$TMP/mlp/ckpt-0-100.safetensors" \
	--test-data "$DATA/test"
if expect_ok mlp_4ranks; then
	grep -q "written by 2 ranks x batch 32, this run has 4 x 16" "$TMP/mlp_4ranks.out" ||
		fail "4 ranks: no note about the changed rank count"
	acc=$(field mlp_4ranks test_accuracy)
	if awk -v a="$acc" -v b="${MLP_ACC:-0}" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }'; then
		ok "4 ranks x 16 resumed from 2 x 32: accepted, test accuracy $acc (2 ranks straight: $MLP_ACC)"
	else
		fail "4 ranks x 16 resumed: test accuracy $acc, 2 ranks straight $MLP_ACC (more than 0.01 apart)"
	fi
fi
run mlp_3ranks 3 "${MLP[@]}" --epochs 2 --resume "$TMP/mlp"
if [ "$RC" -ne 2 ]; then
	fail "3 ranks x 32 (global batch 96 vs 64): exit status $RC, expected 2"
elif ! grep -q "global batch 64 in the checkpoint (2 ranks x --batch-size 32), 96 here" "$TMP/mlp_3ranks.out"; then
	fail "3 ranks: the refusal does not explain the global batch:"
	sed 's/^/    /' "$TMP/mlp_3ranks.out" >&2
else
	ok "3 ranks x 32: refused with status 2 ($(grep -m1 -o 'global batch 64[^:]*' "$TMP/mlp_3ranks.out"))"
fi

# ---- 4. corrupt newest: fallback; bad FILE; other configuration ------------------------
for kind in truncated flipped; do
	d="$TMP/fb_$kind"
	cp -r "$TMP/mlp" "$d"
	newest="$d/ckpt-0-188.safetensors"
	if [ "$kind" = truncated ]; then
		truncate -s 30000 "$newest"
	else
		# Invert one byte of the data (whatever it was).
		byte=$(od -A n -t u1 -j 40000 -N 1 "$newest" | tr -d ' ')
		printf "\\$(printf '%03o' $((byte ^ 255)))" | dd of="$newest" bs=1 seek=40000 conv=notrunc status=none
	fi
	run "fallback_$kind" 2 "${MLP[@]}" --epochs 2 --resume "$d"
	if expect_ok "fallback_$kind"; then
		out="$TMP/fallback_$kind.out"
		grep -q "warning: skipping checkpoint $newest: .*; falling back to the previous one" "$out" ||
			fail "$kind newest: no warning naming $newest"
		grep -q "resuming from $d/ckpt-0-150.safetensors" "$out" || fail "$kind newest: did not resume from ckpt-0-150"
		got=$(field "fallback_$kind" param_crc32)
		[ "$got" = "${MLP_CRC:-none}" ] && ok "$kind newest checkpoint: warned, fell back to ckpt-0-150, still bitwise equal ($got)" ||
			fail "$kind newest: param_crc32 $got, straight ${MLP_CRC:-none}"
	fi
	run "badfile_$kind" 2 "${MLP[@]}" --epochs 2 --resume "$newest"
	if [ "$RC" -ne 2 ]; then
		fail "--resume of the $kind file: exit status $RC, expected 2"
	elif ! grep -q "^mnist-train: --resume $newest: $newest: " "$TMP/badfile_$kind.out"; then
		fail "--resume of the $kind file: no message naming it:"
		sed 's/^/    /' "$TMP/badfile_$kind.out" >&2
	elif grep -q '^summary:' "$TMP/badfile_$kind.out"; then
		fail "--resume of the $kind file: trained anyway"
	else
		ok "--resume FILE of the $kind file: status 2, $(grep -m1 -o "$newest: [^(]*" "$TMP/badfile_$kind.out" | tail -1)"
	fi
done
run other_seed 2 "${MLP[@]}" --epochs 2 --seed 7 --resume "$TMP/mlp"
if [ "$RC" -ne 2 ] || ! grep -q "does not fit this run: --seed 1 in the checkpoint, 7 here" "$TMP/other_seed.out"; then
	fail "--seed 7 against a --seed 1 checkpoint: status $RC, expected 2 and a message naming --seed"
	sed 's/^/    /' "$TMP/other_seed.out" >&2
else
	ok "another configuration (--seed 7): refused with status 2, naming --seed"
fi
run empty_dir 2 "${MLP[@]}" --epochs 2 --resume "$TMP/nothing_here"
[ "$RC" -eq 2 ] && grep -q -- "--resume $TMP/nothing_here" "$TMP/empty_dir.out" &&
	ok "--resume of a missing path: status 2 naming it" || fail "--resume of a missing path: status $RC"

# Ranks launched with different --resume (MPMD): refused on every rank, not a hang.
timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n 1 "$TRAIN" --data "$DATA/train" "${MLP[@]}" --epochs 2 \
	--resume "$TMP/mlp" : -n 1 "$TRAIN" --data "$DATA/train" "${MLP[@]}" --epochs 2 >"$TMP/mpmd.out" 2>&1
RC=$?
if [ "$RC" -eq 2 ] && [ "$(grep -c 'start-up check failed' "$TMP/mpmd.out")" -eq 2 ] &&
	grep -q "start-up check: rank 1 on .* differs from rank 0 on .*: resume=\"\" (rank 0: $TMP/mlp)" "$TMP/mpmd.out" &&
	! grep -q '^summary:' "$TMP/mpmd.out"; then
	ok "ranks with different --resume (MPMD): both refuse with status 2, rank 0 naming --resume"
else
	fail "ranks with different --resume: status $RC, expected 2 with a message from each rank"
	tail -8 "$TMP/mpmd.out" | sed 's/^/    /' >&2
fi

# ---- 5. lenet, cosine schedule with warm-up -----------------------------------------
# 3200 examples, 2 ranks x 32: 50 steps per epoch, 100 in all; 10 of warm-up.
mnist_subset "$DATA" "$TMP/lenet_data" 3200 || fail "lenet: cannot copy the first 3200 images"
LENET=("${COMMON[@]}" --data "$TMP/lenet_data/train" --model lenet --momentum 0.9 --lr 0.05 --limit 3200 --lr-schedule cosine
	--warmup-steps 10)
run lenet_straight 2 "${LENET[@]}" --epochs 2
expect_ok lenet_straight && LENET_CRC=$(field lenet_straight param_crc32)
run lenet_first 2 "${LENET[@]}" --epochs 2 --checkpoint-dir "$TMP/lenet" --save-every 30 --keep 0
expect_ok lenet_first
[ "$(field lenet_first param_crc32)" = "${LENET_CRC:-none}" ] ||
	fail "lenet: saving checkpoints changed the result ($(field lenet_first param_crc32) vs ${LENET_CRC:-none})"
for from in ckpt-0-30 ckpt-0-50 ckpt-1-60; do
	run "lenet_from_$from" 2 "${LENET[@]}" --epochs 2 --resume "$TMP/lenet/$from.safetensors"
	if expect_ok "lenet_from_$from"; then
		got=$(field "lenet_from_$from" param_crc32)
		[ "$got" = "${LENET_CRC:-none}" ] &&
			ok "lenet + cosine + warm-up: resumed from $from, bitwise equal to the straight run ($got)" ||
			fail "lenet: straight param_crc32=${LENET_CRC:-none}, resumed from $from $got"
	fi
done
run lenet_constant 2 "${COMMON[@]}" --data "$TMP/lenet_data/train" --model lenet --momentum 0.9 --lr 0.05 --limit 3200 --epochs 2
if expect_ok lenet_constant; then
	got=$(field lenet_constant param_crc32)
	[ "$got" != "${LENET_CRC:-none}" ] && ok "control: a constant rate ends elsewhere ($got), so the schedule is applied" ||
		fail "control: the constant rate gave the cosine run's parameters"
fi
run lenet_more_epochs 2 "${LENET[@]}" --epochs 3 --resume "$TMP/lenet/ckpt-0-30.safetensors"
[ "$RC" -eq 2 ] && grep -q -- "--epochs 2 in the checkpoint, 3 here, with --lr-schedule cosine" "$TMP/lenet_more_epochs.out" &&
	ok "cosine checkpoint with another --epochs: refused with status 2, naming --epochs" ||
	fail "cosine checkpoint with --epochs 3: status $RC, expected 2 naming --epochs"
run lenet_other_schedule 2 "${COMMON[@]}" --data "$TMP/lenet_data/train" --model lenet --momentum 0.9 --lr 0.05 --limit 3200 --epochs 2 \
	--warmup-steps 10 --resume "$TMP/lenet/ckpt-0-30.safetensors"
[ "$RC" -eq 2 ] && grep -q -- "--lr-schedule cosine in the checkpoint, constant here" "$TMP/lenet_other_schedule.out" &&
	ok "cosine checkpoint resumed at a constant rate: refused with status 2, naming --lr-schedule" ||
	fail "cosine checkpoint with a constant schedule: status $RC, expected 2 naming --lr-schedule"

# ---- 6. mlp with AdamW -----------------------------------------------------------------
ADAMW=("${COMMON[@]}" --data "$TMP/data12k/train" --model mlp --hidden 32 --optimizer adamw --lr 0.002 --weight-decay 0.01
	--limit 12000)
run adamw_straight 2 "${ADAMW[@]}" --epochs 2
expect_ok adamw_straight && ADAMW_CRC=$(field adamw_straight param_crc32)
run adamw_first 2 "${ADAMW[@]}" --epochs 1 --checkpoint-dir "$TMP/adamw" --save-every 100 --keep 0
expect_ok adamw_first
for from in "$TMP/adamw" "$TMP/adamw/ckpt-0-100.safetensors"; do
	run adamw_resumed 2 "${ADAMW[@]}" --epochs 2 --resume "$from"
	if expect_ok adamw_resumed; then
		got=$(field adamw_resumed param_crc32)
		[ "$got" = "${ADAMW_CRC:-none}" ] && ok "mlp + AdamW: resumed from ${from#"$TMP"/}, bitwise equal to 2 epochs straight ($got)" ||
			fail "mlp + AdamW: straight param_crc32=${ADAMW_CRC:-none}, resumed from ${from#"$TMP"/} $got"
	fi
done
# Controls, re-sealed with a valid checksum: exp_avg zeroed; optimizer.step off by one.
/usr/bin/env python3 - "$TMP/adamw/ckpt-0-100.safetensors" "$TMP/adamw_zero_m.safetensors" "$TMP/adamw_step.safetensors" <<'EOF' || fail "could not build the AdamW controls"
import json, struct, sys, zlib
src = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", src[:8])
hdr = json.loads(src[8:8 + n])
def reseal(blob, path):
    want = hdr["__metadata__"]["checksum"]
    at = blob.find(b'"checksum":"' + want.encode()) + len('"checksum":"crc32:')
    blob[at:at + 8] = b"00000000"
    blob[at:at + 8] = b"%08x" % (zlib.crc32(bytes(blob)) & 0xFFFFFFFF)
    open(path, "wb").write(blob)
zero_m, step = bytearray(src), bytearray(src)
for name, t in hdr.items():
    if name == "__metadata__":
        continue
    b, e = t["data_offsets"]
    if name.endswith(".exp_avg"):
        zero_m[8 + n + b:8 + n + e] = bytes(e - b)
    if name == "optimizer.step":
        assert struct.unpack("<f", step[8 + n + b:8 + n + e])[0] == 100.0, "optimizer.step is not 100"
        step[8 + n + b:8 + n + e] = struct.pack("<f", 101.0)
reseal(zero_m, sys.argv[2])
reseal(step, sys.argv[3])
EOF
run adamw_zero_m 2 "${ADAMW[@]}" --epochs 2 --resume "$TMP/adamw_zero_m.safetensors"
if expect_ok adamw_zero_m; then
	got=$(field adamw_zero_m param_crc32)
	[ "$got" != "${ADAMW_CRC:-none}" ] && ok "control: exp_avg zeroed gives other parameters ($got), so the moments are restored" ||
		fail "control: zeroing exp_avg changed nothing: the test cannot see AdamW's state"
fi
run adamw_bad_step 2 "${ADAMW[@]}" --epochs 2 --resume "$TMP/adamw_step.safetensors"
[ "$RC" -eq 2 ] && grep -q "optimizer.step is 101, but the checkpoint is at global step 100" "$TMP/adamw_bad_step.out" &&
	ok "an optimizer.step that is not the global step: refused with status 2" ||
	fail "optimizer.step 101 at global step 100: status $RC, expected 2 naming optimizer.step"
run adamw_as_sgd 2 "${COMMON[@]}" --data "$TMP/data12k/train" --model mlp --hidden 32 --lr 0.002 --weight-decay 0.01 --limit 12000 \
	--epochs 2 --resume "$TMP/adamw"
[ "$RC" -eq 2 ] && [ "$(grep -c -- "--optimizer adamw in the checkpoint, sgd here" "$TMP/adamw_as_sgd.out")" -eq 1 ] &&
	ok "an AdamW checkpoint resumed with --optimizer sgd: refused with status 2, one message naming --optimizer" ||
	fail "AdamW checkpoint under sgd: status $RC, expected 2 with one message naming --optimizer"
run sgd_as_adamw 2 "${COMMON[@]}" --data "$TMP/data12k/train" --model mlp --hidden 32 --optimizer adamw --lr 0.02 --limit 12000 \
	--epochs 2 --resume "$TMP/mlp/ckpt-0-100.safetensors"
[ "$RC" -eq 2 ] && grep -q -- "--optimizer sgd in the checkpoint, adamw here" "$TMP/sgd_as_adamw.out" &&
	ok "an SGD checkpoint resumed with --optimizer adamw: refused with status 2, naming --optimizer" ||
	fail "SGD checkpoint under adamw: status $RC, expected 2 naming --optimizer"

leftover=$(find "$TMP" -name '.ckpt-*' | head -3)
[ -z "$leftover" ] && ok "no temporary checkpoint file left behind" || fail "temporary files left: $leftover"
finish
