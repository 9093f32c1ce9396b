#!/usr/bin/env bash
# test_clip.sh - --clip-grad-norm F under mpirun: the same clipping on every
# rank, nothing changed by a bound never reached, the value kept by a
# checkpoint, and the CUDA backend's clipping against the host's.
#
#   tests/e2e/test_clip.sh MODE RANKS MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]
#
# Every run: the mlp (784-32-10, momentum 0.9) on the first 1280 training
# images, no test set (train-only: the trained model is compared, not its
# score), a loss line every step. F = 0.5 scales the gradients on most steps
# (unclipped, the run ends at loss 1.09; clipped, 1.81).
#
# MODE host (--backend host; RANKS 2):
#   - clipped, the run ends (the program's replica check: every rank the
#     same parameters, param_crc32) with another model than the run without
#     the flag: the clipping is applied, and alike on every rank;
#   - --clip-grad-norm 1e20, a bound never reached, ends bitwise where the run
#     without the flag ends (param_crc32, final loss);
#   - a checkpoint after epoch 1 of a clipped 2-epoch run: resumed with the
#     same F it ends bitwise where the uninterrupted run ends; resumed
#     without the flag or with another F it is refused (exit 2, naming
#     --clip-grad-norm and both values).
# MODE sim (the CUDA simulator's mnist-train, tests/cmake/45-cudasim.cmake; RANKS 1 or 2):
#   - --backend cuda, each step replayed from a captured graph, clipped:
#     every logged loss within 1e-5 relative of the host backend's clipped run
#     (its GEMMs round otherwise; the clipping is the host's to the bit);
#   - the same uncaptured (--no-graph) ends bitwise where the captured run ends;
#   - --clip-grad-norm 1e20 on cuda ends bitwise where cuda without it ends;
#   - the control: cuda without the flag leaves that 1e-5 bound (the
#     comparison sees the clipping).
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -lt 5 ]; then
	echo "usage: $0 host|sim RANKS MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]" >&2
	exit 1
fi
MODE=$1 RANKS=$2
shift 2
. "$(dirname "$0")/../script_args.sh"
. "$(dirname "$0")/../cudasim/mpirun_args.sh"
RUN_TIMEOUT=150
CLIP=0.5
TOL=1e-5
checks_begin
TRAIN_ONLY=$(train_only)
ok() { echo "ok: $*"; }

# run NAME STATUS ARGS...: mnist-train under mpirun, the output in $TMP/NAME.out; 0 when it
# exited with STATUS.
run() {
	local name=$1 want=$2
	shift 2
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n "$RANKS" --output-filename "$TMP/$name.log" \
		"$TRAIN" --data "$TRAIN_ONLY" \
		--model mlp --hidden 32 --momentum 0.9 --limit 1280 --log-every 1 "$@" \
		>"$TMP/$name.out" 2>&1
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "$name: mnist-train $* exited with status $rc, expected $want; its output:"
		sed 's/^/    /' "$TMP/$name.out"
		return 1
	fi
}
# same A B WHAT: A's and B's runs ended bitwise alike (param_crc32, final loss).
same() {
	local a=$1 b=$2
	if [ -z "$(field "$a" param_crc32)" ] || [ "$(field "$a" param_crc32)" != "$(field "$b" param_crc32)" ] ||
		[ "$(field "$a" final_loss)" != "$(field "$b" final_loss)" ]; then
		fail "$3: $a ended at param_crc32=$(field "$a" param_crc32) final_loss=$(field "$a" final_loss), $b at $(field "$b" param_crc32) $(field "$b" final_loss)"
	else
		ok "$3: param_crc32=$(field "$a" param_crc32) final_loss=$(field "$a" final_loss) in both"
	fi
}
# Every rank's logged losses as "EPOCH STEP LOSS", each step's ranks in loss order.
# (each rank's own stdout file: mpirun's merged copy may interleave two ranks' lines)
losses() {
	cat "$TMP/$1.log"/1/rank.*/stdout 2>/dev/null |
		sed -nE 's/^epoch: ([0-9]+), step: ([0-9]+), loss is (.*)$/\1 \2 \3/p' |
		sort -k1,1n -k2,2n -k3,3g
}
# worst A B: "LINES WORST_RELATIVE" over A's and B's logged losses; exit 1 when their steps differ.
worst() {
	[ "$(losses "$1" | cut -d' ' -f1,2)" = "$(losses "$2" | cut -d' ' -f1,2)" ] || return 1
	paste -d' ' <(losses "$1" | cut -d' ' -f3) <(losses "$2" | cut -d' ' -f3) |
		awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > w) w = r; n++ }
		     END { printf "%d %.3g\n", n, w }'
}

case $MODE in
host)
	run off 0 --backend host --epochs 1 &&
		run clipped 0 --backend host --epochs 1 --clip-grad-norm "$CLIP" &&
		run huge 0 --backend host --epochs 1 --clip-grad-norm 1e20
	same huge off "--clip-grad-norm 1e20 (never reached) against no flag, $RANKS ranks"
	if [ -z "$(field clipped param_crc32)" ] || [ "$(field clipped param_crc32)" = "$(field off param_crc32)" ]; then
		fail "--clip-grad-norm $CLIP: param_crc32=$(field clipped param_crc32), the run without it $(field off param_crc32): no clipping"
	else
		ok "--clip-grad-norm $CLIP at $RANKS ranks: every rank the same parameters (the replica check passed), param_crc32=$(field clipped param_crc32) final_loss=$(field clipped final_loss), without the flag $(field off param_crc32) $(field off final_loss)"
	fi
	# The checkpoint keeps F; a resumed run must have it.
	run full 0 --backend host --epochs 2 --clip-grad-norm "$CLIP" &&
		run first 0 --backend host --epochs 1 --clip-grad-norm "$CLIP" --checkpoint-dir "$TMP/ck" &&
		run resumed 0 --backend host --epochs 2 --clip-grad-norm "$CLIP" --resume "$TMP/ck"
	same resumed full "1 epoch, a checkpoint, --resume for the second, against 2 epochs"
	for case in "unclipped;not given here;" "other;0.25 here;--clip-grad-norm;0.25"; do
		IFS=';' read -r name want flag value <<<"$case"
		if run "$name" 2 --backend host --epochs 2 --resume "$TMP/ck" ${flag:+"$flag" "$value"}; then
			if grep -q -- "--clip-grad-norm $CLIP in the checkpoint, $want" "$TMP/$name.out"; then
				ok "resumed ${flag:-without the flag}${value:+ $value}: refused, '--clip-grad-norm $CLIP in the checkpoint, $want'"
			else
				fail "resumed ${flag:-without the flag}${value:+ $value}: the message does not say '--clip-grad-norm $CLIP in the checkpoint, $want': $(cat "$TMP/$name.out")"
			fi
		fi
	done
	;;
sim)
	run host 0 --backend host --epochs 1 --clip-grad-norm "$CLIP"
	run graph 0 --backend cuda --epochs 1 --clip-grad-norm "$CLIP"
	run plain 0 --backend cuda --no-graph --epochs 1 --clip-grad-norm "$CLIP"
	run huge 0 --backend cuda --epochs 1 --clip-grad-norm 1e20
	run off 0 --backend cuda --epochs 1
	[ "$(field graph backend)" = cuda ] || fail "the cuda run says backend=$(field graph backend)"
	if ! w=$(worst graph host); then
		fail "the cuda and host runs logged different steps ($(losses graph | wc -l) and $(losses host | wc -l) lines)"
	elif ! awk -v w="${w#* }" -v t="$TOL" 'BEGIN { exit !(w <= t) }'; then
		fail "--clip-grad-norm $CLIP at $RANKS ranks: cuda's logged losses differ from the host's by up to ${w#* } relative (limit $TOL; ${w% *} losses)"
	else
		ok "--clip-grad-norm $CLIP at $RANKS ranks: cuda (captured) against host, ${w% *} losses, worst relative difference ${w#* } (limit $TOL)"
	fi
	same plain graph "--clip-grad-norm $CLIP on cuda, --no-graph against captured"
	same huge off "--clip-grad-norm 1e20 (never reached) against no flag, on cuda"
	if ! w=$(worst off graph); then
		fail "control: the runs with and without the flag logged different steps"
	elif awk -v w="${w#* }" -v t="$TOL" 'BEGIN { exit !(w <= t) }'; then
		fail "control: cuda without the flag stays within $TOL of cuda with --clip-grad-norm $CLIP (worst ${w#* }): the comparison cannot see the clipping"
	else
		ok "control: cuda without the flag leaves the bound (worst ${w#* }; final_loss $(field off final_loss) against $(field graph final_loss))"
	fi
	;;
*)
	echo "usage: $0 host|sim RANKS MNIST_TRAIN DATA_DIR MPIRUN [MPIRUN_ARGS...]" >&2
	exit 1
	;;
esac
[ $failures -eq 0 ] || { echo "FAIL: $failures check(s) failed"; exit 1; }
echo "PASS clip $MODE $RANKS"
