#!/usr/bin/env bash
# test_ctest_summary.sh - scripts/gpu-node/ctest_summary.py (the kit's step all) on a
# small ctest project of known outcome: a pass, a failure, a skip (77) that gives its
# reason, a label all of whose tests skip and one half skipped.
#
#   tests/kit/test_ctest_summary.sh CMAKE CTEST
# Exit 0 pass, 1 fail.
set -uo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 CMAKE CTEST" >&2
	exit 1
fi
cmake_bin=$1 ctest_bin=$2
summary=$(cd "$(dirname "$0")/../../scripts/gpu-node" && pwd)/ctest_summary.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-ctest-summary.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
cat >"$tmp/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.21)
project(summary_check NONE)
enable_testing()
add_test(NAME passes COMMAND sh -c "echo all good")
add_test(NAME fails COMMAND sh -c "echo first; echo 'FAIL: the widget broke'; echo last; exit 1")
add_test(NAME skips COMMAND sh -c "echo 'SKIP skips: no widget on this machine'; exit 77")
add_test(NAME skips_too COMMAND sh -c "echo 'nothing to do here'; exit 77")
set_tests_properties(passes fails PROPERTIES LABELS core)
set_tests_properties(skips PROPERTIES LABELS "widget;core" SKIP_RETURN_CODE 77)
set_tests_properties(skips_too PROPERTIES LABELS widget SKIP_RETURN_CODE 77)
CMAKE
"$cmake_bin" -S "$tmp/src" -B "$tmp/build" >/dev/null || { echo "FAIL: cmake" >&2; exit 1; }
"$ctest_bin" --test-dir "$tmp/build" --output-junit "$tmp/junit.xml" >/dev/null 2>&1
PATH=$(dirname "$ctest_bin"):$PATH python3 "$summary" "$tmp/build" "$tmp/junit.xml" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
failures=0
expect() {
	if grep -qxF -- "$1" "$tmp/out"; then
		echo "ok: $1"
	else
		echo "FAIL: no line '$1'" >&2
		failures=$((failures + 1))
	fi
}
expect "== summary: 4 tests: 1 passed, 1 failed, 2 skipped"
expect "FAILED  fails (failed): FAIL: the widget broke"
expect "SKIPPED skips: no widget on this machine"
expect "SKIPPED skips_too: nothing to do here"
expect "labels not run at all: widget (2 skipped)"
expect "labels run in part: core (1 of 3 skipped)"
if [ "$rc" -ne 1 ]; then
	echo "FAIL: exit status $rc with a failed test, expected 1" >&2
	failures=$((failures + 1))
fi
[ "$failures" -eq 0 ] || exit 1
echo "test_ctest_summary: all checks passed"
