#!/usr/bin/env bash
# test_module_elf.sh - the CUDA module and mnist-train as the dynamic loader sees them.
#
#   tests/module/test_module_elf.sh build/mnist-train build/libmnist-cuda.so "DIR:DIR..." \
#                                   build/mnist-cuda-libraries.txt
#   tests/module/test_module_elf.sh --exports-only MODULE
#
# Checks, with readelf and the loader itself (no GPU needed):
# - mnist-train names no CUDA library, directly (readelf NEEDED) or through
#   its dependencies (ldd): a host run cannot open one by linking;
# - the module carries DT_RPATH, not DT_RUNPATH, holding each directory given
#   (the toolkit's and NCCL's library directories it was built against):
#   DT_RPATH also serves the libraries those load (cuBLAS -> cuBLASLt), and
#   LD_LIBRARY_PATH cannot shadow it;
# - it needs libcudart, libcublas and libnccl, and libcublasLt when it calls cuBLASLt;
# - with the loader's cache ignored (ld.so --inhibit-cache: a node whose
#   loader configuration does not list the toolkit), every library the module
#   needs is still found, and each CUDA library is the very file the configure linked
#   (the libraries file cmake/cuda.cmake writes: cudart, nccl, cublas, cublasLt, where
#   each came from, its file, and "rpath" or "system"): one the configure took from a
#   directory of the RPATH is found there, one it took from the system (a distribution's
#   NCCL in /usr/lib/x86_64-linux-gnu) by the loader's own search;
# - the module exports one symbol, backend_module_entry (--exports-only: that check
#   alone, for a module such as the simulator's);
# - each symbol the module needs and none of its libraries defines (check_fail,
#   die, ...) is exported by mnist-train (ENABLE_EXPORTS): the module uses the
#   program's own, where the rank and host identity live. The dynamic loader is one
#   of those libraries (__tls_get_addr, which a C++ runtime linked into the module uses).
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# check_exports MODULE: backend_module_entry is its only defined dynamic symbol.
check_exports() {
	local exports
	exports=$(readelf --dyn-syms -W "$1" |
		awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $5 != "LOCAL" && $8 != "" { print $8 }')
	if [ "$exports" = backend_module_entry ]; then
		ok "$1 exports backend_module_entry only"
	else
		fail "$1 exports $(wc -l <<<"$exports") symbols: $(tr '\n' ' ' <<<"$exports") (expected backend_module_entry only)"
	fi
}
# verdict: the closing line and exit status.
verdict() {
	if [ "$failures" -gt 0 ]; then
		echo "test_module_elf: $failures failure(s)" >&2
		exit 1
	fi
	echo "test_module_elf: all checks passed"
	exit 0
}

if [ $# -eq 2 ] && [ "$1" = --exports-only ]; then
	[ -f "$2" ] || { echo "FAIL: $2 does not exist (build first)" >&2; exit 1; }
	check_exports "$2"
	verdict
fi
if [ $# -ne 4 ]; then
	echo "usage: $0 MNIST_TRAIN MODULE 'RPATH_DIR:...' LIBRARIES_FILE | --exports-only MODULE" >&2
	exit 1
fi
TRAIN=$1 MODULE=$2 LIBS_FILE=$4
IFS=: read -r -a WANT_RPATH <<<"$3"
CUDA_RE='lib(cuda|cudart|cublas|cublasLt|nccl)\.so'

for f in "$TRAIN" "$MODULE" "$LIBS_FILE"; do
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
# cuBLASLt: linked always; needed (under --as-needed, the default of Debian's and Ubuntu's
# GCC) once the module calls it, and then from the module's own NEEDED, not only through
# libcublas's.
lt_calls=$(readelf --dyn-syms -W "$MODULE" | awk '$7 == "UND" && $8 ~ /^cublasLt/ { sub(/@.*/, "", $8); print $8 }' | sort -u)
if grep -q '^libcublasLt\.so' <<<"$module_needed"; then
	ok "the module needs $(grep '^libcublasLt\.so' <<<"$module_needed")"
elif [ -n "$lt_calls" ]; then
	fail "the module calls $(tr '\n' ' ' <<<"$lt_calls")but does not need libcublasLt (NEEDED: $(tr '\n' ' ' <<<"$module_needed"))"
else
	ok "the module calls no cuBLASLt function: not in its NEEDED (linked --as-needed), libcublasLt comes through libcublas"
fi

# Without the loader's cache, each CUDA library is the file the configure linked: through the
# RPATH, or, for one the configure took from the system, through the loader's own search.
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
	seen=0
	while IFS=$'\t' read -r lib from file through; do
		case $lib in '#'* | '') continue ;; esac
		seen=$((seen + 1))
		loaded=$(awk -v re="^lib$lib\\.so" '$1 ~ re && $2 == "=>" { print $3 }' <<<"$list")
		if [ -z "$loaded" ]; then
			# (--list shows the libraries loaded for another too: cuBLASLt for cuBLAS.)
			fail "without the loader cache lib$lib is not loaded at all (the configure linked $file, from $from)"
			continue
		fi
		want=$(realpath "$file") got=$(realpath "$loaded")
		if [ "$want" != "$got" ]; then
			fail "without the loader cache lib$lib is $loaded ($got), not the file the configure took from $from: $file ($want)"
			continue
		fi
		dir=$(dirname "$loaded")
		case $through in
		rpath)
			case ":$rpath:" in
			*":$dir:"*) ok "without the loader cache: lib$lib => $loaded, through the RPATH (from $from)" ;;
			*) fail "lib$lib ($from) should come through the RPATH '$rpath', came from $dir" ;;
			esac
			;;
		system) ok "without the loader cache: lib$lib => $loaded, the loader's own search (from $from: $file)" ;;
		*) fail "$LIBS_FILE: lib$lib is found through '$through' (expected rpath or system)" ;;
		esac
	done <"$LIBS_FILE"
	[ "$seen" -ge 4 ] || fail "$LIBS_FILE lists $seen libraries (expected cudart, nccl, cublas, cublasLt)"
fi

# One export.
check_exports "$MODULE"

# Strong undefined symbols: each from one of the module's libraries (the dynamic loader
# among them) or from mnist-train.
defined_in() { # FILE: its defined dynamic symbols, version suffixes dropped
	readelf --dyn-syms -W "$1" |
		awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 != "" { sub(/@.*/, "", $8); print $8 }'
}
provided=$(
	{
		ldd "$MODULE" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
		[ -x "$interp" ] && echo "$interp"
	} | sort -u | while read -r lib; do
		defined_in "$lib"
	done | sort -u
)
grep -qx __tls_get_addr <<<"$provided" ||
	fail "the module's libraries, the dynamic loader $interp among them, define no __tls_get_addr"
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

verdict
