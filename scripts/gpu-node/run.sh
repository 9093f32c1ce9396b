#!/usr/bin/env bash
# run.sh - build and verify mnist-ddp on a GPU node without network access, from the kit
# scripts/gpu-node/pack.sh made. The node needs its NVIDIA driver, the CUDA toolkit (nvcc
# with cuBLAS), gcc and CMake; NCCL comes from the toolkit, NCCL_HOME or the nvidia-nccl-cu*
# wheel of a Python (PyTorch's), where CMake finds it itself (docs/gpu.md), and Open MPI,
# OpenBLAS, jansson and Criterion from the kit's Debian packages, unpacked (no root
# install) and Open MPI relocated with OPAL_PREFIX. Run from the project's root.
#
#   RESULTS_DIR=/some/dir bash scripts/gpu-node/run.sh [steps...]
#   bash scripts/gpu-node/run.sh --limits     # each step's time limit, and the default's sum
#
# Default: env build quick, which ends inside 6 minutes on a 16-core node with one GPU (the
# three limits add up to 355 s). By name: sanitize (300 s: compute-sanitizer's four tools
# over seed, mlp, LeNet-5 and LeNet-5 with the measured GEMM plan, one short run each, all
# 16 at once; a loan's second command, "build sanitize"), all (240 s: the suite but what
# stays CI's, below), and, for longer loans, gpu, train, bench, torch, matrix-fc,
# matrix-lenet.
#   quick: the GPU suite (ctest -L '^gpu$'), the per-op breakdown of one step of each model
#          (mnist-train --profile, where this build has it; then seed b32's first step again
#          with CUDA_MODULE_LOADING=EAGER, "set-up:" lines in the log) and the GPU matrix (bench/train
#          --backend cuda, 3 models x batch 32 and 256, 300 steps, 1 repetition, LeNet-5
#          AdamW time to 99%, --time-limit from what is left of the step). Without a GPU
#          every part says "no GPU" and the step is reported skipped, never passed.
# Every step prints its limit at its start, runs even if an earlier one failed, and is
# ended inside its limit (timeout; its parts plan their own time within it, so what they
# finished is written); what it printed goes to RESULTS_DIR/STEP.log. After every step
# RESULTS_DIR/SUMMARY.txt is written afresh (scripts/gpu-node/summary.py): each step's
# status and time, and quick's answers: the GPU matrix's goals met or missed, the slowest
# ops, the GEMM plan chosen. Exit status: 0 every step passed, 1 a step failed or was cut at
# its limit, 77 none failed but one skipped (no GPU).
#
# Environment (defaults): KIT (./.gpu-node; "none": use the system's Open MPI, OpenBLAS,
# jansson and Criterion, no kit), PREFIX (/tmp/gpu-node-prefix: where the packages are
# unpacked), BUILD_DIR (build), RESULTS_DIR (./gpu-node-results), PYTHON (python3: the
# interpreter with PyTorch and the NVIDIA wheels), CUDA_ARCHS (90), MNIST_DDP_TESTS (all
# when Criterion is at hand, in the kit or the system, else gpu: the GPU suite only).
set -uo pipefail

# Each step's limit in seconds. The default (env build quick) adds up to 355 s: with the
# kit's unpacking before the first step (about 4 s) and the summary, inside 6 minutes.
# The second command of a 15-minute loan, build sanitize, adds up to 400 s (build takes
# seconds when BUILD_DIR is still there): with the machine's start (1-2 minutes) and the
# first command, inside 15 minutes.
declare -A LIMIT=([env]=20 [build]=100 [quick]=235 [all]=240 [sanitize]=300
	[gpu]=120 [train]=400 [bench]=400 [torch]=400 [matrix-fc]=560 [matrix-lenet]=560)
ORDER="env build quick all sanitize gpu train bench torch matrix-fc matrix-lenet"
DEFAULT_STEPS="env build quick"
# What the step all leaves to CI (ctest -LE): nothing a GPU node has changes their outcome.
ALL_LEAVES_OUT="cudasim|bench|gpu-sanitize|multinode|slurm|reliability|build"
ALL_WHY="cudasim and bench run the CUDA backend on the simulator, on the CPU, as CI does; \
gpu-sanitize is the step sanitize; multinode and slurm need network namespaces (root) or a \
Slurm cluster, on the host backend; reliability is host-only (valgrind, kill -9, resume); \
build configures library layouts made of the toolkit's files, where the step build has \
already built with the node's own"

if [ "${1:-}" = --limits ]; then
	sum=0
	for s in $ORDER; do echo "$s ${LIMIT[$s]}"; done
	for s in $DEFAULT_STEPS; do sum=$((sum + LIMIT[$s])); done
	echo "default $DEFAULT_STEPS $sum"
	exit 0
fi

root=$(pwd)
kit=${KIT:-$root/.gpu-node}
out=${RESULTS_DIR:-$root/gpu-node-results}
prefix=${PREFIX:-/tmp/gpu-node-prefix}
build_dir=${BUILD_DIR:-build}
python=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
steps=${*:-$DEFAULT_STEPS}
for s in $steps; do
	[ -n "${LIMIT[$s]:-}" ] || { echo "run.sh: unknown step $s (steps: $ORDER)" >&2; exit 2; }
done
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

. "$root/scripts/gpu-node/pmix_env.sh" # kit_pmix_env, mpirun_clean
if [ "$kit" = none ]; then
	P=/usr A=/usr/lib/x86_64-linux-gnu
else
	[ -d "$kit/debs" ] || { echo "run.sh: no kit at $kit (run scripts/gpu-node/pack.sh first, set KIT, or KIT=none)" >&2; exit 2; }
	# Open MPI, OpenBLAS, jansson, Criterion from the Debian packages, relocated under $prefix.
	if [ ! -x "$prefix/usr/bin/orterun" ]; then
		mkdir -p "$prefix"
		for d in "$kit"/debs/*.deb; do
			dpkg-deb -x "$d" "$prefix" 2>/dev/null && continue
			# No dpkg on this node: a .deb is an ar archive holding data.tar.*.
			"$python" - "$d" "$prefix" <<'PY' || echo "run.sh: cannot unpack $d" >&2
import io, sys, tarfile
raw = open(sys.argv[1], 'rb').read()
pos = 8  # after "!<arch>\n"
while pos < len(raw):
    name = raw[pos:pos + 16].decode().strip().rstrip('/')
    size = int(raw[pos + 48:pos + 58].decode().strip())
    body = raw[pos + 60:pos + 60 + size]
    if name.startswith('data.tar'):
        tarfile.open(fileobj=io.BytesIO(body), mode='r:*').extractall(sys.argv[2])
    pos += 60 + size + (size & 1)
PY
		done
	fi
	P=$prefix/usr A=$prefix/usr/lib/x86_64-linux-gnu
	# dpkg -x makes no alternatives links: the names users and CMake call.
	mkdir -p "$prefix/bin"
	ln -sf "$P/bin/orterun" "$prefix/bin/mpirun"
	ln -sf "$P/bin/mpicc.openmpi" "$prefix/bin/mpicc"
	ln -sf "$P/bin/mpiexec.openmpi" "$prefix/bin/mpiexec"
	export OPAL_PREFIX=$P PATH=$prefix/bin:$PATH
	export LD_LIBRARY_PATH=$A/openmpi/lib:$A/openblas-pthread:$A${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	# The kit's PMIx reads its own plugins and files, not the node's (pmix_env.sh).
	kit_pmix_env "$A/pmix2"
fi

tests=${MNIST_DDP_TESTS:-}
if [ -z "$tests" ]; then
	tests=gpu
	[ -f "$P/include/criterion/criterion.h" ] || [ -f /usr/include/criterion/criterion.h ] && tests=all
fi

data=$root/MNIST_Data
if [ "$kit" != none ] && [ ! -e "$data/train/train-images-idx3-ubyte" ] &&
	[ ! -e "$data/train/train-images-idx3-ubyte.gz" ]; then
	mkdir -p "$data/train" "$data/test"
	cp "$kit"/MNIST_Data/train/*.gz "$data/train/"
	cp "$kit"/MNIST_Data/test/*.gz "$data/test/"
fi

# gpu_present: prints the GPUs nvidia-smi lists and returns 0, or why there is none and
# returns 1. Every GPU part of a step asks this first, so that without a GPU it says
# "no GPU" and is skipped, never run and reported passed.
gpu_present() {
	local l
	if [ -n "${CUDA_VISIBLE_DEVICES+x}" ] && { [ -z "$CUDA_VISIBLE_DEVICES" ] || [[ $CUDA_VISIBLE_DEVICES == -1* ]]; }; then
		echo "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU"
		return 1
	fi
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "nvidia-smi not found: no NVIDIA driver on this machine"
		return 1
	fi
	if ! l=$(timeout 20 nvidia-smi -L 2>&1); then
		echo "nvidia-smi -L failed: $(head -n 1 <<<"$l")"
		return 1
	fi
	if ! grep -q '^GPU [0-9]' <<<"$l"; then
		echo "nvidia-smi lists no GPU"
		return 1
	fi
	grep '^GPU [0-9]' <<<"$l" | sed 's/ (UUID.*//' | paste -sd ';' -
}
left_s() { echo $((STEP_DEADLINE - $(date +%s))); } # seconds left for the running step's parts
stop_at() { date -d "@$(($(date +%s) + $1))" +%H:%M:%S; } # ctest --stop-time, $1 s from now

env_report() {
	local rc=0 g
	set -x
	cat /etc/os-release; uname -a; nproc; free -g
	nvidia-smi; nvidia-smi -q -d COMPUTE | head -n 20
	nvcc --version || rc=1
	gcc --version | head -n 1; cmake --version | head -n 1 || rc=1
	ls -d /usr/local/cuda*
	timeout 8 find / -xdev \( -name nccl.h -o -name 'libnccl.so*' -o -name cublas_v2.h -o -name 'libcublas.so*' \) 2>/dev/null
	echo "NCCL_HOME=${NCCL_HOME:-} PYTHON=$python MNIST_DDP_TESTS=$tests KIT=$kit"
	"$python" "$root/cmake/nvidia_wheels.py" nvidia.nccl nvidia.cu13 nvidia.cublas
	command -v mpirun mpicc; mpirun --version
	timeout 30 "$python" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0))'
	set +x
	# Every later mpirun prints what this one does: PMIx complaining of its plugins fails the step.
	mpirun_clean || rc=1
	if g=$(gpu_present); then echo "GPU: $g" | tee "$out/gpu.txt"; else echo "no GPU ($g)" | tee "$out/gpu.txt"; fi
	return $rc
}
# build: configure, then what the default run needs (target gpu-tests: mnist-train, the
# CUDA module, the GPU suite's programs); the step all builds the rest.
build() {
	cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DMNIST_DDP_CUDA=ON \
		-DCMAKE_PREFIX_PATH="$P;$A/openblas-pthread" \
		-DCBLAS_INCLUDE_DIR="$P/include/x86_64-linux-gnu/openblas-pthread" \
		-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DMNIST_DATA_DIR="$data" \
		-DMNIST_DDP_TESTS="$tests" -DMNIST_DDP_PYTHON="$python" || return 1
	cmake --build "$build_dir" -j"$jobs" --target gpu-tests
}

# ---- quick ------------------------------------------------------------------------------
# Each part appends "PART<TAB>STATUS<TAB>SECONDS<TAB>DETAIL" to quick/parts.tsv (a line
# "running" first: a part the step's limit ended stays "running", reported cut).
part() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$out/quick/parts.tsv"; echo "quick: $1: $2${4:+: $4}"; }
quick() {
	local g rc=0 r
	mkdir -p "$out/quick"
	: >"$out/quick/parts.tsv"
	if ! g=$(gpu_present); then
		echo "no GPU ($g)" >"$out/gpu.txt"
		for p in gpu-suite profile matrix; do part "$p" skipped 0 "no GPU ($g)"; done
		echo "quick: no GPU: nothing of this step ran; it is reported skipped, not passed"
		return 77
	fi
	echo "GPU: $g" >"$out/gpu.txt"
	if [ ! -x "$build_dir/mnist-train" ] || [ ! -e "$build_dir/libmnist-cuda.so" ]; then
		for p in gpu-suite profile matrix; do
			part "$p" failed 0 "no build: $build_dir/mnist-train or libmnist-cuda.so missing (the step build failed or was cut)"
		done
		return 1
	fi
	echo "quick: GPU: $g; $(left_s) s for the GPU suite (60 s at most), the profile (60 s at most) and the matrix"
	# The step's status: failed (1) over cut (124) over skipped (77) over passed.
	for p in quick_suite quick_profile quick_matrix; do
		r=0
		$p || r=$?
		case $r in 0) ;; 77) [ "$rc" -ne 0 ] || rc=77 ;; 124) [ "$rc" -eq 1 ] || rc=124 ;; *) rc=1 ;; esac
	done
	return $rc
}
# The GPU suite, one GPU shared by 4 tests at a time, stopped (--stop-time) inside 60 s.
quick_suite() {
	local t0=$SECONDS rc=0 n counts junit=$out/quick/ctest-gpu.xml
	n=$(($(left_s) - 10))
	[ "$n" -le 60 ] || n=60
	part gpu-suite running 0 "limit $n s"
	if [ "$n" -lt 15 ]; then part gpu-suite cut 0 "not started: $(left_s) s left"; return 124; fi
	ctest --test-dir "$build_dir" -L '^gpu$' -j4 --output-on-failure --timeout "$n" \
		--stop-time "$(stop_at "$n")" --output-junit "$junit" >"$out/quick/gpu-suite.log" 2>&1 || rc=$?
	python3 "$root/scripts/gpu-node/ctest_summary.py" "$build_dir" "$junit" -L '^gpu$' \
		>"$out/quick/gpu-suite-summary.txt" 2>&1 || rc=1
	cat "$out/quick/gpu-suite-summary.txt"
	counts=$(head -n 1 "$out/quick/gpu-suite-summary.txt" | sed 's/^== summary: //')
	grep -q '^0 tests' <<<"$counts" && counts="no test labelled gpu in $build_dir" && rc=1
	if [ $rc -ne 0 ]; then
		part gpu-suite failed $((SECONDS - t0)) "$counts"
		return 1
	fi
	# Nothing passed: the suite did not run here (every test skipped, with its reason).
	if ! grep -Eq ': [1-9][0-9]* passed' <<<"$counts"; then
		part gpu-suite skipped $((SECONDS - t0)) "$counts"
		return 77
	fi
	part gpu-suite passed $((SECONDS - t0)) "$counts"
}
# One step of each model op by op (mnist-train --profile), batch 32 and 256, 50 timed steps
# first, no test set; each run's table in its log, op_times (and gpu_plan) in its metrics.
quick_profile() {
	local t0=$SECONDS d=$out/quick/profile m b rc=0 r n=0 f end
	end=$(($(date +%s) + 60))
	part profile running 0 "limit 60 s"
	if ! "$build_dir/mnist-train" --help 2>&1 | grep -q -- '--profile'; then
		part profile n/a 0 "not available in this build (mnist-train --help has no --profile)"
		return 0
	fi
	mkdir -p "$d/data/train"
	for f in "$data"/train/train-images-idx3-ubyte* "$data"/train/train-labels-idx1-ubyte*; do
		[ ! -e "$f" ] || ln -sf "$(readlink -f "$f")" "$d/data/train/"
	done
	for m in seed mlp lenet; do
		for b in 32 256; do
			if [ $(($(date +%s) + 15)) -gt "$end" ] || [ "$(left_s)" -lt 130 ]; then
				echo "profile: $m b$b not started: the part's 60 s are spent, or the matrix needs the 130 s left"
				rc=124
				continue
			fi
			r=0
			timeout -k 3 30 mpirun -n 1 "$build_dir/mnist-train" --data "$d/data/train" --model "$m" \
				--batch-size "$b" --limit $((b * 50)) --epochs 1 --log-every 1000 --backend cuda \
				--profile --metrics "$d/$m-b$b.jsonl" >"$d/$m-b$b.log" 2>&1 || r=$?
			if [ $r -ne 0 ] || ! grep -q '"op_times"' "$d/$m-b$b.jsonl" 2>/dev/null; then
				echo "profile: $m b$b: status $r, no op_times record ($d/$m-b$b.log):"
				tail -n 5 "$d/$m-b$b.log" | sed 's/^/    /'
				rc=1
			else
				n=$((n + 1))
				sed -n '/^summary:/!p' "$d/$m-b$b.log" | tail -n 25
			fi
		done
	done
	# Where the first step's set-up goes (115-170 ms on the H100, even for seed --no-graph):
	# the same seed b32 run with every module loaded when the context is made
	# (CUDA_MODULE_LOADING=EAGER) against the lazy default; the plan's measure_ms beside.
	if [ $rc -eq 0 ] && [ $(($(date +%s) + 15)) -le "$end" ] && [ "$(left_s)" -ge 130 ]; then
		CUDA_MODULE_LOADING=EAGER timeout -k 3 20 mpirun -x CUDA_MODULE_LOADING -n 1 \
			"$build_dir/mnist-train" --data "$d/data/train" --model seed --batch-size 32 \
			--limit 1600 --epochs 1 --log-every 1000 --backend cuda --profile \
			--metrics "$d/seed-b32-eager.jsonl" >"$d/seed-b32-eager.log" 2>&1 || true
		for f in "$d/seed-b32.jsonl" "$d/seed-b32-eager.jsonl"; do
			python3 - "$f" <<'PY' || true
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
st = next((r for r in recs if r.get("event") == "step_times"), {})
plan = next((r for r in recs if r.get("event") == "gpu_plan"), {})
print("set-up: %s: first step %s ms, the plan's measurement %s ms, its ops' first runs %s ms" % (sys.argv[1].rsplit("/", 1)[-1], st.get("max_ms"), plan.get("measure_ms"), plan.get("warm_ms")))
PY
		done
	fi
	case $rc in
	0) part profile passed $((SECONDS - t0)) "$n runs: seed, mlp, lenet at batch 32 and 256" ;;
	124) part profile cut $((SECONDS - t0)) "$n of 6 runs before the part's limit" ;;
	*) part profile failed $((SECONDS - t0)) "$n of 6 runs wrote op_times (quick/profile/*.log)" ;;
	esac
	return $rc
}
# The GPU matrix at the size a loan fits; bench/train starts no run past --time-limit and
# ends one that overruns it by 60 s, so it is given what is left less 75 s.
quick_matrix() {
	local t0=$SECONDS left tl rc=0 md gpus allreduce=(--no-allreduce)
	left=$(left_s)
	tl=$((left - 75))
	# With 2 GPUs or more, bench/allreduce's NCCL tables too (issue 15's goal; at 1 rank the
	# step reduces nothing); bench/train runs them before its diagnostic columns.
	gpus=$(gpu_present | tr ';' '\n' | grep -c '^GPU [0-9]')
	[ "$gpus" -lt 2 ] || allreduce=()
	part matrix running 0 "--time-limit $tl s${allreduce[*]:+, ${allreduce[*]}}"
	if [ "$tl" -lt 30 ]; then part matrix cut 0 "not started: $left s left in the step"; return 124; fi
	timeout -k 2 $((left - 3)) "$python" bench/train --backend cuda --build-dir "$build_dir" --python "$python" \
		--data "$data/train" --out-dir "$out/quick/bench-results" --models seed,mlp,lenet --batches 32,256 \
		--reps 1 --steps 300 "${allreduce[@]}" --tta lenet-adamw-b256 --time-limit "$tl" --tag quick \
		>"$out/quick/matrix.log" 2>&1 || rc=$?
	grep -v gnuplot "$out/quick/matrix.log"
	md=$(ls -t "$out"/quick/bench-results/*.md 2>/dev/null | head -n 1)
	if [ $rc -ne 0 ] || [ -z "$md" ]; then
		local how=failed
		[ $rc -ne 124 ] && [ $rc -ne 137 ] || how="cut" # ended by timeout, its results file unwritten
		part matrix $how $((SECONDS - t0)) \
			"bench/train status $rc${md:+, }${md#"$out"/}: $(grep -v gnuplot "$out/quick/matrix.log" | tail -n 1)"
		[ $how = cut ] && return 124
		return 1
	fi
	if grep -q -- '--time-limit .* reached' "$out/quick/matrix.log"; then
		part matrix cut $((SECONDS - t0)) "--time-limit $tl s reached: $(grep -o -- '--time-limit .* reached[^.;]*' "$out/quick/matrix.log" | head -n 1); ${md#"$out"/}"
		return 124
	fi
	part matrix passed $((SECONDS - t0)) "${md#"$out"/}"
}

# ---- all, sanitize ---------------------------------------------------------------------
# all: the rest of the build, then the suite but what stays CI's (ALL_LEAVES_OUT), stopped
# inside the step's limit; then what passed, failed, was skipped (with the reasons) and was
# not started (ctest_summary.py).
all_suite() {
	local rc=0 n junit=$out/ctest-all.xml
	echo "all: leaves out the labels $ALL_LEAVES_OUT (CI runs them): $ALL_WHY"
	# The rest of the build (the default's build step made gpu-tests only), leaving ctest 30 s.
	timeout -k 2 $(($(left_s) - 30)) cmake --build "$build_dir" -j"$jobs" >"$out/all-build.log" 2>&1 ||
		{ echo "all: the build failed or was cut (all-build.log):"; tail -n 20 "$out/all-build.log"; rc=1; }
	n=$(($(left_s) - 5))
	echo "all: ctest -LE '^($ALL_LEAVES_OUT)\$' -j$jobs, stopped in $n s"
	ctest --test-dir "$build_dir" -LE "^($ALL_LEAVES_OUT)\$" -j"$jobs" --output-on-failure --timeout "$n" \
		--stop-time "$(stop_at "$n")" --output-junit "$junit" || rc=$?
	python3 "$root/scripts/gpu-node/ctest_summary.py" "$build_dir" "$junit" -LE "^($ALL_LEAVES_OUT)\$" \
		>"$out/all-summary.txt" 2>&1 || rc=1
	echo "left to CI (labels not run here): ${ALL_LEAVES_OUT//|/, } (all.log says why)" >>"$out/all-summary.txt"
	cat "$out/all-summary.txt"
	return $((rc ? 1 : 0))
}
# sanitize: compute-sanitizer's memcheck, initcheck, racecheck and synccheck over seed, mlp,
# LeNet-5 (--gpu-plan heuristic) and LeNet-5 with --gpu-plan measure (the GEMM candidates
# timed at the first step, the project's cooperative gemm_ksplit_micro_kernel and
# bias_grad_block_kernel among them): ctest -L gpu-sanitize, one 3-step run each
# (MNIST_SANITIZE_RUNS=one, tests/sanitize/gpu_sanitize.sh, which says which options cut
# the sanitizer's start-up and why), all 16 at once on the one GPU, each run given what the
# step has left but its probe. On the H100 of 2026-11-27 one such run alone took 102-108 s,
# nearly all of it start-up, and with 12 at once (89 s a run) synccheck's 3 ended in 99-102 s
# each, probe included: the runs seem not to wait on each other much (not measured apart),
# so none is held back to a second round, which would halve each run's time. Zero errors,
# and a skip, no GPU, a run not ended or a test not started fails the step.
sanitize_runs() {
	local rc=0 g n count junit=$out/ctest-sanitize.xml
	if ! g=$(gpu_present); then
		echo "sanitize: no GPU ($g): nothing was sanitized, which fails this step"
		echo "== summary: 0 tests: no GPU ($g)" >"$out/sanitize-summary.txt"
		return 1
	fi
	count=$(ctest --test-dir "$build_dir" -N -L gpu-sanitize 2>/dev/null | grep -c 'Test *#')
	if [ "$count" -eq 0 ]; then
		echo "sanitize: no test labelled gpu-sanitize in $build_dir (the step build failed or was cut?)"
		echo "== summary: 0 tests: none labelled gpu-sanitize in $build_dir" >"$out/sanitize-summary.txt"
		return 1
	fi
	n=$(($(left_s) - 3))
	# Each run gets what is left but its probe (seconds; 60 at most) and a margin.
	export MNIST_SANITIZE_RUNS=one MNIST_SANITIZE_LIMIT=48 MNIST_SANITIZE_RUN_TIMEOUT=$((n - 25))
	echo "sanitize: $count tests at once, $MNIST_SANITIZE_RUN_TIMEOUT s a run, stopped in $n s"
	ctest --test-dir "$build_dir" -L gpu-sanitize -j"$count" --output-on-failure --timeout "$n" \
		--stop-time "$(stop_at "$n")" --output-junit "$junit" || rc=$?
	python3 "$root/scripts/gpu-node/ctest_summary.py" "$build_dir" "$junit" -L gpu-sanitize \
		>"$out/sanitize-summary.txt" 2>&1 || rc=1
	cat "$out/sanitize-summary.txt"
	if grep -q '^SKIPPED' "$out/sanitize-summary.txt"; then
		echo "sanitize: tests skipped (above): nothing was sanitized there"
		rc=1
	fi
	return $((rc ? 1 : 0))
}

# ---- the steps for longer loans --------------------------------------------------------
# -L takes a regular expression: '^gpu$' is the GPU suite without gpu-sanitize.
gpu_suite() { ctest --test-dir "$build_dir" -L '^gpu$' --output-on-failure --timeout 300; }
train_runs() {
	local m b args
	for m in "seed" "mlp --hidden 512,256 --batch-size 64 --lr 0.05 --momentum 0.9" \
		 "lenet --batch-size 64 --lr-schedule cosine --warmup-steps 500 --lr 0.05 --momentum 0.9 --epochs 8"; do
		args="--data $data/train --model $m"
		for b in cuda host; do
			echo "== mpirun -n 1 $build_dir/mnist-train $args --backend $b"
			mpirun -n 1 "$build_dir/mnist-train" $args --backend $b 2>&1 | grep -E 'summary|backend|WARN|rror'
		done
		echo "== same, cuda, --no-graph"
		mpirun -n 1 "$build_dir/mnist-train" $args --backend cuda --no-graph 2>&1 | grep -E 'summary|rror|cuda'
	done
}
bench_runs() {
	local m b
	mpirun -n 1 "$build_dir/bench/allreduce"
	for m in seed mlp lenet; do
		for b in 32 256 4096; do
			echo "== $m batch $b"
			mpirun -n 1 "$build_dir/mnist-train" --data "$data/train" --model "$m" --batch-size "$b" \
				--epochs 2 --backend cuda --metrics "$out/metrics-$m-b$b.jsonl" 2>&1 | grep summary
		done
	done
}
torch_ref() {
	local m b
	"$python" bench/reference/train_ref.py --help >/dev/null 2>&1 || { echo "no reference"; return 1; }
	for m in seed mlp lenet; do
		for b in 32 256 4096; do
			echo "== torch $m batch $b"
			"$python" bench/reference/train_ref.py --data "$data/train" --model "$m" --batch-size "$b" \
				--epochs 2 --device cuda 2>&1 | tail -n 2
		done
	done
}
# matrix MODELS [bench/train ARGS...]: the GPU matrix of bench/train for MODELS.
matrix() {
	local models=$1
	shift
	"$python" bench/train --backend cuda --build-dir "$build_dir" --python "$python" \
		--data "$data/train" --out-dir "$out/bench-results" --models "$models" --tag "$models" "$@"
}

# step NAME FUNCTION...: print the step's limit, run it ended inside that limit (TERM 4 s
# before it, KILL 1 s before), its parts planning to end 8 s before (STEP_DEADLINE); log to
# $out/NAME.log; note its status and time in steps.tsv; write SUMMARY.txt afresh.
step() {
	local name=$1 limit=${LIMIT[$1]} t0=$SECONDS rc=0 t
	shift
	echo "== $name: limit $limit s, started $(date -u +%H:%M:%S) UTC" | tee "$out/$name.log"
	STEP_DEADLINE=$(($(date +%s) + limit - 8))
	export STEP_DEADLINE
	timeout -k 3 $((limit - 4)) bash -c "$*" >>"$out/$name.log" 2>&1 || rc=$?
	t=$((SECONDS - t0))
	printf '%s\t%s\t%s\t%s\n' "$name" "$limit" "$rc" "$t" >>"$out/steps.tsv"
	case $rc in
	0) echo "$name: passed in $t s" ;;
	77) echo "$name: SKIPPED in $t s: $(grep -m1 -o 'no GPU.*' "$out/$name.log" || echo "see $out/$name.log")" ;;
	124 | 137) echo "$name: CUT in $t s: stopped at its limit ($limit s), or a part at its own (what it finished: $out/$name.log)" ;;
	*) echo "$name: FAILED (status $rc) in $t s: $out/$name.log" ;;
	esac
	python3 "$root/scripts/gpu-node/summary.py" "$out" >/dev/null 2>&1 ||
		echo "run.sh: summary.py could not write $out/SUMMARY.txt" >&2
}

export P A data out jobs root build_dir python tests kit ALL_LEAVES_OUT ALL_WHY
export -f env_report build quick part quick_suite quick_profile quick_matrix all_suite sanitize_runs \
	gpu_suite train_runs bench_runs torch_ref matrix mpirun_clean gpu_present left_s stop_at
# steps.tsv keeps the steps of earlier runs into the same RESULTS_DIR (a loan's second
# command adds to the first's SUMMARY.txt); a step run again replaces its row there.
git -C "$root" rev-parse --short HEAD >"$out/commit.txt" 2>/dev/null || echo unknown >"$out/commit.txt"
if g=$(gpu_present); then echo "GPU: $g" >"$out/gpu.txt"; else echo "no GPU ($g)" >"$out/gpu.txt"; fi
for s in $steps; do
	case $s in
	env) step env env_report ;;
	build) step build build ;;
	quick) step quick quick ;;
	all) step all all_suite ;;
	sanitize) step sanitize sanitize_runs ;;
	gpu) step gpu gpu_suite ;;
	train) step train train_runs ;;
	bench) step bench bench_runs ;;
	torch) step torch torch_ref ;;
	# bench/train starts no run past --time-limit, ends one that overruns it by 60 s, and still
	# writes its results file: 480 s leaves the step's 560 s room for both.
	matrix-fc) step matrix-fc matrix seed,mlp --no-tta --reps 3 --steps 500 --time-limit 480 ;;
	matrix-lenet) step matrix-lenet matrix lenet --no-allreduce --reps 3 --steps 500 --time-limit 480 ;;
	esac
done
grep -h 'summary:' "$out"/*.log >"$out/summaries.txt" 2>/dev/null
echo
cat "$out/SUMMARY.txt" 2>/dev/null
status=0
for rc in $(tail -n "$(echo $steps | wc -w)" "$out/steps.tsv" | cut -f 3); do
	case $rc in 0) ;; 77) [ $status -ne 0 ] || status=77 ;; *) status=1 ;; esac
done
exit $status
