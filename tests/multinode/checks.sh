# tests/multinode/checks.sh - sourced by the multi-node, restart and Slurm test
# scripts: how a check reports, a scratch directory that goes away, and the
# verdict at the end.
#
#   source tests/multinode/checks.sh
#   checks_tmp NAME            # $tmp, removed on exit or interrupt
#   pass "what held"; fail "what did not"; skip "why" (exit 77); fatal "why" (exit 1)
#   checks_done "all ... checks passed"
#
# fail counts in $failures and the script goes on, so one run reports every
# failed check; checks_done exits 1 with their count, else 0 with its message.

readonly SKIP=77

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
pass() { echo "ok: $*"; }
skip() {
	echo "SKIPPED: $*" >&2
	exit "$SKIP"
}
fatal() {
	echo "FAIL: $*" >&2
	exit 1
}

# checks_tmp NAME: a scratch directory in $tmp, removed on exit, failure or interrupt.
checks_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-$1.XXXXXX") || fatal "mktemp failed"
	trap 'rm -rf "$tmp"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM HUP
}

# checks_done MESSAGE: status 1 and the count when a check failed, else MESSAGE and 0.
checks_done() {
	if ((failures)); then
		echo "$failures check(s) failed" >&2
		exit 1
	fi
	echo "$1"
	exit 0
}
