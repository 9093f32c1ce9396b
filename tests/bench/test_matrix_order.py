#!/usr/bin/env python3
"""The GPU matrix's order of work (bench/harness/matrix.py, CudaMatrix), with a stand-in
runner that records each run and a clock that runs out after a given number of runs: no
GPU, no mnist-train, no PyTorch (what the runs measure is tested elsewhere; this is the
order and the bookkeeping of bench/train itself).

 1. No limit: every cell gets every column; every column the goals judge (ours with its
    graph, PyTorch's three) runs for every cell, then what bench/train runs between the
    passes (its time to accuracy and NCCL tables; a mark here), then the diagnostic columns.
 2. The limit reached inside the diagnostic columns: every cell still has every goal
    column's figure; the diagnostics that did not start say "not run: --time-limit
    reached"; the cut-short line names the diagnostic columns.
 3. A run that failed is a failure, not "not run", even when the limit is reached later.
 4. Two repetitions: the goal columns' second repetition before any diagnostic run.
 5. A node of 4 GPUs (ranks 1, 2, 4): every cell at 1 rank before any at 2 or 4, so a limit
    reached after the 1-rank cells' goal columns leaves every goal's figure (stated on one
    GPU) measured; the results keep the order model, batch, ranks.
 6. Each diagnostic run is given its cell's graph-column plan (--gpu-plan-from that run's
    metrics file), and measures its own where that run failed.
Exit status 0 when all hold, 1 with the first that does not."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from harness import matrix  # noqa: E402


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


class Clock:
    """Out of time once `runs` runs have started (None: never)."""

    def __init__(self, runs=None):
        self.limit_runs = runs
        self.started = 0

    def out_of_time(self):
        return self.limit_runs is not None and self.started >= self.limit_runs


class Runner:
    """Records (column, cell) per run; `failing` holds the (column, cell) runs that fail."""

    def __init__(self, clock, failing=()):
        self.clock, self.failing, self.log = clock, set(failing), []
        self.extra = {}  # (column, cell) -> mnist-train's extra flags

    def _result(self, key, cell):
        self.clock.started += 1
        self.log.append((key, cell))
        if (key, cell) in self.failing:
            sys.exit(f"stand-in failure of {key} {cell}")
        return {"ips": 1.0, "step_median_ms": 0.01, "step_p95_ms": 0.02, "acc": 0.9,
                "metrics": f"{key}-{cell[0]}-b{cell[1]}-r{cell[2]}.jsonl", "device": "stand-in GPU"}

    def ours(self, m, b, r, graph, extra, tag):
        key = {"": "ours" if graph else "ours_nograph", "-single": "ours_single", "-nopdl": "ours_nopdl",
               "-noside": "ours_noside"}[tag]
        if key == "ours_single" and "--graph-steps" not in extra:
            fail(f"{key}: flags {extra}")
        self.extra[(key, (m, b, r))] = list(extra)
        return self._result(key, (m, b, r))

    def torch_cell(self, m, b, r, variant):
        return self._result({v: k for k, v in matrix.TORCH_VARIANT.items()}[variant], (m, b, r))


def args(reps=1, ranks=(1,)):
    return types.SimpleNamespace(hidden="512,256", models=["seed", "mlp", "lenet"], ranks=list(ranks), reps=reps,
                                 model_batches={"seed": [32, 256], "mlp": [32, 256], "lenet": [32, 256]},
                                 stopped=None, time_limit=100)


def both_passes(a, R, clock):
    """bench/train's matrix, its time to accuracy (between the passes) a mark in the log."""
    return matrix.cuda_matrix(a, R, clock, None, {"compile": True, "version": "stand-in"},
                              between=lambda: R.log.append(("tta", None)))


def runs(R):
    return [(k, cell) for k, cell in R.log if k != "tta"]


every_key = [k for k, _, _ in matrix.CUDA_VARIANTS]
if sorted(matrix.GOAL_COLUMNS + matrix.DIAGNOSTIC_COLUMNS) != sorted(every_key):
    fail("the two passes do not cover every column exactly once")

# 1. no limit
clock = Clock()
R = Runner(clock)
a = args()
cells = both_passes(a, R, clock)
n_cells = len(cells)
if len(runs(R)) != n_cells * len(every_key):
    fail(f"1: {len(runs(R))} runs, expected {n_cells} cells x {len(every_key)} columns")
kinds = ["goal" if k in matrix.GOAL_COLUMNS else k if k == "tta" else "diagnostic" for k, _ in R.log]
if [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] != ["goal", "tta", "diagnostic"]:
    fail(f"1: not every goal column, then the time to accuracy, then every diagnostic one: {R.log}")
for cell, c in cells.items():
    missing = [k for k in every_key if not c[k]]
    if missing or c["not_run"]:
        fail(f"1: {cell}: no figure for {missing}, not run {c['not_run']}")
if a.stopped:
    fail(f"1: cut short without a limit: {a.stopped}")

# 2. the limit inside the diagnostics: the goals' figures all there
goal_runs = n_cells * len(matrix.GOAL_COLUMNS)
clock = Clock(goal_runs + 2)
R = Runner(clock)
a = args()
cells = both_passes(a, R, clock)
for cell, c in cells.items():
    if any(not c[k] for k in matrix.GOAL_COLUMNS):
        fail(f"2: {cell}: a goal column without its figure: {c['not_run']}")
lenet = cells[("lenet", 256, 1)]
for k in matrix.DIAGNOSTIC_COLUMNS:
    if lenet[k] or lenet["not_run"].get(k) != "not run: --time-limit reached":
        fail(f"2: lenet b256's {k}: {lenet[k]}, not_run {lenet['not_run']}")
if not a.stopped or "the diagnostic columns" not in a.stopped:
    fail(f"2: the cut-short line: {a.stopped}")

# 3. a failed run stays a failure
failed = ("ours_nopdl", ("seed", 32, 1))
clock = Clock(goal_runs + 5)
R = Runner(clock, failing=[failed])
a = args()
cells = both_passes(a, R, clock)
c = cells[failed[1]]
if c[failed[0]] is not None or failed[0] in c["not_run"]:
    fail(f"3: the failed run: {c[failed[0]]}, not_run {c['not_run']}")
if "not run: --time-limit reached" not in cells[("lenet", 32, 1)]["not_run"].values():
    fail(f"3: lenet b32's diagnostics were not cut: {cells[('lenet', 32, 1)]['not_run']}")

# 4. two repetitions: all the goals' runs first
clock = Clock()
R = Runner(clock)
a = args(reps=2)
cells = both_passes(a, R, clock)
if [k for k, _ in R.log[:2 * goal_runs]] != [k for k, _ in runs(R) if k in matrix.GOAL_COLUMNS]:
    fail("4: a diagnostic run before the goal columns' second repetition")
if any(cells[cell][k]["reps"] != 2 for cell in cells for k in every_key):
    fail("4: a column without its two repetitions")

# 5. ranks 1, 2, 4: the 1-rank cells first (PyTorch's inductor column runs at 1 rank only)
a = args(ranks=(1, 2, 4))
one_rank_goal_runs = n_cells * len(matrix.GOAL_COLUMNS)
clock = Clock(one_rank_goal_runs)
R = Runner(clock)
cells = both_passes(a, R, clock)
if list(cells) != [(m, b, r) for m in a.models for b in a.model_batches[m] for r in a.ranks]:
    fail(f"5: the results' order: {list(cells)}")
for (m, b, r), c in cells.items():
    if r == 1 and any(not c[k] for k in matrix.GOAL_COLUMNS):
        fail(f"5: {m} b{b} at 1 rank without a goal column's figure: {c['not_run']}")
    if r > 1 and (c["ours"] or c["not_run"].get("ours") != "not run: --time-limit reached"):
        fail(f"5: {m} b{b} r{r} ran before every 1-rank cell was done: {c['ours']}, {c['not_run']}")

# 6. the diagnostics on the plan their cell's graph column measured (--gpu-plan-from its
# metrics file); where that run failed, each measures its own
failed = ("ours", ("mlp", 32, 1))
clock = Clock()
R = Runner(clock, failing=[failed])
cells = both_passes(args(), R, clock)
for (key, cell), extra in R.extra.items():
    given = extra[extra.index("--gpu-plan-from") + 1] if "--gpu-plan-from" in extra else None
    want = None if key == "ours" or cell == failed[1] else f"ours-{cell[0]}-b{cell[1]}-r{cell[2]}.jsonl"
    if given != want:
        fail(f"6: {key} {cell} ran with --gpu-plan-from {given}, expected {want}")

print(f"PASS: {n_cells} cells: the goals' {len(matrix.GOAL_COLUMNS)} columns first, "
      f"the {len(matrix.DIAGNOSTIC_COLUMNS)} diagnostic ones after; a limit cuts diagnostics only; "
      "a failure stays a failure; 2 repetitions of the goal columns first; 1 rank before more; "
      "the diagnostics on the graph column's plan")
