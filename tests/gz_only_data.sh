#!/usr/bin/env bash
# gz_only_data.sh - run a test against a copy of MNIST that holds its four files
# as .gz only, the layout scripts/gpu-node's kit carries (and a user may keep), so
# that a test needing the raw files fails here, not first on a GPU node.
#
#   tests/gz_only_data.sh DATA_DIR -- COMMAND [ARGS...]
#
# DATA_DIR is an MNIST_Data directory (train/ and test/, raw or .gz). The copy
# goes to a scratch directory removed on exit: each file compressed by gzip from
# the raw one, or the .gz linked where DATA_DIR has only that. Every argument
# equal to @DATA@ becomes the copy's path, and MNIST_DATA_DIR is set to it.
# Exit status: the command's (77, a skip, passes through); 1 when DATA_DIR lacks
# a file or the copy cannot be made.
set -uo pipefail

# shellcheck source=e2e/subset.sh
. "$(dirname "$0")/e2e/subset.sh"
data_wrapper_start gz-only "$@"
src=$DATA_SRC tmp=$DATA_TMP
for f in train/train-images-idx3-ubyte train/train-labels-idx1-ubyte \
	test/t10k-images-idx3-ubyte test/t10k-labels-idx1-ubyte; do
	mkdir -p "$tmp/data/${f%/*}"
	if [ -f "$src/$f" ]; then
		gzip -1 -c "$src/$f" >"$tmp/data/$f.gz" || {
			echo "FAIL: cannot compress $src/$f into $tmp/data/$f.gz" >&2
			exit 1
		}
	elif [ -f "$src/$f.gz" ]; then
		ln -s "$(readlink -f "$src/$f.gz")" "$tmp/data/$f.gz"
	else
		echo "FAIL: neither $src/$f nor $src/$f.gz exists: run scripts/get-mnist.sh" >&2
		exit 1
	fi
done
if [ -n "$(find "$tmp/data" -name '*-ubyte' -print -quit)" ]; then
	echo "FAIL: the .gz-only copy holds a raw file: $(find "$tmp/data" -name '*-ubyte')" >&2
	exit 1
fi
echo "gz_only_data: MNIST as .gz only in $tmp/data: $(cd "$tmp/data" && echo */*)"

MNIST_DATA_DIR=$tmp/data run_on_data "$tmp/data" "${DATA_CMD[@]}"
