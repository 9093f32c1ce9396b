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
# mnist-train's extra flags and metrics-file tag per column (the default launches up to
# --graph-steps 8 steps at once).
OURS_RUN = {"ours_single": (("--graph-steps", "1"), "-single"), "ours_nopdl": (("--no-pdl",), "-nopdl"),
            "ours_noside": (("--no-side-stream",), "-noside")}
TORCH_VARIANT = {"torch": "eager", "torch_graph": "graph", "torch_compiled": "compiled"}


def cuda_matrix(a, R, clock, t_why, t_info):
    """GPU matrix, repetition by repetition (every cell once, then every cell again, ...), so
    that a --time-limit leaves fewer repetitions, not missing cells; within a cell mnist-train
    with its graph and with --no-graph, then PyTorch eager, CUDA graph and inductor + CUDA graph
    from the step servers. {(model, batch, ranks): cell}, a cell holding each column's medians
    (None: failed or not run), `devices` and `not_run` (column key -> why)."""
    extra = {"mlp": ["--hidden", a.hidden]}
    order = [(m, b, r) for m in a.models for b in a.model_batches[m] for r in a.ranks]
    runs = {cell: {key: [] for key, _, _ in CUDA_VARIANTS} for cell in order}
    not_run = {cell: {} for cell in order}
    for cell in order:
        m, b, r = cell
        for key, _, side in CUDA_VARIANTS:
            if side == "torch" and t_why:
                not_run[cell][key] = t_why
            elif key == "torch_compiled" and r > 1:
                not_run[cell][key] = "not run: 1 rank only"
            elif key == "torch_compiled" and t_info and not t_info.get("compile", True):
                not_run[cell][key] = f"not available: PyTorch {t_info['version']} has no torch.compile"
    for rep in range(a.reps):
        cut = False
        for cell in order:
            if clock.out_of_time():
                cut = True
                break
            m, b, r = cell
            for key, label, side in CUDA_VARIANTS:
                if key in not_run[cell]:
                    continue
                if side == "ours":
                    flags, tag = OURS_RUN.get(key, ((), ""))
                    fn = lambda: R.ours(m, b, r, graph=key != "ours_nograph",  # noqa: E731
                                        extra=tuple(extra.get(m, ())) + flags, tag=tag)
                else:
                    fn = lambda: R.torch_cell(m, b, r, TORCH_VARIANT[key])  # noqa: E731
                res = attempt(f"{label}, {m} b{b} r{r}", fn)
                if res:
                    runs[cell][key].append(res)
            log(f"rep {rep + 1}, {m} b{b} r{r}: " + ", ".join(
                f"{key} {runs[cell][key][-1]['step_median_ms'] * 1e3:.1f} us" for key, _, _ in CUDA_VARIANTS
                if runs[cell][key]))
        if cut or (clock.out_of_time() and rep + 1 < a.reps):
            a.stopped = f"--time-limit {a.time_limit:.0f} s reached {'during' if cut else 'after'} repetition {rep + 1} of {a.reps}"
            log(a.stopped)
            for cell in order:  # what never started is not a failure
                for key, _, _ in CUDA_VARIANTS:
                    if not runs[cell][key] and key not in not_run[cell]:
                        not_run[cell][key] = "not run: --time-limit reached"
            break
    R.close()
    cells = {}
    for cell in order:
        c = {key: med_result(v) for key, v in runs[cell].items()}
        c["not_run"] = not_run[cell]
        c["devices"] = sorted({x["device"] for v in runs[cell].values() for x in v if x.get("device")})
        cells[cell] = c
    return cells
