#!/usr/bin/env bash
# test.sh - the whole test suite on a fresh machine: set up (scripts/setup.sh,
# warnings as errors), run every ctest test, then the sanitizer build of the
# unit suite and a short fuzzing run. GPU tests skip with their reason where
# no device is usable and are reported as skipped, never as passed.
#
#   bash scripts/test.sh            # what CI runs
#   bash scripts/test.sh --quick    # in a built tree: the unit suite and a few runs, ~1 min
#
# Environment: MNIST_DDP_QUICK=1 runs the main suite only (no sanitizer build,
# no fuzzing): for a quick check while working, never for CI.
set -euo pipefail
cd "$(dirname "$0")/.."

# --quick: for work in progress, in a tree this script has built once: what changed rebuilt,
# the unit suite, and a few end-to-end runs of each backend (the host's, and the CUDA
# backend's on the simulator): about a minute on 2 cores. Never what CI runs.
QUICK_TESTS='^(e2e_train|e2e_eval_every|mpi_dp_equiv_2|mpi_replicas_3|gpu_ops_sim|mnist_train_sim_seed_cuda_vs_host_2|mnist_train_sim_plan_foreign)$'
case "${1:-}" in
"") ;;
--quick)
	if [ ! -f build/CMakeCache.txt ]; then
		echo "test.sh --quick: no build/ here: run bash scripts/test.sh once first" >&2
		exit 2
	fi
	export OPENBLAS_NUM_THREADS=1
	cmake --build build -j"$(nproc)" >/dev/null
	echo "test.sh --quick: built in ${SECONDS} s"
	ctest --test-dir build -L unit -j"$(nproc)" --output-on-failure --timeout 600
	ctest --test-dir build -R "$QUICK_TESTS" -j"$(nproc)" --output-on-failure --timeout 600
	echo "test.sh --quick: passed in ${SECONDS} s (the whole suite: bash scripts/test.sh)"
	exit 0
	;;
*)
	echo "test.sh: unknown argument '$1' (none: the whole suite; --quick: a minute's check)" >&2
	exit 2
	;;
esac

export CMAKE_ARGS="-DMNIST_DDP_WERROR=ON ${CMAKE_ARGS:-}"
export MNIST_DDP_SETUP=test # the tests' packages too (Slurm, munge, PyTorch)
bash scripts/setup.sh
echo "test.sh: set up and built in ${SECONDS} s"

export OPENBLAS_NUM_THREADS=1
# Tests that keep several cores busy declare them (PROCESSORS: their processes, or fewer
# where those mostly wait, as on a deadline or a daemon), so ctest runs a single-process
# test beside another one but never oversubscribes the cores.
echo "== ctest: the whole suite (build/)"
ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 600
echo "test.sh: the whole suite done at ${SECONDS} s"
[ "${MNIST_DDP_QUICK:-0}" = 1 ] && exit 0

# The unit suite again, every object built with AddressSanitizer and
# UndefinedBehaviorSanitizer (host backend only: nvcc objects carry no ASan); its
# tests are single processes that share nothing, so they run side by side. -O1, as the
# sanitizers' documentation advises: on 2 cores it builds in 70 s where -O2 took 115, and the
# tests run about as fast.
echo "== ctest -L unit under ASan + UBSan (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
	-DMNIST_DDP_SANITIZE=ON -DMNIST_DDP_CUDA=OFF -DMNIST_DDP_WERROR=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target unit-tests >/dev/null # what -L unit runs
# A build that is not instrumented would pass for the wrong reason. (grep reads all of
# nm's output: with -q it could stop early, and pipefail would count nm's SIGPIPE.)
if [ "$(nm build-asan/tests/test_idx | grep -c __asan_init)" -eq 0 ]; then
	echo "test.sh: build-asan/tests/test_idx is not built with AddressSanitizer" >&2
	exit 1
fi
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	ctest --test-dir build-asan -L unit -j"$(nproc)" --output-on-failure --timeout 600
echo "test.sh: the sanitizer suite done at ${SECONDS} s"

# libFuzzer on the two readers of untrusted files, 20 s each (clang), side by side (each
# fuzzer is one process).
echo "== fuzzing: the IDX and checkpoint readers (build-fuzz/)"
CC=clang cmake -S . -B build-fuzz -DMNIST_DDP_FUZZ=ON -DMNIST_DDP_CUDA=OFF \
	-DMNIST_DDP_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_idx fuzz_checkpoint >/dev/null
ctest --test-dir build-fuzz -L fuzz -j"$(nproc)" --output-on-failure --timeout 600
echo "test.sh: all suites passed in ${SECONDS} s"
