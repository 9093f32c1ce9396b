#!/usr/bin/env bash
# pack.sh - on a machine with Debian's package repositories, gather what a GPU node
# WITHOUT network access needs to build and verify mnist-ddp beside its own CUDA
# toolkit: the Debian packages for Open MPI, OpenBLAS, jansson, zlib's headers and
# Criterion (about 22 MB) and MNIST as .gz files (about 11 MB). Run it from the
# project's root; it fills .gpu-node/ there (KIT=DIR for another folder; the default
# one is added to .git/info/exclude, so that it is never committed).
#
#   bash scripts/gpu-node/pack.sh            # then carry the checkout with .gpu-node/ to the node
#   bash scripts/gpu-node/run.sh             # on the node, from the project's root (README.md)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
kit=${KIT:-$root/.gpu-node}
mkdir -p "$kit/debs" "$kit/MNIST_Data/train" "$kit/MNIST_Data/test"
if [ "$kit" = "$root/.gpu-node" ]; then
	exclude=$(git rev-parse --git-path info/exclude)
	mkdir -p "$(dirname "$exclude")"
	grep -qx '/.gpu-node/' "$exclude" 2>/dev/null || echo '/.gpu-node/' >>"$exclude"
fi

# Runtime libraries and headers only; the node's own libc, gcc, CMake and CUDA are used.
pkgs=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1
      libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libpciaccess0
      libxnvctrl0 libmunge2 libltdl7 libgfortran5 libquadmath0
      libopenblas0 libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev
      libjansson4 libjansson-dev zlib1g-dev
      libcriterion3 libcriterion-dev libnanomsg5 libgit2-1.5 libmbedtls14 libmbedx509-1
      libmbedcrypto7 libhttp-parser2.9 libssh2-1 libboxfort-dev libffi-dev)
if ! ls "$kit"/debs/libopenmpi3_*.deb >/dev/null 2>&1; then
	ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || apt-get update -qq
	(cd "$kit/debs" && apt-get download "${pkgs[@]}" >/dev/null)
fi

# MNIST, gzip-compressed (the trainer reads .gz as it is), checked against get-mnist.sh's sums.
src=${MNIST_DIR:-$root/MNIST_Data}
bash "$root/scripts/get-mnist.sh" "$src" >/dev/null # fetches what is missing, checks every md5
for f in train/train-images-idx3-ubyte train/train-labels-idx1-ubyte test/t10k-images-idx3-ubyte \
	 test/t10k-labels-idx1-ubyte; do
	[ -s "$kit/MNIST_Data/$f.gz" ] || gzip -c "$src/$f" >"$kit/MNIST_Data/$f.gz"
done
echo "pack.sh: $(ls "$kit/debs" | wc -l) packages and MNIST in $kit ($(du -sh "$kit" | cut -f1))"
