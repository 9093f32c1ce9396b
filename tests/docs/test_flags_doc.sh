#!/usr/bin/env bash
# test_flags_doc.sh - docs/flags.md documents exactly the flags `mnist-train --help` lists.
#
#   tests/docs/test_flags_doc.sh build/mnist-train [SOURCE_DIR]
#
# --help's flags are its option lines (two spaces, then `--flag` or `-x, --flag`); the page's
# are the flags named in the first cell of its tables' rows (`--flag ARG`, `-h`, `--help`).
# Fails naming each flag --help has that the page lacks, and each flag the page documents
# that --help lacks. Exit 0 pass, 1 fail.
set -uo pipefail
if [ $# -lt 1 ]; then
	echo "usage: $0 MNIST_TRAIN [SOURCE_DIR]" >&2
	exit 1
fi
TRAIN=$1
ROOT=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
DOC=$ROOT/docs/flags.md
[ -f "$DOC" ] || { echo "FAIL: $DOC does not exist" >&2; exit 1; }

if ! help=$("$TRAIN" --help 2>&1); then
	echo "FAIL: $TRAIN --help failed:" >&2
	printf '%s\n' "$help" | sed 's/^/    /' >&2
	exit 1
fi
# An option line of --help: exactly two spaces, then -x, --flag or --flag.
from_help=$(printf '%s\n' "$help" | grep -oE '^  (-[a-zA-Z], )?--[a-z0-9][a-z0-9-]*' |
	grep -oE -- '(^  -[a-zA-Z]|--[a-z0-9][a-z0-9-]*)' | sed 's/^ *//' | sort -u)
# A documented flag: named in backquotes in the first cell of a table row.
from_doc=$(awk -F'|' '/^\| *`-/ { print $2 }' "$DOC" | grep -oE -- '`-(-[a-z0-9][a-z0-9-]*|[a-zA-Z])' |
	tr -d '`' | sort -u)
if [ -z "$from_help" ]; then
	echo "FAIL: no flag found in $TRAIN --help" >&2
	exit 1
fi

failures=0
for f in $(comm -23 <(printf '%s\n' "$from_help") <(printf '%s\n' "$from_doc")); do
	echo "FAIL: --help has $f, which docs/flags.md does not document (a table row starting \`$f\`)" >&2
	failures=$((failures + 1))
done
for f in $(comm -13 <(printf '%s\n' "$from_help") <(printf '%s\n' "$from_doc")); do
	echo "FAIL: docs/flags.md documents $f, which mnist-train --help does not list" >&2
	failures=$((failures + 1))
done
if [ "$failures" -ne 0 ]; then
	echo "$failures flag(s) differ between mnist-train --help and docs/flags.md" >&2
	exit 1
fi
echo "ok: docs/flags.md and --help name the same $(printf '%s\n' "$from_help" | wc -l) flags"
