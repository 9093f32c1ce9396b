#!/usr/bin/env bash
# setup.sh - make a fresh Debian machine ready: install what is missing, build,
# fetch MNIST. Safe to run again: each step does nothing when already done.
#
#   bash scripts/setup.sh            (BUILD_DIR=build by default)
#
# Environment: BUILD_DIR (default build), CMAKE_ARGS (extra cmake arguments),
#              MNIST_DDP_SKIP_APT=1 (never call apt-get), MNIST_DDP_SETUP=test
#              (what the tests need too, and every target built: scripts/test.sh
#              sets it; otherwise only mnist-train and its CUDA module are built).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
testing=0
[ "${MNIST_DDP_SETUP:-}" != test ] || testing=1
say() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages the build and the launch scripts need.
packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libopenblas-dev
	  zlib1g-dev libjansson-dev python3)
# Only the tests need these (Criterion, valgrind, clang for the fuzzers, the
# namespaces' tools, numpy for the checkpoint reader, a Slurm cluster they start
# and stop, the PyTorch reference): a training machine is given none of them.
[ "$testing" = 0 ] || packages+=(libcriterion-dev python3-numpy iproute2 procps clang
	libclang-rt-14-dev valgrind slurm-wlm munge python3-torch)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && [ "${MNIST_DDP_SKIP_APT:-0}" != 1 ]; then
	sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	say "installing ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA backend is built when the toolkit, cuBLAS and NCCL are there (AUTO).
# Training builds mnist-train and its CUDA module only, and configures without the
# tests where Criterion is missing (a build directory the tests configured keeps
# them); the tests build every target.
config=(-DCMAKE_BUILD_TYPE=Release)
targets=()
if [ "$testing" = 1 ]; then
	config+=(-DMNIST_DDP_TESTS=all)
else
	[ -f /usr/include/criterion/criterion.h ] || config+=(-DMNIST_DDP_TESTS=none)
	targets=(--target mnist-train)
fi
say "configuring and building in $BUILD_DIR"
# shellcheck disable=SC2086 # CMAKE_ARGS: several arguments, split on purpose
if ! configured=$(cmake -S . -B "$BUILD_DIR" "${config[@]}" ${CMAKE_ARGS:-} 2>&1); then
	printf '%s\n' "$configured" >&2
	exit 1
fi
if [ "$testing" = 0 ] && grep -q 'mnist-ddp: CUDA backend ON' <<<"$configured"; then
	targets+=(mnist-cuda)
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" ${targets[@]+"${targets[@]}"}

bash scripts/get-mnist.sh ./MNIST_Data
