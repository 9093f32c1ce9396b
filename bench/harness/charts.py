"""gnuplot charts of a results folder: images/s against ranks per model (one line per batch and
side), and the training loss against training time of one cell per model."""
import os
import subprocess

from .common import COMMANDS, log, read_metrics


def gnuplot(script):
    COMMANDS.append("gnuplot <<EOF ... EOF  (scripts in the results folder)")
    try:
        p = subprocess.run(["gnuplot"], input=script, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        log(f"gnuplot cannot be run ({e.strerror}): no charts (apt-get install gnuplot-nox)")
        return False
    if p.returncode != 0:
        log(f"gnuplot failed: {p.stderr.strip()[:500]}")
    return p.returncode == 0


def charts(a, cells, loss_runs, folder, series, figure="ips", ylabel="images/s (log scale)"):
    """series: [(cell key, label)], e.g. [("ours", "mnist-train"), ("torch", "PyTorch")]; figure:
    the result's key plotted (ips: the whole run; steady_ips: without the first steps).
    loss_runs: {name: [(label, metrics file, colour)]}. The PNGs made."""
    made = []
    for model in a.models:
        dat = os.path.join(folder, f"ips-{model}.dat")
        with open(dat, "w") as f:
            f.write("# ranks " + " ".join(f"{key}_b{b}" for b in a.model_batches[model] for key, _ in series) + "\n")
            for r in a.ranks:
                vals = []
                for b in a.model_batches[model]:
                    c = cells.get((model, b, r))
                    for key, _ in series:
                        v = c and c.get(key) and c[key].get(figure)
                        vals.append(v if v else "NaN")
                f.write(f"{r} " + " ".join(str(v) for v in vals) + "\n")
        png = os.path.join(folder, f"ips-{model}.png")
        plots, col = [], 2
        for i, b in enumerate(a.model_batches[model]):
            for j, (_, label) in enumerate(series):
                style = "pt 7" if j == 0 else f"pt {5 + j} dt {j + 1}"
                plots.append(f"'{dat}' using 1:{col} with linespoints lw 2 {style} lc {i + 1} title '{label} b{b}'")
                col += 1
        # The title in two short lines and the key below the plot: a one-line title wider than
        # the plot area was cut off at the left edge of the image.
        script = f"""set terminal pngcairo size 860,560 noenhanced
set output '{png}'
set title "MNIST {model}: training images/s against ranks\\n{a.chart_subtitle}"
set xlabel 'ranks (processes)'
set ylabel '{ylabel}'
set logscale y
set xtics ({", ".join(str(r) for r in a.ranks)})
set key below horizontal maxcols 3 height 1
set grid
plot {", ".join(plots)}
"""
        with open(png[:-4] + ".gp", "w") as f:
            f.write(script)
        if gnuplot(script):
            made.append(png)
    for name, runs in loss_runs.items():
        png = os.path.join(folder, f"loss-{name}.png")
        plots = []
        for label, mfile, color in runs:
            dat = mfile[:-6] + ".loss.dat"
            rows, _, _, _ = read_metrics(mfile)
            with open(dat, "w") as f:
                f.write("# elapsed_s loss\n")
                for d in rows:
                    f.write(f"{d['elapsed']} {d['loss']}\n")
            plots.append(f"'{dat}' using 1:2 with lines lw 2 lc {color} title '{label}'")
        script = f"""set terminal pngcairo size 860,560 noenhanced
set output '{png}'
set title "MNIST {name}: training loss (rank 0 batch)\\nagainst training time"
set xlabel 'seconds of training'
set ylabel 'loss'
set logscale x
set key below horizontal height 1
set grid
plot {", ".join(plots)}
"""
        with open(png[:-4] + ".gp", "w") as f:
            f.write(script)
        if gnuplot(script):
            made.append(png)
    return made
