"""run_scripts.py - several Python scripts run in one interpreter, each as its own __main__.

    python3 tests/run_scripts.py DIR NAME...

For each NAME, in order: DIR/NAME.args holds a command line (the script's path, then its
arguments, each ended by a NUL byte), which runs as "python3 SCRIPT ARGS..." would (runpy:
fresh globals, sys.argv set), its stdout and stderr in DIR/NAME.log and its exit status in
DIR/NAME.rc (1 for an exception, printed to the log). What the scripts import (PyTorch takes
about a second of CPU) loads once for all of them; the tests that score several checkpoints
or run several references use it.
"""
import contextlib
import runpy
import sys
import traceback


def run(directory, name):
    with open(f"{directory}/{name}.args", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0")[:-1]]
    sys.argv = argv
    with open(f"{directory}/{name}.log", "w") as out, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(out):
        try:
            runpy.run_path(argv[0], run_name="__main__")
            rc = 0
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            rc = 1
    with open(f"{directory}/{name}.rc", "w") as f:
        f.write(f"{rc}\n")


def main(args):
    if len(args) < 2:
        print("usage: run_scripts.py DIR NAME...", file=sys.stderr)
        return 2
    for name in args[1:]:
        run(args[0], name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
