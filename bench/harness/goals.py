"""Issues 21's and 25's goals for the GPU step (one GPU, medians, side by side), and issue 15's
goal for the step's allreduce: each judged met, missed or not measured (with why). Kernels per
step are shown as a diagnostic, never judged: time on the device is the figure (issue 25).
Nothing is judged from a simulated run."""
import re

# Median step time, one GPU, mnist-train with its graph: (model, batch, microseconds).
STEP_GOALS = (("seed", 32, 10), ("mlp", 32, 25), ("lenet", 32, 50), ("lenet", 256, 100))
# The first H100 run's medians (092b1c6, 2026-11-25; us): no cell may be slower (issue 25).
BASELINE = {("seed", 32): 31.4, ("seed", 256): 41.7, ("mlp", 32): 72.6, ("mlp", 256): 102.0,
            ("lenet", 32): 160.0, ("lenet", 256): 407.0}
BASELINE_COMMIT = "092b1c6"
TORCH_FACTOR = 2          # every cell at least 2x PyTorch's best configuration
TTA_GOAL_S = 0.3          # 99% LeNet-5 test accuracy in at most 0.3 s of training, one GPU
PLAN_GOAL_MS = 50         # the plan's measurement: at most 50 ms of a run's start-up (issue 25)
MODEL_NAME = {"seed": "seed", "mlp": "mlp 512,256", "lenet": "LeNet-5"}
GOALS_GPU = "H100"        # the GPU the goals' times are stated for (issues 21 and 25)

TORCH_KEYS = (("torch_compiled", "inductor + CUDA graph"), ("torch_graph", "CUDA graph"), ("torch", "eager"))


def torch_best(c):
    """(median ms, name) of PyTorch's fastest measured variant in cell c, or None. Only where
    the inductor + CUDA graph step was measured: the goal names that configuration."""
    if not c.get("torch_compiled"):
        return None
    return min((c[k]["step_median_ms"], name) for k, name in TORCH_KEYS if c.get(k))


def other_gpu(node):
    """The run's GPU where it is not the GPU the goals are stated for (GOALS_GPU), else None."""
    gpu = (node.get("gpus") or [""])[0]
    return None if not gpu or GOALS_GPU in gpu else re.sub(r" \(.*\)$", "", gpu)


def judge(a, node, t_why, cells, tta, allreduce_ops):
    """Rows of (goal, measured, verdict). A goal whose figure is a time on the GPU (every one
    but the ratio to PyTorch, measured side by side) is stated for one H100: on another GPU
    its verdict says so."""
    sim = "not measured (simulated run)" if node["simulated"] else None
    elsewhere = other_gpu(node)
    rows = []

    def row(goal, measured, ok, why_not=None, side_by_side=False):
        if sim:
            rows.append((goal, f"{measured} (SIMULATED)" if measured else "-", sim))
        elif why_not or ok is None:
            rows.append((goal, measured or "-", f"not measured ({why_not or 'no figure'})"))
        else:
            verdict = "met" if ok else "missed"
            if elsewhere and not side_by_side:
                verdict += f" (on an {elsewhere}; the goal is stated for one {GOALS_GPU})"
            rows.append((goal, measured, verdict))

    def ours(model, b, r=1):
        c = cells.get((model, b, r))
        return c and c.get("ours")

    base = sorted((c["ours"]["step_median_ms"] * 1e3 / BASELINE[(m, b)], f"{m} b{b}")
                  for (m, b, r), c in cells.items()
                  if r == 1 and (m, b) in BASELINE and c.get("ours") and c["ours"].get("step_median_ms"))
    goal = f"no cell slower than the {BASELINE_COMMIT} baseline (1 GPU, median step, graph)"
    if not base:
        row(goal, None, None, "no baseline cell in this run's matrix, or its runs failed")
    else:
        row(goal, f"worst {base[-1][0]:.2f}x the baseline ({base[-1][1]}); " +
            ", ".join(f"{name} {x:.2f}x" for x, name in base), base[-1][0] <= 1.0)

    for model, b, us in STEP_GOALS:
        o = ours(model, b)
        med = o and o["step_median_ms"]
        row(f"{MODEL_NAME[model]}, batch {b}, 1 GPU: median step <= {us} us (graph)",
            f"{med * 1e3:.1f} us" if med is not None else None, med is not None and med * 1e3 <= us,
            None if med is not None else "not in this run's matrix, or its run failed")

    judged, missing = [], []
    for (model, b, r), c in cells.items():
        best = torch_best(c)
        if c.get("ours") and best:
            judged.append((best[0] / c["ours"]["step_median_ms"], f"{model} b{b} r{r}", best[1]))
        else:
            missing.append(f"{model} b{b} r{r}")
    goal = f"every cell: mnist-train's median step at least {TORCH_FACTOR}x faster than PyTorch's best (inductor + CUDA graph)"
    if not judged:
        row(goal, None, None, f"PyTorch {t_why}" if t_why else "no cell with both figures")
    else:
        worst = min(judged)
        text = f"worst {worst[0]:.2f}x ({worst[1]}, against {worst[2]}); " + \
            ", ".join(f"{name} {x:.2f}x" for x, name, _ in judged)
        if missing:
            text += f"; without both figures: {', '.join(missing)}"
        row(goal, text, worst[0] >= TORCH_FACTOR, side_by_side=True)

    lenet = [t for t in tta if t["model"] == "lenet" and t["ranks"] == 1]
    goal = f"LeNet-5: 99% test accuracy in <= {TTA_GOAL_S} s of training, 1 GPU"
    if not lenet:
        row(goal, None, None, "no LeNet-5 time to accuracy in this run: --quick, --no-tta, --tta or no lenet")
    elif not any(t["ours_curve"] for t in lenet):
        row(goal, None, None, "mnist-train's runs failed")
    else:
        hit = sorted((t["ours_seconds"], t["name"], t["ours_epochs"]) for t in lenet if t["ours_seconds"] is not None)
        if hit:
            secs, name, epochs = hit[0]
            row(goal, f"{secs:.2f} s ({name}, {epochs} epochs)", secs <= TTA_GOAL_S)
        else:
            row(goal, "0.99 not reached (" + ", ".join(t["name"] for t in lenet) + ")", False)

    plans = sorted((c["ours"]["plan_ms"], f"{m} b{b} r{r}", c["ours"].get("plan_warm_ms"))
                   for (m, b, r), c in cells.items()
                   if c.get("ours") and c["ours"].get("plan_ms") is not None)
    goal = f"every run: the plan's measurement (gpu_plan's measure_ms, rank 0) <= {PLAN_GOAL_MS} ms of start-up"
    if not plans:
        row(goal, None, None, "no gpu_plan record with measure_ms in this run's metrics")
    else:
        # warm_ms: each op's first way's first run, apart (a run that does not measure pays it too).
        row(goal, f"worst {plans[-1][0]:.1f} ms ({plans[-1][1]}); " +
            ", ".join(f"{name} {ms:.1f}" + (f" (+{w:.1f} first runs)" if w is not None else "")
                      for ms, name, w in plans), plans[-1][0] <= PLAN_GOAL_MS)

    order = list(MODEL_NAME)
    nodes = sorted(set((m, r, c["ours"]["graph_nodes"]) for (m, b, r), c in cells.items()
                       if c.get("ours") and c["ours"].get("graph_nodes") is not None),
                   key=lambda x: (order.index(x[0]) if x[0] in order else len(order), x[1], x[2]))
    if nodes:
        rows.append(("kernels per step (graph nodes): a diagnostic, not a goal",
                     ", ".join(f"{MODEL_NAME[m]} {n:.0f} at {r} rank(s)" for m, r, n in nodes) +
                     (" (SIMULATED)" if sim else ""), "not judged"))

    worst = max((x for _, _, _, x in allreduce_ops), default=None)
    row(f"(issue 15) the step's allreduce within 10% of a bare ncclAllReduce of the same size "
        f"({a.allreduce_ranks} rank(s))", ", ".join(f"{m} {x:.3f}x ({t:.1f} vs {b:.1f} us)" for m, b, t, x in allreduce_ops) or None,
        worst is not None and worst <= 1.1, None if worst is not None else "bench/allreduce's table not run or not found",
        side_by_side=True)
    return rows


def step_ops(allreduce_out):
    """[(model, bare us, step op us, ratio)] of bench/allreduce's table of the CUDA backend's op."""
    ops, inside = [], False
    for line in allreduce_out.splitlines():
        if line.startswith("#"):
            inside = inside or "CUDA backend's gradient allreduce" in line
            continue
        m = re.match(r"\s+(\S+(?: [\d,]+)?)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s*$", line)
        if inside and m:
            ops.append((m.group(1), float(m.group(3)), float(m.group(4)), float(m.group(5))))
    return ops
