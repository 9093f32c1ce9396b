#!/usr/bin/env python3
"""times.py - the suite's per-test times: a table to keep, and ctest's schedule from it.

    python3 tests/times.py table JUNIT.xml BUILD_DIR > tests/times.txt
    python3 tests/times.py costdata tests/times.txt > build/Testing/Temporary/CTestCostData.txt
    python3 tests/times.py top JUNIT.xml [N]

table: from the JUnit file of a whole run (ctest --output-junit, which scripts/test.sh
writes to build/ctest-junit.xml), every test's seconds in that run, beside other tests as
ctest ran them, the slowest first, with its labels and status; the header says where the
run was. Committed as tests/times.txt so that the next slow test shows in a diff.

costdata: that table as ctest's cost data (name, runs, seconds per line, then "---"). ctest
starts the costliest tests first when it has one; a fresh build has none and runs the suite
in the order it was registered, which left the longest tests (the builds', multinode) for
the end while one core idled. scripts/test.sh seeds a build that has none with it.

top: the N slowest tests of a run (10 by default), for the end of scripts/test.sh.
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def read_labels(build):
    """Each test's labels, from ctest's listing of BUILD (the JUnit file has none)."""
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                             capture_output=True, text=True).stdout
    labels = {}
    for test in json.loads(listing).get("tests", []):
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels[test["name"]] = ",".join(prop.get("value", []))
    return labels


def read_junit(path, labels=None):
    """Rows (seconds, name, status, labels) of a ctest JUnit file, the slowest first."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name")
        if case.find("failure") is not None:
            status = "failed"
        elif case.get("status") == "run":
            status = "passed"
        else:
            status = "skipped"  # ctest's "notrun": skipped, with the reason, or disabled
        rows.append((float(case.get("time", "0")), name, status, (labels or {}).get(name, "")))
    rows.sort(key=lambda r: (-r[0], r[1]))
    return rows


def table(path, build, out):
    rows = read_junit(path, read_labels(build))
    total = sum(r[0] for r in rows)
    out.write("# seconds per test in one whole run of the suite (scripts/test.sh's ctest on %d cores,\n"
              "# tests beside each other as ctest ran them), the slowest first. Written by\n"
              "# python3 tests/times.py table build/ctest-junit.xml build; %d tests, %.0f s summed.\n"
              "# seconds  status   test  [labels]\n" % (os.cpu_count() or 1, len(rows), total))
    for secs, name, status, labels in rows:
        out.write("%8.2f  %-7s  %s%s\n" % (secs, status, name, "  [%s]" % labels if labels else ""))


def read_table(path):
    """(name, seconds) of each row of a table written by `table`."""
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            fields = line.split()
            if len(fields) < 3:
                sys.exit("times.py: %s: a row needs seconds, status and test: %r" % (path, line))
            try:
                secs = float(fields[0])
            except ValueError:
                sys.exit("times.py: %s: '%s' is not a number of seconds" % (path, fields[0]))
            rows.append((fields[2], secs))
    return rows


def costdata(path, out):
    for name, secs in read_table(path):
        out.write("%s 1 %.3f\n" % (name, max(secs, 0.01)))
    out.write("---\n")


def top(path, n, out):
    for secs, name, status, _ in read_junit(path)[:n]:
        out.write("%8.2f s  %s%s\n" % (secs, name, "" if status == "passed" else " (%s)" % status))


def main(argv):
    if len(argv) == 4 and argv[1] == "table":
        table(argv[2], argv[3], sys.stdout)
    elif len(argv) >= 3 and argv[1] == "costdata":
        costdata(argv[2], sys.stdout)
    elif len(argv) >= 3 and argv[1] == "top":
        top(argv[2], int(argv[3]) if len(argv) > 3 else 10, sys.stdout)
    else:
        sys.stderr.write("usage: times.py table JUNIT BUILD_DIR | costdata TABLE | top JUNIT [N]\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
