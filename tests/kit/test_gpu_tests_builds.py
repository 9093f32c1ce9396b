#!/usr/bin/env python3
"""test_gpu_tests_builds.py - every program the GPU tests run is built by the target gpu-tests.

    tests/kit/test_gpu_tests_builds.py CTEST BUILD_DIR PROGRAMS_TSV

The GPU-node kit's step build makes only the target gpu-tests, then runs the tests labelled
gpu (quick) and gpu-sanitize (sanitize). A test whose program gpu-tests does not build fails
on the node with "mpiexec was unable to launch ... Executable: BUILD/tests/gpu_plan" (the H100
node of 2026-11-27), and only there. This check finds it on any machine, building nothing:

PROGRAMS_TSV (written by tests/cmake/48-cuda-kit.cmake when CMake generates) lists every
executable, shared library and module of the project: its file, its target, and whether
building gpu-tests builds it (its dependencies followed to the end). `CTEST --show-only=json-v1`
gives each test's command line as ctest runs it. Every word of the command line of a test
labelled gpu or gpu-sanitize that is one of those files must be one gpu-tests builds.

The control: the same check, told that gpu-tests leaves out the first program the suite
runs, must report that program; a check that cannot fail passes nothing.

Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys

LABELS = {"gpu", "gpu-sanitize"}


def programs(tsv):
    """{real path: (target, built by gpu-tests)} from PROGRAMS_TSV."""
    out = {}
    with open(tsv, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            path, target, built = parts
            out[os.path.realpath(path)] = (target, built == "yes")
    return out


def gpu_tests(ctest, build_dir):
    """[(name, [words of its command])] of the tests labelled gpu or gpu-sanitize."""
    raw = subprocess.run([ctest, "--test-dir", build_dir, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(raw).get("tests", []):
        labels = set()
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                labels.update(p.get("value", []))
        if labels & LABELS:
            tests.append((t["name"], t.get("command", [])))
    return tests


def check(tests, progs):
    """(problems, [(test, program file, target)] checked): each word that is a program."""
    problems, seen = [], []
    for name, command in tests:
        for word in command:
            if not word.startswith("/"):
                continue
            hit = progs.get(os.path.realpath(word))
            if hit is None:
                continue
            target, built = hit
            seen.append((name, word, target))
            if not built:
                problems.append(f"{name} runs {word} (target {target}), which the target "
                                f"gpu-tests does not build: add it to gpu-tests "
                                f"(tests/cmake/48-cuda-kit.cmake)")
    return problems, seen


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    ctest, build_dir, tsv = sys.argv[1:]
    if not os.path.exists(tsv):
        print(f"FAIL: {tsv} not written (CMake's generate step writes it)", file=sys.stderr)
        return 1
    progs = programs(tsv)
    tests = gpu_tests(ctest, build_dir)
    failures = 0
    if not tests:
        print(f"FAIL: no test labelled {' or '.join(sorted(LABELS))} in {build_dir}", file=sys.stderr)
        return 1
    if not any(built for _, built in progs.values()):
        print(f"FAIL: {tsv}: gpu-tests builds none of the project's programs", file=sys.stderr)
        return 1
    problems, seen = check(tests, progs)
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    failures += len(problems)
    targets = sorted({t for _, _, t in seen})
    print(f"{len(tests)} tests labelled gpu or gpu-sanitize run {len(targets)} of the project's "
          f"programs: {', '.join(targets)}")
    if not seen:
        print("FAIL: no test labelled gpu runs a program of this build (the check matched nothing)",
              file=sys.stderr)
        failures += 1
    else:
        # The control: gpu-tests told to leave out the first program the suite runs.
        _, word, target = seen[0]
        doctored = dict(progs)
        doctored[os.path.realpath(word)] = (target, False)
        control, _ = check(tests, doctored)
        if any(f"(target {target})" in c for c in control):
            print(f"ok: control: with {target} left out of gpu-tests the check reports "
                  f"{len(control)} test(s), e.g. {control[0].split(',')[0]}")
        else:
            print(f"FAIL: control: with {target} left out of gpu-tests the check reports nothing",
                  file=sys.stderr)
            failures += 1
    if failures == 0:
        print("ok: every program those tests run is built by gpu-tests")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
