#!/usr/bin/env bash
# test.sh - the whole test suite on a fresh machine: set up (scripts/setup.sh,
# warnings as errors), run every ctest test and, beside them, the unit suite
# built with the sanitizers and a short fuzzing run. GPU tests skip with their
# reason where no device is usable and are reported as skipped, never as passed.
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

# The sanitizer and fuzzing stages (host backend only: nvcc objects carry no ASan) run beside
# the main suite, at the lowest priority (nice 19): its tests leave a core idle for a fifth of
# their time (a deadline's wait, mpirun starting a job, a daemon), which these take and yield
# back at once. In order: the sanitizer build (-O1, as its documentation advises), the unit
# suite under AddressSanitizer and UndefinedBehaviorSanitizer, the fuzzing build (clang,
# libFuzzer), the fuzzing runs. A unit test that asserts elapsed time (TIMED_UNIT) is held back
# and run after the main suite, when nothing starves it. Each stage's log is
# build-*/test-sh-*.log, shown below; the first failure ends the side work (its status says
# which stage).
TIMED_UNIT='^test_deadline$'
ASAN_ENV=(ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
	UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}")
side_build() { # DIR CMAKE_ARGS... -- TARGETS...
	local dir=$1 args=()
	shift
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	mkdir -p "$dir"
	{ cmake -S . -B "$dir" -DMNIST_DDP_CUDA=OFF -DMNIST_DDP_WERROR=ON "${args[@]}" &&
		cmake --build "$dir" -j"$(nproc)" --target "$@"; } >"$dir/test-sh-build.log" 2>&1
}
side_work() {
	# -g1: line tables only (a report's file:line), a fifth less compiling than -g.
	side_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
		-DMNIST_DDP_SANITIZE=ON -- unit-tests || return 1 # what -L unit runs
	# A build that is not instrumented would pass for the wrong reason. (grep reads all of
	# nm's output: with -q it could stop early, and pipefail would count nm's SIGPIPE.)
	if [ "$(nm build-asan/tests/test_idx | grep -c __asan_init)" -eq 0 ]; then
		echo "test.sh: build-asan/tests/test_idx is not built with AddressSanitizer" >build-asan/test-sh-unit.log
		return 2
	fi
	env "${ASAN_ENV[@]}" ctest --test-dir build-asan -L unit -E "$TIMED_UNIT" -j"$(nproc)" \
		--output-on-failure --timeout 600 >build-asan/test-sh-unit.log 2>&1 || return 2
	CC=clang side_build build-fuzz -DMNIST_DDP_FUZZ=ON -- fuzz_idx fuzz_checkpoint || return 3
	ctest --test-dir build-fuzz -L fuzz -j"$(nproc)" -V --timeout 900 \
		>build-fuzz/test-sh-fuzz.log 2>&1 || return 4
}
side_pid=
if [ "${MNIST_DDP_QUICK:-0}" != 1 ]; then
	# A session of its own, so that a failure below stops the side work too.
	setsid nice -n 19 bash -c "$(declare -f side_build side_work); $(declare -p TIMED_UNIT ASAN_ENV); side_work" &
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
echo "== ctest -L unit under ASan + UBSan (build-asan/), beside the main suite"
case $side_rc in
1) tail -n 30 build-asan/test-sh-build.log >&2; echo "test.sh: the sanitizer build failed (build-asan/test-sh-build.log)" >&2; exit 1 ;;
2) cat build-asan/test-sh-unit.log >&2; echo "test.sh: the unit suite under ASan + UBSan failed" >&2; exit 1 ;;
esac
sed -n '/tests passed/,$p' build-asan/test-sh-unit.log
echo "== fuzzing: the IDX and checkpoint readers (build-fuzz/), beside the main suite"
case $side_rc in
3) tail -n 30 build-fuzz/test-sh-build.log >&2; echo "test.sh: the fuzzing build failed (build-fuzz/test-sh-build.log)" >&2; exit 1 ;;
4) cat build-fuzz/test-sh-fuzz.log >&2; echo "test.sh: fuzzing failed" >&2; exit 1 ;;
0) ;;
*) echo "test.sh: the sanitizer and fuzzing stages ended with status $side_rc" >&2; exit 1 ;;
esac
sed -n 's/^[0-9]*: \(fuzz: .*executions=.*\)/\1/p' build-fuzz/test-sh-fuzz.log
sed -n '/tests passed/p' build-fuzz/test-sh-fuzz.log
echo "test.sh: the sanitizer and fuzzing stages were done at ${SECONDS} s"

# The unit tests that assert elapsed time, under the sanitizers now that nothing runs beside.
echo "== ctest under ASan + UBSan, the unit tests that time themselves (build-asan/)"
env "${ASAN_ENV[@]}" ctest --test-dir build-asan -L unit -R "$TIMED_UNIT" --output-on-failure --timeout 600
echo "test.sh: all suites passed in ${SECONDS} s"
