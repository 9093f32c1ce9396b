#!/usr/bin/python3
"""train_ref.py - the PyTorch reference for bench/train: mnist-train's models,
data, hyperparameters and sharding, in PyTorch (CPU, or CUDA when asked).

Single process:
    /usr/bin/python3 bench/reference/train_ref.py --model seed --batch-size 32
    python3 bench/reference/train_ref.py --device cuda --cuda-graph --batch-size 32
DDP (gloo on the CPU, nccl with --device cuda); torchrun is not used, each
rank is started by hand (LOCAL_RANK, else RANK, picks the GPU):
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2 RANK=0 train_ref.py ... &
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2 RANK=1 train_ref.py ...

On CUDA the step runs eagerly, or with --cuda-graph as one captured CUDA graph
(torch.cuda.CUDAGraph, PyTorch's whole-network capture recipe): the first
steps run eagerly on a side stream (3, or 11 under DDP, as PyTorch asks), the
next one is captured (gather, forward, loss, backward, DDP's allreduce, SGD)
and every later full batch replays it with its indices copied into the
graph's input; a shorter last batch of an epoch runs eagerly. Capture needs a
learning rate fixed for the run (constant schedule, no warm-up): the rate is
baked into the graph. Exit status 2 when CUDA is asked for and not available.

What matches mnist-train:
- data: the same IDX files (raw or .gz), read with numpy; pixels normalised as
  (x/255 - 0.1307)/0.3081. The whole set is normalised once, before the clock
  starts (the fastest way to feed PyTorch; mnist-train normalises each batch).
- models: seed = Linear(784, 10) with normal(0, 0.01) weights, zero bias, ReLU
  on the logits; linear = the same without the ReLU; mlp = Linear layers
  784-H1-...-10 with ReLU between, PyTorch's default init; lenet = LeNet-5:
  Conv2d(1, 6, 5, padding=2), ReLU, MaxPool2d(2), Conv2d(6, 16, 5), ReLU,
  MaxPool2d(2), Linear(400, 120), ReLU, Linear(120, 84), ReLU, Linear(84, 10),
  PyTorch's default init (the images viewed as (N, 1, 28, 28)).
- loss: cross-entropy averaged over the batch, gradients averaged over ranks
  (DDP); --optimizer sgd: torch.optim.SGD with lr, momentum (dampening 0) and
  --weight-decay (L2, added to the gradient); --optimizer adamw:
  torch.optim.AdamW with --beta1, --beta2, --eps and --weight-decay (decoupled);
  --clip-grad-norm F: torch.nn.utils.clip_grad_norm_(params, F) on the averaged
  gradients before the optimizer's step (its weight decay after, inside it);
  the summary then counts the steps it clipped (clipped_steps=).
- --init CKPT: start from an mnist-train checkpoint's parameters (its layers
  in order onto the model's Linear and Conv2d layers) and, with adamw, its
  optimizer state (exp_avg, exp_avg_sq, step), so both trainers continue from
  the same point; --limit N trains on the first N images, as mnist-train's.
- schedule (--lr-schedule constant|cosine, --warmup-steps W), stepped once per
  step over the T steps of the whole run, mnist-train's formula: step t < W runs
  at lr (t + 1) / W, then constant lr, or cosine lr (1 + cos(pi (t - W) / (T - W))) / 2,
  which is CosineAnnealingLR(T_max = T - W, eta_min = 0) in closed form.
- sharding: each epoch one global permutation shared by every rank; rank r
  takes positions r, r+N, ...; short shards wrap around to the start
  (DistributedSampler's padding), so every rank runs ceil(ceil(n/N)/batch) steps.
The permutation comes from torch's generator, not mnist-train's, so the
examples differ but not their number or the arithmetic.

Prints on rank 0 one line (keys like mnist-train's summary):
    summary: model=seed backend=torch ranks=1 epochs=1 steps_per_epoch=1875 images=60000
             train_seconds=... images_per_second=... test_accuracy=... final_loss=...
             step_median_ms=... step_p95_ms=... tta_seconds=...
and with --metrics FILE the JSON lines mnist-train writes (epoch, step, loss,
images_per_second, elapsed), plus one {"event": "step_times", ...} line (steps,
median_ms, p95_ms, mean_ms, min_ms, max_ms, as mnist-train's).

bench/reference/step_ref.py times the step alone, many cells per process (eager,
CUDA graph, inductor + CUDA graph), for bench/train's GPU matrix.
"""
import argparse
import contextlib
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def read_idx(directory, prefix, kind):
    """The `kind` ("images" or "labels") IDX file of `prefix` in `directory`, raw or .gz."""
    name = f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte"
    for path, opener in ((os.path.join(directory, name), open),
                         (os.path.join(directory, name + ".gz"), gzip.open)):
        if os.path.exists(path):
            with opener(path, "rb") as f:
                raw = f.read()
            break
    else:
        sys.exit(f"train_ref: {name} not found in {directory}")
    if kind == "images":
        n, rows, cols = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
        return np.frombuffer(raw, np.uint8, n * rows * cols, 16).reshape(n, rows * cols)
    n = int.from_bytes(raw[4:8], "big")
    return np.frombuffer(raw, np.uint8, n, 8)


def normalise(images):
    return torch.from_numpy(((images.astype(np.float32) / 255.0 - 0.1307) / 0.3081).astype(np.float32))


def make_model(kind, hidden):
    if kind == "lenet":
        return nn.Sequential(
            nn.Unflatten(1, (1, 28, 28)),
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    if kind in ("seed", "linear"):
        fc = nn.Linear(784, 10)
        nn.init.normal_(fc.weight, 0.0, 0.01)
        nn.init.zeros_(fc.bias)
        return nn.Sequential(fc, nn.ReLU()) if kind == "seed" else nn.Sequential(fc)
    layers, fan_in = [], 784
    for h in hidden:
        layers += [nn.Linear(fan_in, h), nn.ReLU()]
        fan_in = h
    layers.append(nn.Linear(fan_in, 10))
    return nn.Sequential(*layers)


def shard(n, rank, world, epoch, seed):
    """This rank's examples of `epoch`: every world-th of one global permutation, padded by wrap-around."""
    g = torch.Generator()
    g.manual_seed(seed * 1000003 + epoch)
    perm = torch.randperm(n, generator=g)
    per_rank = (n + world - 1) // world
    pos = torch.arange(per_rank) * world + rank
    return perm[pos % n]


def make_optimizer(a, params):
    if a.optimizer == "adamw":
        # capturable: the step count stays on the device, so a captured graph can replay it
        return torch.optim.AdamW(params, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                                 weight_decay=a.weight_decay, capturable=a.cuda_graph)
    return torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)


def load_init(path, model, opt):
    """The checkpoint's layers, in order, onto the model's; AdamW's state onto opt's."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reliability"))
    import read_checkpoint
    meta, tensors = read_checkpoint.read_checkpoint(path)
    tensors = {k: t.numpy() for k, t in tensors.items()}  # the reader's Tensors as float32 arrays
    mods = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    layers = read_checkpoint.layers(tensors)
    if len(mods) != len(layers):
        sys.exit(f"train_ref: {path} holds {len(layers)} layers, the model {len(mods)}")
    adamw = isinstance(opt, torch.optim.AdamW)
    if adamw != (meta.get("optimizer", "sgd") == "adamw"):
        sys.exit(f"train_ref: {path} is an --optimizer {meta.get('optimizer', 'sgd')} checkpoint")
    with torch.no_grad():
        for m, (name, w, b) in zip(mods, layers):
            m.weight.copy_(torch.from_numpy(w.copy()))
            m.bias.copy_(torch.from_numpy(b.copy()))
            if adamw:
                for p, kind in ((m.weight, "weight"), (m.bias, "bias")):
                    opt.state[p] = {
                        "step": torch.tensor(float(tensors["optimizer.step"])),
                        "exp_avg": torch.from_numpy(tensors[f"optimizer.{name}.{kind}.exp_avg"].copy()).to(p.device),
                        "exp_avg_sq": torch.from_numpy(tensors[f"optimizer.{name}.{kind}.exp_avg_sq"].copy()).to(p.device)}


def evaluate(model, x, y, device):
    with torch.no_grad():
        hits = 0
        for i in range(0, x.shape[0], 1000):
            hits += (model(x[i:i + 1000].to(device)).argmax(1) == y[i:i + 1000].to(device)).sum().item()
    return hits / x.shape[0]


class GraphedStep:
    """`step` (indices in, loss out) replayed from one captured CUDA graph.

    The first `warm` full batches run eagerly on a side stream, the next is
    captured with its indices in a static tensor and replayed; later full
    batches copy their indices in and replay. A batch of another size (an
    epoch's short last batch) runs eagerly, its gradients accumulated into
    the graph's own (zeroed in place, never freed)."""

    def __init__(self, step, batch, device, warm):
        self.step, self.warm, self.warmed = step, warm, 0
        self.idx = torch.zeros(batch, dtype=torch.int64, device=device)
        self.side = torch.cuda.Stream(device)
        self.graph, self.loss = None, None

    def __call__(self, b):
        if b.shape[0] != self.idx.shape[0]:
            return self.step(b, set_to_none=self.graph is None)
        if self.graph is None and self.warmed < self.warm:
            self.warmed += 1
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                loss = self.step(b, set_to_none=True)
            torch.cuda.current_stream().wait_stream(self.side)
            return loss
        self.idx.copy_(b)
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):  # records, runs nothing: the replay below runs it
                self.loss = self.step(self.idx, set_to_none=True)
        self.graph.replay()
        return self.loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "./MNIST_Data/train/"))
    ap.add_argument("--test-data", default=None)
    ap.add_argument("--model", choices=("seed", "linear", "mlp", "lenet"), default="seed")
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--clip-grad-norm", type=float, default=0.0,
                    help="clip the gradients by their global L2 norm to at most F (0: no clipping)")
    ap.add_argument("--init", default=None, help="an mnist-train checkpoint to start from")
    ap.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant")
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="--device cuda: replay the step from a captured CUDA graph")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N training images (0: all)")
    ap.add_argument("--metrics", default=None)
    ap.add_argument("--target-accuracy", type=float, default=0.0,
                    help="score the test set after each epoch (off the clock) and stop once reached")
    a = ap.parse_args()
    if a.cuda_graph and a.device != "cuda":
        ap.error("--cuda-graph needs --device cuda")
    if a.cuda_graph and (a.lr_schedule != "constant" or a.warmup_steps):
        ap.error("--cuda-graph: the learning rate is baked into the graph, so only "
                 "--lr-schedule constant without --warmup-steps can be captured")
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"train_ref: --device cuda: not available in PyTorch {torch.__version__} "
              f"(torch.cuda.is_available() is False: built without CUDA, or no usable GPU)", file=sys.stderr)
        sys.exit(2)

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % max(1, torch.cuda.device_count())) \
        if a.device == "cuda" else torch.device("cpu")
    if world > 1 and a.cuda_graph:  # PyTorch's condition for capturing DDP's allreduce
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
        os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "0")
    if world > 1:
        dist.init_process_group("nccl" if a.device == "cuda" else "gloo", rank=rank, world_size=world)

    keep = slice(0, a.limit if a.limit > 0 else None)
    x_train = normalise(read_idx(a.data, "train", "images")[keep]).to(device)
    y_train = torch.from_numpy(read_idx(a.data, "train", "labels")[keep].astype(np.int64)).to(device)
    test_dir = a.test_data or os.path.join(os.path.dirname(os.path.normpath(a.data)), "test")
    have_test = os.path.isdir(test_dir)
    if have_test:
        x_test = normalise(read_idx(test_dir, "t10k", "images"))
        y_test = torch.from_numpy(read_idx(test_dir, "t10k", "labels").astype(np.int64))

    model = make_model(a.model, [int(h) for h in a.hidden.split(",")]).to(device)
    if world > 1:  # DDP broadcasts rank 0's parameters; for capture it is built on a side stream
        with torch.cuda.stream(torch.cuda.Stream(device)) if a.cuda_graph else contextlib.nullcontext():
            model = nn.parallel.DistributedDataParallel(model)
    opt = make_optimizer(a, model.parameters())
    if a.init:
        load_init(a.init, model, opt)
    n = x_train.shape[0]
    per_rank = (n + world - 1) // world
    steps = (per_rank + a.batch_size - 1) // a.batch_size
    total, warm = a.epochs * steps, a.warmup_steps

    def rate(t):  # the factor of step t: mnist-train's host/train/schedule.c
        if t < warm:
            return (t + 1) / warm
        if a.lr_schedule == "constant":
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * (t - warm) / (total - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    metrics = open(a.metrics, "w") if a.metrics and rank == 0 else None
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    # Steps whose gradients were scaled (max_norm / (norm + 1e-6) < 1), counted on the device.
    clipped = torch.zeros((), dtype=torch.int64, device=device)

    def train_step(b, set_to_none):
        loss = F.cross_entropy(model(x_train.index_select(0, b)), y_train.index_select(0, b))
        opt.zero_grad(set_to_none=set_to_none)
        loss.backward()
        if a.clip_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad_norm)
            clipped.add_((a.clip_grad_norm / (norm + 1e-6) < 1).to(torch.int64))
        opt.step()
        return loss

    step_fn = GraphedStep(train_step, a.batch_size, device, 11 if world > 1 else 3) if a.cuda_graph \
        else (lambda b: train_step(b, set_to_none=True))

    step_times, images, train_seconds, tta, acc, loss_v = [], 0, 0.0, float("nan"), float("nan"), float("nan")
    if world > 1:
        dist.barrier()
    for epoch in range(a.epochs):
        idx = shard(n, rank, world, epoch, a.seed).to(device)
        sync()
        t_epoch = time.perf_counter()
        for step in range(steps):
            t0 = time.perf_counter()
            b = idx[step * a.batch_size:(step + 1) * a.batch_size]
            loss = step_fn(b)
            sched.step()
            images += b.shape[0] * world
            last = epoch == a.epochs - 1 and step == steps - 1
            if step % a.log_every == 0 or last:
                loss_v = loss.item()
                if metrics:
                    el = train_seconds + time.perf_counter() - t_epoch
                    metrics.write(json.dumps({"epoch": epoch, "step": step, "global_step": epoch * steps + step,
                                              "loss": loss_v, "images_per_second": images / el if el > 0 else 0.0,
                                              "elapsed": el}) + "\n")
            sync()
            step_times.append(time.perf_counter() - t0)
        sync()
        train_seconds += time.perf_counter() - t_epoch
        if a.target_accuracy > 0 and have_test:
            acc = evaluate(model, x_test, y_test, device)  # every rank scores the whole test set
            if rank == 0:
                print(f"epoch {epoch} train_seconds={train_seconds:.3f} test_accuracy={acc:.4f}", file=sys.stderr, flush=True)
            if acc >= a.target_accuracy:
                tta = train_seconds
                break
    if have_test and (a.target_accuracy <= 0 or tta != tta):
        acc = evaluate(model, x_test, y_test, device)
    st = np.array(step_times) * 1e3
    if metrics:
        metrics.write(json.dumps({"event": "step_times", "steps": len(st),
                                  "median_ms": float(np.median(st)), "p95_ms": float(np.percentile(st, 95)),
                                  "mean_ms": float(st.mean()), "min_ms": float(st.min()),
                                  "max_ms": float(st.max())}) + "\n")
        metrics.close()
    if rank == 0:
        print(f"summary: model={a.model} backend=torch ranks={world} epochs={epoch + 1} steps_per_epoch={steps} "
              f"images={images} train_seconds={train_seconds:.3f} images_per_second={images / train_seconds:.0f} "
              f"test_accuracy={acc:.4f} final_loss={loss_v:.8g} step_median_ms={np.median(st):.4f} "
              f"step_p95_ms={np.percentile(st, 95):.4f} tta_seconds={tta:.3f} threads={torch.get_num_threads()}"
              + (f" clipped_steps={clipped.item()}" if a.clip_grad_norm > 0 else ""), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
