#!/usr/bin/env bash
# test_pmix_plugins.sh - the GPU-node kit's relocated PMIx loads its own plugins, not
# those of a PMIx of another version where Debian's are installed
# (scripts/gpu-node/pmix_env.sh).
#
#   tests/kit/test_pmix_plugins.sh BROKEN_PLUGIN MPIRUN
#
# The node of 2026-11-25, on this machine: Debian's libpmix2 copied to a scratch
# prefix as the kit unpacks it (dpkg -x), and, in a mount namespace of the test's
# own, BROKEN_PLUGIN (tests/kit/broken_pmix_plugin.c: a pmix_mca_pcompress_zlib.so
# that needs a symbol PMIx 4.2 lacks) standing in the system's plugin directory.
# The control: with the copy's library but not the kit's environment, mpirun
# prints "pmix_mca_base_component_repository_open: unable to open ... undefined
# symbol: pmix_output_info" (and the compression banner), as it did there. Then
# with kit_pmix_env: no complaint. Exit 0 pass, 1 fail, 77 skipped (not root, no
# mount namespace, or no Debian libpmix2 to relocate).
set -uo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 BROKEN_PLUGIN MPIRUN" >&2
	exit 1
fi
plugin=$1 mpirun_bin=$2
here=$(cd "$(dirname "$0")" && pwd)
sysdir=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
skip() {
	echo "SKIP kit_pmix_plugins: $*"
	exit 77
}

if [ -z "${MNIST_PMIX_TEST_NS:-}" ]; then
	dpkg-query -W -f='${Status}' libpmix2 2>/dev/null | grep -q "install ok installed" ||
		skip "Debian's libpmix2 is not installed: no PMIx to relocate"
	[ -d "$sysdir" ] || skip "no $sysdir (libpmix2 of another layout)"
	unshare -m true 2>/dev/null || skip "unshare -m is not permitted here (it needs CAP_SYS_ADMIN)"
	MNIST_PMIX_TEST_NS=1 exec unshare -m bash "$0" "$@"
fi

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }
[ -f "$plugin" ] || { echo "FAIL: no broken plugin at $plugin (build first)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist-pmix.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The kit's unpacking (dpkg -x libpmix2), from the installed package's own file list.
prefix=$tmp/prefix
dpkg -L libpmix2 | while read -r f; do
	[ -f "$f" ] || [ -L "$f" ] || continue
	mkdir -p "$prefix$(dirname "$f")" && cp -a "$f" "$prefix$f"
done
A=$prefix/usr/lib/x86_64-linux-gnu
[ -f "$A/pmix2/lib/pmix/pmix_mca_pcompress_zlib.so" ] ||
	{ echo "FAIL: the copy of libpmix2 in $prefix lacks its zlib plugin" >&2; exit 1; }

# The node: another PMIx's plugin where Debian's are, seen by this namespace only.
mkdir -p "$tmp/node-plugins"
cp "$plugin" "$tmp/node-plugins/pmix_mca_pcompress_zlib.so"
if ! mount --make-rprivate / || ! mount --bind "$tmp/node-plugins" "$sysdir"; then
	echo "FAIL: cannot bind $tmp/node-plugins over $sysdir" >&2
	exit 1
fi

# shellcheck source=scripts/gpu-node/pmix_env.sh
. "$here/../../scripts/gpu-node/pmix_env.sh"
mpirun() { "$mpirun_bin" "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=$A${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

out=$(mpirun_clean 2>&1)
if grep -q "pmix_mca_base_component_repository_open: unable to open $sysdir/pmix_mca_pcompress_zlib" <<<"$out" &&
	grep -q "undefined symbol: pmix_output_info" <<<"$out"; then
	ok "control: without the kit's environment, PMIx opens the node's plugin: $(grep -m1 -o 'undefined symbol: pmix_output_info' <<<"$out")"
else
	fail "control: without the kit's environment, mpirun did not trip on the plugin in $sysdir (so the check below proves nothing); it printed:"
	printf '%s\n' "$out" | sed 's/^/    /' >&2
fi

(
	kit_pmix_env "$A/pmix2"
	out=$(mpirun_clean 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && ! grep -q "$sysdir" <<<"$out"; then
		echo "ok: kit_pmix_env: $(tail -n 1 <<<"$out")"
	else
		echo "FAIL: kit_pmix_env: mpirun still reads $sysdir or complains (status $rc):" >&2
		printf '%s\n' "$out" | sed 's/^/    /' >&2
		exit 1
	fi
) || failures=$((failures + 1))

if [ "$failures" -gt 0 ]; then
	echo "test_pmix_plugins: $failures failure(s)" >&2
	exit 1
fi
echo "test_pmix_plugins: all checks passed"
