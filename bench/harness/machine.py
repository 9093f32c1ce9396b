"""The machine a run measures: the CPU, which OpenBLAS kernels it gets, the tools' versions."""
import os
import platform
import re
import subprocess

from .common import ROOT, run


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def openblas_env(sgemm_rate, env):
    """OPENBLAS_CORETYPE to use (or None) and what the probe said.

    OpenBLAS 0.3.21 does not know every recent CPU and then falls back to its Prescott (SSE3)
    kernels, 3-5x slower: on a CPU with AVX-512 (AVX2) every run of both trainers then gets
    OPENBLAS_CORETYPE=SkylakeX (Haswell). A value already in the environment stands."""
    if env.get("OPENBLAS_CORETYPE"):
        return env["OPENBLAS_CORETYPE"], f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} from the environment"
    e = dict(env, OPENBLAS_VERBOSE="2")
    p = run([sgemm_rate, "--size", "64", "--seconds", "0.01"], env=e)
    m = re.search(r"Core: (\w+)", p.stdout + p.stderr)
    core = m.group(1) if m else "?"
    flags = cpu_flags()
    if core.lower() in ("prescott", "core2", "nehalem", "?"):
        if "avx512f" in flags:
            return "SkylakeX", f"OpenBLAS detected core '{core}' on a CPU with AVX-512: runs use OPENBLAS_CORETYPE=SkylakeX"
        if "avx2" in flags:
            return "Haswell", f"OpenBLAS detected core '{core}' on a CPU with AVX2: runs use OPENBLAS_CORETYPE=Haswell"
    return None, f"OpenBLAS detected core '{core}' (left as is)"


def versions(python):
    """The versions of what a run used, by name; `python` runs the PyTorch reference."""
    v = {}

    def out(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=ROOT, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    top = out(["git", "rev-parse", "--show-toplevel"])
    if top != "?" and os.path.realpath(top) == os.path.realpath(ROOT):
        v["mnist-ddp commit"] = out(["git", "rev-parse", "--short", "HEAD"]) + \
            (" (with uncommitted changes)" if out(["git", "status", "--porcelain", "--untracked-files=no"]) else "")
    else:  # a tree copied without .git: git would name the commit of a repository around it
        v["mnist-ddp commit"] = f"unknown ({ROOT} is not the top of a git checkout)"
    v["Open MPI"] = (out(["mpirun", "--version"]).splitlines() or ["?"])[0]
    v["OpenBLAS"] = out(["sh", "-c", "dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo ?"])
    v["PyTorch"] = out([python, "-c", "import torch; print(torch.__version__, 'threads default', torch.get_num_threads())"])
    v["Python"] = out([python, "--version"])
    v["C compiler"] = (out(["cc", "--version"]).splitlines() or ["?"])[0]
    v["kernel"] = platform.release()
    return v
