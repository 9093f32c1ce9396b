"""compare_losses.py OURS THEIRS STEPS WHAT [--control] - mnist-train's losses against
PyTorch's, step by step, from two --metrics files.

For the shell tests that hold mnist-train against a PyTorch reference
(test_torch_adamw.sh, test_torch_clip.sh). Without --control: each file must
hold STEPS losses and every pair agree within 1e-4 relative; prints
"ok: WHAT: worst relative loss difference ..." and exits 0, or "FAIL: ..." on
stderr and exits 1. With --control (THEIRS is the reference run with what is
under test changed): the pair must leave that bound somewhere, else the
comparison cannot see what it tests; WHAT names the change.
"""
import json
import sys

args = [a for a in sys.argv[1:] if a != "--control"]
control = len(args) != len(sys.argv) - 1
ours_path, theirs_path, steps, what = args[0], args[1], int(args[2]), args[3]


def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]


ours, theirs = losses(ours_path), losses(theirs_path)
n = min(len(ours), len(theirs))
rel = [abs(a - b) / abs(b) for a, b in zip(ours[:n], theirs[:n])]
over = [i for i, r in enumerate(rel) if r > 1e-4]
worst = "%.3g" % max(rel) if rel else "nan"
ends = "losses %s -> %s, PyTorch %s -> %s" % (ours[0] if ours else "nan", ours[-1] if ours else "nan",
                                              theirs[0] if theirs else "nan", theirs[-1] if theirs else "nan")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


if control:
    if not over:
        fail("control: %s stayed within 1e-4 of mnist-train (worst %s): the comparison cannot see it" % (what, worst))
    print("ok: control: %s leaves the bound at step %d (worst %s; %s)" % (what, over[0], worst, ends))
elif len(ours) != steps or len(theirs) != steps:
    fail("expected %d losses from each trainer, got %d (mnist-train) and %d (PyTorch)" % (steps, len(ours), len(theirs)))
elif over:
    fail("loss of step %d differs by more than 1e-4 relative (worst %s); %s" % (over[0], worst, ends))
else:
    print("ok: %s: worst relative loss difference %s (%s)" % (what, worst, ends))
