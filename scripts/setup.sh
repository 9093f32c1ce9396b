#!/usr/bin/env bash
# setup.sh - make a fresh Debian machine ready: install what is missing, build,
# fetch MNIST. Safe to run again: each step does nothing when already done.
#
#   bash scripts/setup.sh            (BUILD_DIR=build by default)
#
# Environment: BUILD_DIR (default build), CMAKE_ARGS (extra cmake arguments),
#              MNIST_DDP_SKIP_APT=1 (never call apt-get), MNIST_DDP_SETUP=test
#              (also what only the tests need: scripts/test.sh sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
say() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages the build, the tests and the launch scripts need.
packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libopenblas-dev
	  libcriterion-dev zlib1g-dev libjansson-dev python3 python3-numpy iproute2 procps
	  clang libclang-rt-14-dev valgrind)
# Only the tests need these (a Slurm cluster they start and stop, the PyTorch
# reference): a training machine is not given Slurm's daemons.
[ "${MNIST_DDP_SETUP:-}" != test ] || packages+=(slurm-wlm munge python3-torch)
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
say "configuring and building in $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

bash scripts/get-mnist.sh ./MNIST_Data
