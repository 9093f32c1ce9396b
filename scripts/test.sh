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

# The sanitizer and fuzzing builds (host backend only: nvcc objects carry no ASan), made at
# the lowest priority while the main suite runs: its tests leave a core idle for a third of
# their time (a deadline's wait, mpirun starting a job, a daemon), which the compilers take,
# and yield it back at once. Their logs in build-*/test-sh-build.log; each stage waits for
# its build below. -O1 for the sanitizers, as their documentation advises.
side_build() { # DIR CMAKE_ARGS... -- TARGETS...
	local dir=$1 args=()
	shift
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	mkdir -p "$dir"
	{ cmake -S . -B "$dir" -DMNIST_DDP_CUDA=OFF -DMNIST_DDP_WERROR=ON "${args[@]}" &&
		cmake --build "$dir" -j"$(nproc)" --target "$@"; } >"$dir/test-sh-build.log" 2>&1
}
side_builds() {
	side_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
		-DMNIST_DDP_SANITIZE=ON -- unit-tests || return 1 # what -L unit runs
	CC=clang side_build build-fuzz -DMNIST_DDP_FUZZ=ON -- fuzz_idx fuzz_checkpoint || return 2
}
side_pid=
if [ "${MNIST_DDP_QUICK:-0}" != 1 ]; then
	# A session of its own, so that a failure below stops the compilers too.
	setsid nice -n 19 bash -c "$(declare -f side_build side_builds); side_builds" &
	side_pid=$!
	trap 'kill -- "-$side_pid" 2>/dev/null || true' EXIT
fi

# Tests that keep several cores busy declare them (PROCESSORS: their processes, or one
# where those mostly wait, as on a deadline or a daemon). Even so a third to a half of the
# suite's time is waiting (a job starting and ending, a deadline, a daemon, a script between
# runs): run at as many slots as cores, 2 cores stayed half idle (416 s for the main run;
# 246 s at twice the cores), so ctest gets two slots a core and the kernel shares the cores
# among what is running. (Three a core, 206 s, was too much: under that load an srun job's
# PMIx start-up failed once in slurm_two_nodes.) ctest starts the longest
# first from tests/times.txt (a fresh build has no times of its own), and the run's times
# go to build/ctest-junit.xml (python3 tests/times.py table build/ctest-junit.xml build
# writes tests/times.txt anew).
echo "== ctest: the whole suite (build/)"
mkdir -p build/Testing/Temporary
[ -s build/Testing/Temporary/CTestCostData.txt ] ||
	python3 tests/times.py costdata tests/times.txt >build/Testing/Temporary/CTestCostData.txt
ctest --test-dir build -j"$((2 * $(nproc)))" --output-on-failure --timeout 600 \
	--output-junit "$PWD/build/ctest-junit.xml"
echo "test.sh: the whole suite done at ${SECONDS} s; its slowest tests:"
python3 tests/times.py top build/ctest-junit.xml 5
[ "${MNIST_DDP_QUICK:-0}" = 1 ] && exit 0

side_rc=0
wait "$side_pid" || side_rc=$?
trap - EXIT
if [ "$side_rc" -ne 0 ]; then
	log=build-asan/test-sh-build.log
	[ "$side_rc" -eq 1 ] || log=build-fuzz/test-sh-build.log
	tail -n 30 "$log" >&2
	echo "test.sh: the sanitizer or fuzzing build failed ($log)" >&2
	exit 1
fi
echo "test.sh: the sanitizer and fuzzing builds were ready at ${SECONDS} s"

# The unit suite again, every object built with AddressSanitizer and
# UndefinedBehaviorSanitizer; its tests are single processes that share nothing, so they
# run side by side.
echo "== ctest -L unit under ASan + UBSan (build-asan/)"
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
ctest --test-dir build-fuzz -L fuzz -j"$(nproc)" --output-on-failure --timeout 600
echo "test.sh: all suites passed in ${SECONDS} s"
