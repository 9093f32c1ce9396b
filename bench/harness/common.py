"""What every part of bench/train shares: running commands (and keeping each one for the
results file), parsing mnist-train's summary line and --metrics files, step-time figures,
writing the results file and packing the run's raw data."""
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(ROOT, "bench", "reference", "train_ref.py")
STEP_REF = os.path.join(ROOT, "bench", "reference", "step_ref.py")
COMMANDS = []  # every command run, for the results file
FAILURES = []  # runs that failed in the GPU matrix (reported, not fatal: one bad cell keeps the rest)


def log(msg):
    print(f"bench/train: {msg}", file=sys.stderr, flush=True)


def bad_input(msg):
    """A wrong option or a missing build: one message, exit status 2, nothing written."""
    print(f"bench/train: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def quote(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


def run(cmd, env=None, timeout=1800, check=True):
    COMMANDS.append(quote(cmd))
    try:
        p = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench/train: command ran past {timeout:.0f} s (ended): {COMMANDS[-1]}")
    if check and p.returncode != 0:
        sys.exit(f"bench/train: command failed ({p.returncode}): {COMMANDS[-1]}\n{p.stderr[-3000:]}")
    return p


def attempt(what, fn):
    """fn()'s result, or None with the failure logged and kept for the results file."""
    try:
        return fn()
    except SystemExit as e:
        FAILURES.append(f"{what}: {str(e)[-1500:]}")
        log(f"{what} failed")
        return None


def parse_kv(line):
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}


def summary_of(text):
    for line in text.splitlines():
        if line.startswith("summary:"):
            return parse_kv(line)
    return None


def read_metrics(path):
    """(the loss rows, the step_times event or None, the eval events, the gpu_plan record or
    None) of a --metrics file."""
    rows, steps, evals, plan = [], None, [], None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                if d.get("event") == "step_times":
                    steps = d
                elif d.get("event") == "eval":
                    evals.append(d)
                elif d.get("event") == "gpu_plan":
                    plan = d
                elif "event" not in d:
                    rows.append(d)
    return rows, steps, evals, plan


def steady_step_ms(st):
    """The mean step without the set-up of the first: from a step_times event, (steps x mean -
    max) / (steps - 1). mnist-train's slowest step is its first (cuBLAS's start, the graph's
    capture: 100-150 ms on an H100, against tens of microseconds for a replay), so this is the
    mean of the steps after it. None when the event lacks the figures or holds one step."""
    if not st or st.get("steps", 0) < 2 or st.get("mean_ms") is None or st.get("max_ms") is None:
        return None
    return (st["steps"] * st["mean_ms"] - st["max_ms"]) / (st["steps"] - 1)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".0f"):
    return "n/a" if x is None else format(x, spec)


def isnan(x):
    return isinstance(x, float) and math.isnan(x)


def med_result(results):
    """Median of each figure over repetitions; the loss rows of the median-throughput run."""
    if not results:
        return None
    by_ips = sorted(results, key=lambda r: r["ips"])
    mid = by_ips[(len(by_ips) - 1) // 2]
    out = {"ips": median([r["ips"] for r in results]),
           "ips_all": [r["ips"] for r in results],
           "step_median_ms": median([r["step_median_ms"] for r in results]),
           "step_p95_ms": median([r["step_p95_ms"] for r in results]),
           "acc": mid["acc"], "metrics": mid["metrics"], "reps": len(results)}
    for k in ("steady_ips", "steady_ms", "graph_nodes", "wall_s", "steps", "plan_ms",
              "plan_warm_ms"):
        if any(r.get(k) is not None for r in results):
            out[k] = median([r.get(k) for r in results])
    return out


class Clock:
    """The invocation's clock and its --time-limit: past the limit no new run starts."""

    def __init__(self, limit):
        self.t0 = time.time()
        self.limit = limit

    def elapsed(self):
        return time.time() - self.t0

    def out_of_time(self):
        return bool(self.limit) and self.elapsed() >= self.limit

    def left(self):
        return self.limit - self.elapsed() if self.limit else None


class Runner:
    """What both backends' runners share: mpirun, the results folder, mnist-train's runs and
    the PyTorch reference train_ref.py (one process per rank, started by hand)."""

    def __init__(self, a, env):
        self.a = a
        self.env = env
        self.train = os.path.join(a.build_dir, "mnist-train")
        self.port = 29500 + os.getpid() % 1000
        self.mpirun = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + ["--oversubscribe"]
        self.metrics_dir = os.path.join(a.out_dir, a.stamp)
        os.makedirs(self.metrics_dir, exist_ok=True)
        self.limit = ["--limit", str(a.limit)] if a.limit else []

    def next_port(self):
        self.port += 1
        return self.port

    def mnist_train(self, launch, model, batch, mfile, epochs, extra, timeout=1800):
        """One mnist-train run: `launch` is mpirun and its options up to the program's flags.
        Its figures: images/s over the run (set-up included) and at the steady state, step time
        median and p95 (ms), the evaluations (--eval-every), graph_nodes when the summary has it."""
        cmd = launch + ["--data", self.a.data, "--model", model, "--batch-size", str(batch), "--epochs", str(epochs),
                        "--log-every", str(self.a.log_every), "--metrics", mfile] + list(extra)
        t0 = time.time()
        p = run(cmd, env=self.env, timeout=timeout)
        wall = time.time() - t0
        s = summary_of(p.stdout)
        if s is None:
            sys.exit(f"bench/train: no summary line from: {COMMANDS[-1]}\n{p.stderr[-3000:]}")
        rows, st, evals, plan = read_metrics(mfile)
        ranks = int(s.get("ranks", 1))
        steady = steady_step_ms(st)
        m = re.search(r"backend (\w+) \((.*?)\), model", p.stderr)
        return {"ips": float(s["images_per_second"]), "train_seconds": float(s["train_seconds"]),
                "acc": float(s["test_accuracy"]), "step_median_ms": st and st["median_ms"],
                "step_p95_ms": st and st["p95_ms"], "steps": st and st["steps"], "steady_ms": steady,
                "steady_ips": batch * ranks / (steady / 1e3) if steady else None,
                "graph_nodes": int(s["graph_nodes"]) if s.get("graph_nodes", "").isdigit() else None,
                "plan_ms": plan and plan.get("measure_ms"),
                "plan_warm_ms": plan and plan.get("warm_ms"),
                "metrics": mfile, "loss_rows": rows, "evals": evals, "backend": s.get("backend"),
                "device": m and m.group(2), "wall_s": wall}

    def train_ref(self, model, batch, ranks, threads, mfile, epochs, extra, timeout=3600):
        """One run of bench/reference/train_ref.py, `ranks` processes started together."""
        port = self.next_port()
        procs = []
        for r in range(ranks):
            env = dict(self.env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                       LOCAL_RANK=str(r), WORLD_SIZE=str(ranks), OMP_NUM_THREADS=str(threads),
                       OPENBLAS_NUM_THREADS=str(threads), GLOO_SOCKET_IFNAME="lo")
            cmd = [self.a.python, REF, "--data", self.a.data, "--model", model, "--batch-size", str(batch),
                   "--epochs", str(epochs), "--threads", str(threads), "--log-every", str(self.a.log_every),
                   "--metrics", mfile] + self.limit + list(extra)
            if r == 0:
                COMMANDS.append(f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE={ranks} RANK=r "
                                f"OMP_NUM_THREADS={threads} OPENBLAS_NUM_THREADS={threads} " +
                                quote(cmd) + f"   (r = 0..{ranks - 1}, started together)")
            procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        t0 = time.time()
        try:
            outs = [p.communicate(timeout=timeout) for p in procs]
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.wait()
            sys.exit(f"bench/train: the PyTorch reference ran past {timeout:.0f} s: {COMMANDS[-1]}")
        wall = time.time() - t0
        if any(p.returncode for p in procs):
            sys.exit(f"bench/train: the PyTorch reference failed: {COMMANDS[-1]}\n" + outs[0][1][-3000:])
        s = summary_of(outs[0][0])
        rows, st, _, _ = read_metrics(mfile)
        steady = steady_step_ms(st)
        return {"ips": float(s["images_per_second"]), "train_seconds": float(s["train_seconds"]),
                "acc": float(s["test_accuracy"]), "step_median_ms": float(s["step_median_ms"]),
                "step_p95_ms": float(s["step_p95_ms"]), "tta": float(s["tta_seconds"]),
                "steady_ms": steady, "steady_ips": batch * ranks / (steady / 1e3) if steady else None,
                "epochs": int(s["epochs"]), "metrics": mfile, "loss_rows": rows, "log": outs[0][1], "wall_s": wall}


# What stays in the results folder beside the report, where it links them: charts and notes. The rest
# of the folder (metrics JSONL, raw.json, the charts' data and gnuplot scripts) is raw data.
KEPT_BESIDE_REPORT = (".png", ".md")


def raw_archive(a):
    """The archive of the run's raw data: <out-dir>/<stamp>.tar.xz, beside the report."""
    return os.path.join(a.out_dir, a.stamp + ".tar.xz")


def pack_raw(a):
    """Everything in the results folder but the charts into one xz-compressed tar archive beside
    the report (members named <stamp>/...), then removed from the folder (and the folder too
    when nothing is left in it). Returns the archive's path."""
    folder = os.path.join(a.out_dir, a.stamp)
    path = raw_archive(a)
    packed = []
    with tarfile.open(path, "w:xz") as tar:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(KEPT_BESIDE_REPORT):
                    full = os.path.join(root, name)
                    tar.add(full, arcname=os.path.relpath(full, a.out_dir))
                    packed.append(full)
    for full in packed:
        os.remove(full)
    for root, dirs, files in os.walk(folder, topdown=False):
        if not os.listdir(root):
            os.rmdir(root)
    return path


def write_report(a, lines, raw):
    """The results file <out-dir>/<stamp>.md from lines, ending with where the raw data is;
    raw.json (every figure) in the results folder; then the raw data packed (pack_raw). The
    results file's path is printed on stdout."""
    path = os.path.join(a.out_dir, a.stamp + ".md")
    archive = os.path.basename(raw_archive(a))
    lines = lines + [
        "## Raw data\n",
        f"[`{archive}`]({archive}), beside this file: raw.json (every figure above), every run's "
        "`--metrics` JSON lines, the charts' data and gnuplot scripts, under "
        f"`{a.stamp}/` (`tar xJf {archive}`).\n"]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(a.out_dir, a.stamp, "raw.json"), "w") as f:
        json.dump(raw, f, indent=1, default=str)
    log(f"wrote {path}, raw data in {pack_raw(a)}")
    print(path)
