#!/usr/bin/env bash
# test_torch_snippet.sh - docs/reliability.md's "Loading a checkpoint in PyTorch" is true:
# its Python snippet, taken from the document as it stands, loads a checkpoint of each
# model into a torch.nn module and scores the same test accuracy that mnist-train
# reported for those parameters.
#
#   PYTHON=/usr/bin/python3 tests/reliability/test_torch_snippet.sh build/mnist-train MNIST_Data mpirun ...
#
# For seed, linear, mlp (--hidden 64,32) and LeNet-5: a short 2-rank run scored on the
# first 3000 test images (--test-data on a copy of that many), its checkpoint given to the
# snippet (its CKPT, MODEL, HIDDEN and TEST lines replaced), whose accuracy must be the
# summary's within 1e-3 (3 images: the two sum in other orders, so an argmax near a tie may
# flip). Also the document's bare nn.Linear(784, 10) for the seed's fc0. The snippet loads
# with safetensors.torch when that package is installed, else with read_checkpoint.py's
# load_file. Exit 0 pass, 1 fail, 77 skipped (no PyTorch for PYTHON, with the reason).
set -uo pipefail
. "$(dirname "$0")/common.sh"
PYTHON=${PYTHON:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DOC=$ROOT/docs/reliability.md

if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
	echo "SKIP: $PYTHON cannot import torch (Debian: apt-get install python3-torch)"
	exit 77
fi

# The snippet: the python block that follows the section's heading.
awk '/^## Loading a checkpoint in PyTorch/ { s = 1 } s == 1 && /^```python/ { s = 2; next }
     s == 2 && /^```/ { exit } s == 2 { print }' "$DOC" >"$TMP/snippet.py"
for line in 'CKPT = ' 'MODEL, HIDDEN = ' 'TEST = '; do
	if [ "$(grep -c "^$line" "$TMP/snippet.py")" != 1 ]; then
		echo "FAIL: docs/reliability.md's PyTorch snippet has no single line starting '$line'" \
			"(this test sets it); the snippet it found:" >&2
		sed 's/^/    /' "$TMP/snippet.py" >&2
		exit 1
	fi
done

# The first 3000 test images and labels, raw (from raw or .gz files).
"$PYTHON" - "$DATA/test" "$TMP/test" 3000 <<'EOF' || exit 1
import gzip, os, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst)
for name, head, item in (("t10k-images-idx3-ubyte", 16, 784), ("t10k-labels-idx1-ubyte", 8, 1)):
    p = os.path.join(src, name)
    raw = open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
    out = raw[:4] + struct.pack(">I", n) + raw[8:head] + raw[head:head + n * item]
    open(os.path.join(dst, name), "wb").write(out)
EOF

# case_ NAME MODEL HIDDEN ARGS...: train; the snippet, its lines set for that checkpoint, in
# $TMP/NAME.py, and NAME queued (CASES) for score_all.
CASES=()
case_() {
	local name=$1 model=$2 hidden=$3 ckpt
	shift 3
	run "$name" 2 --model "$model" --epochs 1 --log-every 1000 --test-data "$TMP/test" \
		--checkpoint-dir "$TMP/$name" "$@"
	expect_ok "$name" || return
	if [ "$(field "$name" test_images)" != 3000 ]; then
		fail "$name: the run scored $(field "$name" test_images) test images, expected 3000"
		return
	fi
	ckpt=$(ls "$TMP/$name"/ckpt-*.safetensors | head -1)
	sed -e "s#^CKPT = .*#CKPT = \"$ckpt\"#" -e "s#^MODEL, HIDDEN = .*#MODEL, HIDDEN = \"$model\", ($hidden)#" \
		-e "s#^TEST = .*#TEST = \"$TMP/test\"#" "$TMP/snippet.py" >"$TMP/$name.py"
	CASES+=("$name")
}

case_ seed seed 512,256 --limit 10000
case_ linear linear 512,256 --limit 10000
case_ mlp mlp 64,32 --hidden 64,32 --momentum 0.5 --limit 10000
case_ lenet lenet 512,256 --lr 0.05 --momentum 0.9 --limit 4000

# The document's bare nn.Linear(784, 10): the seed's fc0.* with the prefix dropped, then the
# seed's ReLU on its logits, scores what the snippet's Sequential scores.
if [ -f "$TMP/seed.py" ]; then
	cat >"$TMP/bare.py" <<EOF
CKPT, TEST = "$(ls "$TMP/seed"/ckpt-*.safetensors | head -1)", "$TMP/test"
EOF
	cat >>"$TMP/bare.py" <<'EOF'
import sys
import torch
sys.path.insert(0, "tests/reliability")
from read_checkpoint import load_file
state = load_file(CKPT)
fc0 = torch.nn.Linear(784, 10)
fc0.load_state_dict({k.removeprefix("fc0."): v for k, v in state.items() if k.startswith("fc0.")})
images = open(f"{TEST}/t10k-images-idx3-ubyte", "rb").read()[16:]
labels = open(f"{TEST}/t10k-labels-idx1-ubyte", "rb").read()[8:]
x = (torch.frombuffer(bytearray(images), dtype=torch.uint8).view(-1, 784).float() / 255 - 0.1307) / 0.3081
y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
with torch.no_grad():
    print(f"accuracy={(torch.relu(fc0(x)).argmax(1) == y).float().mean().item():.4f}")
EOF
fi

# score_all NAME...: one Python (tests/run_scripts.py) runs each $TMP/NAME.py as its own
# __main__, as "python3 NAME.py" would, from the repository's root, its output in
# $TMP/NAME.log and its status in $TMP/NAME.rc: PyTorch, a second of CPU to import, loads
# once instead of five times.
score_all() {
	local name
	for name in "$@"; do printf '%s\0' "$TMP/$name.py" >"$TMP/$name.args"; done
	(cd "$ROOT" && "$PYTHON" tests/run_scripts.py "$TMP" "$@")
}
if [ -f "$TMP/bare.py" ]; then score_all "${CASES[@]}" bare; else score_all "${CASES[@]}"; fi

for name in "${CASES[@]}"; do
	acc=$(field "$name" test_accuracy)
	if [ "$(cat "$TMP/$name.rc" 2>/dev/null)" != 0 ]; then
		fail "$name: the snippet failed on $(ls "$TMP/$name"/ckpt-*.safetensors | head -1):"
		sed 's/^/    /' "$TMP/$name.log" >&2
		continue
	fi
	got=$(sed -n 's/^accuracy=\([0-9.]*\).*/\1/p' "$TMP/$name.log")
	if [ -n "$got" ] && awk -v a="$acc" -v b="$got" 'BEGIN { d = a - b; exit !(d <= 0.001 && d >= -0.001) }'; then
		ok "$name: the snippet's torch model scores $got on 3000 test images; mnist-train reported $acc"
	else
		fail "$name: the snippet's torch model scores '${got}', mnist-train reported $acc (more than 1e-3 apart):"
		sed 's/^/    /' "$TMP/$name.log" >&2
	fi
done
if [ -f "$TMP/bare.py" ]; then
	if [ "$(cat "$TMP/bare.rc" 2>/dev/null)" = 0 ]; then
		bare=$(sed -n 's/^accuracy=//p' "$TMP/bare.log")
		snip=$(sed -n 's/^accuracy=\([0-9.]*\).*/\1/p' "$TMP/seed.log")
		if [ -n "$bare" ] && [ "$bare" = "$snip" ]; then
			ok "seed: a bare nn.Linear(784, 10) given fc0.weight and fc0.bias scores $bare, as the snippet's model"
		else
			fail "seed: a bare nn.Linear(784, 10) scores '$bare', the snippet's model '$snip'"
		fi
	else
		fail "seed: loading fc0.* into a bare nn.Linear(784, 10) failed:"
		sed 's/^/    /' "$TMP/bare.log" >&2
	fi
fi
finish
