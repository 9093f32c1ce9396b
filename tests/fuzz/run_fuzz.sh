#!/usr/bin/env bash
# run_fuzz.sh - run one libFuzzer target for a while on a copy of its seed corpus.
#
#   tests/fuzz/run_fuzz.sh TARGET SEED_CORPUS_DIR SECONDS [LIBFUZZER_ARGS...]
#   tests/fuzz/run_fuzz.sh build-fuzz/tests/fuzz_idx tests/fuzz/corpus/idx 30
#   tests/fuzz/run_fuzz.sh build-fuzz/tests/fuzz_idx tests/fuzz/corpus/idx 100 -runs=200000
#
# SECONDS bounds the run; with -runs=N it ends after N inputs, if sooner (a fixed amount of
# fuzzing, whatever else the machine is doing).
# The seeds are copied into a fresh work directory, so new inputs never land
# in the repository; a crash reproducer is kept in $FUZZ_ARTIFACTS (default:
# the work directory, printed) - copy it into the seed corpus once fixed, and
# the replay test guards against the regression for good. A dictionary
# TARGET_NAME.dict next to this script is used when there is one (fuzz_idx
# needs none). Prints libFuzzer's final statistics and one summary line:
#   fuzz: TARGET executions=N crashes=0 seconds=S corpus=N
# Exit 0 when the run ended without a crash, leak or timeout; 1 otherwise.
set -uo pipefail
if [ $# -lt 3 ]; then
	echo "usage: $0 TARGET SEED_CORPUS_DIR SECONDS [LIBFUZZER_ARGS...]" >&2
	exit 1
fi
TARGET=$1
SEEDS=$2
SECS=$3
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$TARGET")
[ -x "$TARGET" ] || { echo "run_fuzz: $TARGET is not built (configure with CC=clang -DMNIST_DDP_FUZZ=ON)" >&2; exit 1; }
[ -d "$SEEDS" ] || { echo "run_fuzz: no seed corpus $SEEDS" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
ART=${FUZZ_ARTIFACTS:-$WORK/artifacts}
mkdir -p "$WORK/corpus" "$ART"
cp "$SEEDS"/* "$WORK/corpus/"
started=$SECONDS
dict=()
[ -f "$HERE/${name}.dict" ] && dict=(-dict="$HERE/${name}.dict")
[ "$name" = fuzz_checkpoint ] && [ -f "$HERE/checkpoint.dict" ] && dict=(-dict="$HERE/checkpoint.dict")

ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	"$TARGET" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-print_final_stats=1 -artifact_prefix="$ART/" "${dict[@]}" "$@" "$WORK/corpus" \
	>"$WORK/log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/log" | tail -1)
crashes=$(find "$ART" -type f | wc -l)
corpus=$(ls "$WORK/corpus" | wc -l)
grep -E '^stat::|^#[0-9]+ *DONE' "$WORK/log"
echo "fuzz: $name executions=${execs:-0} crashes=$crashes seconds=$((SECONDS - started)) corpus=$corpus"
if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
	echo "run_fuzz: $name failed (libFuzzer status $rc); the log and reproducers are in $WORK" >&2
	grep -E 'ERROR|SUMMARY|invariant|runtime error' "$WORK/log" | head -20 >&2
	exit 1
fi
[ -z "${FUZZ_ARTIFACTS:-}" ] && rm -rf "$WORK"
exit 0
