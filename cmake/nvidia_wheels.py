"""nvidia_wheels.py - where this interpreter's NVIDIA library wheels are installed.

Run by cmake/cuda_libraries.cmake with the interpreter MNIST_DDP_PYTHON names:

    python3 cmake/nvidia_wheels.py nvidia.nccl nvidia.cu13 nvidia.cublas

prints one line per directory of each package found, "NAME=DIR" (for example
"nvidia.nccl=/venv/lib/python3.12/site-packages/nvidia/nccl", the nvidia-nccl-cu*
wheel), and nothing for a package that is not installed. Only the packages'
locations are looked up: no package code is run.
"""
import importlib.util
import sys

for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # no "nvidia" package at all
        continue
    for path in (spec.submodule_search_locations or []) if spec else []:
        print(f"{name}={path}")
