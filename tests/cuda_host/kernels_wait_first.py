#!/usr/bin/env python3
"""Every kernel of ours begins with KERNEL_WAIT_PREVIOUS(): with programmatic dependent launch
a kernel may start while the one before it in the stream still runs, and only that wait
(cudaGridDependencySynchronize, griddepcontrol.wait) makes the earlier kernel's writes visible
(cuda/kernel_launch.cuh). A read or write of memory before it is a race on a GPU of compute
capability 9.0 that neither the unit tests' runner nor the simulator can see (they run kernels
one after another; the simulator checks that every thread waits, not what it touched first).
So the wait must be the first statement of every __global__ function in cuda/.

    tests/cuda_host/kernels_wait_first.py CUDA_DIR

Checks CUDA_DIR/*.cu and *.cuh, then a control: the same check on a kernel that loads before
its wait must fail. Exit 0 when every kernel begins with the wait, 1 otherwise."""
import glob
import os
import re
import sys

KERNEL = re.compile(r"__global__\s[^;{]*?\b(\w+)\s*\([^)]*\)\s*\{", re.S)


def first_statement(body):
    """The first statement of a function body (comments and preprocessor lines left out)."""
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
    body = re.sub(r"//[^\n]*", " ", body)
    lines = [line for line in body.splitlines() if not line.strip().startswith("#")]
    text = " ".join(lines).strip()
    m = re.match(r"[^;{}]*;", text)
    return re.sub(r"\s+", "", m.group(0)) if m else text[:60]


def check(text):
    """[(kernel, first statement)] of the kernels in text that do not begin with the wait, and
    how many kernels there are."""
    bad, n = [], 0
    for m in KERNEL.finditer(text):
        n += 1
        first = first_statement(text[m.end():m.end() + 2000])
        if first != "KERNEL_WAIT_PREVIOUS();":
            bad.append((m.group(1), first))
    return bad, n


def main():
    src = sys.argv[1]
    files = sorted(glob.glob(os.path.join(src, "*.cu")) + glob.glob(os.path.join(src, "*.cuh")))
    total, failures = 0, 0
    for f in files:
        bad, n = check(open(f).read())
        total += n
        for name, first in bad:
            print(f"FAIL: {os.path.basename(f)}: {name} begins with '{first}', not KERNEL_WAIT_PREVIOUS();")
            failures += 1
    if total == 0:
        print(f"FAIL: no __global__ function found in {src}/*.cu")
        return 1
    control = """
static __global__ void early_kernel(const float *x, float *y)
{
	/* the index first: that is no memory access, but the load below is */
	float v = x[threadIdx.x];
	KERNEL_WAIT_PREVIOUS();
	y[threadIdx.x] = v;
}
static __global__ void late_kernel(const float *x, float *y)
{
	KERNEL_WAIT_PREVIOUS();
	y[threadIdx.x] = x[threadIdx.x];
}
"""
    bad, n = check(control)
    if n != 2 or [name for name, _ in bad] != ["early_kernel"]:
        print(f"FAIL: the control: {n} kernels, flagged {bad}; expected early_kernel alone")
        return 1
    if failures:
        return 1
    print(f"PASS: all {total} kernels in {src} begin with KERNEL_WAIT_PREVIOUS(); the control's early load is caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
