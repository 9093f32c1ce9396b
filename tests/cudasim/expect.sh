#!/usr/bin/env bash
# expect.sh - run a command and pass only when it ends as expected: the
# ctest wrapper for simulator runs whose right outcome is a particular exit
# status (a GPU test that must skip with 77, or fail with 1) and output.
#
#   expect.sh STATUS PATTERN... -- COMMAND [ARG...]
#
# STATUS: the exit status the command must have. PATTERN: an extended
# regular expression its output (stdout and stderr together) must match, or
# "!" followed by one it must not match. The output is shown either way.
set -u
if [ $# -lt 3 ]; then
	echo "usage: expect.sh STATUS PATTERN... -- COMMAND [ARG...]" >&2
	exit 2
fi
want=$1
shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	patterns+=("$1")
	shift
done
if [ $# -lt 2 ]; then
	echo "expect.sh: no command after --" >&2
	exit 2
fi
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
got=$?
cat "$out"
fail=0
if [ "$got" -ne "$want" ]; then
	echo "expect.sh: exit status $got, expected $want"
	fail=1
fi
for p in "${patterns[@]}"; do
	if [ "${p:0:1}" = "!" ]; then
		if grep -Eq -- "${p:1}" "$out"; then
			echo "expect.sh: the output matches '${p:1}', which it must not"
			fail=1
		fi
	elif ! grep -Eq -- "$p" "$out"; then
		echo "expect.sh: the output does not match '$p'"
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "expect.sh: exit status $got and output as expected"
exit $fail
