#!/usr/bin/env bash
# test_cublaslt_link.sh - a module that calls cuBLASLt (tests/build/cublaslt_link.cu), linked
# as libmnist-cuda.so is, needs libcublasLt, and the loader (without its cache) takes it from
# the file the configure chose (build/mnist-cuda-libraries.txt, the line "cublasLt").
#
#   tests/build/test_cublaslt_link.sh MODULE LIBRARIES_FILE
#
# Exit 0 pass, 1 fail (every failure is printed).
set -uo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 MODULE LIBRARIES_FILE" >&2
	exit 1
fi
MODULE=$1 LIBS_FILE=$2
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

for f in "$MODULE" "$LIBS_FILE"; do
	[ -f "$f" ] || { echo "FAIL: $f does not exist (build first)" >&2; exit 1; }
done
calls=$(readelf --dyn-syms -W "$MODULE" | awk '$7 == "UND" && $8 ~ /^cublasLt/ { sub(/@.*/, "", $8); print $8 }' | sort -u)
[ -n "$calls" ] && ok "the module calls $(tr '\n' ' ' <<<"$calls")" || fail "the module calls no cuBLASLt function"
needed=$(readelf -d "$MODULE" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
lt=$(grep '^libcublasLt\.so' <<<"$needed")
[ -n "$lt" ] && ok "the module needs $lt" ||
	fail "the module does not need libcublasLt (NEEDED: $(tr '\n' ' ' <<<"$needed"))"

want=$(awk -F '\t' '$1 == "cublasLt" { print $3 }' "$LIBS_FILE")
[ -n "$want" ] || fail "$LIBS_FILE has no cublasLt line"
interp=$(readelf -l /bin/sh | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
loaded=$("$interp" --inhibit-cache --list "$MODULE" 2>&1 | awk '$1 ~ /^libcublasLt\.so/ && $2 == "=>" { print $3 }')
if [ -n "$want" ] && [ -n "$loaded" ] && [ "$(realpath "$loaded")" = "$(realpath "$want")" ]; then
	ok "without the loader cache: $lt => $loaded, the configure's $want"
else
	fail "without the loader cache libcublasLt is '$loaded', not the configure's $want"
fi

if [ "$failures" -gt 0 ]; then
	echo "test_cublaslt_link: $failures failure(s)" >&2
	exit 1
fi
echo "test_cublaslt_link: all checks passed"
