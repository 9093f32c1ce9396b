#!/usr/bin/env bash
# train_only_data.sh - run a test script against MNIST's training files alone, with no
# test set beside them, for a script whose runs check the trained model, never its
# accuracy: mnist-train then scores nothing at the end of a run (scoring the 10,000 test
# images is most of a short simulated LeNet-5 run: 3 s of CPU against 0.7 s for 16 steps).
#
#   tests/cudasim/train_only_data.sh DATA_DIR -- COMMAND [ARGS...]
#
# DATA_DIR is an MNIST_Data directory (train/, raw or .gz). A scratch directory, removed
# on exit, gets train/ with links to DATA_DIR's training files and no test/
# (mnist_train_only, tests/e2e/subset.sh). Every argument equal to @DATA@ becomes the
# scratch directory's path. Exit status: the command's; 1 when DATA_DIR
# lacks a training file.
set -uo pipefail

# shellcheck source=../e2e/subset.sh
. "$(dirname "$0")/../e2e/subset.sh"
data_wrapper_start train-only "$@"
mnist_train_only "$DATA_SRC" "$DATA_TMP/data" || { echo "FAIL: no training set to link" >&2; exit 1; }
run_on_data "$DATA_TMP/data" "${DATA_CMD[@]}"
