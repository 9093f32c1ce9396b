#!/usr/bin/env bash
# test_python_reader.sh - a checkpoint read by a small independent Python
# reader (read_checkpoint.py: numpy, and PyTorch when installed) scores the
# same test accuracy as mnist-train reports for the same parameters.
#
#   PYTHON=/usr/bin/python3 tests/reliability/test_python_reader.sh build/mnist-train MNIST_Data mpirun ...
#
# The final checkpoint of a run holds the parameters that the run's summary
# scores, so the reader's accuracy on the MNIST test set must equal the
# summary's test_accuracy: for the seed model (ReLU on the logits), an mlp,
# LeNet-5 (whose tensors load into a PyTorch module of Conv2d and Linear
# layers with strict=True when PyTorch is installed) and an mlp trained with
# AdamW (whose moments and update count the reader checks too).
# The reader computes in float32 like the trainer but sums in another order,
# so an argmax near a tie may flip: up to 2 of the 10000 images may differ
# (measured: none). Controls: the reader must refuse a truncated copy and a
# copy with a flipped byte. Without numpy the reader still checks a file and prints its
# metadata (--print-meta), and says that scoring needs numpy (status 2). Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "$0")/common.sh"
PYTHON=${PYTHON:-/usr/bin/python3}
READER="$(dirname "$0")/read_checkpoint.py"

if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
	echo "FAIL: $PYTHON has no numpy (Debian: apt-get install python3-numpy); this test does not skip" >&2
	exit 1
fi

# scored NAME CKPT: once the run NAME has finished, its checkpoint is scored below.
SCORED=()
scored() { expect_ok "$1" && SCORED+=("$1" "$2" "$(field "$1" test_accuracy)"); }

run seed 2 --epochs 1 --log-every 1000 --checkpoint-dir "$TMP/seed"
scored seed "$TMP/seed/ckpt-0-938.safetensors"

run mlp 2 --model mlp --hidden 64,32 --momentum 0.5 --epochs 1 --limit 20000 --log-every 1000 \
	--checkpoint-dir "$TMP/mlp"
scored mlp "$TMP/mlp/ckpt-0-313.safetensors"

run lenet 2 --model lenet --lr 0.05 --momentum 0.9 --lr-schedule cosine --epochs 1 --limit 12000 \
	--log-every 1000 --checkpoint-dir "$TMP/lenet"
scored lenet "$TMP/lenet/ckpt-0-188.safetensors"

run adamw 2 --model mlp --hidden 64,32 --optimizer adamw --lr 0.001 --weight-decay 0.01 --epochs 1 \
	--limit 20000 --log-every 1000 --checkpoint-dir "$TMP/adamw"
scored adamw "$TMP/adamw/ckpt-0-313.safetensors"

# The reader's accuracy against each run's summary. One Python scores every checkpoint
# (tests/run_scripts.py), each the command line
#   read_checkpoint.py CKPT --test-data DATA/test --expect-accuracy ACC --tolerance 0.0002
# as its own __main__, with its output and status kept apart, so that numpy and PyTorch (a
# second of CPU to import) load once, not four times. The command line itself runs below
# (without numpy, and the controls).
names=()
for ((i = 0; i < ${#SCORED[@]}; i += 3)); do
	printf '%s\0' "$READER" "${SCORED[i + 1]}" --test-data "$DATA/test" \
		--expect-accuracy "${SCORED[i + 2]}" --tolerance 0.0002 >"$TMP/${SCORED[i]}.args"
	names+=("${SCORED[i]}")
done
[ ${#names[@]} -gt 0 ] && "$PYTHON" "$(dirname "$0")/../run_scripts.py" "$TMP" "${names[@]}"
for ((i = 0; i < ${#SCORED[@]}; i += 3)); do
	name=${SCORED[i]} acc=${SCORED[i + 2]}
	# Status 0 from --expect-accuracy, and the score printed (a run that never scored fails).
	if [ "$(cat "$TMP/$name.rc" 2>/dev/null)" = 0 ] && grep -q '^accuracy=' "$TMP/$name.log"; then
		ok "$name: the Python reader scores $(grep -o 'accuracy=[0-9.]*' "$TMP/$name.log" | head -1), \
$(grep -o 'torch_accuracy=[a-z0-9.]*' "$TMP/$name.log"); mnist-train reported $acc"
	else
		fail "$name: the Python reader disagrees with mnist-train's test_accuracy=$acc:"
		sed 's/^/    /' "$TMP/$name.log" >&2
	fi
done

# Without numpy (python3 -S: no site-packages, so no Debian numpy) the header still reads:
# --print-meta works with the standard library alone, and scoring says numpy is needed (2).
if [ -f "$TMP/seed/ckpt-0-938.safetensors" ]; then
	if "$PYTHON" -S -c 'import numpy' 2>/dev/null; then
		ok "no-numpy: not checked ($PYTHON -S still imports numpy)"
	else
		"$PYTHON" -S "$READER" "$TMP/seed/ckpt-0-938.safetensors" --print-meta >"$TMP/nonumpy.out" 2>&1
		rc=$?
		if [ "$rc" = 0 ] && grep -q '^checkpoint=.* global_step=938 tensors=4 finite=1$' "$TMP/nonumpy.out" \
			&& grep -q '^meta model=seed$' "$TMP/nonumpy.out"; then
			ok "no-numpy: --print-meta reads the checkpoint with the standard library alone"
		else
			fail "no-numpy: --print-meta without numpy: status $rc, output:"
			sed 's/^/    /' "$TMP/nonumpy.out" >&2
		fi
		"$PYTHON" -S "$READER" "$TMP/seed/ckpt-0-938.safetensors" --test-data "$DATA/test" >"$TMP/nonumpy2.out" 2>&1
		rc=$?
		if [ "$rc" = 2 ] && grep -q 'needs numpy (apt-get install python3-numpy)' "$TMP/nonumpy2.out"; then
			ok "no-numpy: --test-data exits 2 saying numpy is needed"
		else
			fail "no-numpy: --test-data without numpy: status $rc (expected 2 and 'needs numpy'), output:"
			sed 's/^/    /' "$TMP/nonumpy2.out" >&2
		fi
	fi
fi

# Controls: the reader validates what it reads.
if [ -f "$TMP/seed/ckpt-0-938.safetensors" ]; then
	head -c 40000 "$TMP/seed/ckpt-0-938.safetensors" >"$TMP/short.safetensors"
	cp "$TMP/seed/ckpt-0-938.safetensors" "$TMP/flip.safetensors"
	byte=$(od -A n -t u1 -j 50000 -N 1 "$TMP/flip.safetensors" | tr -d ' ')
	printf "\\$(printf '%03o' $((byte ^ 1)))" | dd of="$TMP/flip.safetensors" bs=1 seek=50000 conv=notrunc status=none
	for bad in short flip; do
		if "$PYTHON" "$READER" "$TMP/$bad.safetensors" >"$TMP/$bad.py" 2>&1; then
			fail "control: the reader accepted the $bad copy"
		else
			ok "control: the reader refuses the $bad copy ($(head -1 "$TMP/$bad.py"))"
		fi
	done
fi
finish
