"""The host matrix's results file: bench/results/<date>-<host>[-<tag>].md, its charts in the
folder beside it, and its raw data (raw.json, the metrics files) in <date>-<host>[-<tag>].tar.xz
(common.write_report)."""
import datetime
import os
import re
import shlex
import sys

from .common import COMMANDS, fmt, write_report
from .machine import cpu_model, versions
from .tta import curve_text, reached


def model_flops_per_image(model, hidden):
    """Training FLOPs (GEMMs only) of one image: each layer's forward multiply-adds, the same
    again for its weight gradient, and again for its input gradient past the first layer."""
    if model == "lenet":
        # conv1 28x28 outputs of 6 channels x 25 taps; conv2 10x10 x 16 x 150; fc 400-120-84-10
        macs = [28 * 28 * 6 * 25, 10 * 10 * 16 * 150, 400 * 120, 120 * 84, 84 * 10]
    else:
        dims = [784] + (hidden if model == "mlp" else []) + [10]
        macs = [dims[i] * dims[i + 1] for i in range(len(dims) - 1)]
    return sum(2 * mac * (3 if i > 0 else 2) for i, mac in enumerate(macs))


def write_results(a, env, coretype, blas_note, rate, per_core, flops, cells, tta, allreduce_out, pngs, wall):
    rel = lambda p: os.path.relpath(p, a.out_dir)
    L = []
    L.append(f"# Benchmarks: mnist-train against PyTorch on {a.host}, {datetime.date.today().isoformat()}\n")
    L.append("Written by `bench/train` (the exact commands are at the end). Every ratio compares runs made "
             "side by side in this one invocation, cell by cell and interleaved; figures are medians over "
             f"{a.reps} repetition(s) of {a.epochs} epoch(s) of "
             f"{'the first ' + str(a.limit) if a.limit else 'the 60,000'} training images per cell.\n")
    L.append("## Machine and versions\n")
    L.append(f"- CPU: {cpu_model()}, {a.cores} logical cores")
    L.append("- OpenBLAS SGEMM (2048^3, best of 3): " +
             ", ".join(f"{t} thread{'s' if t > 1 else ''} {rate[t]:.1f} GFLOP/s" for t in sorted(rate)))
    L.append(f"- BLAS kernels: {blas_note}")
    for k, v in versions(a.python).items():
        L.append(f"- {k}: {v}")
    try:
        load = os.getloadavg()
        L.append(f"- load average when the report was written: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
                 "(other work on the machine inflates the noise; compare within a row)")
    except OSError:
        pass
    L.append(f"- whole invocation: {wall:.0f} s\n")

    L.append("## Throughput matrix (host backend vs PyTorch CPU)\n")
    L.append("mnist-train ranks run with max(1, cores/ranks) OpenBLAS threads each; PyTorch processes with 1 "
             "thread each (single process, or DDP over gloo). `ratio` = mnist-train images/s / PyTorch images/s. "
             "Scaling = images/s at N ranks / images/s at 1 rank (same model and batch per rank); "
             "efficiency = scaling / N. SGEMM% = the step's FLOPs per second / the 1-thread SGEMM rate "
             f"({per_core:.1f} GFLOP/s) x cores in use (min(ranks x threads, {a.cores})). Step times are rank 0's, "
             "per step.\n")
    L.append("| model | batch/rank | ranks | thr/rank | mnist-train img/s | PyTorch img/s | ratio | ours step med/p95 (ms) | torch step med/p95 (ms) | scaling (eff.) | torch scaling | SGEMM% |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, b, r), c in cells.items():
        o, t = c["ours"], c["torch"]
        base = cells.get((model, b, a.ranks[0]))
        sc = o["ips"] / base["ours"]["ips"] if base else None
        tsc = t["ips"] / base["torch"]["ips"] if base and t and base["torch"] else None
        used = min(r * c["threads"], a.cores)
        frac = o["ips"] * flops[model] / (per_core * 1e9 * used) * 100
        L.append(f"| {model} | {b} | {r} | {c['threads']} | {fmt(o['ips'])} | {fmt(t and t['ips'])} | "
                 f"{fmt(t and o['ips'] / t['ips'], '.2f')} | {fmt(o['step_median_ms'], '.3f')} / {fmt(o['step_p95_ms'], '.3f')} | "
                 f"{fmt(t and t['step_median_ms'], '.3f')} / {fmt(t and t['step_p95_ms'], '.3f')} | "
                 f"{fmt(sc, '.2f')} ({fmt(sc and sc / r * 100, '.0f')}%) | {fmt(tsc, '.2f')} | {frac:.1f}% |")
        if c["ours_1t"]:
            o1 = c["ours_1t"]
            frac1 = o1["ips"] * flops[model] / (per_core * 1e9) * 100
            L.append(f"| {model} | {b} | 1 | 1 | {fmt(o1['ips'])} | {fmt(t and t['ips'])} | "
                     f"{fmt(t and o1['ips'] / t['ips'], '.2f')} | {fmt(o1['step_median_ms'], '.3f')} / {fmt(o1['step_p95_ms'], '.3f')} | "
                     f"{fmt(t and t['step_median_ms'], '.3f')} / {fmt(t and t['step_p95_ms'], '.3f')} | (1 thread) | | {frac1:.1f}% |")
    L.append("")
    L.append("Every repetition's images/s (mnist-train; PyTorch):\n")
    L.append("```")
    for (model, b, r), c in cells.items():
        L.append(f"{model:6s} b{b:<4d} r{r}: " + " ".join(f"{x:.0f}" for x in c["ours"]["ips_all"]) +
                 ("; " + " ".join(f"{x:.0f}" for x in c["torch"]["ips_all"]) if c["torch"] else ""))
    L.append("```\n")

    # targets
    L.append("## Targets (issues 5 and 11)\n")
    L.append("| target | measured | met |")
    L.append("|---|---|---|")

    def cell(m, b, r):
        return cells.get((m, b, r))

    def target(name, value, goal, unit="x"):
        if value is None:
            L.append(f"| {name} | not measured | - |")
        else:
            ok = value >= goal
            L.append(f"| {name} | {value:.2f}{unit} (goal {goal}{unit}) | {'yes' if ok else f'no, {value / goal * 100:.0f}% of the goal'} |")

    s1, s2, m1, m128_1, m128_2 = cell("seed", 32, 1), cell("seed", 32, 2), cell("mlp", 32, 1), cell("mlp", 128, 1), cell("mlp", 128, 2)
    target("seed b32, 1 rank vs PyTorch 1 process 1 thread",
           s1 and s1["torch"] and s1["ours"]["ips"] / s1["torch"]["ips"], 10)
    target("seed b32, 2 ranks vs PyTorch DDP (gloo) 2 processes",
           s2 and s2["torch"] and s2["ours"]["ips"] / s2["torch"]["ips"], 40)
    target("seed b32, 2 ranks vs our 1 rank", s1 and s2 and s2["ours"]["ips"] / s1["ours"]["ips"], 1.2)
    target("mlp b32, 1 rank vs PyTorch 1 thread", m1 and m1["torch"] and m1["ours"]["ips"] / m1["torch"]["ips"], 1.5)
    target("mlp b128, 2 ranks vs our 1 rank", m128_1 and m128_2 and m128_2["ours"]["ips"] / m128_1["ours"]["ips"], 1.7)
    if m128_1 and m128_1["ours_1t"] and m128_2:
        L.append(f"| (same, against our 1 rank with 1 thread) | {m128_2['ours']['ips'] / m128_1['ours_1t']['ips']:.2f}x | (for reference) |")
    for row in tta:
        if row["model"] == "mlp" and row.get("torch_seconds") and row["ours_seconds"]:
            target("time to 0.98 (mlp): PyTorch time / ours", row["torch_seconds"] / row["ours_seconds"], 2)
    lb = a.model_batches.get("lenet", [64])[0]
    l1, l2 = cell("lenet", lb, 1), cell("lenet", lb, 2)
    if l1 and l1["ours_1t"]:
        o1 = l1["ours_1t"]
        target(f"lenet b{lb}, 1 rank 1 thread vs PyTorch 1 thread",
               l1["torch"] and o1["ips"] / l1["torch"]["ips"], 2)
        gemm_bound = per_core * 1e9 / flops["lenet"]
        L.append(f"| lenet b{lb}, 1 rank 1 thread: fraction of the GEMM-bound rate ({flops['lenet'] / 1e6:.2f} MFLOP "
                 f"per image at {per_core:.1f} GFLOP/s = {gemm_bound:.0f} images/s) | "
                 f"{o1['ips'] / gemm_bound * 100:.0f}% ({o1['ips']:.0f} images/s) | (reported) |")
        if l2 and l2["threads"] == 1:
            target(f"lenet b{lb}, 2 ranks of 1 thread vs our 1 rank of 1 thread", l2["ours"]["ips"] / o1["ips"], 1.7)
            L.append(f"| (same, against our 1 rank with {l1['threads']} threads) | "
                     f"{l2['ours']['ips'] / l1['ours']['ips']:.2f}x | (for reference) |")
    if l2 and l2["torch"]:
        L.append(f"| lenet b{lb}, 2 ranks vs PyTorch DDP (gloo) 2 processes | "
                 f"{l2['ours']['ips'] / l2['torch']['ips']:.2f}x | (reported) |")
    for row in tta:
        if row["model"] == "lenet" and row.get("torch_seconds") and row["ours_seconds"]:
            target(f"time to 0.99 ({row['name']}): PyTorch time / ours", row["torch_seconds"] / row["ours_seconds"], 2)
    for line in allreduce_out.splitlines():
        m = re.match(r"\s+(seed/linear|mlp 512,256)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if m:
            ratio = float(m.group(5))
            L.append(f"| per-step allreduce vs bare MPI_Allreduce, {m.group(1)} ({m.group(2)} floats, 2 ranks) | "
                     f"{ratio:.3f}x ({m.group(4)} vs {m.group(3)} us; goal <= 1.2x) | {'yes' if ratio <= 1.2 else 'no'} |")
    L.append("")

    if tta:
        L.append("## Time to test accuracy\n")
        L.append("Training seconds until the test accuracy reaches the target (scoring off the clock on both "
                 "sides, same settings). mnist-train trains the row's epochs once with --eval-every 1 (all ranks "
                 "score the test set after every epoch; --metrics' eval event has the training time so far); "
                 "PyTorch scores after each epoch and stops at the target. A cosine schedule spans the row's "
                 "epochs on both sides.\n")
        L.append("| model | target | ranks x batch | settings | mnist-train s (epochs) | PyTorch s (epochs) | PyTorch / ours |")
        L.append("|---|---|---|---|---|---|---|")
        for row in tta:
            ratio = row["torch_seconds"] / row["ours_seconds"] if row.get("torch_seconds") and row["ours_seconds"] else None
            torch_cell = reached(row["torch_seconds"], row["torch_epochs"], row["torch_curve"]) if not a.no_torch else "not run"
            L.append(f"| {row['name']} | {row['target']} | {row['ranks']} x {row['batch']} | `{row['settings']}` | "
                     f"{reached(row['ours_seconds'], row['ours_epochs'], row['ours_curve'])} | {torch_cell} | "
                     f"{fmt(ratio, '.2f')} |")
        L.append("")
        for row in tta:
            L.append(f"- {row['name']}: mnist-train (epochs, train s, accuracy): {curve_text(row['ours_curve'])}; "
                     f"PyTorch: {curve_text(row['torch_curve'])}")
        L.append("")

    if allreduce_out:
        L.append("## Allreduce (bench/allreduce, 2 ranks)\n")
        L.append("```")
        L.append(allreduce_out.rstrip())
        L.append("```\n")

    if pngs:
        L.append("## Charts\n")
        for p in pngs:
            L.append(f"![{os.path.basename(p)}]({rel(p)})")
        L.append("")
    L.append("## Commands\n")
    L.append("Environment for every run: " + (f"`OPENBLAS_CORETYPE={coretype}`" if coretype else "as inherited") +
             "; PyTorch processes also `OMP_NUM_THREADS`/`OPENBLAS_NUM_THREADS` = their thread count, "
             "`GLOO_SOCKET_IFNAME=lo`.\n")
    L.append("```")
    L.append("bench/train " + " ".join(shlex.quote(x) for x in sys.argv[1:]))
    L.append("```\n")
    L.append("<details><summary>every command run</summary>\n\n```")
    L += COMMANDS
    L.append("```\n</details>\n")
    raw = {"cells": {f"{m}-b{b}-r{r}": {k: v for k, v in c.items()} for (m, b, r), c in cells.items()},
           "tta": tta, "sgemm_gflops": rate, "openblas_coretype": coretype}
    write_report(a, L, raw)

