# shellcheck shell=bash
# pmix_env.sh - sourced by scripts/gpu-node/run.sh (and its test,
# tests/kit/test_pmix_plugins.sh): the unpacked Debian PMIx (libpmix2, which the
# kit's Open MPI 4.1 links) made to read its own files only.
#
# Debian builds PMIx with absolute directories (/usr/lib/x86_64-linux-gnu/pmix2/...),
# which OPAL_PREFIX does not move. Unpacked elsewhere, it would still load the
# plugins found there: on a node with a PMIx of its own in that place (Ubuntu 24.04),
# plugins of another version, which fail ("pmix_mca_base_component_repository_open:
# unable to open .../pmix_mca_pcompress_zlib: undefined symbol: pmix_output_info"),
# and without its zlib plugin PMIx prints its "unable to find a usable compression
# library" banner at every launch. PMIx takes each of those directories from an
# environment variable first (its pinstalldirs "env" component): set them all.

# kit_pmix_env DIR: DIR is the unpacked pmix2 directory (PREFIX/usr/lib/x86_64-linux-gnu/pmix2).
kit_pmix_env() {
	local d=$1
	export PMIX_PREFIX=$d PMIX_EXEC_PREFIX=$d PMIX_LIBDIR=$d/lib PMIX_PKGLIBDIR=$d/lib/pmix \
		PMIX_DATAROOTDIR=$d/share PMIX_DATADIR=$d/share PMIX_SYSCONFDIR=$d/share \
		PMIX_PKGDATADIR=$d/share/pmix
}

# mpirun_clean: `mpirun -n 1 true`; prints what it printed, and returns 1 when it
# failed or PMIx complained of its plugins.
mpirun_clean() {
	local out rc=0
	local complaints='pmix_mca_base_component_repository_open|unable to find a usable compression library'
	out=$(mpirun -n 1 true 2>&1) || rc=$?
	[ -z "$out" ] || printf '%s\n' "$out"
	if [ "$rc" -ne 0 ]; then
		echo "mpirun_clean: mpirun -n 1 true exited with $rc" >&2
		return 1
	fi
	if grep -Eq "$complaints" <<<"$out"; then
		echo "mpirun_clean: PMIx loaded plugins that are not the kit's, or none:" \
			"$(grep -Eo "$complaints" <<<"$out" | sort -u | tr '\n' ';')" >&2
		return 1
	fi
	echo "mpirun_clean: mpirun -n 1 true: no complaint from PMIx"
}
