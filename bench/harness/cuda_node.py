"""The GPUs and CUDA libraries a --backend cuda run measures, and what PyTorch offers on CUDA.
The harness itself opens no CUDA library: children probe them."""
import json
import re
import subprocess
import sys

# What the CUDA simulator's device calls itself (tests/cudasim/device.cc); a GPU never does.
SIMULATED_MARKS = ("cudasim", "not a GPU")
SIMULATED_NOTE = ("SIMULATED: mnist-train ran on the CUDA simulator (tests/cudasim), on the CPU, not on a "
                  "GPU. Its timings say nothing about a GPU; no goal is judged from them.")

# Versions of the libraries the CUDA module links (run as a child: the harness opens no CUDA library).
CUDA_VERSION_PROBE = r"""
import ctypes, json, sys
libs, out = json.loads(sys.argv[1]), {}
def num(lib, fn, *args):
    v = ctypes.c_int(0)
    return v.value if getattr(lib, fn)(*args, ctypes.byref(v)) == 0 else None
if "cudart" in libs:
    rt = ctypes.CDLL(libs["cudart"])
    out.update(runtime=num(rt, "cudaRuntimeGetVersion"), driver=num(rt, "cudaDriverGetVersion"),
               devices=num(rt, "cudaGetDeviceCount"))
if "cublas" in libs:
    out["cublas"] = [num(ctypes.CDLL(libs["cublas"]), "cublasGetProperty", ctypes.c_int(k)) for k in (0, 1, 2)]
if "nccl" in libs:
    out["nccl"] = num(ctypes.CDLL(libs["nccl"]), "ncclGetVersion")
print(json.dumps(out))
"""

# What PyTorch offers on CUDA, as JSON; {"error": ...} when it cannot be imported.
TORCH_PROBE = r"""
import json
try:
    import torch
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    raise SystemExit
d = {"version": torch.__version__, "cuda_build": torch.version.cuda, "available": torch.cuda.is_available(),
     "compile": hasattr(torch, "compile")}
if d["available"]:
    d.update(devices=torch.cuda.device_count(), name=torch.cuda.get_device_name(0))
    try:
        d["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception:
        d["nccl"] = "?"
print(json.dumps(d))
"""


def is_simulated(device):
    return bool(device) and any(m in device for m in SIMULATED_MARKS)


def cuda_version(code):
    """cudaRuntimeGetVersion's 13000 -> '13.0'."""
    return "?" if code is None else f"{code // 1000}.{code % 1000 // 10}"


def cuda_node(a, module, env):
    """The GPUs and the CUDA libraries this run measures: a dict with simulated, gpus (names),
    count, versions (name -> text) and name (a short name for the results file)."""
    libs = {}
    ldd = subprocess.run(["ldd", module], capture_output=True, text=True, env=env)
    for line in ldd.stdout.splitlines():
        m = re.match(r"\s*lib(cudart|cublas|nccl)\.so\S* => (\S+)", line)
        if m and m.group(1) not in libs:
            libs[m.group(1)] = m.group(2)
    node = {"simulated": not libs, "gpus": [], "versions": {}}
    if node["simulated"]:
        # The simulator's module carries its stand-ins for the CUDA runtime, cuBLAS and NCCL inside.
        node["versions"]["CUDA libraries"] = (f"none: {module} links no CUDA library (the CUDA simulator, "
                                              "tests/cudasim, stands in for the CUDA runtime, cuBLAS and NCCL)")
        node["count"] = 2  # the simulator has as many devices as asked; 2 ranks exercise its NCCL
        node["name"] = f"{a.host}-cudasim"
        return node
    p = subprocess.run([sys.executable, "-c", CUDA_VERSION_PROBE, json.dumps(libs)], capture_output=True,
                       text=True, env=env, timeout=120)
    v = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else {}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=60)
        rows = [[x.strip() for x in line.split(",")] for line in q.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.TimeoutExpired):
        rows = []
    node["gpus"] = [f"{r[0]} ({r[2]})" for r in rows if len(r) == 3]
    node["devices"] = v.get("devices")
    node["count"] = len(rows) or v.get("devices") or 1
    bl, nc = v.get("cublas") or [None] * 3, v.get("nccl")
    node["versions"] = {
        "GPUs": ", ".join(node["gpus"]) or f"{v.get('devices', '?')} (nvidia-smi not found)",
        "driver": (rows[0][1] if rows and len(rows[0]) == 3 else "?") +
                  (f" (supports CUDA {cuda_version(v['driver'])})" if v.get("driver") else " (cudaDriverGetVersion: no driver)"),
        "CUDA runtime": f"{cuda_version(v.get('runtime'))} ({libs.get('cudart')})",
        "cuBLAS": ".".join("?" if x is None else str(x) for x in bl) + f" ({libs.get('cublas')})",
        "NCCL": ("?" if nc is None else f"{nc // 10000}.{nc // 100 % 100}.{nc % 100}") + f" ({libs.get('nccl')})",
    }
    first = rows[0][0] if rows else "gpu"
    node["name"] = re.sub(r"[^a-z0-9]+", "-", first.lower().replace("nvidia", "")).strip("-") or "gpu"
    return node


def torch_cuda(a, node):
    """(probe dict or None, why PyTorch does not run here or None)."""
    if a.no_torch:
        return None, "not run (--no-torch)"
    try:
        p = subprocess.run([a.python, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=300)
    except OSError as e:
        return None, f"not available: {a.python} cannot be run ({e.strerror})"
    try:
        t = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f"not available: {a.python} could not report on PyTorch ({p.stderr.strip()[-200:]})"
    if "error" in t:
        return None, f"not available: PyTorch cannot be imported by {a.python} ({t['error']})"
    if not t["available"]:
        return t, (f"not available: PyTorch {t['version']} ({a.python}) has no usable CUDA "
                   f"(torch.cuda.is_available() is False{'; built without CUDA' if not t['cuda_build'] else ''})")
    if node["simulated"]:
        return t, "not run: mnist-train's side is simulated, so there is nothing to compare PyTorch on a GPU with"
    return t, None
