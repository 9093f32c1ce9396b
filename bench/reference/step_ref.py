#!/usr/bin/python3
"""step_ref.py - PyTorch's training step, timed, for bench/train's GPU matrix: any number of
cells (model, batch per rank, variant) measured by one process.

One cell:
    python3 bench/reference/step_ref.py --device cuda --model lenet --batch-size 256 --variant compiled --steps 500
Many, from one process (bench/train --backend cuda does this, one process per rank):
    python3 bench/reference/step_ref.py --device cuda --serve
    then one JSON request per line on stdin, e.g.
    {"model": "seed", "batch": 32, "variant": "eager", "steps": 500, "metrics": "FILE"}
    each answered by one line on stdout: "result: {...}" (JSON); an empty line or EOF ends it.
DDP (one process per GPU, NCCL): as train_ref.py, ranks started by hand with MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE (LOCAL_RANK, else RANK, picks the GPU); every rank gets the same
requests, in the same order.

Why one process: starting PyTorch (import, CUDA context, cuBLAS, the data on the device) costs
seconds, and the matrix's step-time cells take milliseconds; a process per cell spent nearly all
of the kit's time limit starting PyTorch.

What a cell runs: the data, models, initialisation, cross-entropy and sharding of
train_ref.py (imported from it), a fresh model and torch.optim.SGD (--lr, --momentum) per
cell, and --steps steps on full batches of the per-epoch shards (epoch after epoch as
needed), each timed with the device synchronised at its end, as mnist-train's --metrics
does. The step gathers its batch on the device (index_select from the normalised training
set), runs forward, loss, zero_grad, backward, SGD. Variants:

  eager     the step op by op (train_ref.py --device cuda)
  graph     the whole step captured once as a CUDA graph and replayed (train_ref.py
            --cuda-graph, PyTorch's whole-network capture recipe): 3 eager warm-up steps on a
            side stream (11 under DDP), the capture, then replays with the batch's indices
            copied into the graph's input
  compiled  the model compiled by inductor (torch.compile, default mode), and the whole step
            around it captured by hand with torch.cuda.graph, after 20 warm-up steps on a side
            stream (the first compiles), gradients zeroed in place so their buffers stay put;
            then replays. torch.compile(mode="reduce-overhead") does its own capture, but over
            a step with backward() and opt.step() PyTorch 2.11 stopped it with "accessing
            tensor output of CUDAGraphs that has been overwritten"; compiling the model and
            capturing the step around it ran. 1 rank only (not tried under DDP). Dynamo's
            caches are reset before each compiled cell, so no cell inherits another's guards
            or reaches the recompile limit, past which Dynamo would silently run eagerly.

A result (rank 0's; other ranks answer {"ok": true} too): steps, setup_steps (eager 1, graph
warm-up + 1, compiled 21: the steps before the step takes its final form), median_ms,
p95_ms, mean_ms, min_ms, max_ms of all steps, steady_mean_ms (the mean after the set-up
steps), images (all ranks), seconds (the sum of the step times), images_per_second
(whole run, set-up included: the first cell of a process also pays cuBLAS's start),
steady_images_per_second (ranks x batch / steady_mean_ms), final_loss; or {"ok": false,
"error": ...}. --metrics FILE gets train_ref.py's JSON lines (elapsed = training time
so far) and a step_times event with the same figures.
"""
import argparse
import contextlib
import gc
import json
import math
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_ref import GraphedStep, make_model, normalise, read_idx, shard  # noqa: E402

VARIANTS = ("eager", "graph", "compiled")
COMPILED_WARM_UP = 20


class CompiledGraphStep:
    """The step around an inductor-compiled model, captured once with torch.cuda.graph and
    replayed: `warm` eager calls on a side stream first (the first compiles; every one keeps
    the gradient buffers, zeroed in place, so the capture records the buffers later replays
    use), then the capture with the indices in a static tensor, then replays."""

    def __init__(self, step, batch, device, warm):
        self.step, self.warm, self.warmed = step, warm, 0
        self.idx = torch.zeros(batch, dtype=torch.int64, device=device)
        self.side = torch.cuda.Stream(device)
        self.graph, self.loss = None, None

    def __call__(self, b):
        if self.graph is None and self.warmed < self.warm:
            self.warmed += 1
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                loss = self.step(b, set_to_none=False)
            torch.cuda.current_stream().wait_stream(self.side)
            return loss
        self.idx.copy_(b)
        if self.graph is None:
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # records, runs nothing: the replay below runs it
                self.loss = self.step(self.idx, set_to_none=False)
        self.graph.replay()
        return self.loss


class Context:
    """What every cell of a process shares: the device, the ranks, the data on the device."""

    def __init__(self, a):
        self.a = a
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if a.device == "cuda":
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", self.rank)) % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        if self.world > 1:
            if a.device == "cuda":  # PyTorch's condition for capturing DDP's allreduce
                os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
                os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "0")
            dist.init_process_group("nccl" if a.device == "cuda" else "gloo", rank=self.rank, world_size=self.world)
        self.x = normalise(read_idx(a.data, "train", "images")).to(self.device)
        self.y = torch.from_numpy(read_idx(a.data, "train", "labels").astype(np.int64)).to(self.device)
        self.n = self.x.shape[0]
        self.hidden = [int(h) for h in a.hidden.split(",")]

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def indices(self, batch, steps):
        """steps x batch indices on the device: this rank's shards of epochs 0, 1, ..., each cut
        to whole batches (an epoch's short last batch would run eagerly in a captured variant)."""
        per_rank = (self.n + self.world - 1) // self.world
        whole = per_rank // batch * batch
        if whole == 0:
            raise ValueError(f"batch {batch} exceeds this rank's {per_rank} training images")
        parts, have, epoch = [], 0, 0
        while have < steps * batch:
            parts.append(shard(self.n, self.rank, self.world, epoch, self.a.seed)[:whole])
            have += whole
            epoch += 1
        return torch.cat(parts)[:steps * batch].to(self.device)


def measure(ctx, req):
    """One cell: a fresh model, optimizer and step of the request's variant, `steps` timed steps."""
    model_name, batch, variant = req["model"], int(req["batch"]), req.get("variant", "eager")
    steps = int(req.get("steps", ctx.a.steps))
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: expected one of {', '.join(VARIANTS)}")
    if variant != "eager" and ctx.device.type != "cuda":
        raise ValueError(f"variant {variant}: needs --device cuda")
    if variant == "compiled" and ctx.world > 1:
        raise ValueError("variant compiled: 1 rank only")
    if variant == "compiled" and not hasattr(torch, "compile"):
        raise ValueError(f"variant compiled: PyTorch {torch.__version__} has no torch.compile")
    warm = 11 if ctx.world > 1 else 3
    setup = {"eager": 1, "graph": warm + 1, "compiled": COMPILED_WARM_UP + 1}[variant]
    if steps <= setup:
        raise ValueError(f"--steps {steps}: variant {variant} needs more than its {setup} set-up steps")

    torch.manual_seed(ctx.a.seed)
    model = make_model(model_name, ctx.hidden).to(ctx.device)
    if ctx.world > 1:  # DDP broadcasts rank 0's parameters; for capture it is built on a side stream
        with torch.cuda.stream(torch.cuda.Stream(ctx.device)) if variant == "graph" else contextlib.nullcontext():
            model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=ctx.a.lr, momentum=ctx.a.momentum)
    forward = model
    if variant == "compiled":
        torch._dynamo.reset()
        forward = torch.compile(model)
    x, y = ctx.x, ctx.y

    def train_step(b, set_to_none):
        loss = F.cross_entropy(forward(x.index_select(0, b)), y.index_select(0, b))
        opt.zero_grad(set_to_none=set_to_none)
        loss.backward()
        opt.step()
        return loss

    if variant == "eager":
        step_fn = lambda b: train_step(b, set_to_none=True)  # noqa: E731
    elif variant == "graph":
        step_fn = GraphedStep(train_step, batch, ctx.device, warm)
    else:
        step_fn = CompiledGraphStep(train_step, batch, ctx.device, COMPILED_WARM_UP)

    idx = ctx.indices(batch, steps)
    metrics = open(req["metrics"], "w") if req.get("metrics") and ctx.rank == 0 else None
    log_every = int(req.get("log_every", ctx.a.log_every))
    times, loss_v = [], float("nan")
    if ctx.world > 1:
        dist.barrier()
    ctx.sync()
    for s in range(steps):
        t0 = time.perf_counter()
        loss = step_fn(idx[s * batch:(s + 1) * batch])
        ctx.sync()
        times.append(time.perf_counter() - t0)
        if s % log_every == 0 or s == steps - 1:
            loss_v = loss.item()
            if metrics:
                el = sum(times)
                metrics.write(json.dumps({"epoch": 0, "step": s, "global_step": s, "loss": loss_v,
                                          "images_per_second": (s + 1) * batch * ctx.world / el,
                                          "elapsed": el}) + "\n")
    ms = np.array(times) * 1e3
    steady = float(ms[setup:].mean())
    res = {"model": model_name, "batch": batch, "variant": variant, "ranks": ctx.world, "steps": steps,
           "setup_steps": setup, "median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)),
           "mean_ms": float(ms.mean()), "min_ms": float(ms.min()), "max_ms": float(ms.max()),
           "steady_mean_ms": steady, "images": steps * batch * ctx.world, "seconds": float(ms.sum() / 1e3),
           "final_loss": loss_v}
    res["images_per_second"] = res["images"] / res["seconds"]
    res["steady_images_per_second"] = batch * ctx.world / (steady / 1e3)
    if metrics:
        metrics.write(json.dumps(dict({"event": "step_times"}, **{k: res[k] for k in (
            "steps", "median_ms", "p95_ms", "mean_ms", "min_ms", "max_ms", "setup_steps", "steady_mean_ms")})) + "\n")
        metrics.close()
    if not math.isfinite(loss_v):
        res["note"] = "the loss is not finite"
    return res


def answer(ctx, req):
    try:
        res = dict(measure(ctx, req), ok=True)
    except Exception as e:  # a cell that fails is reported; the process serves the next one
        traceback.print_exc()
        res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    gc.collect()  # the cell's model, optimizer and graph are garbage now: give their memory back
    if ctx.device.type == "cuda":
        torch.cuda.empty_cache()
    if ctx.rank != 0:
        res = {"ok": res["ok"]}
    print("result: " + json.dumps(res), flush=True)
    return res["ok"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "./MNIST_Data/train/"))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--model", choices=("seed", "linear", "mlp", "lenet"), default="seed")
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--variant", choices=VARIANTS, default="eager")
    ap.add_argument("--steps", type=int, default=500, help="timed steps per cell, set-up included")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--metrics", default=None)
    ap.add_argument("--serve", action="store_true", help="measure the cells requested on stdin, one JSON line each")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"step_ref: --device cuda: not available in PyTorch {torch.__version__} "
              f"(torch.cuda.is_available() is False: built without CUDA, or no usable GPU)", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(a.threads)
    ctx = Context(a)
    ok = True
    if a.serve:
        for line in sys.stdin:
            if not line.strip():
                break
            try:
                req = json.loads(line)
            except ValueError as e:
                print("result: " + json.dumps({"ok": False, "error": f"not a JSON request: {e}"}), flush=True)
                continue
            answer(ctx, req)
    else:
        ok = answer(ctx, {"model": a.model, "batch": a.batch_size, "variant": a.variant, "steps": a.steps,
                          "metrics": a.metrics})
    if ctx.world > 1:
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
