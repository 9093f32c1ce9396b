"""The GPU matrix's runs: mnist-train's CUDA backend under mpirun (one rank per GPU, the step
replayed from a CUDA graph or launched op by op), and PyTorch on CUDA: the step-time cells
served by long-lived processes of bench/reference/step_ref.py (one per rank, many cells
each), the time-to-accuracy runs by bench/reference/train_ref.py.

A cell's mnist-train run has a fixed number of steps (--steps): `--limit steps x batch x ranks`
for one epoch where the training set holds that many images, else whole epochs with
--drop-last until the steps are reached (every step a full batch, as on PyTorch's side). The step-time figures need no more, and the run then costs its start-up
(mpirun, the CUDA context, NCCL, the data) and little else."""
import json
import math
import os
import select
import subprocess
import sys
import time

from .common import COMMANDS, ROOT, STEP_REF, Runner, log, quote


class TorchWorkers:
    """The processes of step_ref.py --serve for one rank count: every request goes to each
    rank, rank 0's answer is the figure."""

    def __init__(self, runner, ranks):
        a = runner.a
        self.ranks = ranks
        self.answered = 0
        port = runner.next_port()
        self.procs, self.bufs, self.logs = [], [], []
        for r in range(ranks):
            env = dict(runner.env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), LOCAL_RANK=str(r),
                       WORLD_SIZE=str(ranks), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            cmd = [a.python, STEP_REF, "--device", "cuda", "--serve", "--data", a.data, "--hidden", a.hidden,
                   "--steps", str(a.steps), "--log-every", str(a.log_every)]
            path = os.path.join(runner.metrics_dir, f"torch-serve-r{ranks}-rank{r}.log")
            self.logs.append(path)
            with open(path, "w") as err:
                self.procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT, stdin=subprocess.PIPE,
                                                   stdout=subprocess.PIPE, stderr=err, bufsize=0))
            self.bufs.append(b"")
            if r == 0:
                self.command = (f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE={ranks} RANK=r "
                                f"OMP_NUM_THREADS=1 {quote(cmd)}   (r = 0..{ranks - 1}, started together)")
                COMMANDS.append(self.command + "   # serves the PyTorch cells at "
                                f"{ranks} rank(s) below, each a JSON request on its stdin")
        log(f"PyTorch step server started for {ranks} rank(s)")

    def log_tail(self):
        try:
            with open(self.logs[0]) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def _result(self, i, deadline):
        p = self.procs[i]
        while True:
            while b"\n" in self.bufs[i]:
                line, self.bufs[i] = self.bufs[i].split(b"\n", 1)
                if line.startswith(b"result: "):
                    return json.loads(line[len(b"result: "):])
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([p.stdout], [], [], left)
            if ready:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError(f"rank {i} of the PyTorch step server exited ({p.wait()})")
                self.bufs[i] += chunk

    def request(self, req, timeout):
        """Rank 0's answer to `req`; raises TimeoutError, EOFError or BrokenPipeError."""
        line = (json.dumps(req) + "\n").encode()
        for p in self.procs:
            p.stdin.write(line)
            p.stdin.flush()
        deadline = time.time() + timeout
        answers = [self._result(i, deadline) for i in range(self.ranks)]
        return answers[0]

    def close(self, kill=False):
        for p in self.procs:
            if not kill:
                try:
                    p.stdin.write(b"\n")
                    p.stdin.close()
                    p.wait(timeout=60)
                    continue
                except (OSError, subprocess.TimeoutExpired):
                    pass
            p.kill()
            p.wait()


class CudaRunner(Runner):
    def __init__(self, a, env, clock):
        super().__init__(a, env)
        self.clock = clock
        self.workers = {}  # ranks -> TorchWorkers
        self.broken = {}   # ranks -> why its server failed its first request (it is not started again)

    def timeout(self, most=1800):
        """Seconds a run may take: under --time-limit, what is left and a minute more."""
        return max(30.0, min(most, self.clock.left() + 60)) if self.clock.limit else most

    def launch(self, ranks, graph=True):
        return self.mpirun + ["-n", str(ranks)] + ["-x", "LD_LIBRARY_PATH"] * ("LD_LIBRARY_PATH" in self.env) + \
            [self.train, "--backend", "cuda"] + ([] if graph else ["--no-graph"])

    def step_args(self, batch, ranks):
        """(epochs, flags) for a run of at least --steps steps, every one a full batch as on
        PyTorch's side (--steps 0: --epochs, --limit)."""
        if not self.a.steps:
            return self.a.epochs, self.limit
        n = min(self.a.limit, self.a.n_train) if self.a.limit else self.a.n_train
        if self.a.steps * batch * ranks <= n:
            return 1, ["--limit", str(self.a.steps * batch * ranks)]
        per_epoch = n // ranks // batch
        if per_epoch == 0:
            sys.exit(f"bench/train: batch {batch} x {ranks} rank(s) exceeds the {n} training images")
        return math.ceil(self.a.steps / per_epoch), self.limit + ["--drop-last"]

    def ours(self, model, batch, ranks, graph=True, extra=(), tag=""):
        """One matrix cell of mnist-train on the CUDA backend."""
        mfile = os.path.join(self.metrics_dir, f"ours-{model}-b{batch}-r{ranks}-{'graph' if graph else 'nograph'}{tag}.jsonl")
        epochs, flags = self.step_args(batch, ranks)
        return self.mnist_train(self.launch(ranks, graph), model, batch, mfile, epochs, flags + list(extra),
                                timeout=self.timeout())

    def ours_epochs(self, model, batch, ranks, epochs, extra=(), tag=""):
        """A whole-epochs run (time to accuracy), the step replayed from its graph."""
        mfile = os.path.join(self.metrics_dir, f"ours-{model}-b{batch}-r{ranks}-graph{tag}.jsonl")
        return self.mnist_train(self.launch(ranks), model, batch, mfile, epochs, self.limit + list(extra),
                                timeout=self.timeout())

    def torch_epochs(self, model, batch, ranks, epochs, extra=(), tag=""):
        """A whole-epochs run of train_ref.py on CUDA, eager (time to accuracy)."""
        mfile = os.path.join(self.metrics_dir, f"torch-{model}-b{batch}-r{ranks}-eager{tag}.jsonl")
        return self.train_ref(model, batch, ranks, 1, mfile, epochs, ["--device", "cuda"] + list(extra),
                              timeout=self.timeout(3600))

    def torch_cell(self, model, batch, ranks, variant):
        """One matrix cell of PyTorch on CUDA (eager, graph or compiled), by the step server."""
        mfile = os.path.join(self.metrics_dir, f"torch-{model}-b{batch}-r{ranks}-{variant}.jsonl")
        if ranks in self.broken:
            sys.exit(f"bench/train: no PyTorch step server at {ranks} rank(s): {self.broken[ranks]}")
        w = self.workers.get(ranks)
        if w is None:
            w = self.workers[ranks] = TorchWorkers(self, ranks)
        req = {"model": model, "batch": batch, "variant": variant, "steps": self.a.steps, "metrics": mfile}
        one = [self.a.python, STEP_REF, "--device", "cuda", "--data", self.a.data, "--hidden", self.a.hidden,
               "--model", model, "--batch-size", str(batch), "--variant", variant, "--steps", str(self.a.steps),
               "--metrics", mfile]
        COMMANDS.append(f"{json.dumps(req)}   # request to the server at {ranks} rank(s); alone: {quote(one)}")
        timeout = self.a.cell_timeout
        if self.clock.limit:  # a compilation in flight gets what is left and 30 s more
            timeout = max(10.0, min(timeout, self.clock.left() + 30))
        t0 = time.time()
        try:
            res = w.request(req, timeout)
        except (TimeoutError, EOFError, OSError) as e:
            why = f"no answer within {timeout:.0f} s" if isinstance(e, TimeoutError) else str(e) or type(e).__name__
            tail = w.log_tail()
            w.close(kill=True)
            del self.workers[ranks]
            if not w.answered:  # it never served a cell: starting it again would fail again, slowly
                self.broken[ranks] = f"its first request got {why}"
            sys.exit(f"bench/train: the PyTorch step server at {ranks} rank(s): {why} (ended; "
                     f"{'not started again' if not w.answered else 'the next cell starts a new one'})\n{tail}")
        w.answered += 1
        if not res.get("ok"):
            sys.exit(f"bench/train: PyTorch {variant}, {model} b{batch} r{ranks}: {res.get('error')}")
        return {"ips": res["images_per_second"], "steady_ips": res["steady_images_per_second"],
                "step_median_ms": res["median_ms"], "step_p95_ms": res["p95_ms"], "steady_ms": res["steady_mean_ms"],
                "steps": res["steps"], "setup_steps": res["setup_steps"], "acc": float("nan"), "metrics": mfile,
                "wall_s": time.time() - t0}

    def close(self):
        for w in self.workers.values():
            w.close()
        self.workers = {}
