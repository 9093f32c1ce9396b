#!/usr/bin/env bash
# test_bad_input.sh - bad flags and bad files end every rank with status 2 and a message.
#
#   tests/e2e/test_bad_input.sh build/mnist-train MNIST_Data mpirun --allow-run-as-root --oversubscribe
#
# Each case runs mnist-train under a real mpirun with 2 ranks, per-rank output
# files and a timeout, and must
#   - finish (no rank left waiting in a collective: a timeout is a failure),
#   - exit with status 2 (mpirun returns the status of the first rank to fail),
#   - print on the stderr of each culprit rank exactly one line naming the flag
#     or file, with what is wrong, and on every other rank a line saying which
#     rank stopped it,
#   - not crash (no signal, no MPI_Abort), and not start training (no loss or
#     summary line).
# The cases: unknown flag, bad --epochs, --lr -1, --model foo, a missing data
# directory, a truncated image file, a wrong magic, image and label counts
# that disagree, a --test-data directory that does not exist, --limit larger
# than the data set, --drop-last leaving no full batch, --threads above the
# node's cores (once silently capped by OpenBLAS), an unknown --lr-schedule, a
# negative --warmup-steps, --beta1 1, --eps 0, a negative --weight-decay,
# --clip-grad-norm -1, 0, abc and nan,
# --beta2 without --optimizer adamw, --tf32 on the host backend, micro-batch mode's bad sizes
# (--global-batch not a multiple of --micro-batch, --micro-batch above it, more ranks than
# micro-batches, --grad-reduce sum with --exact, --drop-last leaving no full step), --eval-every without a test set (a data
# directory with no test/ beside it), a warm-up longer than the run (with a control: a
# warm-up exactly as long trains), MPMD launches where
# only one rank has a bad flag or a bad file, --gpu-plan-from files that hold no plan (missing,
# none in it, one cut short, a host backend's checkpoint, a checkpoint with a byte changed) or
# given with --resume, --init-from and --eval-only given what is not a checkpoint of
# the model (a missing file, one cut short, a text file, a directory with none, a checkpoint
# of another model or other hidden sizes), --init-from with --resume, a flag of training
# with --eval-only, --eval-only without a test set, and a --metrics file in a
# directory that does not exist (and no file left behind).
# MNIST_BAD_INPUT_ONLY=REGEX runs only the cases whose names match (extended
# regex), and the controls they need: the .gz-only run wants only those that read
# or copy data files (tests/cmake/30-mpi.cmake).
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

. "$(dirname "$0")/../script_args.sh"
CASE_TIMEOUT=${MNIST_CASE_TIMEOUT:-60} # seconds per case; a hung rank fails the case

# The data set as mnist-train reads it: each file raw or .gz (the kit of
# scripts/gpu-node carries .gz only). raw_or_gz PATH: PATH, or PATH.gz when only that exists.
raw_or_gz() { if [ -f "$1" ]; then echo "$1"; elif [ -f "$1.gz" ]; then echo "$1.gz"; fi; }
IMAGES=$(raw_or_gz "$DATA/train/train-images-idx3-ubyte")
LABELS=$(raw_or_gz "$DATA/train/train-labels-idx1-ubyte")
if [ -z "$IMAGES" ] || [ -z "$LABELS" ] || [ -z "$(raw_or_gz "$DATA/test/t10k-images-idx3-ubyte")" ]; then
	echo "FAIL: real MNIST (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte," \
		"raw or .gz) not found under $DATA/{train,test}: run scripts/get-mnist.sh (or configure" \
		"with -DMNIST_DATA_DIR=DIR); this test does not skip" >&2
	exit 1
fi
if [ ! -x "$TRAIN" ]; then
	echo "FAIL: $TRAIN is not an executable (build mnist-train first)" >&2
	exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-bad-input.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export DATA_PATH=$DATA/train/

# ---- bad data sets ---------------------------------------------------------
# be32 N: N as 4 big-endian bytes (IDX headers are big-endian).
be32() {
	local v=$(($1))
	printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((v >> 24 & 255)) $((v >> 16 & 255)) $((v >> 8 & 255)) $((v & 255)))"
}
write_images() { # FILE MAGIC COUNT
	{ be32 "$2"; be32 "$3"; be32 28; be32 28; head -c $(($3 * 784)) /dev/zero; } >"$1"
}
write_labels() { # FILE MAGIC COUNT
	{ be32 "$2"; be32 "$3"; head -c "$3" /dev/zero; } >"$1"
}
mkdir -p "$TMP/trunc" "$TMP/magic" "$TMP/count"
# A raw copy where one is needed (gzip -dcf passes a raw file through as it is):
# 3 MB of the real 47 MB image file, and the labels whole.
gzip -dcf "$LABELS" >"$TMP/trunc/train-labels-idx1-ubyte"
gzip -dcf "$IMAGES" >"$TMP/images-raw"
head -c 3000000 "$TMP/images-raw" >"$TMP/trunc/train-images-idx3-ubyte"
rm -f "$TMP/images-raw"
if [ "$(wc -c <"$TMP/trunc/train-images-idx3-ubyte")" -ne 3000000 ] ||
	[ "$(wc -c <"$TMP/trunc/train-labels-idx1-ubyte")" -ne 60008 ]; then
	echo "FAIL: cannot make the truncated copy of $IMAGES and $LABELS in $TMP/trunc" >&2
	exit 1
fi
write_images "$TMP/magic/train-images-idx3-ubyte" 0x00000804 10 # dtype 0x08 but 4 dimensions
write_labels "$TMP/magic/train-labels-idx1-ubyte" 0x00000801 10
write_images "$TMP/count/train-images-idx3-ubyte" 0x00000803 10
write_labels "$TMP/count/train-labels-idx1-ubyte" 0x00000801 9
# The control: the same generator with nothing wrong must give a set that trains.
mkdir -p "$TMP/good/train"
write_images "$TMP/good/train/train-images-idx3-ubyte" 0x00000803 10
write_labels "$TMP/good/train/train-labels-idx1-ubyte" 0x00000801 10

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

# bad NAME CULPRITS NAMES WHAT MPIRUN_APP_ARGS...
#   CULPRITS: the ranks that hold the bad input ("0 1", "0" or "1");
#   NAMES: a fixed string the message must contain (the flag or the file);
#   WHAT: an extended regex (case-insensitive) for what is wrong.
wanted() { [ -z "${MNIST_BAD_INPUT_ONLY:-}" ] || [[ $1 =~ ${MNIST_BAD_INPUT_ONLY} ]]; }
bad() {
	local name=$1 culprits=$2 names=$3 what=$4
	shift 4
	wanted "$name" || return 0
	local dir=$TMP/case-$name before=$failures start=$SECONDS
	# After the first rank exits non-zero, mpirun waits odls_base_sigkill_timeout
	# (1 s) between SIGTERM and SIGKILL for the rest; every rank here has printed
	# and left MPI_Finalize by then, so 0 only saves a second per case.
	timeout -k 10 "$CASE_TIMEOUT" "${MPIRUN[@]}" --mca odls_base_sigkill_timeout 0 \
		--output-filename "$dir/log" "$@" >"$dir.out" 2>&1
	local rc=$?
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		fail "$name: did not finish within ${CASE_TIMEOUT}s: a rank hung"
	elif [ $rc -ne 2 ]; then
		fail "$name: exit status $rc, expected 2"
	fi
	if grep -qE 'MPI_ABORT|Segmentation fault|core dumped|exited on signal|signal [0-9]+' "$dir.out"; then
		fail "$name: a rank crashed or aborted instead of exiting with status 2"
	fi
	for r in 0 1; do
		local err=$dir/log/1/rank.$r/stderr out=$dir/log/1/rank.$r/stdout
		if [ ! -s "$err" ]; then
			fail "$name: rank $r printed nothing on stderr"
			continue
		fi
		if [ -f "$out" ] && grep -qE '^(epoch: |summary:)' "$out"; then
			fail "$name: rank $r started training (loss or summary lines on stdout)"
		fi
		case " $culprits " in
		*" $r "*)
			local n
			n=$(grep -F -- "$names" "$err" | grep -ciE -- "$what")
			if [ "$n" -ne 1 ]; then
				fail "$name: rank $r printed $n lines naming '$names' and matching /$what/, expected exactly 1; its stderr:"
				sed 's/^/    /' "$err" >&2
			fi
			;;
		*)
			if ! grep -qE "stopping because rank [$culprits] failed" "$err"; then
				fail "$name: rank $r does not say which rank stopped it; its stderr:"
				sed 's/^/    /' "$err" >&2
			fi
			;;
		esac
	done
	if [ $failures -eq $before ]; then
		echo "ok: $name ($((SECONDS - start)) s): status 2; $(grep -hF -- "$names" "$dir"/log/1/rank.*/stderr | head -n 1)"
	else
		echo "    $name: mpirun's output:" >&2
		sed 's/^/    /' "$dir.out" >&2
	fi
}

T=$TRAIN
timeout -k 10 "$CASE_TIMEOUT" "${MPIRUN[@]}" -n 2 "$T" --data "$TMP/good/train" --epochs 1 \
	>"$TMP/control.out" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q '^summary: .*images=10 ' "$TMP/control.out"; then
	fail "control: a well-formed synthetic set of 10 images did not train (status $rc), so the" \
		"synthetic cases below would not test what they claim; output:"
	sed 's/^/    /' "$TMP/control.out" >&2
else
	echo "ok: control: the synthetic IDX writer makes a set that trains (status 0)"
fi

bad unknown-flag "0 1" "--bogus" "unknown" -n 2 "$T" --bogus --limit 100
bad host-isa-unknown "0 1" "MNIST_DDP_HOST_ISA=avx" "expected avx512, avx2 or generic" \
	-x MNIST_DDP_HOST_ISA=avx -n 2 "$T" --limit 100
# --tf32 given to rank 0 only (an MPMD launch): refused on rank 0, rank 1 told, no rank left waiting.
bad tf32-rank-0-only "0" "--tf32" "no TF32 mode" -n 1 "$T" --backend host --tf32 --limit 100 : \
	-n 1 "$T" --backend host --limit 100
bad ambiguous-prefix "0 1" "'--e'" "ambiguous.*--epochs.*--eps.*--eval-every" -n 2 "$T" --e 3
bad progress-unknown "0 1" "--progress" "'yes'.*auto, on or off" -n 2 "$T" --progress yes
bad epochs-not-a-number "0 1" "--epochs" "'x'.*integer" -n 2 "$T" --epochs x
bad epochs-zero "0 1" "--epochs" "'0'.*integer" -n 2 "$T" --epochs 0
bad lr-negative "0 1" "--lr" "'-1'.*positive" -n 2 "$T" --lr -1
bad model-unknown "0 1" "--model" "'foo'.*seed" -n 2 "$T" --model foo
bad data-dir-missing "0 1" "$TMP/nope" "not exist|missing|no such" -n 2 "$T" --data "$TMP/nope"
bad images-truncated "0 1" "$TMP/trunc/train-images-idx3-ubyte" "truncat" -n 2 "$T" --data "$TMP/trunc"
bad images-wrong-magic "0 1" "$TMP/magic/train-images-idx3-ubyte" "magic.*0x0*804" -n 2 "$T" --data "$TMP/magic"
bad label-count-mismatch "0 1" "$TMP/count/train-labels-idx1-ubyte" "mismatch|disagree|differ" \
	-n 2 "$T" --data "$TMP/count"
bad test-data-missing "0 1" "--test-data" "$TMP/nope-test" -n 2 "$T" --test-data "$TMP/nope-test"
bad limit-too-large "0 1" "--limit" "70000.*60000" -n 2 "$T" --limit 70000
bad drop-last-no-batch "0 1" "--drop-last" "batch" -n 2 "$T" --drop-last --limit 40
bad threads-above-cores "0 1" "--threads" "1000 is more than the [0-9]+ cores of this node" \
	-n 2 "$T" --threads 1000 --limit 100
bad lr-schedule-unknown "0 1" "--lr-schedule" "'linear'.*constant or cosine" \
	-n 2 "$T" --lr-schedule linear --limit 100
bad warmup-negative "0 1" "--warmup-steps" "'-5'.*integer" -n 2 "$T" --warmup-steps -5 --limit 100
bad beta1-one "0 1" "--beta1" "'1'.*in \[0, 1\)" -n 2 "$T" --optimizer adamw --beta1 1 --limit 100
bad eps-zero "0 1" "--eps" "'0'.*positive" -n 2 "$T" --optimizer adamw --eps 0 --limit 100
bad weight-decay-negative "0 1" "--weight-decay" "'-0.01'.*>= 0" -n 2 "$T" --weight-decay -0.01 --limit 100
bad clip-grad-norm-negative "0 1" "--clip-grad-norm" "'-1' is not a positive finite number" \
	-n 2 "$T" --clip-grad-norm -1 --limit 100
bad clip-grad-norm-zero "0 1" "--clip-grad-norm" "'0' is not a positive finite number" \
	-n 2 "$T" --clip-grad-norm 0 --limit 100
bad clip-grad-norm-word "0 1" "--clip-grad-norm" "'abc' is not a positive finite number" \
	-n 2 "$T" --clip-grad-norm abc --limit 100
bad clip-grad-norm-nan "0 1" "--clip-grad-norm" "'nan' is not a positive finite number" \
	-n 2 "$T" --clip-grad-norm nan --limit 100
bad beta2-with-sgd "0 1" "--beta2" "only applies with --optimizer adamw" -n 2 "$T" --beta2 0.99 --limit 100
bad tf32-on-host "0 1" "--tf32" "host backend has no TF32 mode" -n 2 "$T" --backend host --tf32 --limit 100
# Micro-batch mode's sizes (docs/exact.md): G a multiple of M, M at most G, a micro-batch a rank.
bad micro-not-multiple "0 1" "--global-batch 100" "not a multiple of --micro-batch 32" -n 2 "$T" \
	--global-batch 100 --micro-batch 32 --limit 1000
bad micro-above-global "0 1" "--micro-batch 64" "more than --global-batch 32" -n 2 "$T" \
	--micro-batch 64 --global-batch 32 --limit 1000
bad micro-too-few "0 1" "--global-batch 32" "is 1 micro-batch a step: at most 1 rank " -n 2 "$T" \
	--exact --global-batch 32 --micro-batch 32 --limit 1000
bad micro-grad-reduce-sum "0 1" "--grad-reduce sum" "mean over the global batch" -n 2 "$T" \
	--exact --grad-reduce sum --limit 1000
bad micro-drop-last-no-step "0 1" "--drop-last" "no full step of --global-batch 64" -n 2 "$T" \
	--drop-last --global-batch 64 --limit 40
bad eval-every-without-test-set "0 1" "--eval-every" "no test set" -n 2 "$T" --data "$TMP/good/train" \
	--eval-every 1
# 640 examples over 2 ranks of batch 32: 10 steps per epoch, 20 in 2 epochs.
bad warmup-longer-than-run "0 1" "--warmup-steps" "21 is longer than the run.*20 steps" \
	-n 2 "$T" --lr-schedule cosine --warmup-steps 21 --limit 640 --epochs 2
if wanted warmup-control; then
	timeout -k 10 "$CASE_TIMEOUT" "${MPIRUN[@]}" -n 2 "$T" --lr-schedule cosine --warmup-steps 20 \
		--limit 640 --epochs 2 >"$TMP/warmup-control.out" 2>&1
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q '^summary: .*steps_per_epoch=10 ' "$TMP/warmup-control.out"; then
		fail "warmup control: a warm-up as long as the run (20 steps) did not train (status $rc):"
		sed 's/^/    /' "$TMP/warmup-control.out" >&2
	else
		echo "ok: warmup control: --warmup-steps 20 of a 20-step run trains (status 0)"
	fi
fi
# MPMD: the ranks get different command lines; only one of them is bad.
bad mpmd-rank0-bad-flag "0" "--epochs" "'x'.*integer" \
	-n 1 "$T" --epochs x --limit 100 : -n 1 "$T" --limit 100
bad mpmd-rank1-bad-flag "1" "--lr" "'-1'.*positive" \
	-n 1 "$T" --limit 100 : -n 1 "$T" --limit 100 --lr -1
bad mpmd-rank1-bad-file "1" "$TMP/magic/train-images-idx3-ubyte" "magic.*0x0*804" \
	-n 1 "$T" --limit 10 --epochs 1 : -n 1 "$T" --limit 10 --epochs 1 --data "$TMP/magic"
# --gpu-plan-from: rank 0 reads an earlier run's --metrics file for its gpu_plan record, or a
# checkpoint for its plan (any backend: a file that holds no plan, or a record that is not
# JSON, is bad input even where no plan is used; what is inside a record is the CUDA
# backend's to read: tests/cudasim/plan_foreign.sh); rank 1 says rank 0 stopped it.
printf '{"epoch": 0, "step": 0, "loss": 2.3}\n' >"$TMP/no-plan.jsonl"
printf '{"event": "gpu_plan", "device": "GPU", "library": "cublasLt 1", "ops": [{"op": "gemm"' \
	>"$TMP/cut-plan.jsonl" # a record cut short, as by a run killed while writing it
bad gpu-plan-from-missing "0" "$TMP/nope.jsonl" "cannot open" \
	-n 2 "$T" --limit 100 --gpu-plan-from "$TMP/nope.jsonl"
bad gpu-plan-from-no-record "0" "$TMP/no-plan.jsonl" "no gpu_plan record" \
	-n 2 "$T" --limit 100 --gpu-plan-from "$TMP/no-plan.jsonl"
bad gpu-plan-from-cut-short "0" "$TMP/cut-plan.jsonl" "line 1: the gpu_plan record is not JSON" \
	-n 2 "$T" --limit 100 --gpu-plan-from "$TMP/cut-plan.jsonl"
bad gpu-plan-from-with-resume "0 1" "--gpu-plan-from" "resumed run follows its checkpoint's own plan" \
	-n 2 "$T" --limit 100 --resume "$TMP/nope" --gpu-plan-from "$TMP/no-plan.jsonl"
# A checkpoint as FILE: one of the host backend's holds no plan; one with a byte changed fails its
# checksum. The data set of 10 images trains in one step (the control above).
if wanted gpu-plan-from-checkpoint; then
	timeout -k 10 "$CASE_TIMEOUT" "${MPIRUN[@]}" -n 1 "$T" --data "$TMP/good/train" --epochs 1 \
		--checkpoint-dir "$TMP/host-ck" >"$TMP/host-ck.out" 2>&1
	HOST_CK=$(ls "$TMP"/host-ck/ckpt-*.safetensors 2>/dev/null | head -n 1)
	[ -n "$HOST_CK" ] || fail "gpu-plan-from-checkpoint: no checkpoint written in $TMP/host-ck: $(cat "$TMP/host-ck.out")"
	cp "$HOST_CK" "$TMP/flipped.safetensors"
	printf 'X' | dd of="$TMP/flipped.safetensors" bs=1 seek=$(($(wc -c <"$HOST_CK") - 20)) conv=notrunc 2>/dev/null
fi
bad gpu-plan-from-checkpoint-no-plan "0" "${HOST_CK:-host-ck}" "holds no GPU plan.*host backend" \
	-n 2 "$T" --limit 100 --gpu-plan-from "${HOST_CK:-host-ck}"
bad gpu-plan-from-checkpoint-damaged "0" "$TMP/flipped.safetensors" "checksum mismatch" \
	-n 2 "$T" --limit 100 --gpu-plan-from "$TMP/flipped.safetensors"

# --init-from and --eval-only: rank 0 reads the checkpoint (a missing file, one cut short,
# a file that is not a checkpoint, a directory with none, a checkpoint of another model);
# rank 1 says rank 0 stopped it. Refused by every rank at the start: --init-from with
# --resume, a flag of training with --eval-only, --eval-only without a test set.
if wanted init-from- || wanted eval-only-; then
	if [ -z "${HOST_CK:-}" ]; then
		timeout -k 10 "$CASE_TIMEOUT" "${MPIRUN[@]}" -n 1 "$T" --data "$TMP/good/train" --epochs 1 \
			--checkpoint-dir "$TMP/host-ck" >"$TMP/host-ck.out" 2>&1
		HOST_CK=$(ls "$TMP"/host-ck/ckpt-*.safetensors 2>/dev/null | head -n 1)
	fi
	timeout -k 10 "$CASE_TIMEOUT" "${MPIRUN[@]}" -n 1 "$T" --data "$TMP/good/train" --epochs 1 \
		--model mlp --hidden 64 --checkpoint-dir "$TMP/mlp-ck" >"$TMP/mlp-ck.out" 2>&1
	MLP_CK=$(ls "$TMP"/mlp-ck/ckpt-*.safetensors 2>/dev/null | head -n 1)
	[ -n "${HOST_CK:-}" ] && [ -n "$MLP_CK" ] ||
		fail "init-from/eval-only: no checkpoints written: $(cat "$TMP/host-ck.out" "$TMP/mlp-ck.out")"
	head -c 3000 "${HOST_CK:-/dev/null}" >"$TMP/cut.safetensors"
	printf 'not a checkpoint\n' >"$TMP/text.safetensors"
	mkdir -p "$TMP/no-ck"
fi
MLP_CK=${MLP_CK:-mlp-ck}
for flag in init-from eval-only; do
	limit=(--limit 100) # --eval-only trains nothing: --limit is refused there
	[ $flag = eval-only ] && limit=()
	bad $flag-missing "0" "$TMP/nope.safetensors" "--$flag .*No such file" \
		-n 2 "$T" "${limit[@]}" --$flag "$TMP/nope.safetensors"
	bad $flag-truncated "0" "$TMP/cut.safetensors" "--$flag .*truncated: 3000 bytes" \
		-n 2 "$T" "${limit[@]}" --$flag "$TMP/cut.safetensors"
	bad $flag-not-a-checkpoint "0" "$TMP/text.safetensors" "--$flag .*not a checkpoint" \
		-n 2 "$T" "${limit[@]}" --$flag "$TMP/text.safetensors"
	bad $flag-no-checkpoint-in-dir "0" "$TMP/no-ck" "--$flag .*no checkpoint" \
		-n 2 "$T" "${limit[@]}" --$flag "$TMP/no-ck"
done
bad init-from-other-model "0" "$MLP_CK" "--init-from .*holds --model mlp --hidden 64, not --model lenet" \
	-n 2 "$T" --limit 100 --model lenet --init-from "$MLP_CK"
bad init-from-other-hidden "0" "$MLP_CK" \
	"--init-from .*holds --model mlp --hidden 64, not --model mlp --hidden 128" \
	-n 2 "$T" --limit 100 --model mlp --hidden 128 --init-from "$MLP_CK"
bad init-from-with-resume "0 1" "--init-from" "--resume continues the run that saved one" \
	-n 2 "$T" --limit 100 --init-from "$MLP_CK" --resume "$TMP/mlp-ck"
bad eval-only-other-model "0" "${HOST_CK:-host-ck}" "--eval-only .*holds --model seed, not --model lenet" \
	-n 2 "$T" --eval-only "${HOST_CK:-host-ck}" --model lenet
bad eval-only-training-flag "0 1" "--lr" "--eval-only trains nothing" \
	-n 2 "$T" --eval-only "${HOST_CK:-host-ck}" --lr 0.1
bad eval-only-without-test-set "0 1" "--eval-only" "no test set to score.*give --test-data" \
	-n 2 "$T" --data "$TMP/good/train" --eval-only "${HOST_CK:-host-ck}"

# Nothing half-written: no metrics file where its directory does not exist.
bad metrics-dir-missing "0" "--metrics" "$TMP/no-such-dir/m.jsonl" \
	-n 2 "$T" --limit 100 --epochs 1 --metrics "$TMP/no-such-dir/m.jsonl"
if wanted metrics-dir-missing && [ -e "$TMP/no-such-dir" ]; then
	fail "metrics-dir-missing: $TMP/no-such-dir was created"
fi

if [ $failures -gt 0 ]; then
	echo "FAIL: $failures check(s) failed" >&2
	exit 1
fi
echo "PASS: bad input ends every rank with status 2 and a message"
