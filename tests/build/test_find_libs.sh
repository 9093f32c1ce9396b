#!/usr/bin/env bash
# test_find_libs.sh - where CMake finds NCCL and cuBLAS (cmake/cuda_libraries.cmake), and a
# test build without Criterion (MNIST_DDP_TESTS=gpu). Each case configures the project
# afresh in a temporary directory (Unix Makefiles, one CUDA architecture), from the
# settings of the build that registered it (SEED, an initial cache), and removes it after.
#
#   tests/build/test_find_libs.sh CASE SOURCE_DIR SEED NCCL_INCLUDE_DIR NCCL_LIBRARY \
#                                 CUBLAS_INCLUDE_DIR CUBLAS_LIBRARY HIDE_DIRS
#
# NCCL_* and CUBLAS_* are the files the registering build uses (the toolkit's): the cases
# make wheel-shaped directories of them. HIDE_DIRS (colon-separated: the toolkit's and
# NCCL's directories) are hidden from the test build's search with CMAKE_IGNORE_PATH (the
# spellings given, their real paths and their prefixes' include/, lib/, lib64/), the
# toolkit's runtime given to it by SEED, so that only the wheel or NCCL_HOME can provide
# NCCL and cuBLAS.
#
# Cases:
#   nccl_wheel  site-packages shaped as the wheels install: nvidia/nccl/{include, lib/
#               libnccl.so.2 only} (nvidia-nccl-cu*, with __init__.py files as cu12-era
#               wheels have), nvidia/cu13/{include, lib/libcublas.so.13 and libcublasLt.so.13}
#               (nvidia-cublas, a namespace package as CUDA 13 wheels are), seen by python3
#               through PYTHONPATH. The configure names both wheel files; the module
#               (mnist-cuda) is built, links those files, needs libnccl.so.2 and
#               libcublas.so.13, carries their directories in its DT_RPATH (NCCL's first),
#               and resolves libnccl.so.2 from the wheel without the loader cache; no
#               unversioned libnccl.so was made.
#   nccl_home   NCCL_HOME with include/ and lib/libnccl.so.2 only, cuBLAS from the cu12
#               wheel layout nvidia/cublas/ in MNIST_DDP_SITE_PACKAGES (no interpreter):
#               both named by the configure, both directories in the module's RPATH
#               (configure only). Then NCCL_HOME (the environment variable) naming an
#               empty directory with MNIST_DDP_CUDA=ON: the configure fails and says so.
#   tests_gpu   MNIST_DDP_TESTS=gpu with Criterion's cache paths leading to a directory
#               that does not exist: the configure succeeds, no generated build file
#               names that directory, ctest lists the GPU suite and no Criterion program
#               (configure only).
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -ne 8 ]; then
	echo "usage: $0 CASE SOURCE_DIR SEED NCCL_INCLUDE_DIR NCCL_LIBRARY CUBLAS_INCLUDE_DIR CUBLAS_LIBRARY HIDE_DIRS" >&2
	exit 1
fi
CASE=$1 SRC=$2 SEED=$3 NCCL_INC=$4 NCCL_LIB=$5 CUBLAS_INC=$6 CUBLAS_LIB=$7 HIDE=$8

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

T=$(mktemp -d "${TMPDIR:-/tmp}/mnist-build-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT

# soname FILE: the name the loader looks for (libnccl.so.2), as a wheel names the file.
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
# place FILE DIR: FILE under its soname in DIR, a hard link where possible (no copy of
# hundreds of megabytes), else a symbolic link.
place() {
	local file name
	file=$(realpath "$1") && name=$(soname "$file")
	[ -n "$name" ] || { fail "$1 has no SONAME"; return 1; }
	ln -f "$file" "$2/$name" 2>/dev/null || ln -sf "$file" "$2/$name"
}
# nccl_tree DIR: DIR/include with NCCL's headers, DIR/lib with libnccl.so.2 only.
nccl_tree() {
	mkdir -p "$1/include" "$1/lib"
	cp -r "$NCCL_INC"/nccl*.h "$1/include/" && cp -r "$NCCL_INC"/nccl_device "$1/include/" 2>/dev/null
	place "$NCCL_LIB" "$1/lib"
}
# cublas_tree DIR: cuBLAS's headers and libcublas.so.N, libcublasLt.so.N beside it.
cublas_tree() {
	mkdir -p "$1/include" "$1/lib"
	cp "$CUBLAS_INC"/cublas*.h "$1/include/"
	place "$CUBLAS_LIB" "$1/lib"
	local lt
	lt=$(ls "$(dirname "$(realpath "$CUBLAS_LIB")")"/libcublasLt.so.* 2>/dev/null | head -n 1)
	[ -n "$lt" ] && place "$lt" "$1/lib"
}

# The directories to hide, in every spelling a search may reach them by.
ignore=()
IFS=: read -r -a hide_dirs <<<"$HIDE"
for d in "${hide_dirs[@]}"; do
	for p in "$d" "$(realpath -m "$d")"; do
		ignore+=("$p")
		prefix=$(dirname "$p")
		ignore+=("$prefix/include" "$prefix/lib" "$prefix/lib64")
	done
done
IGNORE=$(printf '%s;' "${ignore[@]}")
IGNORE=${IGNORE%;}

# configure LOG ARGS...: a fresh configure of the project into $T/build.
configure() {
	local log=$1
	shift
	rm -rf "$T/build"
	cmake -G "Unix Makefiles" -C "$SEED" -S "$SRC" -B "$T/build" -DCMAKE_CUDA_ARCHITECTURES=80-real \
		"$@" >"$log" 2>&1
}
# line LOG REGEX WHAT: the configure log has a line matching REGEX.
line() {
	if grep -Eq "$2" "$1"; then
		ok "$3: $(grep -E "$2" "$1" | head -n 1 | sed 's/^-- //')"
	else
		fail "$3: no configure line matches '$2'; the log's mnist-ddp lines:"
		grep 'mnist-ddp' "$1" >&2
	fi
}
# module_link: what the module's link command names (libraries and RPATH).
module_link() { cat "$T/build/CMakeFiles/mnist-cuda.dir/link.txt" "$T/build/CMakeFiles/mnist-cuda.dir/linkLibs.rsp" 2>/dev/null; }
re() { sed 's/[.[\*^$+?(){}|]/\\&/g' <<<"$1"; } # a path as an extended regex

case $CASE in
nccl_wheel)
	SP=$T/site-packages
	nccl_tree "$SP/nvidia/nccl"
	touch "$SP/nvidia/__init__.py" "$SP/nvidia/nccl/__init__.py"
	cublas_tree "$SP/nvidia/cu13"
	[ "$(ls "$SP/nvidia/nccl/lib")" = libnccl.so.2 ] || fail "nvidia/nccl/lib holds more or less than libnccl.so.2"
	if ! PYTHONPATH=$SP configure "$T/configure.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none \
		-DMNIST_DDP_PYTHON=python3 "-DCMAKE_IGNORE_PATH=$IGNORE"; then
		cat "$T/configure.log" >&2
		fail "the configure with the wheels failed"
	else
		line "$T/configure.log" "mnist-ddp: NCCL [0-9.]+ from the nvidia-nccl wheel \(python3\): $(re "$SP/nvidia/nccl/lib/libnccl.so.2")$" "NCCL from the wheel"
		line "$T/configure.log" "mnist-ddp: cuBLAS [0-9.]+ from the nvidia-cublas wheel \(python3\): $(re "$SP/nvidia/cu13/lib/libcublas.so.13")$" "cuBLAS from the wheel"
		module_link | grep -q "$SP/nvidia/nccl/lib/libnccl.so.2" &&
			ok "the module's link command names the wheel's libnccl.so.2" ||
			fail "the module's link command does not name $SP/nvidia/nccl/lib/libnccl.so.2: $(module_link)"
		if ! cmake --build "$T/build" --target mnist-cuda -j2 >"$T/build.log" 2>&1; then
			tail -n 30 "$T/build.log" >&2
			fail "building mnist-cuda against the wheels failed"
		else
			module=$T/build/libmnist-cuda.so
			dyn=$(readelf -d "$module")
			for lib in libnccl.so.2 libcublas.so.13; do
				grep -q "(NEEDED).*\[$lib\]" <<<"$dyn" && ok "the module needs $lib" ||
					fail "the module does not need $lib: $(grep NEEDED <<<"$dyn" | tr -s ' ' | tr '\n' ' ')"
			done
			rpath=$(sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p' <<<"$dyn")
			nccl_dir=$(realpath "$SP/nvidia/nccl/lib") cublas_dir=$(realpath "$SP/nvidia/cu13/lib")
			[ "${rpath%%:*}" = "$nccl_dir" ] && ok "the module's DT_RPATH starts with the NCCL wheel's $nccl_dir" ||
				fail "the module's DT_RPATH '$rpath' does not start with $nccl_dir"
			case ":$rpath:" in
			*":$cublas_dir:"*) ok "the module's DT_RPATH holds the cuBLAS wheel's $cublas_dir" ;;
			*) fail "the module's DT_RPATH '$rpath' lacks $cublas_dir" ;;
			esac
			interp=$(readelf -l "$module" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
			interp=${interp:-$(ls /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.* 2>/dev/null | head -n 1)}
			resolved=$("$interp" --inhibit-cache --list "$module" 2>&1 | grep 'libnccl\.so')
			grep -q "=> $nccl_dir/libnccl.so.2 " <<<"$resolved" &&
				ok "without the loader cache: $(tr -s '\t ' ' ' <<<"$resolved")" ||
				fail "without the loader cache libnccl.so.2 is not the wheel's: '$resolved'"
		fi
	fi
	made=$(find "$SP" "$T/build" -name libnccl.so 2>/dev/null)
	[ -z "$made" ] && ok "no unversioned libnccl.so was made" || fail "an unversioned libnccl.so appeared: $made"
	;;
nccl_home)
	HOME_DIR=$T/nccl-home SP=$T/site-packages
	nccl_tree "$HOME_DIR"
	cublas_tree "$SP/nvidia/cublas"
	if ! configure "$T/configure.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none -DNCCL_HOME="$HOME_DIR" \
		-DMNIST_DDP_PYTHON= -DMNIST_DDP_SITE_PACKAGES="$SP" "-DCMAKE_IGNORE_PATH=$IGNORE"; then
		cat "$T/configure.log" >&2
		fail "the configure with NCCL_HOME failed"
	else
		line "$T/configure.log" "mnist-ddp: NCCL [0-9.]+ from NCCL_HOME: $(re "$HOME_DIR/lib/libnccl.so.2")$" "NCCL from NCCL_HOME"
		line "$T/configure.log" "mnist-ddp: cuBLAS [0-9.]+ from the nvidia-cublas wheel \(MNIST_DDP_SITE_PACKAGES\): $(re "$SP/nvidia/cublas/lib/libcublas.so.")[0-9]+$" "cuBLAS from the cu12 wheel layout"
		for dir in "$HOME_DIR/lib" "$SP/nvidia/cublas/lib"; do
			dir=$(realpath "$dir")
			module_link | grep -Eq -- "-rpath,([^ ]*:)?$(re "$dir")(:| |$)" && ok "the module's RPATH holds $dir" ||
				fail "the module's link command sets no RPATH to $dir: $(module_link)"
		done
	fi
	mkdir -p "$T/empty-nccl"
	if NCCL_HOME=$T/empty-nccl configure "$T/refused.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none \
		-DMNIST_DDP_PYTHON= "-DCMAKE_IGNORE_PATH=$IGNORE"; then
		fail "NCCL_HOME=$T/empty-nccl (an empty directory) was accepted"
	elif refusal=$(tr -s '\n ' '  ' <"$T/refused.log" |
		grep -o "cannot be built: not found: NCCL .*under NCCL_HOME=$T/empty-nccl [^)]*)"); then
		ok "an empty NCCL_HOME is refused: $refusal" # (CMake wraps the message's lines)
	else
		fail "the refusal of an empty NCCL_HOME does not say so:"
		cat "$T/refused.log" >&2
	fi
	;;
tests_gpu)
	nowhere=$T/no-criterion
	if ! configure "$T/configure.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=gpu \
		-DCRITERION_LIBRARY="$nowhere/libcriterion.so" -DCRITERION_INCLUDE_DIR="$nowhere/include"; then
		cat "$T/configure.log" >&2
		fail "the configure with MNIST_DDP_TESTS=gpu failed"
	else
		line "$T/configure.log" "mnist-ddp: tests: the GPU suite only" "MNIST_DDP_TESTS=gpu"
		used=$(grep -rl --include='*.make' --include='*.rsp' --include='link.txt' -- "$nowhere" "$T/build")
		[ -z "$used" ] && ok "no target compiles or links with Criterion" ||
			fail "Criterion is used by: $used"
		listed=$(cd "$T/build" && ctest -N)
		gpu=$(cd "$T/build" && ctest -N -L gpu | sed -n 's/.*Test *#[0-9]*: //p')
		for t in gpu_ops gpu_train_parity gpu_graph gpu_allreduce_2; do
			grep -qx "$t" <<<"$gpu" || fail "ctest -L gpu does not list $t (it lists: $(tr '\n' ' ' <<<"$gpu"))"
		done
		ok "ctest -L gpu lists $(wc -l <<<"$gpu") tests"
		crit=$(sed -n 's/.*Test *#[0-9]*: //p' <<<"$listed" | grep -E '^(test_ops|test_idx|test_kernels_host|test_cudasim_rules|test_config)$')
		[ -z "$crit" ] && ok "no Criterion program is registered" || fail "Criterion programs registered: $crit"
	fi
	;;
*)
	echo "$0: unknown case '$CASE' (nccl_wheel, nccl_home, tests_gpu)" >&2
	exit 1
	;;
esac

if [ "$failures" -gt 0 ]; then
	echo "test_find_libs $CASE: $failures failure(s)" >&2
	exit 1
fi
echo "test_find_libs $CASE: all checks passed"
