"""The throughput matrix: models x batch per rank x ranks, mnist-train and PyTorch run side by
side, interleaved, --reps times (medians reported)."""
from .common import attempt, log, med_result


def host_matrix(a, R):
    """Host backend, cell by cell: every repetition of a cell, mnist-train (each rank
    max(1, cores / ranks) OpenBLAS threads, and at 1 rank also 1 thread) then PyTorch (1 thread
    per process). {(model, batch, ranks): cell}."""
    cells = {}
    extra = {"mlp": ["--hidden", a.hidden]}
    for model in a.models:
        for b in a.model_batches[model]:
            for r in a.ranks:
                t = max(1, a.cores // r)
                ours, ours1, torch_ = [], [], []
                for rep in range(a.reps):
                    ours.append(R.ours(model, b, r, t, epochs=a.epochs, extra=extra.get(model, ())))
                    if r == 1 and t != 1:
                        ours1.append(R.ours(model, b, r, 1, epochs=a.epochs, extra=extra.get(model, ())))
                    if not a.no_torch:
                        torch_.append(R.torch(model, b, r, 1, epochs=a.epochs, extra=extra.get(model, ())))
                c = {"threads": t, "ours": med_result(ours), "ours_1t": med_result(ours1),
                     "torch": med_result(torch_)}
                cells[(model, b, r)] = c
                log(f"{model} b{b} r{r}: ours {c['ours']['ips']:.0f} img/s" +
                    (f", torch {c['torch']['ips']:.0f} img/s, ratio {c['ours']['ips'] / c['torch']['ips']:.2f}"
                     if c["torch"] else ""))
    return cells


# The GPU matrix's columns: key, label, who runs it.
CUDA_VARIANTS = (
    ("ours", "mnist-train (graph)", "ours"),
    ("ours_single", "mnist-train graph, 1 step a launch", "ours"),
    ("ours_nopdl", "mnist-train graph, --no-pdl", "ours"),
    ("ours_noside", "mnist-train graph, --no-side-stream", "ours"),
    ("ours_nograph", "mnist-train --no-graph", "ours"),
    ("torch", "PyTorch eager", "torch"),
    ("torch_graph", "PyTorch CUDA graph", "torch"),
    ("torch_compiled", "PyTorch inductor + CUDA graph", "torch"),
)
# The order of the work, in two passes: first the columns the goals judge (mnist-train with
# its graph, PyTorch's three variants), then the columns that say where our time goes (one
# step a launch, --no-pdl, --no-side-stream, --no-graph), each run on the plan its cell's
# graph column measured (--gpu-plan-from). bench/train runs the time to accuracy between
# them, so that a --time-limit cuts diagnostics, never a goal's figure.
GOAL_COLUMNS = ("ours", "torch", "torch_graph", "torch_compiled")
DIAGNOSTIC_COLUMNS = ("ours_single", "ours_nopdl", "ours_noside", "ours_nograph")
# mnist-train's extra flags and metrics-file tag per column (the default launches up to
# --graph-steps 8 steps at once).
OURS_RUN = {"ours_single": (("--graph-steps", "1"), "-single"), "ours_nopdl": (("--no-pdl",), "-nopdl"),
            "ours_noside": (("--no-side-stream",), "-noside")}
TORCH_VARIANT = {"torch": "eager", "torch_graph": "graph", "torch_compiled": "compiled"}


class CudaMatrix:
    """The GPU matrix: models x batches per rank x ranks, mnist-train's columns and PyTorch's.
    run(columns) runs those columns of every cell --reps times, repetition by repetition
    (every cell once, then every cell again, ...), so that a --time-limit leaves fewer
    repetitions of the cells after it rather than missing cells, and the cells at 1 rank
    before those at more; cells() gives
    {(model, batch, ranks): cell}, a cell holding each column's medians (None: failed or not
    run), `devices` and `not_run` (column key -> why)."""

    def __init__(self, a, R, clock, t_why, t_info):
        self.a, self.R, self.clock = a, R, clock
        self.extra = {"mlp": ["--hidden", a.hidden]}
        self.order = [(m, b, r) for m in a.models for b in a.model_batches[m] for r in a.ranks]
        # Run at 1 rank first, every model, then at 2, ...: the goals are stated on one GPU,
        # so a --time-limit on a node of several cuts the larger rank counts first. The
        # results keep self.order (model, batch, ranks).
        self.run_order = sorted(self.order, key=lambda cell: a.ranks.index(cell[2]))
        self.runs = {cell: {key: [] for key, _, _ in CUDA_VARIANTS} for cell in self.order}
        self.not_run = {cell: {} for cell in self.order}
        self.tried = set()  # (cell, key) started at least once
        for cell in self.order:
            m, b, r = cell
            for key, _, side in CUDA_VARIANTS:
                if side == "torch" and t_why:
                    self.not_run[cell][key] = t_why
                elif key == "torch_compiled" and r > 1:
                    self.not_run[cell][key] = "not run: 1 rank only"
                elif key == "torch_compiled" and t_info and not t_info.get("compile", True):
                    self.not_run[cell][key] = f"not available: PyTorch {t_info['version']} has no torch.compile"

    def _run_one(self, cell, key):
        m, b, r = cell
        label, side = next((lab, sd) for k, lab, sd in CUDA_VARIANTS if k == key)
        if side == "ours":
            flags, tag = OURS_RUN.get(key, ((), ""))
            if key in DIAGNOSTIC_COLUMNS and self.runs[cell]["ours"]:
                # The plan the goal column measured, so that a diagnostic differs from it only
                # in its flag (and measures no plan of its own).
                flags = flags + ("--gpu-plan-from", self.runs[cell]["ours"][-1]["metrics"])
            fn = lambda: self.R.ours(m, b, r, graph=key != "ours_nograph",  # noqa: E731
                                     extra=tuple(self.extra.get(m, ())) + flags, tag=tag)
        else:
            fn = lambda: self.R.torch_cell(m, b, r, TORCH_VARIANT[key])  # noqa: E731
        self.tried.add((cell, key))
        res = attempt(f"{label}, {m} b{b} r{r}", fn)
        if res:
            self.runs[cell][key].append(res)

    def run(self, columns, what):
        """Every repetition of `columns` (keys of CUDA_VARIANTS) over the cells; `what` names
        them in the line that says where a --time-limit stopped it."""
        a = self.a
        for rep in range(a.reps):
            cut = False
            for cell in self.run_order:
                if self.clock.out_of_time():
                    cut = True
                    break
                for key in columns:
                    if key not in self.not_run[cell]:
                        self._run_one(cell, key)
                m, b, r = cell
                log(f"rep {rep + 1}, {m} b{b} r{r}: " + ", ".join(
                    f"{key} {self.runs[cell][key][-1]['step_median_ms'] * 1e3:.1f} us" for key in columns
                    if self.runs[cell][key]))
            if cut or (self.clock.out_of_time() and rep + 1 < a.reps):
                if not a.stopped:
                    a.stopped = (f"--time-limit {a.time_limit:.0f} s reached {'during' if cut else 'after'} "
                                 f"repetition {rep + 1} of {a.reps} of {what}")
                    log(a.stopped)
                break
        for cell in self.order:  # what never started is not a failure
            for key in columns:
                if (cell, key) not in self.tried and key not in self.not_run[cell]:
                    self.not_run[cell][key] = "not run: --time-limit reached"

    def cells(self):
        cells = {}
        for cell in self.order:
            c = {key: med_result(v) for key, v in self.runs[cell].items()}
            c["not_run"] = self.not_run[cell]
            c["devices"] = sorted({x["device"] for v in self.runs[cell].values() for x in v if x.get("device")})
            cells[cell] = c
        return cells


def cuda_matrix(a, R, clock, t_why, t_info, between=lambda: None):
    """The GPU matrix in bench/train's order: the goals' columns of every cell (every
    repetition), then between() (bench/train's time to accuracy and NCCL tables), then the
    diagnostic columns of every cell; a --time-limit thus cuts the diagnostics first.
    {(model, batch, ranks): cell} (CudaMatrix.cells)."""
    mx = CudaMatrix(a, R, clock, t_why, t_info)
    mx.run(GOAL_COLUMNS, "the goals' columns")
    between()
    mx.run(DIAGNOSTIC_COLUMNS, "the diagnostic columns")
    return mx.cells()
