#!/usr/bin/env python3
"""summary.py - RESULTS_DIR/SUMMARY.txt of scripts/gpu-node/run.sh, one screen.

    python3 scripts/gpu-node/summary.py RESULTS_DIR

run.sh calls it after every step, so the file holds what was done so far even when a
later step, or the loan, is cut. It reads what the steps left in RESULTS_DIR:
  steps.tsv            STEP, LIMIT, STATUS, SECONDS per step run (the last row of a step counts)
  gpu.txt, commit.txt  the GPUs (or why there is none), the tree's commit
  quick/parts.tsv      each part of quick: PART, STATUS, SECONDS, DETAIL
  quick/bench-results/*.md   bench/train's results file: its Goals and Step time tables
  quick/profile/*.jsonl      mnist-train --profile's metrics: {"event": "op_times", ...} and,
                       where the backend writes it, {"event": "gpu_plan", "ops": [...]}
  all-summary.txt, sanitize-summary.txt   ctest_summary.py's reports
and prints: each step's limit, status and time; quick's parts; each goal of the GPU matrix
met or missed with its figure; each cell's median step in every column of ours; the slowest
ops of each profiled step; the GEMM plan chosen
(in full in quick/plans.txt, each candidate's first run beside) and the spread of the
first runs over the candidates' times; every way weighed, by family, with the cells it won
or that it won none (quick/ways.txt in full); the first lines of the all and sanitize reports. A skipped
part or step is written SKIPPED with its reason, never passed. Exit 0, or 2 on bad usage.
"""
import glob
import json
import os
import re
import sys

WIDTH = 118
ORDER = ["env", "build", "quick", "all", "sanitize", "gpu", "train", "bench", "torch",
         "matrix-fc", "matrix-lenet"]
RUNS = [(m, b) for m in ("seed", "mlp", "lenet") for b in (32, 256)]


def clip(s, width=WIDTH):
    s = re.sub(r"\s*\n\s*|\t", " ", str(s)).rstrip()
    return s if len(s) <= width else s[:width - 3] + "..."


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def tsv_last(path, width):
    """The last row of each key (first column), in the order keys first appeared."""
    rows = {}
    for line in read(path).splitlines():
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0]:
            rows.pop(cols[0], None)
            rows[cols[0]] = (cols + [""] * width)[:width]
    return rows


def step_status(rc):
    return {"0": "passed", "77": "SKIPPED", "124": "CUT", "137": "CUT"}.get(rc, f"FAILED ({rc})")


def steps_part(out, lines):
    steps = tsv_last(os.path.join(out, "steps.tsv"), 4)
    names = sorted(steps, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    total = sum(int(steps[n][3] or 0) for n in names)
    lines.append(f"steps (limit, status, time; {total} s in all):")
    for n in names:
        _, limit, rc, secs = steps[n]
        why = ""
        if rc == "77":
            g = read(os.path.join(out, "gpu.txt")).strip()
            why = "  " + ("no GPU (above)" if g.startswith("no GPU") else f"see {n}.log")
        elif rc in ("124", "137"):
            why = f"  stopped at its limit, or a part at its own; {n}.log has what it finished"
        elif rc != "0":  # the last thing the step said
            said = [ln for ln in read(os.path.join(out, f"{n}.log")).splitlines() if ln.strip()]
            why = "  " + (said[-1].strip() if said else f"see {n}.log")
        lines.append(clip(f"  {n:<12} {limit:>4} s  {step_status(rc):<17} {secs:>4} s{why}"))
    return steps


def quick_parts(out, lines):
    parts = tsv_last(os.path.join(out, "quick", "parts.tsv"), 4)
    if not parts:
        return
    lines.append("quick:")
    for name, (_, status, secs, detail) in parts.items():
        if status == "running":  # its end was never written: the step's limit ended it
            status, detail = "cut", f"ended by the step's limit ({detail})"
        if detail == read(os.path.join(out, "gpu.txt")).strip():
            detail = "no GPU (above)"
        word = {"passed": "passed", "skipped": "SKIPPED", "failed": "FAILED", "cut": "CUT",
                "n/a": "n/a"}.get(status, status)
        lines.append(clip(f"  {name:<10} {word:<8} {secs:>4} s  {detail}"))
        if name == "gpu-suite":
            suite_lines(out, lines)


def suite_lines(out, lines):
    """The GPU suite's failures and its skips, one line per reason."""
    reasons = {}
    for ln in read(os.path.join(out, "quick", "gpu-suite-summary.txt")).splitlines():
        if ln.startswith("SKIPPED "):
            why = re.sub(r"^gpu_\w+: ", "", ln.split(": ", 1)[-1])
            reasons[why] = reasons.get(why, 0) + 1
        elif ln.startswith(("FAILED ", "NOT STARTED ")):
            lines.append(clip("      " + ln))
    for why, n in reasons.items():
        lines.append(clip(f"      {n} skipped: {why}"))


def goals(out, lines):
    mds = sorted(glob.glob(os.path.join(out, "quick", "bench-results", "*.md")), key=os.path.getmtime)
    if not mds:
        return
    text = read(mds[-1])
    m = re.search(r"^## Goals[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    lines.append(f"GPU matrix goals ({os.path.relpath(mds[-1], out)}):")
    if not m:
        lines.append("  (no Goals table in the results file)")
        return
    for row in m.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("goal", "") or set(cells[0]) <= set("-: "):
            continue
        goal, measured, verdict = cells[0], cells[1].split(";")[0], cells[-1]
        why = verdict.split(" (", 1)
        verdict = "MET" if why[0] == "met" else why[0]
        if len(why) > 1 and measured in ("", "-"):
            measured = "(" + why[1]
        line = f"  {verdict:<12} {goal}: {measured}"
        if len(line) > WIDTH:  # the figure on a line of its own
            lines.append(clip(f"  {verdict:<12} {goal}"))
            line = f"  {'':<12}   {measured}"
        lines.append(clip(line))


def step_medians(out, lines):
    """The matrix's median step per cell, each column of ours side by side (the graph, one step a
    launch, --no-pdl, --no-side-stream, --no-graph) and PyTorch's best over ours: a change's column against the
    graph column at a glance."""
    mds = sorted(glob.glob(os.path.join(out, "quick", "bench-results", "*.md")), key=os.path.getmtime)
    if not mds:
        return
    m = re.search(r"^## Step time[^\n]*\n(.*?)(?=^## |\Z)", read(mds[-1]), re.S | re.M)
    if not m:
        return
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in m.group(1).splitlines()
            if ln.startswith("|")]
    if not rows or rows[0][:3] != ["model", "batch/rank", "ranks"]:
        return
    head = rows[0]
    keep = [i for i, h in enumerate(head) if h.startswith("mnist-train") or h.startswith("PyTorch best")]
    def short(h):
        h = re.sub(r", SIMULATED$", "", h)
        if h.startswith("PyTorch best"):
            return "best/ours"
        h = re.sub(r"^mnist-train (graph, )?", "", h)
        return {"graph": "graph", "1 step a launch": "1 step"}.get(h, h.lstrip("-"))
    names = {i: short(head[i]) for i in keep}
    lines.append("Median step, us (the matrix's columns of ours; PyTorch's best / ours):")
    for r in rows[1:]:
        if len(r) != len(head) or set(r[0]) <= set("-: "):
            continue
        cells = [f"{names[i]} {r[i].split(' / ')[0].split(' (')[0]}" for i in keep]
        lines.append(clip(f"  {r[0]} b{r[1]} r{r[2]}: " + " | ".join(cells)))


def records(path, event):
    recs = []
    for line in read(path).splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and r.get("event") == event:
            recs.append(r)
    return recs


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def op_list(rec):
    ops = rec.get("ops")
    if not isinstance(ops, list):
        ops = next((v for v in rec.values() if isinstance(v, list) and v and isinstance(v[0], dict)), [])
    return [o for o in ops if isinstance(o, dict)]


def op_time(o):
    for k in ("us", "microseconds", "time_us", "median_us", "mean_us"):
        if num(o.get(k)) is not None:
            return float(o[k])
    for k, v in o.items():
        if k.endswith("_us") and num(v) is not None:
            return float(v)
    return None


def op_name(o, shape=True):
    name = " ".join(str(o[k]) for k in ("layer", "phase", "op", "name") if o.get(k) not in (None, ""))
    if not shape:
        return name or "?"
    shape = o.get("shape")
    if isinstance(shape, list):
        shape = "x".join(str(s) for s in shape)
    return f"{name} [{shape}]" if shape not in (None, "") else (name or "?")


def profile_files(out):
    d = os.path.join(out, "quick", "profile")
    return [(f"{m} b{b}", os.path.join(d, f"{m}-b{b}.jsonl")) for m, b in RUNS
            if os.path.exists(os.path.join(d, f"{m}-b{b}.jsonl"))]


def slowest_ops(out, lines):
    runs = profile_files(out)
    shown = []
    for label, path in runs:
        recs = records(path, "op_times")
        if not recs:
            continue
        rec = recs[-1]
        ops = [(op_time(o), op_name(o, shape=False)) for o in op_list(rec)]  # shapes: the run's log
        ops = [(t, n) for t, n in ops if t is not None]
        total = next((float(v) for k, v in rec.items() if "step" in k and k.endswith("us") and num(v)), None)
        total = total or sum(t for t, _ in ops) or None
        top = sorted(ops, reverse=True)[:3]
        desc = "; ".join(f"{n} {t:.1f} us" + (f" {100 * t / total:.0f}%" if total else "") for t, n in top)
        shown.append(clip(f"  {label:<10} step {total:.1f} us: {desc}" if total else f"  {label:<10} {desc}"))
    if shown:
        lines.append("slowest ops (mnist-train --profile: one step op by op after the timed steps; shapes in "
                     "quick/profile/*.log):")
        lines.extend(shown)


def plans(out, lines):
    found = []
    for label, path in profile_files(out):
        recs = records(path, "gpu_plan")
        if recs:
            found.append((label, recs[-1]))
    if not found:  # bench/train's runs may have written one too
        for path in sorted(glob.glob(os.path.join(out, "quick", "bench-results", "**", "*.jsonl"), recursive=True)):
            recs = records(path, "gpu_plan")
            if recs:
                found.append((os.path.basename(path)[:-6], recs[-1]))
    if not found:
        return
    full, short, gaps = [], [], []
    for label, rec in found:
        full.append(f"== {label}")
        picks = []
        for o in op_list(rec):
            cands = [c for c in o.get("candidates", []) if isinstance(c, dict)]
            chosen = o.get("chosen")
            if isinstance(chosen, int) and not isinstance(chosen, bool) and 0 <= chosen < len(cands):
                chosen = cands[chosen].get("name")
            elif isinstance(chosen, dict):
                chosen = chosen.get("name")
            us = next((c.get("us") for c in cands if c.get("name") == chosen), None)
            cand = ", ".join(f"{c.get('name')} {c.get('us')} us"
                             + (f" (first run {c.get('first_us')})" if num(c.get("first_us")) is not None else "")
                             for c in cands)
            gaps.extend(num(c.get("first_us")) - num(c.get("us")) for c in cands
                        if num(c.get("first_us")) is not None and num(c.get("us")) is not None)
            full.append(f"{op_name(o)}: chosen {chosen} of [{cand}]")
            picks.append(f"{o.get('op', '?')} {chosen}" + (f" {us} us" if num(us) is not None else ""))
        short.append(clip(f"  {label:<10} " + "; ".join(picks)))
    with open(os.path.join(out, "quick", "plans.txt"), "w") as f:
        f.write("\n".join(full) + "\n")
    lines.append("GEMM plan chosen (gpu_plan; every candidate in quick/plans.txt):")
    lines.extend(short)
    if gaps:
        # A first run is passed over only when over 4 times the best and 100 us more
        # (cuda/plan.cu): the host's submission in it must stay well under 100 us.
        gaps.sort()
        lines.append(clip(f"  first runs on the stream over their times (us, {len(gaps)} candidates): "
                          f"min {gaps[0]:.1f}, median {gaps[len(gaps) // 2]:.1f}, max {gaps[-1]:.1f} "
                          "(the plan allows 100 for the host's submission)"))


def way_family(name):
    """A way's family: its name without what only tells algorithms or chunk counts apart
    (lt.bgradb.a20.t15...+bg.gemv -> lt.bgradb+bg.gemv, ksplit.c49.micro -> ksplit.micro)."""
    name = str(name)
    if name.startswith("im2col+"):
        return "im2col+" + way_family(name[len("im2col+"):])
    if name.endswith("+col2im"):
        return way_family(name[:-len("+col2im")]) + "+col2im"
    m = re.search(r"\+(bg\.\w+|wgrad)$", name)
    tail = m.group(0) if m else ""
    base = name[:m.start()] if m else name
    if base.startswith("lt."):
        base = ".".join(base.split(".")[:2])
    base = re.sub(r"^ksplit\.c\d+", "ksplit", base)
    return base + tail


def ways(out, lines):
    """Every way weighed in the run's plans, by family: the cells it won, or that it won none
    (issue 43: a way the GPU measured and never chose is removed after the run)."""
    paths = [(label, path) for label, path in profile_files(out)]
    paths += [(os.path.basename(p)[:-len(".jsonl")], p) for p in
              sorted(glob.glob(os.path.join(out, "quick", "bench-results", "**", "*.jsonl"), recursive=True))]
    won, timed = {}, {}
    for label, path in paths:
        for rec in records(path, "gpu_plan"):
            for o in op_list(rec):
                for c in o.get("candidates", []):
                    if isinstance(c, dict) and num(c.get("us")) is not None:
                        f = way_family(c.get("name"))
                        timed[f] = timed.get(f, 0) + 1
                chosen = o.get("chosen")
                if isinstance(chosen, str) and o.get("source") in (None, "measured"):
                    won.setdefault(way_family(chosen), set()).add(label)
    if not timed and not won:
        return
    detail = [f"{f}: won in {len(won.get(f, ()))} cells ({', '.join(sorted(won.get(f, ()))) or 'none'}), "
              f"timed {timed.get(f, 0)} times" for f in sorted(set(timed) | set(won))]
    with open(os.path.join(out, "quick", "ways.txt"), "w") as f:
        f.write("\n".join(detail) + "\n")
    lines.append("ways by family (every gpu_plan record; the cells of each in quick/ways.txt):")
    lines.append(clip("  won: " + "; ".join(f"{f} {len(won[f])}" for f in sorted(won))))
    lost = sorted(f for f in timed if f not in won)
    lines.append(clip("  won nothing: " + ("; ".join(f"{f} (timed {timed[f]})" for f in lost) or "none")))


def reports(out, lines):
    for name in ("all", "sanitize"):
        text = read(os.path.join(out, f"{name}-summary.txt")).splitlines()
        if not text:
            continue
        lines.append(clip(f"{name}: " + text[0].lstrip("= ").replace("summary: ", "")))
        lines.extend(clip("  " + ln) for ln in text if ln.startswith("left to CI")
                     or ln.startswith("labels not run at all: ") and not ln.endswith(": none"))
        bad = [ln for ln in text if ln.startswith(("FAILED", "NOT STARTED"))]
        lines.extend(clip("  " + ln) for ln in bad[:4])
        if len(bad) > 4:
            lines.append(f"  ... {len(bad) - 4} more in {name}-summary.txt")


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: summary.py RESULTS_DIR", file=sys.stderr)
        return 2
    out = argv[1]
    gpu = read(os.path.join(out, "gpu.txt")).strip() or "GPU not probed yet"
    lines = [f"mnist-ddp on a GPU node: commit {read(os.path.join(out, 'commit.txt')).strip() or 'unknown'}, "
             f"{os.cpu_count()} cores", clip(gpu)]
    steps_part(out, lines)
    quick_parts(out, lines)
    goals(out, lines)
    step_medians(out, lines)
    slowest_ops(out, lines)
    plans(out, lines)
    ways(out, lines)
    reports(out, lines)
    lines.append(f"logs: {out}/STEP.log; quick's parts under quick/")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "SUMMARY.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
