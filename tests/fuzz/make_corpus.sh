#!/usr/bin/env bash
# make_corpus.sh - (re)build the seed corpora of the fuzz targets.
#
#   tests/fuzz/make_corpus.sh build/mnist-train MNIST_Data mpirun --allow-run-as-root
#
# corpus/idx/: one mode byte (0 images, 1 labels, 2 file read with a 1 MiB
#   limit, 3 with a 4 KiB limit; see fuzz_idx.c) before each file: valid
#   files, raw and gzip, and the classic defects (truncated, bad magic, label
#   10, huge count, gzip that expands past the limit, truncated gzip).
# corpus/checkpoint/: real checkpoints of small mlps written by mnist-train
#   (end of epoch and mid-epoch, momentum on; AdamW mid-epoch, its moments and
#   update count), a truncated and a flipped copy,
#   an empty header and a file name. format1-mid-epoch.safetensors is a file
#   of the previous format (mnist-ddp-checkpoint-1), kept as it was written:
#   this script does not make it. The SGD files predate --optimizer (their
#   metadata lacks the optimizer settings) and stay so: older checkpoints.
# The corpora are committed; run this only to change them.
set -euo pipefail
TRAIN=$1
DATA=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
IDX=$HERE/corpus/idx
CK=$HERE/corpus/checkpoint
mkdir -p "$IDX" "$CK"

python3 - "$IDX" <<'EOF'
import gzip, os, struct, sys
out = sys.argv[1]
def images(n, fill=7):
    return struct.pack(">IIII", 0x803, n, 28, 28) + bytes((i * fill) % 256 for i in range(n * 784))
def labels(values):
    return struct.pack(">II", 0x801, len(values)) + bytes(values)
def put(name, mode, payload):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + payload)
put("images-2", 0, images(2))
put("labels-3", 1, labels([0, 9, 5]))
put("file-images-raw", 2, images(1))
put("file-images-gz", 2, gzip.compress(images(2), mtime=0))
put("file-labels-gz-small-limit", 3, gzip.compress(labels(list(range(10)) * 3), mtime=0))
put("file-labels-over-4k", 3, labels([i % 10 for i in range(5000)]))
put("images-truncated-header", 0, images(1)[:10])
put("labels-value-10", 1, labels([1, 10]))
put("images-label-magic", 0, labels([1, 2]))
put("images-huge-count", 0, struct.pack(">IIII", 0x803, 0xFFFFFFFF, 28, 28) + bytes(784))
put("images-wrong-size", 0, struct.pack(">IIII", 0x803, 1, 28, 27) + bytes(756))
put("file-gz-bomb", 2, gzip.compress(bytes(2 << 20), mtime=0))
put("file-gz-truncated", 2, gzip.compress(images(1), mtime=0)[:200])
put("file-empty", 2, b"")
EOF

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
"$@" -n 1 "$TRAIN" --data "$DATA/train" --model mlp --hidden 1 --limit 64 --batch-size 32 \
	--epochs 1 --log-every 1000 --checkpoint-dir "$tmp/a" >/dev/null 2>&1
"$@" -n 2 "$TRAIN" --data "$DATA/train" --model mlp --hidden 2,1 --momentum 0.9 --limit 96 \
	--batch-size 16 --epochs 2 --save-every 2 --keep 0 --log-every 1000 --checkpoint-dir "$tmp/b" \
	>/dev/null 2>&1
"$@" -n 1 "$TRAIN" --data "$DATA/train" --model mlp --hidden 2 --optimizer adamw --weight-decay 0.01 \
	--limit 64 --batch-size 16 --epochs 1 --save-every 3 --log-every 1000 --checkpoint-dir "$tmp/c" \
	>/dev/null 2>&1
cp "$tmp/c/ckpt-0-3.safetensors" "$CK/adamw-mid-epoch.safetensors"
cp "$tmp/a/ckpt-0-2.safetensors" "$CK/mlp1-epoch-end.safetensors"
cp "$tmp/b/ckpt-1-4.safetensors" "$CK/mlp21-mid-epoch.safetensors"
head -c 3000 "$tmp/a/ckpt-0-2.safetensors" >"$CK/truncated.safetensors"
cp "$tmp/a/ckpt-0-2.safetensors" "$CK/flipped.safetensors"
printf '\x41' | dd of="$CK/flipped.safetensors" bs=1 seek=2000 conv=notrunc status=none
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >"$CK/empty-header.safetensors"
printf 'ckpt-12-3456.safetensors' >"$CK/file-name"
ls -l "$IDX" "$CK"
