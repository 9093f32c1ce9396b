"""The GPU matrix's results file: bench/results/<date>-<gpu>[-<tag>].md (-cudasim on the CUDA
simulator, labelled SIMULATED throughout), its charts in the folder beside it, and its raw data
(raw.json, the metrics files) in <date>-<gpu>[-<tag>].tar.xz (common.write_report)."""
import datetime
import os
import shlex
import sys

from .common import COMMANDS, FAILURES, median, write_report
from .cuda_node import SIMULATED_NOTE
from .goals import judge, step_ops, torch_best
from .machine import cpu_model, versions
from .matrix import CUDA_VARIANTS
from .tta import curve_text, reached


def short(why):
    """A table cell for a column that did not run: 'not available' or 'not run'."""
    return "not available" if why.startswith("not available") else "not run"


def write_results(a, node, t_info, t_why, cells, tta, allreduce_out, allreduce_note, pngs, wall):
    sim = node["simulated"]
    S = ", SIMULATED" if sim else ""
    na = t_why and short(t_why)
    per_cell = f"{a.steps} steps" if a.steps else f"{a.epochs} epoch(s) of " + \
        (f"the first {a.limit}" if a.limit else "the 60,000") + " training images"
    L = [f"# Benchmarks: mnist-train's CUDA backend against PyTorch on CUDA, "
         f"{'the CUDA simulator (not a GPU)' if sim else ', '.join(node['gpus']) or 'GPU'}, {datetime.date.today().isoformat()}\n"]
    if sim:
        L.append(f"**{SIMULATED_NOTE}**\n")
    L.append("Written by `bench/train --backend cuda` (the exact commands are at the end). Every ratio compares "
             "runs made side by side in this one invocation, interleaved cell by cell; figures are medians over "
             f"{a.reps} repetition(s) of {per_cell} per cell.\n")
    if getattr(a, "stopped", None):
        L.append(f"**Cut short: {a.stopped}.** The cells after that point have fewer repetitions (column `reps`); "
                 "what did not start is marked `not run`; time-to-accuracy rows that did not start are left out.\n")

    L.append("## GPUs and versions\n")
    if sim:
        L.append("- device (mnist-train's start-up line): " +
                 "; ".join(sorted({d for c in cells.values() for d in c["devices"]})))
    for k, v in node["versions"].items():
        L.append(f"- {k}: {v}")
    if t_info and "version" in t_info:
        L.append(f"- PyTorch: {t_info['version']} ({a.python}), built for CUDA {t_info['cuda_build']}" +
                 (f", {t_info['devices']} device(s), {t_info['name']}, NCCL {t_info['nccl']}" if t_info["available"] else ""))
    if t_why:
        L.append(f"- PyTorch on CUDA: {t_why}")
    L.append(f"- CPU: {cpu_model()}, {a.cores} logical cores")
    for k, v in versions(a.python).items():
        if k not in ("PyTorch", "Python"):
            L.append(f"- {k}: {v}")
    L.append(f"- whole invocation: {wall:.0f} s\n")

    def us(r, k):
        return None if not r or r.get(k) is None else r[k] * 1e3

    def missing(c, key):
        why = c["not_run"].get(key)
        return short(why) if why else "failed"

    def steps_cell(c, key):
        r = c.get(key)
        if not r:
            return missing(c, key)
        return f"{us(r, 'step_median_ms'):.1f} / {us(r, 'step_p95_ms'):.1f}"

    L.append("## Step time (median / p95, microseconds)\n")
    L.append("Rank 0's steps, each timed with the device synchronised at its end. mnist-train: the step replayed "
             "from its captured CUDA graph, up to 8 steps a launch between its loss lines (graph: `--graph-steps` "
             "8, the device synchronised at each launch's end and each of its steps timed as the launch's wall "
             "time over its steps), one step a launch (`--graph-steps 1`, synchronised each step as PyTorch's "
             "columns are), as the graph column with plain launches (`--no-pdl`: each kernel starts only once the "
             "one before it has ended), as the graph column on one stream (`--no-side-stream`: the weight "
             "gradients in line with the input gradients, not beside them), or launched op by op (`--no-graph`). PyTorch "
             "(bench/reference/step_ref.py, one process per rank serving every cell): eager; the whole step captured "
             "with torch.cuda.CUDAGraph (CUDA graph); the model compiled by inductor (torch.compile) and the whole "
             "step captured around it with torch.cuda.graph (inductor + CUDA graph, 1 rank only). `PyTorch best / "
             "mnist-train` = PyTorch's fastest median (where the inductor + CUDA graph step was measured) / "
             "mnist-train's (graph). `kernels per step (graph nodes)` = the nodes of mnist-train's captured step "
             "(`graph_nodes=` of its summary; `-` where it does not print it)." +
             (f" PyTorch columns: {t_why}." if t_why else "") + "\n")
    L.append(f"| model | batch/rank | ranks | mnist-train graph{S} | mnist-train graph, 1 step a launch{S} | "
             f"mnist-train graph, --no-pdl{S} | mnist-train graph, --no-side-stream{S} | "
             f"mnist-train --no-graph{S} | PyTorch eager | "
             f"PyTorch CUDA graph | PyTorch inductor + CUDA graph | PyTorch best / mnist-train | "
             f"kernels per step (graph nodes){S} |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, b, r), c in cells.items():
        best = torch_best(c)
        ratio = na or (f"{best[0] / c['ours']['step_median_ms']:.2f} ({best[1]})" if best and c["ours"] else "-")
        nodes = c["ours"].get("graph_nodes") if c["ours"] else None
        L.append(f"| {model} | {b} | {r} | " + " | ".join(steps_cell(c, key) for key, _, _ in CUDA_VARIANTS) +
                 f" | {ratio} | {'-' if nodes is None else f'{nodes:.0f}'} |")
    L.append("")

    def ips_cells(c, key):
        r = c.get(key)
        if not r:
            return [missing(c, key)] * 2
        return [f"{r['ips']:.0f}", f"{r['steady_ips']:.0f}" if r.get("steady_ips") else "-"]

    L.append("## Images/s: the whole run and the steady state\n")
    L.append("Whole run: images / the run's training time, its first steps' set-up included (cuBLAS's start, "
             "the graph's capture, 100-150 ms on an H100; PyTorch's warm-up, capture and compilation). Steady "
             "state: ranks x batch / the mean step after the set-up (mnist-train: all steps but the first, from "
             "--metrics' step_times event, (steps x mean - max) / (steps - 1); PyTorch: the steps after its "
             "warm-up and capture). A PyTorch process serves many cells, so only its first cell pays cuBLAS's "
             "start. `scaling` = steady images/s at N ranks / at 1 rank, mnist-train (graph).\n")
    L.append(f"| model | batch/rank | ranks | reps | mnist-train graph{S} | steady{S} | 1 step a launch{S} | "
             f"steady{S} | --no-pdl{S} | steady{S} | --no-side-stream{S} | steady{S} | --no-graph{S} | steady{S} | "
             "PyTorch eager | steady | PyTorch CUDA graph | steady | PyTorch inductor + CUDA graph | steady | scaling |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, b, r), c in cells.items():
        base = cells.get((model, b, a.ranks[0]))
        sc = c["ours"] and base and base["ours"] and c["ours"].get("steady_ips") and base["ours"].get("steady_ips") and \
            c["ours"]["steady_ips"] / base["ours"]["steady_ips"]
        reps = max((c[k]["reps"] for k, _, _ in CUDA_VARIANTS if c.get(k)), default=0)
        L.append(f"| {model} | {b} | {r} | {reps} | " +
                 " | ".join(x for key, _, _ in CUDA_VARIANTS for x in ips_cells(c, key)) +
                 f" | {f'{sc:.2f}' if sc else '-'} |")
    L.append("")
    walls = []
    for key, label, _ in CUDA_VARIANTS:
        w = median([c[key].get("wall_s") for c in cells.values() if c.get(key)])
        if w is not None:
            walls.append(f"{label} {w:.1f} s")
    if walls:
        L.append("Wall time of one cell's run (median over the cells; a PyTorch cell is one request to its server, "
                 "whose start-up its first request pays): " + ", ".join(walls) + ".\n")
    if FAILURES:
        L.append("Runs that failed (the cell shows `failed`):\n")
        L.append("```")
        L += FAILURES
        L.append("```\n")

    L.append("## Goals (issues 21 and 25; issue 15's allreduce)\n")
    L.append("| goal | measured | verdict |")
    L.append("|---|---|---|")
    for goal, measured, verdict in judge(a, node, t_why, cells, tta, step_ops(allreduce_out)):
        L.append(f"| {goal} | {measured} | {verdict} |")
    L.append("")

    if tta:
        L.append("## Time to test accuracy (1 GPU)\n")
        L.append("Training seconds until the test accuracy reaches the target, scoring off the clock on both sides, "
                 "same settings: mnist-train (graph) trains the row's epochs with --eval-every 1 (the training time "
                 "at each epoch's end from --metrics' eval events); PyTorch (train_ref.py --device cuda, eager) "
                 "scores after each epoch and stops at the target.\n")
        L.append(f"| row | target | batch | settings | mnist-train s (epochs){S} | PyTorch s (epochs) |")
        L.append("|---|---|---|---|---|---|")
        for row in tta:
            theirs = na or reached(row["torch_seconds"], row["torch_epochs"], row["torch_curve"])
            L.append(f"| {row['name']} | {row['target']} | {row['batch']} | `{row['settings']}` | "
                     f"{reached(row['ours_seconds'], row['ours_epochs'], row['ours_curve'])} | {theirs} |")
        L.append("")
        for row in tta:
            L.append(f"- {row['name']}: mnist-train (epochs, train s, accuracy): {curve_text(row['ours_curve'])}; "
                     f"PyTorch: {na or curve_text(row['torch_curve'])}")
        L.append("")

    L.append("## NCCL allreduce (bench/allreduce --path cuda)\n")
    L.append("nccl-tests' definitions: time = the slowest rank's mean per call; algbw = bytes / time; busbw = "
             "algbw x 2(n-1)/n (the bandwidth each link carries in a ring, comparable across rank counts; 0 at 1 "
             "rank); `#wrong` = elements that differ from the exact sum of the inputs (small integers).\n")
    if allreduce_note:
        L.append(f"{allreduce_note}\n")
    if allreduce_out:
        L.append("```")
        L.append(allreduce_out.rstrip())
        L.append("```\n")

    if pngs:
        L.append("## Charts\n")
        for p in pngs:
            L.append(f"![{os.path.basename(p)}]({os.path.relpath(p, a.out_dir)})")
        L.append("")
    L.append("## Commands\n")
    L.append("Environment for every run: " + (", ".join(f"`{e}`" for e in node["env"]) or "as inherited") +
             " (mpirun passes LD_LIBRARY_PATH on to the ranks).\n")
    L.append("```")
    L.append("bench/train " + " ".join(shlex.quote(x) for x in sys.argv[1:]))
    L.append("```\n")
    L.append("<details><summary>every command run</summary>\n\n```")
    L += COMMANDS
    L.append("```\n</details>\n")
    raw = {"simulated": sim, "node": node, "torch": t_info, "torch_why": t_why, "failures": FAILURES,
           "steps": a.steps, "stopped": getattr(a, "stopped", None),
           "cells": {f"{m}-b{b}-r{r}": c for (m, b, r), c in cells.items()}, "tta": tta}
    write_report(a, L, raw)
