"""bench/train's options and the order of its work, for either backend (the docstring of
bench/train says what each does)."""
import argparse
import datetime
import gzip
import os
import socket
import subprocess

from .charts import charts
from .common import ROOT, Clock, attempt, bad_input, log, parse_kv, run
from .cuda_node import cuda_node, is_simulated, torch_cuda
from .cuda_runner import CudaRunner
from .host_runner import HostRunner
from .machine import openblas_env
from .matrix import cuda_matrix, host_matrix
from . import report_cuda, report_host, tta as tta_mod


def parse_args(doc):
    ap = argparse.ArgumentParser(description="mnist-train against PyTorch, side by side; writes bench/results/<date>-<host>.md",
                                 epilog=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("host", "cuda"), default="host",
                    help="host: the CPU matrix; cuda: the GPU matrix (below)")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"),
                    help="the build to measure; for the CUDA simulator: BUILD/cudasim")
    ap.add_argument("--python", default="/usr/bin/python3", help="the interpreter that runs the PyTorch reference (default %(default)s)")
    ap.add_argument("--limit", type=int, default=0, help="train every cell on the first N training images (0: all)")
    ap.add_argument("--epochs", type=int, default=1, help="epochs per matrix cell (host; cuda with --steps 0)")
    ap.add_argument("--steps", type=int, default=None,
                    help="cuda: steps per matrix cell, both trainers (default 500; 0: whole epochs, --epochs)")
    ap.add_argument("--data", default=os.path.join(ROOT, "MNIST_Data", "train"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--models", default=None, help="host seed,linear,mlp,lenet; cuda seed,mlp,lenet")
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--batches", default=None, help="batches per rank (host 32,128,256; cuda 32,256,4096)")
    ap.add_argument("--lenet-batches", default=None, help="batches per rank of lenet in the matrix (host 64; cuda --batches when given, else 32,256)")
    ap.add_argument("--ranks", default=None, help="ranks (host 1,2,4; cuda 1, 2, 4, ... up to the GPUs on the node)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every cell (medians reported)")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    ap.add_argument("--no-tta", action="store_true", help="skip time to accuracy")
    ap.add_argument("--tta", default="", help="only these time-to-accuracy rows (host mlp,seed,lenet,lenet-adamw; "
                    "cuda also lenet-adamw-b256)")
    ap.add_argument("--no-allreduce", action="store_true", help="skip bench/allreduce")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="cuda: start no run after this many seconds; what is left is reported not run (0: no limit)")
    ap.add_argument("--cell-timeout", type=float, default=600,
                    help="cuda: seconds a PyTorch cell may take, its compilation included (default %(default)s)")
    ap.add_argument("--tag", default="", help="appended to the results' name: <date>-<host>-<tag>.md")
    ap.add_argument("--quick", action="store_true", help="seed and mlp, batch 32 and 128, 1 and 2 ranks, 1 rep, no time to accuracy "
                    "(cuda: seed, batch 32, 1 rank and 2 where there are 2 GPUs, 128 steps)")
    a = ap.parse_args()
    for name in ("limit", "epochs", "reps", "log_every", "steps", "time_limit", "cell_timeout"):
        v = getattr(a, name)
        low = 0 if name in ("limit", "steps", "time_limit") else 1
        if v is not None and v < low:
            ap.error(f"--{name.replace('_', '-')}: {v} is out of range (expected {low} or more)")
    a.stopped = None
    return a


def main(doc=None):
    a = parse_args(doc)
    if a.backend == "cuda":
        return main_cuda(a)
    if a.steps is not None:
        bad_input("--steps: only with --backend cuda (the host matrix trains whole epochs, --epochs)")
    return main_host(a)


def main_host(a):
    a.batches = a.batches or "32,128,256"
    a.lenet_batches = a.lenet_batches or "64"
    a.ranks = a.ranks or "1,2,4"
    a.models = a.models or "seed,linear,mlp,lenet"
    if a.quick:
        a.models, a.batches, a.ranks, a.reps, a.no_tta = "seed,mlp", "32,128", "1,2", 1, True
    a.models = a.models.split(",")
    a.batches = [int(b) for b in a.batches.split(",")]
    lenet_batches = [int(b) for b in a.lenet_batches.split(",")]
    a.model_batches = {m: lenet_batches if m == "lenet" else a.batches for m in a.models}
    a.ranks = [int(r) for r in a.ranks.split(",")]
    a.hidden_list = [int(h) for h in a.hidden.split(",")]
    a.build_dir = os.path.abspath(a.build_dir)
    a.data = os.path.abspath(a.data)
    a.cores = os.cpu_count() or 1
    a.host = socket.gethostname().split(".")[0]
    a.stamp = datetime.date.today().isoformat() + "-" + a.host + (f"-{a.tag}" if a.tag else "")
    for exe in ("mnist-train", "bench/sgemm_rate", "bench/allreduce"):
        if not os.access(os.path.join(a.build_dir, exe), os.X_OK):
            bad_input(f"--build-dir: {a.build_dir}/{exe} missing: build first (cmake -S . -B build && cmake --build build -j)")
    if not a.no_torch and subprocess.run([a.python, "-c", "import torch"], capture_output=True).returncode:
        bad_input(f"--python: PyTorch not importable by {a.python}: apt-get install python3-torch (or pass --no-torch)")
    a.torch_version = "" if a.no_torch else subprocess.run(
        [a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True).stdout.strip()
    a.chart_subtitle = f"{a.host}, host backend vs PyTorch {a.torch_version} CPU"
    clock = Clock(0)

    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    sgemm_rate = os.path.join(a.build_dir, "bench", "sgemm_rate")
    coretype, blas_note = openblas_env(sgemm_rate, env)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    log(blas_note)

    # 1. SGEMM rate
    rate = {}
    for t in sorted({1, a.cores}):
        best = []
        for _ in range(3):
            p = run([sgemm_rate, "--threads", str(t), "--size", "2048", "--seconds", "1"], env=env)
            best.append(float(parse_kv(p.stdout)["best_gflops"]))
        rate[t] = max(best)
        log(f"SGEMM 2048^3, {t} thread(s): best {rate[t]:.1f} GFLOP/s")

    # 2. the matrix
    R = HostRunner(a, env)
    cells = host_matrix(a, R)

    # 3. time to accuracy
    tta = []
    if not a.no_tta:
        for row in tta_mod.wanted(a, tta_mod.settings("host", a.hidden)):
            threads = max(1, a.cores // row["ranks"])
            tag = "-tta" + row["name"][len(row["model"]):]  # -tta, -tta-adamw: each row its own files
            got = tta_mod.run_row(
                row,
                lambda r: R.ours(r["model"], r["batch"], r["ranks"], threads, epochs=r["epochs"],
                                 extra=r["hp"] + ["--eval-every", "1"], tag=tag),
                None if a.no_torch else lambda r: R.torch(
                    r["model"], r["batch"], r["ranks"], 1, epochs=r["epochs"],
                    extra=r["hp"] + ["--target-accuracy", str(r["target"])], tag=tag))
            tta.append(got)
            log(f"time to {row['target']} ({row['name']}): ours {got['ours_seconds']} s, torch {got['torch_seconds']} s")

    # 4. allreduce
    allreduce_out = ""
    if not a.no_allreduce:
        ar = os.path.join(a.build_dir, "bench", "allreduce")
        p = run(R.mpirun + ["-n", "2", "--bind-to", "core", ar, "--path", "host"], env=env, check=False)
        allreduce_out = p.stdout
        if p.returncode:
            log(f"bench/allreduce exited {p.returncode}: elements were wrong")

    # 5. charts and the results file
    loss_runs = {}
    for model in a.models:
        b0 = a.model_batches[model][0]
        c = cells.get((model, b0, a.ranks[0]))
        if c:
            runs = [(f"mnist-train b{b0} r{a.ranks[0]}", c["ours"]["metrics"], 1)]
            if c["torch"]:
                runs.append((f"PyTorch b{b0} r{a.ranks[0]}", c["torch"]["metrics"], 2))
            loss_runs[f"{model}-b{b0}-r{a.ranks[0]}"] = runs
    pngs = charts(a, cells, loss_runs, R.metrics_dir, [("ours", "mnist-train"), ("torch", "PyTorch")])
    flops = {m: report_host.model_flops_per_image(m, a.hidden_list) for m in a.models}
    report_host.write_results(a, env, coretype, blas_note, rate, rate[1], flops, cells, tta, allreduce_out, pngs,
                              clock.elapsed())
    return 0


def train_size(data):
    """The number of images in DIR/train-images-idx3-ubyte (raw or .gz), from its header."""
    for name, opener in (("train-images-idx3-ubyte", open), ("train-images-idx3-ubyte.gz", gzip.open)):
        path = os.path.join(data, name)
        if os.path.exists(path):
            with opener(path, "rb") as f:
                head = f.read(8)
            if len(head) == 8 and head[:4] == b"\x00\x00\x08\x03":
                return int.from_bytes(head[4:8], "big")
    bad_input(f"--data: {data} holds no readable train-images-idx3-ubyte (raw or .gz)")


def main_cuda(a):
    clock = Clock(a.time_limit)  # the kit's step limit counts from the start: so does --time-limit
    a.build_dir = os.path.abspath(a.build_dir)
    a.data = os.path.abspath(a.data)
    a.cores = os.cpu_count() or 1
    a.host = socket.gethostname().split(".")[0]
    module = os.path.join(a.build_dir, "libmnist-cuda.so")
    if not os.access(os.path.join(a.build_dir, "mnist-train"), os.X_OK):
        bad_input(f"--build-dir: {a.build_dir}/mnist-train missing: build first (cmake -S . -B build && cmake --build build -j)")
    if not os.path.exists(module):
        bad_input(f"--build-dir: {module} missing: {a.build_dir} has no CUDA backend for --backend cuda (configure "
                  "with -DMNIST_DDP_CUDA=ON where nvcc, cuBLAS and NCCL are found; for the CUDA simulator "
                  "pass --build-dir BUILD/cudasim)")
    if not os.path.isdir(a.data):
        bad_input(f"--data: {a.data} is not a directory (expected MNIST's train-images-idx3-ubyte and "
                  "train-labels-idx1-ubyte, raw or .gz)")
    a.n_train = train_size(a.data)
    env = dict(os.environ)
    stand_in = os.path.join(a.build_dir, "driver")  # the simulator's libcuda.so.1 (tests/cmake/45-cudasim.cmake)
    if os.path.exists(os.path.join(stand_in, "libcuda.so.1")):
        env["LD_LIBRARY_PATH"] = stand_in + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    node = cuda_node(a, module, env)
    node["env"] = [f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}"] if "LD_LIBRARY_PATH" in env else []
    if not node["simulated"] and not node["gpus"] and not node.get("devices"):
        bad_input("--backend cuda: no GPU on this node (nvidia-smi lists none and cudaGetDeviceCount "
                  "fails); to check the harness without one: --build-dir BUILD/cudasim")
    g = node["count"]
    a.models = (a.models or "seed,mlp,lenet").split(",")
    a.ranks = [int(r) for r in a.ranks.split(",")] if a.ranks else \
        sorted({1 << k for k in range(g.bit_length()) if 1 << k <= g} | {g})
    batches = a.batches or "32,256,4096"
    lenet_batches = a.lenet_batches or a.batches or "32,256"  # LeNet-5 at 4096 only when asked
    a.steps = 500 if a.steps is None else a.steps
    if a.quick:
        a.models, batches, a.reps, a.no_tta, a.steps = ["seed"], "32", 1, True, 128
        a.ranks = [1, 2] if g >= 2 else [1]
    a.batches = [int(b) for b in batches.split(",")]
    lenet_batches = [int(b) for b in lenet_batches.split(",")]
    a.model_batches = {m: lenet_batches if m == "lenet" else a.batches for m in a.models}
    a.hidden_list = [int(h) for h in a.hidden.split(",")]
    a.stamp = datetime.date.today().isoformat() + "-" + node["name"] + (f"-{a.tag}" if a.tag else "")
    t_info, t_why = torch_cuda(a, node)
    log(f"GPUs: {node['versions'].get('GPUs', 'simulated')}; PyTorch: {t_why or 'on CUDA'}")

    # 1. the matrix's goal columns (ours with its graph, PyTorch's three), 2. time to accuracy
    # on one GPU, 3. the NCCL allreduce table, 4. the matrix's diagnostic columns (one step a
    # launch, --no-pdl, --no-side-stream, --no-graph): matrix.cuda_matrix's order, 2 and 3
    # between its passes, so that a --time-limit cuts the diagnostics first.
    R = CudaRunner(a, env, clock)
    tta = []
    a.allreduce_ranks = g
    allreduce = {"out": "", "note": None}

    def time_to_accuracy():  # ours with --eval-every 1, PyTorch eager
        if a.no_tta:
            return
        for row in tta_mod.wanted(a, tta_mod.settings("cuda", a.hidden)):
            if clock.out_of_time():
                if not a.stopped:
                    a.stopped = f"--time-limit {a.time_limit:.0f} s reached before time to accuracy ({row['name']})"
                    log(a.stopped)
                break
            tag = "-tta" + row["name"][len(row["model"]):]  # -tta, -tta-adamw, ...: each row its own files
            got = tta_mod.run_row(
                row,
                lambda r: attempt_tta("mnist-train", r, lambda: R.ours_epochs(
                    r["model"], r["batch"], r["ranks"], r["epochs"], r["hp"] + ["--eval-every", "1"], tag)),
                None if t_why else lambda r: attempt_tta("PyTorch", r, lambda: R.torch_epochs(
                    r["model"], r["batch"], r["ranks"], r["epochs"],
                    r["hp"] + ["--target-accuracy", str(r["target"])], tag)))
            tta.append(got)
            log(f"time to {row['target']} ({row['name']}): ours {got['ours_seconds']} s, torch {got['torch_seconds']} s")

    def allreduce_table():  # bench/allreduce's NCCL tables, every GPU of the node
        ar = os.path.join(a.build_dir, "bench", "allreduce")
        if a.no_allreduce:
            allreduce["note"] = "not run (--no-allreduce)"
        elif node["simulated"]:
            allreduce["note"] = ("not available: bench/allreduce is not built against the CUDA simulator; its "
                                 "ncclAllReduce table needs a GPU")
        elif not os.access(ar, os.X_OK):
            allreduce["note"] = f"not available: {ar} missing"
        elif clock.out_of_time():
            allreduce["note"] = f"not run (--time-limit {a.time_limit:.0f} s reached)"
        else:
            left = clock.left()  # like any other run: ended once it overruns the limit by 60 s
            p = attempt("bench/allreduce", lambda: run(
                R.mpirun + ["-n", str(g)] + ["-x", "LD_LIBRARY_PATH"] * ("LD_LIBRARY_PATH" in env) +
                [ar, "--path", "cuda"], env=env, check=False, timeout=1800 if left is None else left + 60))
            if p is None:
                allreduce["note"] = "bench/allreduce ran past the --time-limit by 60 s (ended)"
                return
            allreduce["out"] = p.stdout
            if p.returncode:
                allreduce["note"] = f"bench/allreduce exited {p.returncode} (1: elements were wrong)"

    def between():
        R.close()  # PyTorch's step servers: the matrix's PyTorch columns are done
        time_to_accuracy()
        allreduce_table()

    cells = cuda_matrix(a, R, clock, t_why, t_info, between=between)
    node["simulated"] = node["simulated"] or any(is_simulated(d) for c in cells.values() for d in c["devices"])
    allreduce_out, allreduce_note = allreduce["out"], allreduce["note"]

    # 5. charts and the results file
    where = "SIMULATED on the CPU (cudasim), not a GPU" if node["simulated"] else (node["gpus"] or ["GPU"])[0]
    series = [("ours", "mnist-train (graph)")]
    if not t_why:
        series.append(("torch_compiled", "PyTorch inductor + CUDA graph"))
    a.chart_subtitle = f"{where}: steady-state images/s, " + " vs ".join(label for _, label in series)
    loss_runs = {}
    for model in a.models:
        b0 = a.model_batches[model][0]
        c = cells.get((model, b0, a.ranks[0]))
        if c and c["ours"]:
            loss_runs[f"{model}-b{b0}-r{a.ranks[0]}"] = [(f"mnist-train b{b0} r{a.ranks[0]}", c["ours"]["metrics"], 1)] + \
                ([(f"PyTorch eager b{b0} r{a.ranks[0]}", c["torch"]["metrics"], 2)] if c.get("torch") else [])
    pngs = charts(a, cells, loss_runs, R.metrics_dir, series, figure="steady_ips",
                  ylabel="steady-state images/s (log scale)")
    report_cuda.write_results(a, node, t_info, t_why, cells, tta, allreduce_out, allreduce_note, pngs, clock.elapsed())
    return 0


def attempt_tta(who, row, fn):
    return attempt(f"{who} time to {row['target']}, {row['name']}", fn)
