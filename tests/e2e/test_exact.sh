#!/usr/bin/env bash
# test_exact.sh - micro-batch mode and --exact (docs/exact.md) under a real mpirun.
#
#   tests/e2e/test_exact.sh CASE build/mnist-train MNIST_Data mpirun --allow-run-as-root --oversubscribe
#
# CASE:
#   ranks-seed, ranks-mlp, ranks-lenet
#              --exact --global-batch 96 --micro-batch 8 (12 micro-batches a step,
#              --limit 960: 10 steps) at 1, 2, 3, 4 and 6 ranks gives one
#              param_crc32, with SGD (momentum) and with AdamW; the control, the
#              same runs without --exact at 1 and 4 ranks, differ (the float sums
#              of the 12 micro-batches in another order), so the flag is what
#              makes them equal.
#   resume     --exact at 4 ranks saves every 7 steps; resumed at 2 and at 1
#              rank from the checkpoint at global step 7 (mid-epoch), it ends at
#              the 4-rank run's param_crc32; a different --global-batch or
#              --micro-batch, or the run without --exact, is refused (status 2).
#   overflow   an mlp with --lr 1e6 under --exact: gradients leave the fixed-point
#              range; the run ends with status 1 and every rank's stderr says
#              "gradient elements out of the fixed-point range" (no wrap, no
#              summary line).
#   accumulate --global-batch 64 --micro-batch 32 (no --exact): 1 rank runs two
#              micro-batches a step and ends within float tolerance of the 2-rank
#              run (parameters compared from checkpoints, relative 1e-4); one rank
#              with --global-batch 256 --micro-batch 32 (8 micro-batches a step,
#              gradient accumulation alone) trains (test accuracy above 0.85
#              after an epoch), at steps_per_epoch=235 and images=60160.
#   default    without the flags nothing changes: 2 ranks, --epochs 1 ends at
#              param_crc32=c43ed6c5 (the seed's default, as before micro-batches).
#
# The CUDA backend on the simulator (MNIST_TRAIN: build/cudasim/mnist-train,
# mpirun's arguments carrying the simulator's environment; label cudasim):
#   sim-seed, sim-mlp, sim-lenet
#              --backend cuda --exact --global-batch 96 --micro-batch 8, SGD with
#              momentum, at 1, 2 and 4 ranks: one param_crc32, each step of 12,
#              6 or 3 micro-batches captured as one graph step; the same at 2
#              ranks uncaptured (--no-graph --no-pdl --no-side-stream), and at 2
#              ranks on the 1-rank run's plan (--gpu-plan-from its --metrics, said
#              on stderr); rank 0 alone says once that the plan is the heuristic's,
#              and --gpu-plan measure is refused (status 2). The control without --exact at 1
#              and 4 ranks differs. The host backend's param_crc32 of the same
#              run is printed beside it, not compared: the simulator's GEMMs sum
#              in double, OpenBLAS's in float, in another order.
#              sim-lenet runs the rank counts alone (its simulated runs are the
#              slowest; the rest does not depend on the model: sim-seed, sim-mlp).
#   sim-overflow
#              the overflow on the simulated CUDA backend, read where the loss is
#              (--log-every 1000: after step 0, then at the epoch's last step 9):
#              status 1, both ranks name epoch 0 steps 1 to 9, no summary.
# Exit 0 pass, 1 fail.
set -uo pipefail
CASE=${1:-}
shift
. "$(dirname "$0")/../script_args.sh"
PYTHON=${PYTHON:-/usr/bin/python3}
export DATA_PATH=$DATA/train/
# Several ranks a core: one OpenBLAS thread each (--exact takes one anyway).
export OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-exact.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
FAILED=0
fail() {
	echo "FAIL: $*" >&2
	FAILED=1
}

# The backend the cases run on: the host's, or (sim-*) the simulated CUDA backend.
BACKEND=host
case "$CASE" in sim-*) BACKEND=cuda ;; esac
# run NAME NRANKS ARGS...: mnist-train on $BACKEND, output in $TMP/NAME.out; its status.
run() {
	local name=$1 n=$2
	shift 2
	timeout 170 "${MPIRUN[@]}" -n "$n" "$TRAIN" --backend "$BACKEND" --log-every 1000 "$@" \
		>"$TMP/$name.out" 2>&1
}
# crc NAME: the param_crc32 of a finished run, or "none".
crc() {
	local c
	c=$(grep -o 'param_crc32=[0-9a-f]*' "$TMP/$1.out" | head -1 | cut -d= -f2)
	echo "${c:-none}"
}
# expect_ok NAME NRANKS ARGS...: a run that must finish; echoes nothing, fails with its output.
expect_ok() {
	local name=$1
	if ! run "$@"; then
		fail "$name: status $?; its output:"
		tail -20 "$TMP/$name.out" >&2
	fi
}

EXACT=(--global-batch 96 --micro-batch 8 --limit 960 --epochs 1)

# The host's cases of --limit 960 compare param_crc32, never a test accuracy: they train on a
# copy of the first 960 images and score no test set (tests/e2e/subset.sh: the same bits, without
# reading 47 MB and scoring 10,000 images a run; LeNet-5's 14 runs spent half their CPU there).
case "$CASE" in
ranks-* | resume | overflow)
	. "$(dirname "$0")/subset.sh"
	mnist_subset "$DATA" "$TMP/data" 960 || { echo "FAIL: cannot copy the first 960 images of $DATA" >&2; exit 1; }
	export DATA_PATH=$TMP/data/train/
	;;
esac

ranks_case() {
	local model=("$@") opt first label r
	for opt in "--optimizer sgd --lr 0.05 --momentum 0.9" "--optimizer adamw --lr 0.001"; do
		label="${model[*]} $opt"
		first=""
		local line="$label, --exact:"
		for r in 1 2 3 4 6; do
			# shellcheck disable=SC2086
			expect_ok "x$r" "$r" --exact "${EXACT[@]}" "${model[@]}" $opt
			line+=" $r:$(crc "x$r")"
			[ -z "$first" ] && first=$(crc "x$r")
			[ "$(crc "x$r")" = "$first" ] && [ "$first" != none ] ||
				fail "$label --exact at $r ranks: param_crc32 $(crc "x$r"), at 1 rank $first"
		done
		echo "$line"
		for r in 1 4; do
			# shellcheck disable=SC2086
			expect_ok "c$r" "$r" "${EXACT[@]}" "${model[@]}" $opt
		done
		echo "$label, control without --exact: 1:$(crc c1) 4:$(crc c4)"
		[ "$(crc c1)" != none ] && [ "$(crc c1)" != "$(crc c4)" ] ||
			fail "$label without --exact: 1 and 4 ranks gave $(crc c1) and $(crc c4); the control" \
				"must differ (else the test does not show that --exact is what makes them equal)"
	done
}

# overflow_case AFTER WHAT: an mlp trained at --lr 1e6 overflows the fixed-point range: status
# 1, both ranks' message ("... out of the fixed-point range" then AFTER: what the backend's
# message must say beyond it, WHAT in the failure), no summary (overflow, sim-overflow).
overflow_case() {
	run over 2 --exact --model mlp --hidden 64 --global-batch 96 --micro-batch 8 --limit 960 \
		--epochs 1 --lr 1e6
	local rc=$? n
	n=$(grep -c "gradient elements\? out of the fixed-point range$1" "$TMP/over.out")
	[ "$rc" -eq 1 ] || fail "overflow: status $rc, want 1"
	[ "$n" -eq 2 ] || fail "overflow: $n ranks $2, want 2"
	! grep -q "summary:" "$TMP/over.out" || fail "overflow: a summary line was printed"
	grep -m1 "out of the fixed-point range" "$TMP/over.out"
}

# sim_case LIMIT full|ranks MODEL...: the simulated CUDA backend's --exact at 1, 2 and 4 ranks
# (sim-*); with full also uncaptured, on another run's plan, --gpu-plan measure refused, the
# control without --exact and the host's figure (what the model does not change: sim-lenet,
# whose simulated runs are the slowest, runs only the rank counts).
sim_case() {
	local limit=$1 what=$2 r first="" line
	shift 2
	local model=("$@") opt=(--optimizer sgd --lr 0.05 --momentum 0.9)
	local x=(--exact --global-batch 96 --micro-batch 8 --limit "$limit" --epochs 1)
	line="${model[*]}, simulated CUDA, --exact:"
	for r in 1 2 4; do
		expect_ok "x$r" "$r" "${x[@]}" "${model[@]}" "${opt[@]}" --metrics "$TMP/x$r.jsonl"
		line+=" $r:$(crc "x$r")"
		[ -z "$first" ] && first=$(crc "x$r")
		[ "$(crc "x$r")" = "$first" ] && [ "$first" != none ] ||
			fail "--exact at $r ranks: param_crc32 $(crc "x$r"), at 1 rank $first"
		grep -q "graph_nodes=[1-9]" "$TMP/x$r.out" ||
			fail "--exact at $r ranks: the step was not captured ($(grep -o 'graph_nodes=[0-9]*' "$TMP/x$r.out"))"
	done
	if [ "$what" = ranks ]; then
		echo "$line"
		return
	fi
	expect_ok plain 2 "${x[@]}" "${model[@]}" "${opt[@]}" --no-graph --no-pdl --no-side-stream
	line+=" 2 uncaptured:$(crc plain)"
	expect_ok from 2 "${x[@]}" "${model[@]}" "${opt[@]}" --gpu-plan-from "$TMP/x1.jsonl"
	line+=" 2 on the 1-rank run's plan:$(crc from)"
	echo "$line"
	[ "$(crc plain)" = "$first" ] ||
		fail "--exact at 2 ranks uncaptured: param_crc32 $(crc plain), captured $first"
	[ "$(crc from)" = "$first" ] ||
		fail "--exact at 2 ranks on the 1-rank run's plan: param_crc32 $(crc from), $first without it"
	grep -q "^mnist-train: --exact: the GPU ops run the ways the --gpu-plan-from plan names" "$TMP/from.out" ||
		fail "--exact --gpu-plan-from: rank 0 did not say the ways come from that plan"
	n=$(grep -c "^mnist-train: --exact: the GPU ops run the heuristic's ways" "$TMP/x4.out")
	[ "$n" -eq 1 ] || fail "--exact at 4 ranks: the plan's source said $n times, want once (rank 0)"
	run measured 2 "${x[@]}" "${model[@]}" "${opt[@]}" --gpu-plan measure
	rc=$?
	[ "$rc" -eq 2 ] && grep -q -- "--gpu-plan measure: an --exact run takes the GPU's ways" "$TMP/measured.out" ||
		fail "--exact --gpu-plan measure: status $rc, want 2 and the reason"
	for r in 1 4; do
		expect_ok "c$r" "$r" "${x[@]:1}" "${model[@]}" "${opt[@]}"
	done
	echo "${model[*]}, simulated CUDA, control without --exact: 1:$(crc c1) 4:$(crc c4)"
	[ "$(crc c1)" != none ] && [ "$(crc c1)" != "$(crc c4)" ] ||
		fail "without --exact: 1 and 4 ranks gave $(crc c1) and $(crc c4); the control must differ"
	BACKEND=host expect_ok host 1 "${x[@]}" "${model[@]}" "${opt[@]}"
	echo "${model[*]}, the host backend, --exact: $(crc host) (not compared: the GEMMs sum" \
		"in another order)"
}

# params_close A B: the parameters (not the optimizer's state) of two checkpoints agree
# within a relative 1e-4 of the largest magnitude (Python's standard library only).
params_close() {
	"$PYTHON" - "$1" "$2" <<'EOF'
import array, json, struct, sys
def load(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == '__metadata__' or name.startswith('optimizer'):
            continue
        a = array.array('f')
        a.frombytes(raw[8 + n + t['data_offsets'][0]:8 + n + t['data_offsets'][1]])
        out[name] = a
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), (a.keys(), b.keys())
worst = 0.0
for k in a:
    scale = max(1e-12, max(abs(x) for x in a[k]))
    worst = max(worst, max(abs(x - y) for x, y in zip(a[k], b[k])) / scale)
print("largest relative difference %.3g" % worst)
sys.exit(0 if worst <= 1e-4 else 1)
EOF
}

case "$CASE" in
ranks-seed) ranks_case --model seed ;;
ranks-mlp) ranks_case --model mlp --hidden 64 ;;
ranks-lenet) ranks_case --model lenet ;;
resume)
	X=(--exact --global-batch 96 --micro-batch 8 --limit 960 --epochs 2 --optimizer adamw --lr 0.001)
	expect_ok whole 4 "${X[@]}" --checkpoint-dir "$TMP/ck" --save-every 7 --keep 0
	CK="$TMP/ck/ckpt-0-7.safetensors"
	[ -f "$CK" ] || fail "no checkpoint $CK after the 4-rank run"
	echo "4 ranks, uninterrupted: $(crc whole)"
	for r in 2 1; do
		expect_ok "resumed$r" "$r" "${X[@]}" --resume "$CK"
		echo "saved at 4 ranks, resumed at $r: $(crc "resumed$r")"
		[ "$(crc "resumed$r")" = "$(crc whole)" ] && [ "$(crc whole)" != none ] ||
			fail "resumed at $r ranks: param_crc32 $(crc "resumed$r"), the uninterrupted run's $(crc whole)"
	done
	for other in "--global-batch 48" "--micro-batch 16" "--no-exact"; do
		args=("${X[@]}")
		case "$other" in
		--global-batch*) args=(--exact --global-batch 48 --micro-batch 8 --limit 960 --epochs 2 --optimizer adamw --lr 0.001) ;;
		--micro-batch*) args=(--exact --global-batch 96 --micro-batch 16 --limit 960 --epochs 2 --optimizer adamw --lr 0.001) ;;
		--no-exact) args=(--global-batch 96 --micro-batch 8 --limit 960 --epochs 2 --optimizer adamw --lr 0.001) ;;
		esac
		run refused 2 "${args[@]}" --resume "$CK"
		rc=$?
		[ "$rc" -eq 2 ] && grep -q "does not fit this run" "$TMP/refused.out" ||
			fail "resume with $other: status $rc (want 2 and 'does not fit this run')"
	done
	;;
overflow) overflow_case "" "said so" ;;
accumulate)
	A=(--global-batch 64 --micro-batch 32 --limit 6400 --epochs 1)
	expect_ok one 1 "${A[@]}" --checkpoint-dir "$TMP/one"
	expect_ok two 2 "${A[@]}" --checkpoint-dir "$TMP/two"
	grep -q "steps_per_epoch=100 images=6400" "$TMP/one.out" ||
		fail "1 rank, G=64 M=32: not 100 steps of 64 images: $(grep summary "$TMP/one.out")"
	echo "1 rank vs 2 ranks, G=64 M=32: $(crc one) $(crc two)"
	params_close "$TMP"/one/ckpt-0-100.safetensors "$TMP"/two/ckpt-0-100.safetensors ||
		fail "1 rank and 2 ranks of G=64 M=32 differ beyond float tolerance"
	expect_ok acc 1 --global-batch 256 --micro-batch 32 --epochs 1 --lr 0.1
	grep summary "$TMP/acc.out" | grep -oE "steps_per_epoch=[0-9]+ images=[0-9]+|test_accuracy=[0-9.]+"
	grep -q "steps_per_epoch=235 images=60160" "$TMP/acc.out" ||
		fail "G=256 M=32 on 1 rank: not 235 steps of 256: $(grep summary "$TMP/acc.out")"
	acc=$(grep -o 'test_accuracy=[0-9.]*' "$TMP/acc.out" | cut -d= -f2)
	awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.85) }' ||
		fail "G=256 M=32 on 1 rank did not train: test_accuracy=${acc:-none}"
	;;
sim-seed) sim_case 960 full --model seed ;;
sim-mlp) sim_case 960 full --model mlp --hidden 64 ;;
sim-lenet) sim_case 192 ranks --model lenet ;;
sim-overflow) overflow_case " at epoch 0 steps 1 to 9 " "named epoch 0 steps 1 to 9" ;;
default)
	expect_ok plain 2 --epochs 1
	echo "2 ranks, --epochs 1, no new flag: $(crc plain)"
	[ "$(crc plain)" = c43ed6c5 ] || fail "the default changed: param_crc32=$(crc plain), want c43ed6c5"
	;;
*)
	echo "usage: $0 ranks-seed|ranks-mlp|ranks-lenet|resume|overflow|accumulate|default|sim-seed|sim-mlp|sim-lenet|sim-overflow MNIST_TRAIN DATA MPIRUN..." >&2
	exit 1
	;;
esac
[ "$FAILED" -eq 0 ] && echo "PASS: $CASE"
exit "$FAILED"
