#!/usr/bin/env bash
# test_module_load.sh - when mnist-train opens the CUDA module, and what it
# says when it cannot: 2 ranks under a real mpirun, as users start it.
#
#   tests/module/test_module_load.sh CASE MNIST_TRAIN MODULE OTHER_MODULE STUB DATA MPIRUN...
#
# MODULE is this build's libmnist-cuda.so; OTHER_MODULE the same backend built
# with another interface id (a module from another build); STUB the toolkit's
# stub libcuda.so (NVIDIA's stand-in for linking, which the CUDA runtime
# recognises at run time and refuses with cudaErrorStubLibrary): put on
# LD_LIBRARY_PATH as libcuda.so.1, it is a driver that loads but cannot run
# anything, so the module is opened and its probe runs on a machine without a
# GPU. Which libraries each rank opened is read from the loader's own log
# (LD_DEBUG=files), one file per process.
#
# Cases (each a ctest test; exit 0 pass, 1 fail, 77 skipped with the reason):
#   host            --backend host opens no CUDA library and not the module
#                   (the same log shows libopenblas, so it would show them)
#   auto_no_driver  on a machine without a driver, auto trains on the host
#                   with one line on rank 0 naming libcuda.so.1 and opens no
#                   CUDA runtime, cuBLAS, NCCL or module; cuda fails with
#                   status 1 and the reason on every rank (skips where a
#                   driver loads)
#   missing         mnist-train copied alone to another directory: auto
#                   trains on the host saying which file is missing (quietly
#                   where no driver loads, with the warning and
#                   backend_fallback=module-not-loaded where one does: which,
#                   the test decides from whether libcuda.so.1 loads here);
#                   cuda fails on every rank
#   missing_driver_node  the same on this machine made a GPU node: the stub
#                   driver on LD_LIBRARY_PATH for the test and the ranks
#   missing_with_driver  the same with the stub driver loadable: GPUs are there
#                   and the install is broken, so auto warns loudly (WARNING,
#                   backend_fallback= in the summary) and cuda fails
#   beside_binary   mnist-train and the module copied together elsewhere and
#                   started from a third directory: the module beside the
#                   binary is opened (with the stub driver its probe answers
#                   error 34), cuBLAS and NCCL with it; auto falls back, cuda fails
#   libs_hidden     the module's RPATH directories hidden (a private mount
#                   namespace binds an empty directory over them: a node
#                   without the CUDA libraries, whose driver loads): auto
#                   trains on the host with dlopen's message naming the
#                   missing library; cuda fails on every rank (skips where
#                   unshare -m is not permitted)
#   other_build     a module from another build beside the binary: refused
#                   with a message on every rank for cuda; auto falls back
set -uo pipefail

if [ $# -lt 7 ]; then
	echo "usage: $0 CASE MNIST_TRAIN MODULE OTHER_MODULE STUB DATA MPIRUN [ARGS...]" >&2
	exit 1
fi
CASE=$1 TRAIN=$2 MODULE=$3 OTHER=$4 STUB=$5 DATA=$6
shift 6
MPIRUN=("$@")
RUN_TIMEOUT=120
CUDA_RE='lib(cudart|cublas|cublasLt|nccl)\.so|libmnist-cuda'
SKIP=77

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }
skip() {
	echo "SKIP $CASE: $*"
	exit "$SKIP"
}

# libs_hidden runs in a mount namespace of its own, where it can hide the
# module's RPATH directories: the script starts itself again inside one.
if [ "$CASE" = libs_hidden ] && [ -z "${MNIST_MODULE_TEST_NS:-}" ]; then
	unshare -m true 2>/dev/null || skip "unshare -m is not permitted here (it needs CAP_SYS_ADMIN)"
	MNIST_MODULE_TEST_NS=1 exec unshare -m bash "$0" "$CASE" "$TRAIN" "$MODULE" "$OTHER" "$STUB" \
		"$DATA" "${MPIRUN[@]}"
fi

for f in "$TRAIN" "$MODULE" "$DATA/train"; do
	[ -e "$f" ] || { echo "FAIL: $f does not exist (build first; MNIST: scripts/get-mnist.sh)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-module.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/elsewhere" "$TMP/driver" "$TMP/empty"

need_stub() {
	[ -n "$STUB" ] && [ -f "$STUB" ] || skip "the toolkit's stub libcuda.so was not found at configure time"
	cp "$STUB" "$TMP/driver/libcuda.so.1"
}

# driver_loads [LD_LIBRARY_PATH]: 0 when libcuda.so.1 loads here.
driver_loads() {
	LD_LIBRARY_PATH=${1:-${LD_LIBRARY_PATH:-}} \
		python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null
}

# install DIR TRAIN [MODULE]: a copy of mnist-train, and of a module as libmnist-cuda.so.
install_copy() {
	mkdir -p "$1"
	cp "$2" "$1/mnist-train"
	[ -z "${3:-}" ] || cp "$3" "$1/libmnist-cuda.so"
}

# run NAME BIN ENV_LD_LIBRARY_PATH ARGS...: from $TMP/elsewhere, per-rank files
# under $TMP/NAME, the loader's log under $TMP/NAME.ld; sets RC.
run() {
	local name=$1 bin=$2 ldpath=$3
	shift 3
	local env=(-x LD_DEBUG=files -x "LD_DEBUG_OUTPUT=$TMP/$name.ld/ld")
	[ -z "$ldpath" ] || env+=(-x "LD_LIBRARY_PATH=$ldpath")
	mkdir -p "$TMP/$name.ld"
	(cd "$TMP/elsewhere" && timeout -k 10 "$RUN_TIMEOUT" "${MPIRUN[@]}" -n 2 "${env[@]}" \
		--output-filename "$TMP/$name" "$bin" --data "$DATA/train" --epochs 1 --limit 2000 \
		"$@" >"$TMP/$name.out" 2>&1)
	RC=$?
	if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
		fail "$name: mpirun did not finish within ${RUN_TIMEOUT}s"
	fi
}
rank_file() { echo "$TMP/$1/1/rank.$2/$3"; }
show() { sed 's/^/    /' "$TMP/$1.out" >&2; }

# loaded NAME: what the ranks' loaders opened or tried (file=... lines), one per line.
loaded() {
	cat "$TMP/$1.ld"/ld.* 2>/dev/null | sed -n 's/.*file=\([^ ]*\) .*/\1/p' | sort -u
}

# expect_fallback NAME PATTERN [loud]: auto ran on the host; rank 0 said why in one line
# matching PATTERN: "backend auto: using host, ..." where no driver is installed, or, with
# "loud" (a driver is there, so GPUs are present but unusable), a WARNING line and the
# summary's backend_fallback key.
expect_fallback() {
	local name=$1 pattern=$2 loud=${3:-} err0 err1 out0 lines line
	line='backend auto: using host'
	[ -z "$loud" ] || line='WARNING: GPUs are present but unusable'
	err0=$(rank_file "$name" 0 stderr) err1=$(rank_file "$name" 1 stderr) out0=$(rank_file "$name" 0 stdout)
	if [ "$RC" -ne 0 ]; then
		fail "$name: --backend auto exited with $RC, expected 0 (training on the host); output:"
		show "$name"
		return
	fi
	grep -q '^summary: .* backend=host ' "$out0" 2>/dev/null ||
		fail "$name: rank 0's summary does not say backend=host: $(grep summary "$out0" 2>/dev/null)"
	if [ -n "$loud" ] && ! grep -q '^summary: .* backend_fallback=' "$out0" 2>/dev/null; then
		fail "$name: rank 0's summary does not name the fallback: $(grep summary "$out0" 2>/dev/null)"
	elif [ -z "$loud" ] && grep -q 'backend_fallback=' "$out0" 2>/dev/null; then
		fail "$name: no driver, but the summary names a fallback: $(grep summary "$out0")"
	fi
	lines=$(grep -c "$line" "$err0" 2>/dev/null)
	if [ "${lines:-0}" -ne 1 ]; then
		fail "$name: rank 0 printed ${lines:-0} '$line' lines, expected 1:"
		sed 's/^/    /' "$err0" >&2
	elif ! grep "$line" "$err0" | grep -Eq "$pattern"; then
		fail "$name: rank 0's reason does not match /$pattern/: $(grep "$line" "$err0")"
	else
		ok "$name: trained on the host; rank 0: $(grep "$line" "$err0")"
	fi
	if grep -q "$line" "$err1" 2>/dev/null; then
		fail "$name: rank 1 printed the reason too (rank 0 only): $(grep "$line" "$err1")"
	fi
}

# expect_refusal NAME PATTERN: --backend cuda ended with status 1, every rank giving the reason.
expect_refusal() {
	local name=$1 pattern=$2 r err
	if [ "$RC" -ne 1 ]; then
		fail "$name: --backend cuda exited with $RC, expected 1; output:"
		show "$name"
	fi
	for r in 0 1; do
		err=$(rank_file "$name" $r stderr)
		if grep -- '--backend cuda: ' "$err" 2>/dev/null | grep -Eq "$pattern"; then
			ok "$name: rank $r: $(grep -- '--backend cuda' "$err")"
		else
			fail "$name: rank $r's stderr has no '--backend cuda: ' line matching /$pattern/:"
			sed 's/^/    /' "$err" >&2 2>/dev/null
		fi
	done
}

# opened_none NAME: neither rank's loader opened or tried a CUDA library or the module.
opened_none() {
	local seen
	seen=$(loaded "$1")
	if ! grep -q '^libopenblas' <<<"$seen"; then
		fail "$1: the loader log shows no libopenblas: the log itself is not working ($(ls "$TMP/$1.ld"))"
	elif grep -Eq "$CUDA_RE" <<<"$seen"; then
		fail "$1: the ranks opened $(grep -E "$CUDA_RE" <<<"$seen" | tr '\n' ' ')"
	else
		ok "$1: no CUDA runtime, cuBLAS, NCCL or module opened ($(wc -l <<<"$seen") libraries in the log)"
	fi
}

# both BIN LD_LIBRARY_PATH PATTERN [loud]: --backend auto falls back and --backend
# cuda refuses, each saying PATTERN (runs "auto" and "cuda"); loud as for expect_fallback.
both() {
	run auto "$1" "$2" --backend auto
	expect_fallback auto "$3" "${4:-}"
	run cuda "$1" "$2" --backend cuda
	expect_refusal cuda "$3"
}

case $CASE in
host)
	run host "$TRAIN" "" --backend host
	[ "$RC" -eq 0 ] || { fail "host: exited with $RC"; show host; }
	opened_none host
	if grep -q '^libcuda\.so' <<<"$(loaded host)"; then
		fail "host: the ranks looked for the driver (libcuda.so.1)"
	fi
	;;
auto_no_driver)
	driver_loads && skip "libcuda.so.1 loads on this machine (a driver is installed)"
	both "$TRAIN" "" 'no CUDA driver on this node \(libcuda\.so\.1: cannot open shared object file'
	opened_none auto
	opened_none cuda
	;;
missing | missing_driver_node)
	if [ "$CASE" = missing_driver_node ]; then
		# This machine as a GPU node: its driver on the loader's path, for the test
		# and every rank alike (the stub stands in for it).
		need_stub
		export LD_LIBRARY_PATH=$TMP/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
		driver_loads || { fail "$CASE: the stub driver does not load from $TMP/driver"; exit 1; }
	fi
	install_copy "$TMP/bin" "$TRAIN"
	missing_line="no CUDA backend module: $TMP/bin/libmnist-cuda.so: No such file or directory"
	# What rank 0 owes depends on the machine: where no driver loads, a CPU machine,
	# the quiet line; where one does, GPUs are there and the install is broken, so
	# the warning and backend_fallback=module-not-loaded.
	if driver_loads; then
		ok "$CASE: libcuda.so.1 loads on this machine: expecting the warning [module-not-loaded]"
		both "$TMP/bin/mnist-train" "" "$missing_line" loud
		grep -q "WARNING: GPUs are present but unusable.*$missing_line \\[module-not-loaded\\]" \
			"$(rank_file auto 0 stderr)" ||
			fail "$CASE: rank 0's warning does not give the reason [module-not-loaded]"
		grep -q '^summary: .* backend_fallback=module-not-loaded' "$(rank_file auto 0 stdout)" ||
			fail "$CASE: rank 0's summary lacks backend_fallback=module-not-loaded"
	else
		ok "$CASE: no libcuda.so.1 loads on this machine: expecting the quiet line"
		both "$TMP/bin/mnist-train" "" "$missing_line"
	fi
	;;
missing_with_driver)
	# A driver but no module: GPUs are there and the install is broken, so auto says it loudly.
	need_stub
	install_copy "$TMP/bin" "$TRAIN"
	both "$TMP/bin/mnist-train" "$TMP/driver" \
		"no CUDA backend module: $TMP/bin/libmnist-cuda.so: No such file or directory" loud
	;;
beside_binary)
	need_stub
	install_copy "$TMP/bin" "$TRAIN" "$MODULE"
	both "$TMP/bin/mnist-train" "$TMP/driver" 'cudaGetDeviceCount: error 34 \(cudaErrorStubLibrary\)' loud
	seen=$(loaded auto)
	for lib in "$TMP/bin/libmnist-cuda.so" libcublas.so libnccl.so libcudart.so; do
		if grep -q "^$lib" <<<"$seen"; then
			ok "beside_binary: the ranks opened $lib"
		else
			fail "beside_binary: the ranks did not open $lib (opened: $(tr '\n' ' ' <<<"$seen"))"
		fi
	done
	;;
libs_hidden)
	need_stub
	install_copy "$TMP/bin" "$TRAIN" "$MODULE"
	rpath=$(readelf -d "$MODULE" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
	[ -n "$rpath" ] || skip "the module has no RPATH (CUDA in system directories): nothing to hide"
	# In the mount namespace this script was started in (see the top).
	mount --make-rprivate / || { fail "libs_hidden: mount --make-rprivate / failed"; exit 1; }
	IFS=: read -r -a dirs <<<"$rpath"
	for dir in "${dirs[@]}"; do
		mount --bind "$TMP/empty" "$dir" || { fail "libs_hidden: cannot hide $dir"; exit 1; }
	done
	driver_loads "$TMP/driver" || { fail "libs_hidden: the stub driver does not load from $TMP/driver"; exit 1; }
	both "$TMP/bin/mnist-train" "$TMP/driver" \
		'loading the CUDA backend: lib(cudart|cublas|cublasLt|nccl)\.so\.[0-9]+: cannot open shared object file' loud
	;;
other_build)
	need_stub
	install_copy "$TMP/bin" "$TRAIN" "$OTHER"
	both "$TMP/bin/mnist-train" "$TMP/driver" \
		"$TMP/bin/libmnist-cuda.so is from another build \(module interface [0-9]+ another-build;" loud
	;;
*)
	echo "test_module_load: unknown case '$CASE'" >&2
	exit 1
	;;
esac

if [ "$failures" -gt 0 ]; then
	echo "test_module_load $CASE: $failures failure(s)" >&2
	exit 1
fi
echo "test_module_load $CASE: all checks passed"
