#!/usr/bin/python3
"""ncu_summary.py - kernels per training step from an Nsight Compute CSV of mnist-train.

    python3 ncu_summary.py ncu-seed-b32.csv.gz > ncu-seed-b32-per-step.csv

The CSV (raw or gzipped) holds one row per kernel launch (gpu__time_duration.sum, ns). A training step
ends with its optimizer's update (sgd_update_kernel or adamw_update_kernel), so the
launches between two updates are one step: this prints, for the most common step
length, each kernel of the step in launch order with its median duration over the
window's whole steps, then the step's kernel count and summed duration. ncu locks the
clocks and serialises the launches: read the counts and the shares, not the times."""
import collections
import csv
import gzip
import re
import statistics
import sys

opener = gzip.open if sys.argv[1].endswith(".gz") else open
with opener(sys.argv[1], "rt") as f:
    rows = [r for r in csv.reader(line for line in f if line.startswith('"'))]
head, rows = rows[0], rows[1:]
name_i, value_i = head.index("Kernel Name"), head.index("Metric Value")
names = [r[name_i] for r in rows]
ns = [float(r[value_i].replace(",", "")) for r in rows]
ends = [i for i, n in enumerate(names) if re.match(r"(sgd|adamw)_update_kernel", n)]
steps = [(a + 1, b + 1) for a, b in zip(ends, ends[1:])]
length = collections.Counter(b - a for a, b in steps).most_common(1)[0][0]
steps = [(a, b) for a, b in steps if b - a == length]
w = csv.writer(sys.stdout)
w.writerow(["position", "kernel", "median_ns"])
total = 0.0
for k in range(length):
    med = statistics.median(ns[a + k] for a, _ in steps)
    total += med
    w.writerow([k + 1, names[steps[0][0] + k][:160], f"{med:.0f}"])
w.writerow(["kernels_per_step", length, f"{total:.0f}"])
w.writerow(["whole_steps_in_window", len(steps), ""])
