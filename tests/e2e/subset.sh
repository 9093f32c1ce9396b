# shellcheck shell=bash
# subset.sh - the copies of MNIST tests make for runs that need only part of it (sourced, not run):
# its first images (mnist_subset), its training files alone (mnist_train_only).
#
#   mnist_subset SRC OUT TRAIN_N [TEST_N]
#
# writes OUT/train/ with the first TRAIN_N training images and labels of SRC/train/ and, when
# TEST_N is given, OUT/test/ with the first TEST_N test images and labels of SRC/test/ (each
# source file raw or .gz; the copies raw, their IDX counts set to N). Without TEST_N there is
# no OUT/test/: mnist-train, given --data OUT/train, has no test set to score.
#
# Why: mnist-train reads the whole training file whatever --limit says (47 MB, 188 MB as
# floats on each rank) and scores all 10,000 test images after every epoch. For a run of
# --limit N that compares parameters (param_crc32) and not test accuracy, both are work the
# test does not test; under valgrind they cost seconds a rank. The first N images are the
# ones --limit N trains on, so such a run ends at the same bits. Status 1 (and a line on
# stderr) when a copy comes out short (SRC holds fewer images than asked).

# _subset_be32 N: N as 4 big-endian bytes (IDX headers are big-endian).
_subset_be32() {
	local v=$(($1))
	printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((v >> 24 & 255)) $((v >> 16 & 255)) $((v >> 8 & 255)) $((v & 255)))"
}

# _subset_idx SRC DST N ITEM_BYTES HEADER_BYTES: the first N items of the IDX file SRC (or SRC.gz).
_subset_idx() {
	local src=$1 dst=$2 n=$3 item=$4 header=$5
	[ -f "$src" ] || src=$src.gz
	# gzip -dcf passes a raw file through; head ends it early (SIGPIPE): the size is the check.
	{
		gzip -dcf <"$src" 2>/dev/null | head -c 4
		_subset_be32 "$n"
		gzip -dcf <"$src" 2>/dev/null | head -c $((header + n * item)) | tail -c +9
	} >"$dst"
	if [ "$(wc -c <"$dst")" -ne $((header + n * item)) ]; then
		echo "mnist_subset: $src holds fewer than $n items" >&2
		return 1
	fi
}

mnist_subset() {
	local src=$1 out=$2 n=$3 t=${4:-}
	mkdir -p "$out/train" || return 1
	_subset_idx "$src/train/train-images-idx3-ubyte" "$out/train/train-images-idx3-ubyte" "$n" 784 16 &&
		_subset_idx "$src/train/train-labels-idx1-ubyte" "$out/train/train-labels-idx1-ubyte" "$n" 1 8 ||
		return 1
	[ -n "$t" ] || return 0
	mkdir -p "$out/test" || return 1
	_subset_idx "$src/test/t10k-images-idx3-ubyte" "$out/test/t10k-images-idx3-ubyte" "$t" 784 16 &&
		_subset_idx "$src/test/t10k-labels-idx1-ubyte" "$out/test/t10k-labels-idx1-ubyte" "$t" 1 8
}

# mnist_train_only SRC OUT: OUT/train/ with links to SRC/train/'s two training files (raw or
# .gz) and no OUT/test/: mnist-train given --data OUT/train scores no test set, for runs that
# check the trained model, never its accuracy. The files are linked, not the folder:
# mnist-train looks for the test set in train/../test, which a linked folder would resolve to
# SRC/test. Status 1 (and a line on stderr) when SRC lacks a training file.
mnist_train_only() {
	local src=$1 out=$2 f
	mkdir -p "$out/train" || return 1
	for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
		if [ -e "$src/train/$f" ]; then
			ln -sf "$(readlink -f "$src/train/$f")" "$out/train/$f"
		elif [ -e "$src/train/$f.gz" ]; then
			ln -sf "$(readlink -f "$src/train/$f.gz")" "$out/train/$f.gz"
		else
			echo "mnist_train_only: neither $src/train/$f nor $src/train/$f.gz exists: run scripts/get-mnist.sh" >&2
			return 1
		fi
	done
}

# data_wrapper_start NAME "$@": the opening of a wrapper called as SCRIPT DATA_DIR -- COMMAND
# [ARGS...] (tests/gz_only_data.sh, tests/cudasim/train_only_data.sh): checks that form (else
# a usage line and exit 1), sets DATA_SRC (DATA_DIR), DATA_TMP (a scratch directory
# mnist-NAME.XXXXXX, removed on exit) and DATA_CMD (the command and its arguments).
data_wrapper_start() {
	local name=$1
	shift
	if [ $# -lt 3 ] || [ "$2" != -- ]; then
		echo "usage: $0 DATA_DIR -- COMMAND [ARGS...]" >&2
		exit 1
	fi
	DATA_SRC=$1
	DATA_CMD=("${@:3}")
	DATA_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist-$name.XXXXXX") || exit 1
	trap 'rm -rf "$DATA_TMP"' EXIT
}

# run_on_data DIR COMMAND [ARGS...]: the command, every argument equal to @DATA@ replaced by
# DIR (the wrappers that hand a test a made copy of MNIST); its status.
run_on_data() {
	local dir=$1 a args=()
	shift
	for a in "$@"; do
		if [ "$a" = @DATA@ ]; then args+=("$dir"); else args+=("$a"); fi
	done
	"${args[@]}"
}
