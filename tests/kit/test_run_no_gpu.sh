#!/usr/bin/env bash
# test_run_no_gpu.sh - scripts/gpu-node/run.sh's time limits, and its quick and sanitize
# steps on a machine without a GPU.
#
#   tests/kit/test_run_no_gpu.sh
#
# 1. run.sh --limits: the default steps are env, build and quick, and their limits add
#    up to at most 360 s (a loan's first command, inside 6 minutes); all <= 240 s,
#    sanitize <= 120 s; every step has a limit of at most 600 s (one command).
# 2. run.sh quick sanitize with no GPU (KIT=none: the system's MPI, no kit; an
#    nvidia-smi that fails as it does without a driver, first on PATH, so that the
#    result is the same on a GPU machine): quick prints its limit at its start, each
#    of its parts (GPU suite, profile, matrix) says "no GPU" with nvidia-smi's reason
#    and is reported skipped, never passed; the step is SKIPPED, sanitize FAILED (a
#    step that sanitized nothing fails), run.sh exits 1, and SUMMARY.txt says all that.
# Nothing is built or run on a GPU: a few seconds. Exit 0 pass, 1 fail.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-kit-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# 1. the limits
limits=$(cd "$root" && bash scripts/gpu-node/run.sh --limits) || fail "run.sh --limits exited $?"
echo "$limits" | sed 's/^/    /'
limit() { awk -v s="$1" '$1 == s { print $2 }' <<<"$limits"; }
read -r _ default_steps <<<"$(grep '^default ' <<<"$limits" | awk '{ $NF = ""; print }')"
[ "$default_steps" = "env build quick" ] && ok "default steps: $default_steps" ||
	fail "default steps '$default_steps', expected 'env build quick'"
sum=0
for s in $default_steps; do
	l=$(limit "$s")
	[ -n "$l" ] || { fail "no limit for step $s"; continue; }
	sum=$((sum + l))
done
[ "$sum" -le 360 ] && ok "env + build + quick = $sum s <= 360 s" || fail "env + build + quick = $sum s > 360 s"
grep -q "^default env build quick $sum\$" <<<"$limits" || fail "run.sh's own sum differs from $sum"
for pair in all:240 sanitize:120; do
	s=${pair%:*} max=${pair#*:} l=$(limit "${pair%:*}")
	[ -n "$l" ] && [ "$l" -le "$max" ] && ok "$s: $l s <= $max s" || fail "$s: limit '$l', expected <= $max s"
done
while read -r s l; do
	[ "$s" = default ] || [ "$l" -le 600 ] || fail "$s: limit $l s > 600 s (one command)"
done <<<"$limits"

# 2. quick and sanitize without a GPU
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'SH'
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9
SH
chmod +x "$tmp/bin/nvidia-smi"
(cd "$root" && env -u CUDA_VISIBLE_DEVICES PATH="$tmp/bin:$PATH" KIT=none BUILD_DIR="$tmp/build" \
	RESULTS_DIR="$tmp/results" bash scripts/gpu-node/run.sh quick sanitize) >"$tmp/out" 2>&1
rc=$?
sed 's/^/    /' "$tmp/out"
[ "$rc" -eq 1 ] && ok "run.sh exited 1 (sanitize failed)" || fail "run.sh exited $rc, expected 1"
summary=$tmp/results/SUMMARY.txt
[ -s "$summary" ] || { fail "no SUMMARY.txt"; exit 1; }
expect() { # expect FILE REGEX WHAT
	if grep -Eq -- "$2" "$1"; then ok "$3"; else fail "$3: no line matching '$2' in $(basename "$1")"; fi
}
reason="nvidia-smi -L failed: NVIDIA-SMI has failed because it couldn't communicate"
expect "$tmp/out" '^== quick: limit [0-9]+ s' "quick prints its limit at its start"
expect "$tmp/out" '^== sanitize: limit 120 s' "sanitize prints its limit at its start"
expect "$tmp/out" '^quick: SKIPPED in [0-9]+ s: no GPU' "quick reported skipped, no GPU"
expect "$summary" "^no GPU \\(nvidia-smi -L failed: NVIDIA-SMI has failed" "the summary's second line: no GPU and why"
expect "$summary" '^  quick +[0-9]+ s +SKIPPED ' "summary: quick SKIPPED"
expect "$summary" '^  sanitize +120 s +FAILED \(1\) .*no GPU' "summary: sanitize FAILED, no GPU"
for p in gpu-suite profile matrix; do
	expect "$summary" "^  $p +SKIPPED +[0-9]+ s  no GPU" "summary: quick's $p SKIPPED, no GPU"
	expect "$tmp/results/quick.log" "^quick: $p: skipped: no GPU \\($reason" "quick.log: $p skipped with the reason"
done
if grep -Eq '^quick: [a-z-]+: passed|^quick: passed' "$tmp/out" "$tmp/results/quick.log" ||
	sed -n '/^quick:$/,/^[a-z]/p' "$summary" | grep -Eq '^  [a-z-]+ +passed'; then
	fail "something of quick is reported passed without a GPU"
else
	ok "nothing of quick reported passed"
fi
[ ! -e "$tmp/build" ] && ok "no build touched" || fail "quick without a GPU touched BUILD_DIR"
[ "$failures" -eq 0 ] || exit 1
echo "test_run_no_gpu: all checks passed"
