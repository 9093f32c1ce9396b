#!/usr/bin/env bash
# test_find_libs.sh - where CMake finds NCCL, cuBLAS and cuBLASLt (cmake/cuda_libraries.cmake),
# and a test build without Criterion (MNIST_DDP_TESTS=gpu). Each case configures the project
# afresh in a temporary directory (Unix Makefiles, one CUDA architecture), from the settings
# of the build that registered it (SEED, an initial cache), and removes it after.
#
#   tests/build/test_find_libs.sh CASE SOURCE_DIR SEED NCCL_INCLUDE_DIR NCCL_LIBRARY \
#                                 CUBLAS_INCLUDE_DIR CUBLAS_LIBRARY CUBLASLT_LIBRARY \
#                                 CUDA_BIN_DIR CUDA_INCLUDE_DIR CUDA_LIBRARY_DIR HIDE_DIRS
#
# NCCL_*, CUBLAS* and CUDA_* are the files and directories the registering build uses (its
# toolkit's): the cases make wheel-shaped directories and other toolkits of them (hard
# links, copies where /tmp is another file system). HIDE_DIRS (colon-separated: the
# registering build's toolkit's and NCCL's directories) are hidden from the test build's
# search with CMAKE_IGNORE_PATH (the spellings given, their real paths and their prefixes'
# include/, lib/, lib64/), so that only what a case makes can provide NCCL and cuBLAS.
#
# The cases that configure with another toolkit make it in the layout of NVIDIA's installer
# (the H100 node's /usr/local/cuda-13.0): bin/ (nvcc), include -> targets/x86_64-linux/include,
# lib64 -> targets/x86_64-linux/lib, the libraries under targets/x86_64-linux/lib only, and
# stubs/ (libcuda.so, libcublas.so, libcublasLt.so: for linking only, which CMake's
# FindCUDAToolkit takes for CUDA::cublas when the toolkit's own library is missing), no NCCL.
#
# Cases:
#   nccl_wheel       a toolkit whose cuBLAS is its stubs only, and site-packages shaped as the
#                    wheels install: nvidia/nccl/{include, lib/libnccl.so.2 only}
#                    (nvidia-nccl-cu*, with __init__.py files as cu12-era wheels have),
#                    nvidia/cu13/{include, lib/libcublas.so.13 and libcublasLt.so.13}
#                    (nvidia-cublas, a namespace package as CUDA 13 wheels are), seen by
#                    python3 through PYTHONPATH. The configure names the wheels' files, no
#                    stub and nothing -NOTFOUND; the module (mnist-cuda) is linked (from
#                    the registering build's objects), links those files, needs
#                    libnccl.so.2 and libcublas.so.13, carries their directories in its
#                    DT_RPATH (NCCL's first), and resolves libnccl.so.2,
#                    libcublas.so.13 and libcublasLt.so.13 from the wheels without the loader
#                    cache, as build/mnist-cuda-libraries.txt says; no unversioned libnccl.so
#                    was made.
#   nccl_home        NCCL_HOME with include/ and lib/libnccl.so.2 only, the stubs-only toolkit,
#                    cuBLAS and cuBLASLt from the cu12 wheel layout nvidia/cublas/ in
#                    MNIST_DDP_SITE_PACKAGES (no interpreter): all named by the configure, both
#                    directories in the module's RPATH (configure only). Then, without the
#                    wheel, the stubs-only toolkit refused with MNIST_DDP_CUDA=ON (where it
#                    looked; no stub taken), and NCCL_HOME (the environment variable) naming an
#                    empty directory refused: each configure fails and says so.
#   toolkit_targets  the toolkit with its cuBLAS and cuBLASLt under targets/x86_64-linux/lib
#                    (and stubs/ beside them), NCCL from NCCL_HOME: cuBLAS and cuBLASLt from
#                    the toolkit, the files under targets/x86_64-linux/lib, never a stub; the
#                    module's link command names them and its RPATH that directory (configure
#                    only).
#   tests_gpu        MNIST_DDP_TESTS=gpu with Criterion's cache paths leading to a directory
#                    that does not exist: the configure succeeds, no generated build file
#                    names that directory, ctest lists the GPU suite and no Criterion program
#                    (configure only).
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -ne 12 ]; then
	echo "usage: $0 CASE SOURCE_DIR SEED NCCL_INCLUDE_DIR NCCL_LIBRARY CUBLAS_INCLUDE_DIR CUBLAS_LIBRARY" \
		"CUBLASLT_LIBRARY CUDA_BIN_DIR CUDA_INCLUDE_DIR CUDA_LIBRARY_DIR HIDE_DIRS" >&2
	exit 1
fi
CASE=$1 SRC=$2 SEED=$3 NCCL_INC=$4 NCCL_LIB=$5 CUBLAS_INC=$6 CUBLAS_LIB=$7 CUBLASLT_LIB=$8
CUDA_BIN=$9 CUDA_INC=${10} CUDA_LIB=${11} HIDE=${12}

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
# link_file FILE TARGET: TARGET a hard link to FILE where possible (no copy of hundreds of
# megabytes), else a copy: never a symbolic link, whose real path would lead back to the
# registering build's toolkit.
link_file() { ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"; }
# place FILE DIR [NAME]: FILE in DIR under NAME, by default its soname.
place() {
	local file name
	file=$(realpath "$1") && name=${3:-$(soname "$file")}
	[ -n "$name" ] || { fail "$1 has no SONAME"; return 1; }
	link_file "$file" "$2/$name"
}
# nccl_tree DIR: DIR/include with NCCL's headers, DIR/lib with libnccl.so.2 only.
nccl_tree() {
	mkdir -p "$1/include" "$1/lib"
	cp -r "$NCCL_INC"/nccl*.h "$1/include/" && cp -r "$NCCL_INC"/nccl_device "$1/include/" 2>/dev/null
	place "$NCCL_LIB" "$1/lib"
}
# cublas_tree DIR: cuBLAS's headers (cublasLt.h among them), libcublas.so.N and
# libcublasLt.so.N.
cublas_tree() {
	mkdir -p "$1/include" "$1/lib"
	cp "$CUBLAS_INC"/cublas*.h "$1/include/"
	place "$CUBLAS_LIB" "$1/lib"
	place "$CUBLASLT_LIB" "$1/lib"
}
# toolkit_tree DIR with-cublas|stubs-only: a toolkit in the layout of NVIDIA's installer (the
# header says which) made of the registering build's: nvcc and its profile linked (nvcc
# finds the rest from its own directory), its other tools, nvvm/ and headers (NCCL's left
# out) by symbolic links, the libraries linked under targets/x86_64-linux/lib (cuBLAS and
# cuBLASLt only with with-cublas) and the stubs under its stubs/.
TARGET_NAME=$(uname -m)-linux
toolkit_tree() {
	local top=$1 td=$1/targets/$TARGET_NAME f n
	mkdir -p "$top/bin" "$td/include" "$td/lib/stubs"
	for f in "$CUDA_BIN"/*; do
		n=$(basename "$f")
		case $n in
		nvcc | nvcc.profile) link_file "$f" "$top/bin/$n" ;;
		*) ln -s "$(realpath "$f")" "$top/bin/$n" ;;
		esac
	done
	ln -s "$(realpath "$CUDA_BIN/../nvvm")" "$top/nvvm"
	for f in "$CUDA_INC"/*; do
		case $(basename "$f") in nccl*) ;; *) ln -s "$(realpath "$f")" "$td/include/" ;; esac
	done
	ln -s "targets/$TARGET_NAME/include" "$top/include"
	ln -s "targets/$TARGET_NAME/lib" "$top/lib64"
	local libs=("$CUDA_LIB/libcudart.so")
	[ "$2" = with-cublas ] && libs+=("$CUBLAS_LIB" "$CUBLASLT_LIB")
	for f in "${libs[@]}"; do
		n=$(soname "$(realpath "$f")")
		place "$f" "$td/lib" && ln -s "$n" "$td/lib/${n%.so.*}.so"
	done
	for f in libcudadevrt.a libcudart_static.a libculibos.a; do
		[ -f "$CUDA_LIB/$f" ] && link_file "$(realpath "$CUDA_LIB/$f")" "$td/lib/$f"
	done
	[ -f "$CUDA_LIB/stubs/libcuda.so" ] && place "$CUDA_LIB/stubs/libcuda.so" "$td/lib/stubs" libcuda.so
	place "$CUBLAS_LIB" "$td/lib/stubs" libcublas.so
	place "$CUBLASLT_LIB" "$td/lib/stubs" libcublasLt.so
	# nvcc takes its toolkit (TOP) from its own directory: a made toolkit whose nvcc reports
	# another one would let the registering build's libraries in unseen.
	local where
	where=$("$top/bin/nvcc" -v __probe 2>&1 | sed -n 's/^#\$ TOP=//p')
	[ "$(realpath -m "$where")" = "$(realpath -m "$top")" ] ||
		fail "the toolkit made in $top: its nvcc reports TOP='$where' (CUDA_BIN_DIR $CUDA_BIN must be a toolkit's bin/, nvcc.profile beside nvcc)"
}
# toolkit_args TOP: the configure's arguments for that toolkit (its nvcc and libcudart, given
# as the registering build gives its own through SEED).
toolkit_args() {
	local cudart=$1/targets/$TARGET_NAME/lib/libcudart.so
	echo "-DCMAKE_CUDA_COMPILER=$1/bin/nvcc" "-DCUDA_CUDART=$cudart" "-DCUDA_cudart_LIBRARY=$cudart"
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
# link_module: the test build's module linked by its own link command (link.txt, as its
# Makefile runs it) from the objects the registering build compiled (the directory above
# SEED's): where the libraries are found decides the link, not how the sources compile, and
# compiling the module's 21 CUDA files again costs half a minute of two cores. An object
# missing there fails the link.
link_module() {
	local from obj line
	from=$(dirname "$(dirname "$SEED")")
	(
		cd "$T/build" || exit 1
		for obj in $(tr -d '"' <CMakeFiles/mnist-cuda.dir/objects1); do
			mkdir -p "$(dirname "$obj")" && cp "$from/$obj" "$obj" || exit 1
		done
		while IFS= read -r line; do
			[ -n "$line" ] && { echo "$line"; bash -c "$line" || exit 1; }
		done <CMakeFiles/mnist-cuda.dir/link.txt
	)
}
# module_link: what the module's link command names (libraries and RPATH).
module_link() { cat "$T/build/CMakeFiles/mnist-cuda.dir/link.txt" "$T/build/CMakeFiles/mnist-cuda.dir/linkLibs.rsp" 2>/dev/null; }
re() { sed 's/[.[\*^$+?(){}|]/\\&/g' <<<"$1"; } # a path as an extended regex
# clean LOG: no mnist-ddp line names a path that was not found, or a stub.
clean() {
	local bad
	bad=$(grep 'mnist-ddp: ' "$1" | grep -E -- '-NOTFOUND|/stubs/')
	[ -z "$bad" ] && ok "no configure line names a -NOTFOUND path or a stub" ||
		fail "configure lines name a path not found or a stub: $bad"
}
# libs_entry NAME FROM FILE THROUGH: build/mnist-cuda-libraries.txt has that line.
libs_entry() {
	local want
	want=$(printf '%s\t%s\t%s\t%s' "$@")
	grep -qxF "$want" "$T/build/mnist-cuda-libraries.txt" 2>/dev/null &&
		ok "mnist-cuda-libraries.txt: $(tr '\t' ' ' <<<"$want")" ||
		fail "mnist-cuda-libraries.txt lacks '$(tr '\t' ' ' <<<"$want")': $(cat "$T/build/mnist-cuda-libraries.txt" 2>&1)"
}
# loads MODULE NAME DIR: without the loader cache, MODULE's NAME is DIR/NAME.
loads() {
	local interp resolved
	interp=$(readelf -l /bin/sh 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
	resolved=$("$interp" --inhibit-cache --list "$1" 2>&1 | grep -F "$2 =>")
	grep -qF "=> $3/$2 " <<<"$resolved" &&
		ok "without the loader cache: $(tr -s '\t ' ' ' <<<"$resolved")" ||
		fail "without the loader cache $2 is not $3/$2: '$resolved'"
}

case $CASE in
nccl_wheel)
	SP=$T/site-packages CUDA=$T/cuda-13.0
	toolkit_tree "$CUDA" stubs-only
	nccl_tree "$SP/nvidia/nccl"
	touch "$SP/nvidia/__init__.py" "$SP/nvidia/nccl/__init__.py"
	cublas_tree "$SP/nvidia/cu13"
	[ "$(ls "$SP/nvidia/nccl/lib")" = libnccl.so.2 ] || fail "nvidia/nccl/lib holds more or less than libnccl.so.2"
	# shellcheck disable=SC2046 # toolkit_args: one word per argument
	if ! PYTHONPATH=$SP configure "$T/configure.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none \
		-DMNIST_DDP_PYTHON=python3 "-DCMAKE_IGNORE_PATH=$IGNORE" $(toolkit_args "$CUDA"); then
		cat "$T/configure.log" >&2
		fail "the configure with the wheels failed"
	else
		clean "$T/configure.log"
		line "$T/configure.log" "mnist-ddp: CUDA [0-9.]+ \\($(re "$CUDA/bin/nvcc")\\)" "the toolkit made here"
		line "$T/configure.log" "mnist-ddp: NCCL [0-9.]+ from the nvidia-nccl wheel \(python3\): $(re "$SP/nvidia/nccl/lib/libnccl.so.2")$" "NCCL from the wheel"
		line "$T/configure.log" "mnist-ddp: cuBLAS [0-9.]+ from the nvidia-cublas wheel \(python3\): $(re "$SP/nvidia/cu13/lib/libcublas.so.13")$" "cuBLAS from the wheel"
		line "$T/configure.log" "mnist-ddp: cuBLASLt [0-9.]+ from the nvidia-cublas wheel \(python3\): $(re "$SP/nvidia/cu13/lib/libcublasLt.so.13")$" "cuBLASLt from the wheel"
		for f in nccl/lib/libnccl.so.2 cu13/lib/libcublas.so.13 cu13/lib/libcublasLt.so.13; do
			module_link | grep -q "$SP/nvidia/$f" && ok "the module's link command names the wheel's $f" ||
				fail "the module's link command does not name $SP/nvidia/$f: $(module_link)"
		done
		nccl_dir=$(realpath "$SP/nvidia/nccl/lib") cublas_dir=$(realpath "$SP/nvidia/cu13/lib")
		libs_entry nccl "the nvidia-nccl wheel (python3)" "$SP/nvidia/nccl/lib/libnccl.so.2" rpath
		libs_entry cublas "the nvidia-cublas wheel (python3)" "$SP/nvidia/cu13/lib/libcublas.so.13" rpath
		libs_entry cublasLt "the nvidia-cublas wheel (python3)" "$SP/nvidia/cu13/lib/libcublasLt.so.13" rpath
		if ! link_module >"$T/build.log" 2>&1; then
			tail -n 30 "$T/build.log" >&2
			fail "linking mnist-cuda against the wheels failed"
		else
			module=$T/build/libmnist-cuda.so
			dyn=$(readelf -d "$module")
			for lib in libnccl.so.2 libcublas.so.13; do
				grep -q "(NEEDED).*\[$lib\]" <<<"$dyn" && ok "the module needs $lib" ||
					fail "the module does not need $lib: $(grep NEEDED <<<"$dyn" | tr -s ' ' | tr '\n' ' ')"
			done
			rpath=$(sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p' <<<"$dyn")
			[ "${rpath%%:*}" = "$nccl_dir" ] && ok "the module's DT_RPATH starts with the NCCL wheel's $nccl_dir" ||
				fail "the module's DT_RPATH '$rpath' does not start with $nccl_dir"
			case ":$rpath:" in
			*":$cublas_dir:"*) ok "the module's DT_RPATH holds the cuBLAS wheel's $cublas_dir" ;;
			*) fail "the module's DT_RPATH '$rpath' lacks $cublas_dir" ;;
			esac
			loads "$module" libnccl.so.2 "$nccl_dir"
			loads "$module" libcublas.so.13 "$cublas_dir"
			loads "$module" libcublasLt.so.13 "$cublas_dir"
		fi
	fi
	made=$(find "$SP" "$T/build" -name libnccl.so 2>/dev/null)
	[ -z "$made" ] && ok "no unversioned libnccl.so was made" || fail "an unversioned libnccl.so appeared: $made"
	;;
nccl_home)
	HOME_DIR=$T/nccl-home SP=$T/site-packages CUDA=$T/cuda-13.0
	toolkit_tree "$CUDA" stubs-only
	nccl_tree "$HOME_DIR"
	cublas_tree "$SP/nvidia/cublas"
	# shellcheck disable=SC2046
	if ! configure "$T/configure.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none -DNCCL_HOME="$HOME_DIR" \
		-DMNIST_DDP_PYTHON= -DMNIST_DDP_SITE_PACKAGES="$SP" "-DCMAKE_IGNORE_PATH=$IGNORE" $(toolkit_args "$CUDA"); then
		cat "$T/configure.log" >&2
		fail "the configure with NCCL_HOME failed"
	else
		clean "$T/configure.log"
		line "$T/configure.log" "mnist-ddp: CUDA [0-9.]+ \\($(re "$CUDA/bin/nvcc")\\)" "the toolkit made here"
		line "$T/configure.log" "mnist-ddp: NCCL [0-9.]+ from NCCL_HOME: $(re "$HOME_DIR/lib/libnccl.so.2")$" "NCCL from NCCL_HOME"
		line "$T/configure.log" "mnist-ddp: cuBLAS [0-9.]+ from the nvidia-cublas wheel \(MNIST_DDP_SITE_PACKAGES\): $(re "$SP/nvidia/cublas/lib/libcublas.so.")[0-9]+$" "cuBLAS from the cu12 wheel layout"
		line "$T/configure.log" "mnist-ddp: cuBLASLt [0-9.]+ from the nvidia-cublas wheel \(MNIST_DDP_SITE_PACKAGES\): $(re "$SP/nvidia/cublas/lib/libcublasLt.so.")[0-9]+$" "cuBLASLt from the cu12 wheel layout"
		for dir in "$HOME_DIR/lib" "$SP/nvidia/cublas/lib"; do
			dir=$(realpath "$dir")
			module_link | grep -Eq -- "-rpath,([^ ]*:)?$(re "$dir")(:| |$)" && ok "the module's RPATH holds $dir" ||
				fail "the module's link command sets no RPATH to $dir: $(module_link)"
		done
	fi
	# The same stubs-only toolkit and no wheel: refused, with where it looked, no stub taken.
	# shellcheck disable=SC2046
	if configure "$T/no-cublas.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none -DNCCL_HOME="$HOME_DIR" \
		-DMNIST_DDP_PYTHON= "-DCMAKE_IGNORE_PATH=$IGNORE" $(toolkit_args "$CUDA"); then
		fail "a toolkit with cuBLAS stubs only and no wheel was accepted: $(grep 'mnist-ddp: cuBLAS' "$T/no-cublas.log")"
	elif refusal=$(tr -s '\n ' '  ' <"$T/no-cublas.log" | grep -o "not found: cuBLAS and cuBLASLt (.*stubs/[^)]*)"); then
		ok "a toolkit with cuBLAS stubs only and no wheel is refused: $refusal"
		clean "$T/no-cublas.log"
	else
		fail "the refusal of a toolkit with cuBLAS stubs only does not say so:"
		cat "$T/no-cublas.log" >&2
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
toolkit_targets)
	HOME_DIR=$T/nccl-home CUDA=$T/cuda-13.0
	toolkit_tree "$CUDA" with-cublas
	nccl_tree "$HOME_DIR"
	lib_dir=$CUDA/targets/$TARGET_NAME/lib
	# shellcheck disable=SC2046
	if ! configure "$T/configure.log" -DMNIST_DDP_CUDA=ON -DMNIST_DDP_TESTS=none -DNCCL_HOME="$HOME_DIR" \
		-DMNIST_DDP_PYTHON= "-DCMAKE_IGNORE_PATH=$IGNORE" $(toolkit_args "$CUDA"); then
		cat "$T/configure.log" >&2
		fail "the configure with the toolkit's cuBLAS under targets/$TARGET_NAME/lib failed"
	else
		clean "$T/configure.log"
		line "$T/configure.log" "mnist-ddp: CUDA [0-9.]+ \\($(re "$CUDA/bin/nvcc")\\)" "the toolkit made here"
		line "$T/configure.log" "mnist-ddp: cuBLAS [0-9.]+ from the CUDA toolkit: $(re "$lib_dir/libcublas.so")$" "cuBLAS from the toolkit"
		line "$T/configure.log" "mnist-ddp: cuBLASLt [0-9.]+ from the CUDA toolkit: $(re "$lib_dir/libcublasLt.so")$" "cuBLASLt from the toolkit"
		for f in libcublas.so libcublasLt.so; do
			module_link | grep -q "$lib_dir/$f" && ok "the module's link command names $lib_dir/$f" ||
				fail "the module's link command does not name $lib_dir/$f: $(module_link)"
		done
		stubs=$(module_link | grep -o '[^ "]*/stubs/libcublas[^ "]*')
		[ -z "$stubs" ] && ok "the module links no cuBLAS stub" || fail "the module links a stub: $stubs"
		dir=$(realpath "$lib_dir")
		module_link | grep -Eq -- "-rpath,([^ ]*:)?$(re "$dir")(:| |$)" && ok "the module's RPATH holds $dir" ||
			fail "the module's link command sets no RPATH to $dir: $(module_link)"
		libs_entry cublas "the CUDA toolkit" "$lib_dir/libcublas.so" rpath
		libs_entry cublasLt "the CUDA toolkit" "$lib_dir/libcublasLt.so" rpath
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
	echo "$0: unknown case '$CASE' (nccl_wheel, nccl_home, toolkit_targets, tests_gpu)" >&2
	exit 1
	;;
esac

if [ "$failures" -gt 0 ]; then
	echo "test_find_libs $CASE: $failures failure(s)" >&2
	exit 1
fi
echo "test_find_libs $CASE: all checks passed"
