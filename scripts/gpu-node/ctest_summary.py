#!/usr/bin/env python3
"""ctest_summary.py - what a ctest run passed, failed and skipped, and why it skipped.

    ctest --test-dir BUILD --output-junit JUNIT [SELECT...] ...
    python3 scripts/gpu-node/ctest_summary.py BUILD JUNIT [SELECT...]

Reads ctest's JUnit file (each test's status and output) and the tests' labels
(ctest --show-only=json-v1), and prints: the counts; every failed test; every
skipped test with its reason (the first line of its output that says SKIP, else
its last line; for a failure, the first that says FAIL); and, per label, how many of its tests did not run, ending with
the labels none of whose tests ran. SELECT: the ctest options that chose the tests
(-L REGEX, -LE REGEX, -R REGEX, -E REGEX): the tests they select that the JUnit file
lacks are listed as not started (ctest stopped at --stop-time: the kit's step limits),
and without a JUnit file (ctest ended before writing it) every one of them is.
Exit status: 0 when nothing failed, 1 when a test failed, could not be started or was
not started, 2 on bad usage or unreadable input.
Used by scripts/gpu-node/run.sh (steps quick, all, sanitize); tested by kit_ctest_summary.
"""
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def labels_of(build, select=()):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1", *select],
                         capture_output=True, text=True, check=True).stdout
    labels = {}
    for t in json.loads(out).get("tests", []):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels[t["name"]] = props.get("LABELS", [])
    return labels


def reason_of(text, word):
    """The first line of text that says word (SKIP, FAIL), else its last line with a letter."""
    lines = [ln.strip() for ln in (text or "").splitlines() if re.search(r"[A-Za-z]", ln)]
    for ln in lines:
        if re.search(r"\b" + word, ln):
            return ln
    return lines[-1] if lines else "(no output)"


def main(argv):
    if len(argv) < 3:
        print("usage: ctest_summary.py BUILD_DIR JUNIT_FILE [-L REGEX|-LE REGEX|-R REGEX|-E REGEX]...",
              file=sys.stderr)
        return 2
    build, junit, select = argv[1], argv[2], argv[3:]
    try:
        labels = labels_of(build)
        selected = list(labels_of(build, select)) if select else []
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"ctest_summary: cannot list the tests of {build} ({e})", file=sys.stderr)
        return 2
    try:
        cases = list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        if not select:
            print(f"ctest_summary: cannot read the results ({e})", file=sys.stderr)
            return 2
        print(f"== summary: no results from ctest ({junit}: {e}); {len(selected)} tests not started")
        print("NOT STARTED " + ", ".join(selected))
        return 1
    passed, failed, skipped = [], [], []
    for c in cases:
        name, status = c.get("name"), c.get("status")
        out = c.findtext("system-out") or ""
        skip = c.find("skipped")
        if status == "run":
            passed.append(name)
        elif status == "notrun" and skip is not None and "SKIP_" in (skip.get("message") or ""):
            why = reason_of(out, "SKIP")
            skipped.append((name, re.sub(r"^SKIP(\s+" + re.escape(name) + r")?:?\s*", "", why)))
        else:  # failed, or could not be started (ctest's "Not Run")
            failed.append((name, status, reason_of(out, "FAIL")))
    ran = set(passed) | {f[0] for f in failed} | {s[0] for s in skipped}
    not_started = [t for t in selected if t not in ran]
    total = len(passed) + len(failed) + len(skipped)
    print(f"== summary: {total} tests: {len(passed)} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped" + (f"; {len(not_started)} not started (ctest's --stop-time: the "
                                       "step's limit)" if not_started else ""))
    if not_started:
        print("NOT STARTED " + ", ".join(not_started))
    for name, status, why in failed:
        print(f"FAILED  {name} ({'failed' if status == 'fail' else 'not run'}): {why}")
    for name, why in skipped:
        print(f"SKIPPED {name}: {why}")
    per_label = {}
    for name in passed + [f[0] for f in failed] + [s[0] for s in skipped]:
        for lab in labels.get(name, []) or ["(no label)"]:
            per_label.setdefault(lab, [0, 0])[0] += 1
    for name, _ in skipped:
        for lab in labels.get(name, []) or ["(no label)"]:
            per_label[lab][1] += 1
    partly = [f"{lab} ({s} of {n} skipped)" for lab, (n, s) in sorted(per_label.items()) if 0 < s < n]
    none = [f"{lab} ({n} skipped)" for lab, (n, s) in sorted(per_label.items()) if s == n]
    print("labels not run at all: " + (", ".join(none) if none else "none"))
    print("labels run in part: " + (", ".join(partly) if partly else "none"))
    return 1 if failed or not_started else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
