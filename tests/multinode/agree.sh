#!/usr/bin/env bash
# tests/multinode/agree.sh - the start-up agreement check on one node, with
# MPMD launches giving ranks valid but different settings (bad flags already
# stop at parsing, so every value here parses):
#   - --lr 0.01 : --lr 0.02 (the issue's example), every rank exits 2 and
#     rank 0 names the rank and the values;
#   - a different data file on one rank (same size, one label changed);
#   - several differences at once, and different models;
#   - the checkpoint flags, part of the same fingerprint (--save-every);
#   - per-rank settings that may differ (--threads, --log-every) still run.
#
#   bash tests/multinode/agree.sh TRAINER MNIST_DATA_DIR -- MPIRUN [MPIRUN_ARGS...]
set -uo pipefail

if (($# < 4)) || [[ $3 != -- ]]; then
	echo "usage: $0 TRAINER MNIST_DATA_DIR -- MPIRUN [MPIRUN_ARGS...]" >&2
	exit 2
fi
trainer=$(readlink -f "$1")
data=$(readlink -f "$2")
shift 3
mpirun=("$@")
# shellcheck source=checks.sh
source "$(dirname "$0")/checks.sh"

[[ -x $trainer ]] || fatal "trainer '$trainer' is not built"
labels=$(find "$data/train" -maxdepth 1 -name 'train-labels-idx1-ubyte*' 2>/dev/null | sort | head -n 1)
images=$(find "$data/train" -maxdepth 1 -name 'train-images-idx3-ubyte*' 2>/dev/null | sort | head -n 1)
[[ -n $labels && -n $images && -d $data/test ]] ||
	fatal "MNIST is not in $data (train/ and test/): scripts/get-mnist.sh fetches it"

checks_tmp agree

# A training set equal to the real one but for its first label.
mkdir -p "$tmp/other/train"
ln -s "$images" "$tmp/other/train/$(basename "$images")"
gzip -dcf "$labels" >"$tmp/other/train/train-labels-idx1-ubyte"
first=$(od -An -tu1 -j 8 -N 1 "$tmp/other/train/train-labels-idx1-ubyte" | tr -d ' ')
printf '%b' "\\0$(printf '%o' $(((first + 1) % 10)))" |
	dd of="$tmp/other/train/train-labels-idx1-ubyte" bs=1 seek=8 conv=notrunc status=none

# The trainer, recording each rank's exit status.
cat >"$tmp/trainer" <<EOF
#!/bin/sh
$(printf '%q' "$trainer") "\$@"
rc=\$?
echo \$rc >$(printf '%q' "$tmp")/status.\$OMPI_COMM_WORLD_RANK
exit \$rc
EOF
chmod +x "$tmp/trainer"

common=(--data "$data/train" --test-data "$data/test" --epochs 1 --limit 256)

# mpmd NAME ARGS...: run "mpirun ARGS" with a 60 s limit; rc, out and the per-rank statuses.
mpmd() {
	rm -f "$tmp"/status.*
	rc=0
	out=$(timeout -k 5 60 "${mpirun[@]}" "$@" 2>&1) || rc=$?
	statuses=$(for f in "$tmp"/status.*; do [[ -f $f ]] && cat "$f"; done | tr '\n' ' ')
}

# refused NAME NRANKS PATTERN... : every rank exited 2, the output matches each (extended) regex
refused() {
	local name=$1 n=$2 want="" r p
	shift 2
	for ((r = 0; r < n; r++)); do want+="2 "; done
	if ((rc == 124)); then
		fail "$name: still running after 60 s (a hang)"
		return
	fi
	if [[ $statuses != "$want" ]]; then
		fail "$name: rank statuses '$statuses', want '$want'"
		sed 's/^/    /' <<<"$out" >&2
		return
	fi
	if grep -qE '^epoch: ' <<<"$out"; then
		fail "$name: training started although the ranks disagree"
		return
	fi
	for p in "$@"; do
		if ! grep -qE -- "$p" <<<"$out"; then
			fail "$name: no line matches '$p':"
			sed 's/^/    /' <<<"$out" >&2
			return
		fi
	done
	pass "$name: every rank exited 2; $(grep -m1 'start-up check: rank' <<<"$out" | cut -c1-160)"
}

keep_going=(--mca orte_abort_on_non_zero_status 0) # so each rank's own status shows

# 1. The issue's MPMD example: learning rates differ.
mpmd "${keep_going[@]}" -n 1 "$tmp/trainer" "${common[@]}" --lr 0.01 : -n 1 "$tmp/trainer" "${common[@]}" --lr 0.02
refused "--lr 0.01 : --lr 0.02" 2 \
	'^mnist-train: start-up check: rank 1 on .* differs from rank 0 on .*: lr=0\.02 \(rank 0: 0\.01\)$' \
	'^mnist-train: start-up check failed: 1 of 2 ranks differ from rank 0 in lr .*status 2' \
	'^mnist-train: rank 1 on .*: start-up check failed: this rank differs from rank 0 in lr '
# ... and as the issue launches it, mpirun's own status is 2.
mpmd -n 1 "$trainer" "${common[@]}" --lr 0.01 : -n 1 "$trainer" "${common[@]}" --lr 0.02
if ((rc == 2)); then
	pass "--lr 0.01 : --lr 0.02 without keep-going: mpirun exited 2"
else
	fail "--lr 0.01 : --lr 0.02 without keep-going: mpirun exited $rc, want 2"
fi

# 2. A different data file on rank 2 of 3.
mpmd "${keep_going[@]}" -n 2 "$tmp/trainer" "${common[@]}" : \
	-n 1 "$tmp/trainer" "${common[@]}" --data "$tmp/other/train"
refused "different training labels on rank 2" 3 \
	'^mnist-train: start-up check: rank 2 on .* differs from rank 0 on .*: train_crc32=[0-9a-f]{8} \(rank 0: [0-9a-f]{8}\)$' \
	'^mnist-train: rank 1 on .*: start-up check failed: stopping because rank 2 differs from rank 0 in train_crc32;' \
	'^mnist-train: rank 2 on .*: start-up check failed: this rank differs from rank 0 in train_crc32 '

# 3. Several differences, grouped by rank: ranks 1 and 3 alike, rank 2 otherwise.
mpmd "${keep_going[@]}" -n 1 "$tmp/trainer" "${common[@]}" : \
	-n 1 "$tmp/trainer" "${common[@]}" --epochs 2 --seed 9 : \
	-n 1 "$tmp/trainer" "${common[@]}" --batch-size 16 --momentum 0.9 --drop-last : \
	-n 1 "$tmp/trainer" "${common[@]}" --epochs 2 --seed 9
refused "several differences" 4 \
	'start-up check: ranks 1,3 on .* differ from rank 0 on .*: epochs=2 \(rank 0: 1\), seed=9 \(rank 0: 1\)$' \
	'start-up check: rank 2 on .* differs from rank 0 on .*: batch_size=16 \(rank 0: 32\), momentum=0\.9 \(rank 0: 0\), drop_last=on \(rank 0: off\)$' \
	'start-up check failed: 3 of 4 ranks differ from rank 0 in epochs, seed, batch_size, momentum, drop_last '

# 4. Different models and layer sizes (a setting that does not apply has the value "").
mpmd "${keep_going[@]}" -n 1 "$tmp/trainer" "${common[@]}" --model mlp --hidden 64 : \
	-n 1 "$tmp/trainer" "${common[@]}" --model mlp --hidden 32 : \
	-n 1 "$tmp/trainer" "${common[@]}" --model linear
refused "different models" 3 \
	'rank 1 on .* differs from rank 0 on .*: hidden=32 \(rank 0: 64\)$' \
	'rank 2 on .* differs from rank 0 on .*: model=linear \(rank 0: mlp\), hidden="" \(rank 0: 64\)$' \
	'start-up check failed: 2 of 3 ranks differ from rank 0 in hidden, model '

# 5. The checkpoint flags are part of the one fingerprint.
mpmd "${keep_going[@]}" -n 1 "$tmp/trainer" "${common[@]}" --checkpoint-dir "$tmp/ck" --save-every 5 : \
	-n 1 "$tmp/trainer" "${common[@]}" --checkpoint-dir "$tmp/ck"
refused "--save-every 5 : none" 2 \
	'^mnist-train: start-up check: rank 1 on .* differs from rank 0 on .*: save_every=0 \(rank 0: 5\)$' \
	'^mnist-train: rank 1 on .*: start-up check failed: this rank differs from rank 0 in save_every '

# 6. What may differ per rank does not stop the run; rank 0 shows each rank's device.
mpmd -n 1 "$tmp/trainer" "${common[@]}" --threads 1 : -n 1 "$tmp/trainer" "${common[@]}" --threads 2 --log-every 5
if ((rc == 0)) && [[ $statuses == "0 0 " ]] && grep -q '^summary: ' <<<"$out" &&
	grep -qE '^mnist-train: placement: 2 ranks on 1 host$' <<<"$out" &&
	grep -qE '^mnist-train: placement: .*: ranks 0-1; rank 0 on cpu [a-z0-9]+ \(OpenBLAS [A-Za-z0-9]+, 1 thread\), rank 1 on cpu [a-z0-9]+ \(OpenBLAS [A-Za-z0-9]+, 2 threads\)$' <<<"$out" &&
	! grep -q 'start-up check' <<<"$out"; then
	pass "--threads 1 : --threads 2 --log-every 5: trained, placement shows each rank's device"
else
	fail "--threads 1 : --threads 2 --log-every 5: status $rc, rank statuses '$statuses':"
	sed 's/^/    /' <<<"$out" >&2
fi

checks_done "all agreement checks passed"
