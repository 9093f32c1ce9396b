#!/usr/bin/env bash
# test_readme_length.sh - README.md stays a quickstart: at most 150 lines (what is longer
# belongs in docs/: every flag in docs/flags.md, GPUs in docs/gpu.md, history and
# measurements in docs/benchmarks.md).
#
#   tests/docs/test_readme_length.sh [SOURCE_DIR]
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
MAX=150
lines=$(wc -l <"$ROOT/README.md") || exit 1
if [ "$lines" -gt "$MAX" ]; then
	echo "FAIL: README.md has $lines lines, more than $MAX: move the detail to docs/" >&2
	exit 1
fi
echo "ok: README.md has $lines lines (at most $MAX)"
