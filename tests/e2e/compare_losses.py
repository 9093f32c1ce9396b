"""compare_losses.py OURS THEIRS - two --metrics files' losses, step by step.

Prints one line: "n_ours n_theirs worst_relative_error first_step_over_1e-4 (-1: none)
first_ours first_theirs last_ours last_theirs", for the shell tests that hold
mnist-train against a PyTorch reference (test_torch_adamw.sh, test_torch_clip.sh).
"""
import json
import sys


def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]


ours, theirs = losses(sys.argv[1]), losses(sys.argv[2])
n = min(len(ours), len(theirs))
rel = [abs(a - b) / abs(b) for a, b in zip(ours[:n], theirs[:n])]
over = [i for i, r in enumerate(rel) if r > 1e-4]
print(len(ours), len(theirs), max(rel) if rel else "nan", over[0] if over else -1,
      ours[0] if ours else "nan", theirs[0] if theirs else "nan", ours[-1] if ours else "nan",
      theirs[-1] if theirs else "nan")
