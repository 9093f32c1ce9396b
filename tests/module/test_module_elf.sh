#!/usr/bin/env bash
# test_module_elf.sh - the CUDA module and mnist-train as the dynamic loader sees them.
#
#   tests/module/test_module_elf.sh build/mnist-train build/libmnist-cuda.so "DIR:DIR..."
#
# Checks, with readelf and the loader itself (no GPU needed):
# - mnist-train names no CUDA library, directly (readelf NEEDED) or through
#   its dependencies (ldd): a host run cannot open one by linking;
# - the module carries DT_RPATH, not DT_RUNPATH, holding each directory given
#   (the toolkit's and NCCL's library directories it was built against):
#   DT_RPATH also serves the libraries those load (cuBLAS -> cuBLASLt), and
#   LD_LIBRARY_PATH cannot shadow it;
# - with the loader's cache ignored (ld.so --inhibit-cache: a node whose
#   loader configuration does not list the toolkit), every library the module
#   needs is still found, each CUDA one in a directory of its RPATH;
# - the module exports one symbol, backend_module_entry;
# - each symbol the module needs and none of its libraries defines (check_fail,
#   die, ...) is exported by mnist-train (ENABLE_EXPORTS): the module uses the
#   program's own, where the rank and host identity live.
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -ne 3 ]; then
	echo "usage: $0 MNIST_TRAIN MODULE 'RPATH_DIR:...'" >&2
	exit 1
fi
TRAIN=$1 MODULE=$2
IFS=: read -r -a WANT_RPATH <<<"$3"
CUDA_RE='lib(cuda|cudart|cublas|cublasLt|nccl)\.so'

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

for f in "$TRAIN" "$MODULE"; do
	[ -f "$f" ] || { echo "FAIL: $f does not exist (build first)" >&2; exit 1; }
done

# mnist-train links no CUDA library.
needed=$(readelf -d "$TRAIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || fail "readelf -d $TRAIN lists no NEEDED entry at all"
if grep -Eq "$CUDA_RE" <<<"$needed"; then
	fail "mnist-train needs a CUDA library: $(grep -E "$CUDA_RE" <<<"$needed" | tr '\n' ' ')"
else
	ok "mnist-train's NEEDED: $(tr '\n' ' ' <<<"$needed")"
fi
if ldd "$TRAIN" | grep -Eq "$CUDA_RE"; then
	fail "ldd $TRAIN shows a CUDA library: $(ldd "$TRAIN" | grep -E "$CUDA_RE" | tr '\n' ' ')"
else
	ok "ldd mnist-train: no CUDA library among $(ldd "$TRAIN" | wc -l) entries"
fi

# DT_RPATH, not DT_RUNPATH, with every directory it was built against.
dyn=$(readelf -d "$MODULE")
if grep -q '(RUNPATH)' <<<"$dyn"; then
	fail "the module has DT_RUNPATH: $(grep '(RUNPATH)' <<<"$dyn")"
fi
rpath=$(sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p' <<<"$dyn")
if [ ${#WANT_RPATH[@]} -eq 0 ]; then
	ok "the toolkit and NCCL are in system directories: no RPATH wanted (the module has '$rpath')"
elif [ -z "$rpath" ]; then
	fail "the module has no DT_RPATH"
else
	for dir in "${WANT_RPATH[@]}"; do
		case ":$rpath:" in
		*":$dir:"*) ok "the module's DT_RPATH holds $dir" ;;
		*) fail "the module's DT_RPATH '$rpath' lacks $dir" ;;
		esac
	done
fi
module_needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn")
for lib in libcudart libcublas libnccl; do
	grep -q "^$lib\.so" <<<"$module_needed" ||
		fail "the module does not need $lib (NEEDED: $(tr '\n' ' ' <<<"$module_needed"))"
done

# Found without the loader's cache, through the RPATH.
interp=$(readelf -l "$TRAIN" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
if [ ! -x "$interp" ]; then
	fail "no program interpreter found in $TRAIN ('$interp')"
else
	list=$("$interp" --inhibit-cache --list "$MODULE" 2>&1)
	if grep -q 'not found' <<<"$list"; then
		fail "without the loader cache: $(grep 'not found' <<<"$list" | tr '\n' ' ')"
	fi
	cuda_libs=$(grep -E "$CUDA_RE" <<<"$list")
	[ -n "$cuda_libs" ] || fail "without the loader cache the module resolves no CUDA library: $list"
	while read -r name _ path _; do
		[ -n "$name" ] || continue
		dir=$(dirname "$path")
		case ":$rpath:" in
		*":$dir:"*) ok "without the loader cache: $name => $path" ;;
		*)
			if [ ${#WANT_RPATH[@]} -eq 0 ]; then
				ok "without the loader cache: $name => $path (a system directory)"
			else
				fail "without the loader cache $name came from $dir, not from the RPATH '$rpath'"
			fi
			;;
		esac
	done <<<"$cuda_libs"
fi

# One export.
exports=$(readelf --dyn-syms -W "$MODULE" |
	awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $5 != "LOCAL" && $8 != "" { print $8 }')
if [ "$exports" = backend_module_entry ]; then
	ok "the module exports backend_module_entry only"
else
	fail "the module exports: $(tr '\n' ' ' <<<"$exports") (expected backend_module_entry only)"
fi

# Strong undefined symbols: each from one of the module's libraries or from mnist-train.
defined_in() { # FILE: its defined dynamic symbols, version suffixes dropped
	readelf --dyn-syms -W "$1" |
		awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 != "" { sub(/@.*/, "", $8); print $8 }'
}
provided=$(
	ldd "$MODULE" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
		defined_in "$lib"
	done | sort -u
)
from_train=$(defined_in "$TRAIN" | sort -u)
undefined=$(readelf --dyn-syms -W "$MODULE" |
	awk '$1 ~ /^[0-9]+:$/ && $7 == "UND" && $5 == "GLOBAL" && $8 != "" { sub(/@.*/, "", $8); print $8 }' |
	sort -u)
own=$(comm -23 <(echo "$undefined") <(echo "$provided"))
if [ -z "$own" ]; then
	fail "the module takes nothing from the program (expected check_fail, die, ...)"
else
	missing=$(comm -23 <(echo "$own") <(echo "$from_train"))
	if [ -n "$missing" ]; then
		fail "the module needs what neither its libraries nor mnist-train export: $(tr '\n' ' ' <<<"$missing")"
	else
		ok "from mnist-train's exports: $(tr '\n' ' ' <<<"$own")"
	fi
fi

if [ "$failures" -gt 0 ]; then
	echo "test_module_elf: $failures failure(s)" >&2
	exit 1
fi
echo "test_module_elf: all checks passed"
