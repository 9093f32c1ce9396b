#!/usr/bin/env bash
# run.sh - build and verify mnist-ddp on a GPU node without network access, from the kit
# scripts/gpu-node/pack.sh made. The node needs its NVIDIA driver, the CUDA toolkit (nvcc
# with cuBLAS), gcc and CMake; NCCL comes from the toolkit, NCCL_HOME or the nvidia-nccl-cu*
# wheel of a Python (PyTorch's), where CMake finds it itself (docs/gpu.md), and Open MPI,
# OpenBLAS, jansson and Criterion from the kit's Debian packages, unpacked (no root
# install) and Open MPI relocated with OPAL_PREFIX. Run from the project's root. Every
# step runs even if an earlier one failed, under its own time limit; what each printed
# goes to RESULTS_DIR/STEP.log and SUMMARY.txt there lists each step's status and time.
#
#   RESULTS_DIR=/some/dir bash scripts/gpu-node/run.sh [steps...]
#   steps: env build gpu train bench torch matrix-fc matrix-lenet (default: these, in that
#   order), and, by name only: all (the whole ctest suite, -j$(nproc), then a summary of
#   passed, failed and skipped tests with the reasons and the labels not run) and sanitize
#   (compute-sanitizer memcheck, initcheck, racecheck, synccheck: ctest -L gpu-sanitize)
#   matrix-*: bench/train --backend cuda (the GPU matrix against PyTorch on CUDA: 500 steps a
#   cell, PyTorch's cells served by one process; results file and charts under
#   RESULTS_DIR/bench-results, written even when --time-limit cuts the run short;
#   docs/benchmarks.md "GPU")
#
# Environment (defaults): KIT (./.gpu-node), PREFIX (/tmp/gpu-node-prefix: where the
# packages are unpacked), BUILD_DIR (build), RESULTS_DIR (./gpu-node-results), PYTHON
# (python3: the interpreter with PyTorch and the NVIDIA wheels), CUDA_ARCHS (90),
# MNIST_DDP_TESTS (all when Criterion is at hand, in the kit or the system, else gpu:
# the GPU suite only).
set -uo pipefail
root=$(pwd)
kit=${KIT:-$root/.gpu-node}
out=${RESULTS_DIR:-$root/gpu-node-results}
prefix=${PREFIX:-/tmp/gpu-node-prefix}
build_dir=${BUILD_DIR:-build}
python=${PYTHON:-python3}
mkdir -p "$out"
steps=${*:-env build gpu train bench torch matrix-fc matrix-lenet}
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
say() { echo "$*" | tee -a "$out/SUMMARY.txt"; }
step() { # step NAME SECONDS FUNCTION: run, log to $out/NAME.log, note status and time
	local name=$1 limit=$2 t0=$SECONDS rc=0
	shift 2
	timeout -k 10 "$limit" bash -c "$*" >"$out/$name.log" 2>&1 || rc=$?
	say "$name: status $rc in $((SECONDS - t0)) s"
}
[ -d "$kit/debs" ] || { echo "run.sh: no kit at $kit (run scripts/gpu-node/pack.sh first, or set KIT)" >&2; exit 2; }

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
. "$root/scripts/gpu-node/pmix_env.sh"
kit_pmix_env "$A/pmix2"

tests=${MNIST_DDP_TESTS:-}
if [ -z "$tests" ]; then
	tests=gpu
	[ -f "$P/include/criterion/criterion.h" ] || [ -f /usr/include/criterion/criterion.h ] && tests=all
fi

data=$root/MNIST_Data
if [ ! -e "$data/train/train-images-idx3-ubyte" ] && [ ! -e "$data/train/train-images-idx3-ubyte.gz" ]; then
	mkdir -p "$data/train" "$data/test"
	cp "$kit"/MNIST_Data/train/*.gz "$data/train/"
	cp "$kit"/MNIST_Data/test/*.gz "$data/test/"
fi

env_report() {
	set -x
	cat /etc/os-release; uname -a; nproc; free -g
	nvidia-smi; nvidia-smi -q -d COMPUTE | head -n 20
	nvcc --version; gcc --version | head -n 1; cmake --version | head -n 1
	ls -d /usr/local/cuda*
	find / -xdev \( -name nccl.h -o -name 'libnccl.so*' -o -name cublas_v2.h -o -name 'libcublas.so*' \) 2>/dev/null
	echo "NCCL_HOME=${NCCL_HOME:-} PYTHON=$python MNIST_DDP_TESTS=$tests"
	"$python" "$root/cmake/nvidia_wheels.py" nvidia.nccl nvidia.cu13 nvidia.cublas
	command -v mpirun mpicc; mpirun --version
	"$python" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0))'
	local rc=$?
	# Every later mpirun prints what this one does: PMIx complaining of its plugins fails the step.
	mpirun_clean || rc=1
	return $rc
}
build() {
	cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DMNIST_DDP_CUDA=ON \
		-DCMAKE_PREFIX_PATH="$P;$A/openblas-pthread" \
		-DCBLAS_INCLUDE_DIR="$P/include/x86_64-linux-gnu/openblas-pthread" \
		-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DMNIST_DATA_DIR="$data" \
		-DMNIST_DDP_TESTS="$tests" -DMNIST_DDP_PYTHON="$python" &&
		cmake --build "$build_dir" -j"$jobs"
}
# -L takes a regular expression: '^gpu$' is the GPU suite without gpu-sanitize.
gpu_suite() { ctest --test-dir "$build_dir" -L '^gpu$' --output-on-failure --timeout 300; }
# all: the whole suite from this build, then what passed, failed and was skipped, each
# skip's reason and the labels not run (ctest_summary.py).
all_suite() {
	local junit rc=0
	junit=$(cd "$out" && pwd)/ctest-all.xml
	ctest --test-dir "$build_dir" -j"$jobs" --output-on-failure --timeout 600 --output-junit "$junit" || rc=$?
	python3 "$root/scripts/gpu-node/ctest_summary.py" "$build_dir" "$junit" || rc=1
	return $rc
}
# sanitize: compute-sanitizer's four tools over short runs of each model (ctest -L
# gpu-sanitize, tests/sanitize/gpu_sanitize.sh); zero errors, and a skip fails the step.
sanitize_runs() {
	local junit rc=0
	junit=$(cd "$out" && pwd)/ctest-sanitize.xml
	ctest --test-dir "$build_dir" -L gpu-sanitize -j8 --output-on-failure --timeout 500 \
		--output-junit "$junit" || rc=$?
	python3 "$root/scripts/gpu-node/ctest_summary.py" "$build_dir" "$junit" >"$out/sanitize-summary.txt" || rc=1
	cat "$out/sanitize-summary.txt"
	if grep -q '^SKIPPED' "$out/sanitize-summary.txt"; then
		echo "sanitize: tests skipped (above): nothing was sanitized there"
		rc=1
	fi
	return $rc
}
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
export P A data out jobs root build_dir python tests
export -f env_report build gpu_suite all_suite sanitize_runs train_runs bench_runs torch_ref matrix \
	mpirun_clean
for s in $steps; do
	case $s in
	env) step env 120 env_report ;;
	build) step build 540 build ;;
	gpu) step gpu 400 gpu_suite ;;
	all) step all 560 all_suite ;;
	sanitize) step sanitize 560 sanitize_runs ;;
	train) step train 400 train_runs ;;
	bench) step bench 400 bench_runs ;;
	torch) step torch 400 torch_ref ;;
	# bench/train starts no run past --time-limit, ends one that overruns it by 60 s, and still
	# writes its results file: 480 s leaves the step's 560 s room for both.
	matrix-fc) step matrix-fc 560 matrix seed,mlp --no-tta --reps 3 --steps 500 --time-limit 480 ;;
	matrix-lenet) step matrix-lenet 560 matrix lenet --no-allreduce --reps 3 --steps 500 --time-limit 480 ;;
	*) say "unknown step $s (env build gpu all sanitize train bench torch matrix-fc matrix-lenet)" ;;
	esac
done
grep -h 'summary:' "$out"/*.log >"$out/summaries.txt" 2>/dev/null
say "results in $out"
