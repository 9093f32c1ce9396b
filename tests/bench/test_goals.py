#!/usr/bin/env python3
"""The GPU matrix's goals as bench/train judges them (bench/harness/goals.py, judge), on
figures made up here for a run on an H100, the same on an H200, and a simulated run: no GPU
and no run needed (the figures' measurement is tested elsewhere; this is the judging).

 1. H100: each goal met or missed by its figure (the step goals, the baseline, the ratio to
    PyTorch's best, time to 99%, the plan's measurement); kernels per step not judged.
 2. H200: the same verdicts, and every goal whose figure is a time on the GPU says it is
    stated for one H100; the ratio to PyTorch (side by side on the same GPU) does not.
 3. Simulated: no goal judged, every figure labelled SIMULATED.
Exit status 0 when all hold, 1 with the first that does not."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from harness import goals  # noqa: E402


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def ours(us, plan_ms=20.0):
    return {"step_median_ms": us / 1e3, "graph_nodes": 3, "plan_ms": plan_ms, "plan_warm_ms": 90.0}


def torch(us):
    return {"step_median_ms": us / 1e3}


# Ours and PyTorch's inductor + CUDA graph step, us: seed b32 9 (goal 10: met), mlp b32 30
# (goal 25: missed), LeNet-5 b32 45 and b256 120 (goals 50 and 100: met, missed); every cell
# faster than 092b1c6's; PyTorch's best at least 2x ours everywhere (the least LeNet-5 b256's
# 354 / 120); the plan's measurement 20 ms a run, LeNet-5 b256's 60 (goal 50: missed).
figures = {("seed", 32): (9, 63), ("seed", 256): (12, 76), ("mlp", 32): (30, 118), ("mlp", 256): (40, 158),
           ("lenet", 32): (45, 204), ("lenet", 256): (120, 354)}
cells = {(m, b, 1): {"ours": ours(us, 60.0 if (m, b) == ("lenet", 256) else 20.0),
                     "torch": torch(10 * t), "torch_graph": torch(1.1 * t), "torch_compiled": torch(t)}
         for (m, b), (us, t) in figures.items()}
tta = [{"model": "lenet", "ranks": 1, "name": "lenet-adamw-b256", "ours_seconds": 0.25, "ours_epochs": 3,
        "ours_curve": [(3, 0.25, 0.9911)]}]
a = types.SimpleNamespace(allreduce_ranks=1)


def verdicts(gpus, simulated=False):
    node = {"simulated": simulated, "gpus": gpus}
    return {goal: (measured, verdict) for goal, measured, verdict in goals.judge(a, node, None, cells, tta, [])}


def find(rows, text):
    hit = [g for g in rows if text in g]
    if len(hit) != 1:
        fail(f"{len(hit)} goal rows with {text!r}: {list(rows)}")
    return rows[hit[0]]


expected = {"no cell slower than the 092b1c6 baseline": "met",
            "seed, batch 32, 1 GPU: median step <= 10 us": "met",
            "mlp 512,256, batch 32, 1 GPU: median step <= 25 us": "missed",
            "LeNet-5, batch 32, 1 GPU: median step <= 50 us": "met",
            "LeNet-5, batch 256, 1 GPU: median step <= 100 us": "missed",
            "at least 2x faster than PyTorch's best": "met",
            "99% test accuracy in <= 0.3 s": "met",
            "the plan's measurement": "missed"}
side_by_side = ("at least 2x faster than PyTorch's best",)

# 1. H100
h100 = verdicts(["NVIDIA H100 80GB HBM3 (81559 MiB)"])
for text, want in expected.items():
    measured, verdict = find(h100, text)
    if verdict != want:
        fail(f"H100: {text}: {verdict!r} ({measured}), expected {want!r}")
plan = find(h100, "the plan's measurement")[0]
if "worst 60.0 ms (lenet b256 r1)" not in plan:
    fail(f"H100: the plan's figure: {plan}")
if find(h100, "kernels per step")[1] != "not judged":
    fail("H100: kernels per step judged")

# 2. H200: the same verdicts, qualified where the figure is a time on the GPU
h200 = verdicts(["NVIDIA H200 (143771 MiB)"])
note = "(on an NVIDIA H200; the goal is stated for one H100)"
for text, want in expected.items():
    measured, verdict = find(h200, text)
    qualified = want if text in side_by_side else f"{want} {note}"
    if verdict != qualified:
        fail(f"H200: {text}: {verdict!r}, expected {qualified!r}")

# 3. simulated
sim = verdicts([], simulated=True)
for text in expected:
    measured, verdict = find(sim, text)
    if verdict != "not measured (simulated run)" or not measured.endswith("(SIMULATED)"):
        fail(f"simulated: {text}: {measured!r} {verdict!r}")

print(f"PASS: {len(expected)} goals judged on an H100's figures, the same on an H200's with the "
      "GPU the goal is stated for, none on a simulated run")
