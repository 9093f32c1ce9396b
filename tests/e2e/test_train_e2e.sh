#!/usr/bin/env bash
# test_train_e2e.sh - end to end: mnist-train under a real mpirun, as a user runs it.
#
#   tests/e2e/test_train_e2e.sh build/mnist-train MNIST_Data mpirun --allow-run-as-root --oversubscribe
#
# Trains the seed model on 2 ranks over a subset of real MNIST (the test set
# from the sibling test/ directory, found through DATA_PATH as the tutorial
# sets it), with per-rank output files, and checks the product contract:
# every rank's loss lines in the seed's exact words at steps 0, 10, 20, ...
# of each epoch; rank 0 ending with exactly one summary line whose keys come
# in the contract's order with the values this run implies; a first loss near
# ln 10 that then falls. A second run with a limit that leaves padding and no
# test set checks the image count and test_accuracy=nan; --eval-every 1 must
# print rank 0's score after each epoch and leave the training unchanged;
# --help must list every flag of the contract. Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

. "$(dirname "$0")/../script_args.sh"
RUN_TIMEOUT=120

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

have_split() { # dir prefix
	[ -e "$1/$2-images-idx3-ubyte" ] || [ -e "$1/$2-images-idx3-ubyte.gz" ]
}
if ! have_split "$DATA/train" train || ! have_split "$DATA/test" t10k; then
	echo "FAIL: real MNIST not found under $DATA/{train,test}: run scripts/get-mnist.sh" \
		"(or configure with -DMNIST_DATA_DIR=DIR); this test does not skip" >&2
	exit 1
fi
if [ ! -x "$TRAIN" ]; then
	echo "FAIL: $TRAIN is not an executable (build mnist-train first)" >&2
	exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-e2e.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# run NAME NRANKS ARGS...: mpirun with per-rank files under $TMP/NAME; sets RC.
run() {
	local name=$1 n=$2
	shift 2
	timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n "$n" \
		--output-filename "$TMP/$name/log_output" --merge-stderr-to-stdout \
		"$TRAIN" "$@" >"$TMP/$name.out" 2>&1
	RC=$?
	if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
		fail "$name: mpirun did not finish within ${RUN_TIMEOUT}s (a rank hung)"
	elif [ "$RC" -ne 0 ]; then
		fail "$name: mpirun exited with status $RC, expected 0; its output:"
		sed 's/^/    /' "$TMP/$name.out" >&2
	fi
}

LOSS_RE='^epoch: [0-9]+, step: [0-9]+, loss is -?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'

# check_loss_lines FILE RANK EPOCHS STEPS_PER_EPOCH LOG_EVERY: the seed's lines, in order.
check_loss_lines() {
	local file=$1 rank=$2 epochs=$3 steps=$4 every=$5
	if [ ! -f "$file" ]; then
		fail "rank $rank: no output file $file"
		return
	fi
	local bad
	# (rank 0's line after each epoch, `epoch: E, mean loss: L, ...`, is test_epoch_line.sh's)
	bad=$(grep -E 'loss is|^epoch' "$file" | grep -Ev "$LOSS_RE|^epoch: [0-9]+, mean loss: ")
	[ -z "$bad" ] || fail "rank $rank: loss lines not in the seed's format 'epoch: E, step: S, loss is L': $bad"
	local expected got
	expected=$(for ((e = 0; e < epochs; e++)); do
		for ((s = 0; s < steps; s += every)); do echo "$e $s"; done
	done)
	got=$(grep -E "$LOSS_RE" "$file" | sed -E 's/^epoch: ([0-9]+), step: ([0-9]+),.*/\1 \2/')
	if [ "$got" != "$expected" ]; then
		fail "rank $rank: logged (epoch step) pairs $(echo $got | tr '\n' ' ') differ from the expected $(echo $expected | tr '\n' ' ')"
	fi
	# A float32 printed with at most 8 significant digits.
	local long
	long=$(grep -E "$LOSS_RE" "$file" | sed -E 's/.*loss is -?//; s/[eE].*//; s/\.//; s/^0+//' |
		awk 'length($0) > 8')
	[ -z "$long" ] || fail "rank $rank: losses with more than 8 significant digits: $long"
}

# ---- run 1: the seed model on 2 ranks, 3200 images, 2 epochs ------------------
LIMIT=3200 RANKS=2 EPOCHS=2 BATCH=32 EVERY=10
SHARD=$(((LIMIT + RANKS - 1) / RANKS))
STEPS=$(((SHARD + BATCH - 1) / BATCH))
IMAGES=$((EPOCHS * RANKS * SHARD))
DATA_PATH="$DATA/train/" run main $RANKS --limit $LIMIT --epochs $EPOCHS --log-every $EVERY
R0=$TMP/main/log_output/1/rank.0/stdout
R1=$TMP/main/log_output/1/rank.1/stdout
ranks_seen=$(ls "$TMP/main/log_output/1" 2>/dev/null | tr '\n' ' ')
[ "$ranks_seen" = "rank.0 rank.1 " ] || fail "per-rank output folders are '$ranks_seen', expected rank.0 and rank.1"

for r in 0 1; do
	check_loss_lines "$TMP/main/log_output/1/rank.$r/stdout" $r $EPOCHS $STEPS $EVERY
done

# Loss: near ln 10 at the start on every rank, then falling.
for r in 0 1; do
	f=$TMP/main/log_output/1/rank.$r/stdout
	[ -f "$f" ] || continue
	grep -E "$LOSS_RE" "$f" | sed 's/.*loss is //' | awk -v r=$r '
		{ l[NR] = $1 }
		END {
			if (NR < 4) { printf "FAIL: rank %d: only %d loss lines\n", r, NR; exit 1 }
			last = (l[NR] + l[NR-1] + l[NR-2]) / 3
			printf "rank %d: first loss %s, mean of the last 3 logged %.4f\n", r, l[1], last
			if (!(l[1] >= 2.2 && l[1] <= 2.45)) { printf "FAIL: rank %d: first loss %s is not in 2.2..2.45 (about ln 10)\n", r, l[1]; exit 1 }
			if (!(last < 0.6 * l[1])) { printf "FAIL: rank %d: the loss did not fall: last logged mean %.4f vs first %s\n", r, last, l[1]; exit 1 }
		}' || fail "rank $r: loss check (above)"
done

# The summary: exactly one, the last line of rank 0's standard output, none on rank 1. The
# file holds rank 0's stderr too (--merge-stderr-to-stdout), but Open MPI forwards the two
# streams on separate channels, so a start-up line on stderr ("mnist-train: ...") may land
# after the summary under load (seen once in a fresh-clone run on 2 cores): its lines (the
# start-up line "mnist-train VERSION: ...", and "mnist-train: ...") are
# left out of the "last line".
check_summary() { # FILE EXPECTED(key=value ...) ACC_RULE(accuracy|nan)
	local file=$1 expect=$2 acc=$3
	local n last before_summary=$failures
	n=$(grep -c '^summary:' "$file")
	last=$(grep -v '^[[:space:]]*$' "$file" | grep -Ev '^mnist-train( [0-9][0-9.]*)?: ' | tail -n 1)
	if [ "$n" -ne 1 ]; then
		fail "$file holds $n summary lines, expected exactly 1"
		return
	fi
	case $last in
	summary:*) ;;
	*)
		fail "rank 0's output does not end with its summary line (last line: '$last')"
		return
		;;
	esac
	echo "$last" | awk -v expect="$expect" -v acc="$acc" '
		BEGIN {
			nkeys = split("model backend ranks epochs steps_per_epoch images train_seconds images_per_second test_accuracy", order, " ")
			nexp = split(expect, e, " ")
			for (i = 1; i <= nexp; i++) { split(e[i], kv, "="); want[kv[1]] = kv[2] }
		}
		{
			bad = 0
			if ($1 != "summary:") { print "FAIL: summary line does not start with summary:"; bad = 1 }
			for (i = 2; i <= NF; i++) {
				eq = index($i, "=")
				if (eq < 2) { printf "FAIL: summary field %s is not key=value\n", $i; bad = 1; continue }
				key[i - 1] = substr($i, 1, eq - 1); val[substr($i, 1, eq - 1)] = substr($i, eq + 1)
			}
			for (i = 1; i <= nkeys; i++)
				if (key[i] != order[i]) { printf "FAIL: summary key %d is %s, expected %s (contract order)\n", i, key[i], order[i]; bad = 1 }
			for (k in want)
				if (val[k] != want[k]) { printf "FAIL: summary %s=%s, expected %s\n", k, val[k], want[k]; bad = 1 }
			if (val["backend"] != "host" && val["backend"] != "cuda") { printf "FAIL: summary backend=%s, expected host or cuda\n", val["backend"]; bad = 1 }
			ts = val["train_seconds"]; ips = val["images_per_second"]
			if (ts !~ /^[0-9]+\.[0-9][0-9][0-9]$/ || ts + 0 > 600) { printf "FAIL: train_seconds=%s is not a duration in seconds with 3 decimals (0 to 600)\n", ts; bad = 1 }
			if (ips !~ /^[0-9]+$/ || !(ips + 0 > 0)) { printf "FAIL: images_per_second=%s is not a positive integer\n", ips; bad = 1 }
			else if (ts + 0 > 0) {
				# images / train_seconds, allowing for train_seconds rounded to 1 ms.
				lo = val["images"] / (ts + 0.0005); hi = (ts > 0.0005) ? val["images"] / (ts - 0.0005) : 1e30
				if (ips + 0 < lo * 0.99 - 1 || ips + 0 > hi * 1.01 + 1) { printf "FAIL: images_per_second=%s is not images/train_seconds (%s/%s)\n", ips, val["images"], ts; bad = 1 }
			}
			a = val["test_accuracy"]
			if (acc == "nan") { if (a != "nan") { printf "FAIL: test_accuracy=%s, expected nan without a test set\n", a; bad = 1 } }
			else if (a !~ /^[0-9.]+$/ || !(a + 0 > 0.5 && a + 0 <= 1)) { printf "FAIL: test_accuracy=%s is not in (0.5, 1]\n", a; bad = 1 }
			exit bad
		}' || fail "summary checks (above): $last"
	[ $failures -gt $before_summary ] || ok "summary: $last"
}
if [ -f "$R0" ]; then
	check_summary "$R0" "model=seed ranks=$RANKS epochs=$EPOCHS steps_per_epoch=$STEPS images=$IMAGES" accuracy
fi
if [ -f "$R1" ] && grep -q '^summary:' "$R1"; then
	fail "rank 1 printed a summary line; only rank 0 may"
fi

# ---- run 2: padding (1001 images over 2 ranks) and no test set ---------------
mkdir -p "$TMP/notest/train"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
	src=$DATA/train/$f
	[ -e "$src" ] || src=$src.gz
	ln -s "$(cd "$(dirname "$src")" && pwd)/$(basename "$src")" "$TMP/notest/train/"
done
LIMIT=1001 EPOCHS=1
SHARD=$(((LIMIT + RANKS - 1) / RANKS))
STEPS=$(((SHARD + BATCH - 1) / BATCH))
IMAGES=$((EPOCHS * RANKS * SHARD))
before=$failures
DATA_PATH="$TMP/notest/train/" run padded $RANKS --limit $LIMIT --epochs $EPOCHS --log-every $EVERY
for r in 0 1; do
	check_loss_lines "$TMP/padded/log_output/1/rank.$r/stdout" $r $EPOCHS $STEPS $EVERY
done
[ -f "$TMP/padded/log_output/1/rank.0/stdout" ] &&
	check_summary "$TMP/padded/log_output/1/rank.0/stdout" \
		"model=seed ranks=$RANKS epochs=$EPOCHS steps_per_epoch=$STEPS images=$IMAGES" nan
[ $failures -gt $before ] || ok "padded run: $STEPS steps, images=$IMAGES (wrap-around included), test_accuracy=nan"

# ---- --eval-every: a test score after every epoch, rank 0 only, training unchanged ----
# Run 1's settings (the padded run has changed LIMIT and EPOCHS): 50 steps per epoch.
before=$failures
DATA_PATH="$DATA/train/" run eval $RANKS --limit 3200 --epochs 2 --log-every $EVERY --eval-every 1 \
	--metrics "$TMP/eval.jsonl"
E0=$TMP/eval/log_output/1/rank.0/stdout
EVAL_RE='^epoch: [0-9]+, test accuracy is [01]\.[0-9]{4}$'
got=$(grep -E 'test accuracy is' "$E0" 2>/dev/null | sed -E 's/^epoch: ([0-9]+),.*/\1/' | tr '\n' ' ')
[ "$got" = "0 1 " ] || fail "--eval-every 1: rank 0 scored after epochs '$got', expected '0 1 '"
bad=$(grep -E 'test accuracy is' "$E0" 2>/dev/null | grep -Ev "$EVAL_RE")
[ -z "$bad" ] || fail "--eval-every 1: lines not in the form 'epoch: E, test accuracy is 0.9812': $bad"
! grep -q 'test accuracy is' "$TMP/eval/log_output/1/rank.1/stdout" 2>/dev/null ||
	fail "--eval-every 1: rank 1 printed a test accuracy line (rank 0's job)"
# The loss lines come before the epoch's score, and the last score is the summary's.
[ "$(grep -E "$LOSS_RE|$EVAL_RE" "$E0" | sed -n "$((50 / EVERY + 1))p" | cut -c1-26)" = "epoch: 0, test accuracy is" ] ||
	fail "--eval-every 1: epoch 0's score is not right after epoch 0's loss lines"
last=$(grep 'test accuracy is' "$E0" | tail -1 | sed 's/.* is //')
summ=$(grep '^summary:' "$E0" | tr ' ' '\n' | sed -n 's/^test_accuracy=//p')
[ -n "$last" ] && [ "$last" = "$summ" ] || fail "--eval-every 1: the last epoch's score $last is not the summary's test_accuracy=$summ"
crc_main=$(grep '^summary:' "$R0" 2>/dev/null | tr ' ' '\n' | sed -n 's/^param_crc32=//p')
crc_eval=$(grep '^summary:' "$E0" 2>/dev/null | tr ' ' '\n' | sed -n 's/^param_crc32=//p')
[ -n "$crc_eval" ] && [ "$crc_eval" = "$crc_main" ] ||
	fail "--eval-every 1 changed the training: param_crc32=$crc_eval, without it $crc_main"
n_eval=$(grep -c '"event": "eval"' "$TMP/eval.jsonl" 2>/dev/null)
[ "$n_eval" = 2 ] || fail "--eval-every 1 --metrics: $n_eval eval events, expected 2"
tail -1 "$TMP/eval.jsonl" | grep -q '"event": "step_times"' || fail "--metrics: the step_times line is no longer last"
[ $failures -gt $before ] || ok "--eval-every 1: rank 0 printed epoch 0 and 1 scores (last = summary's $summ), metrics eval events, same param_crc32 ($crc_eval)"

# ---- --help: exit 0, every flag of the contract, printed once ---------------
timeout -k 10 60 "${MPIRUN[@]}" -n 2 "$TRAIN" --help >"$TMP/help.out" 2>&1
RC=$?
[ "$RC" -eq 0 ] || fail "--help: mpirun exited with status $RC, expected 0"
before=$failures
for flag in --data --test-data --model --hidden --epochs --batch-size --lr --momentum --seed \
	--log-every --limit --backend --grad-reduce --drop-last --threads --optimizer --weight-decay \
	--beta1 --beta2 --eps --clip-grad-norm --eval-every --help; do
	grep -qE -- "(^|[[:space:]])$flag([[:space:]=]|\$)" "$TMP/help.out" || fail "--help does not mention $flag"
done
usage=$(grep -c '^Usage' "$TMP/help.out")
[ "$usage" -eq 1 ] || fail "--help printed its Usage line $usage times with 2 ranks, expected once (rank 0)"
[ $failures -gt $before ] || ok "--help lists every flag of the contract"

if [ $failures -gt 0 ]; then
	echo "FAIL: $failures check(s) failed" >&2
	exit 1
fi
echo "PASS: end to end"
