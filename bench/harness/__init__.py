"""bench/harness - the modules of bench/train (the entry script one folder up).

    common.py       running commands, the list of every command run, parsing mnist-train's
                    summary line and --metrics files, step-time figures, medians; writing a
                    results file and packing the run's raw data into <stamp>.tar.xz
    machine.py      the CPU, OpenBLAS's kernels, the versions of the tools
    cuda_node.py    the GPUs and the CUDA libraries libmnist-cuda.so links, PyTorch's CUDA,
                    the CUDA simulator's marks
    host_runner.py  one run of mnist-train's host backend, or of the PyTorch CPU reference
    cuda_runner.py  one run of mnist-train's CUDA backend; the PyTorch processes that serve
                    many GPU cells each (bench/reference/step_ref.py --serve)
    matrix.py       the matrix: cells x repetitions, interleaved, for either backend
    tta.py          time to a test accuracy: the rows' settings and their runs
    goals.py        issue 21's goals for the GPU step, judged met / missed / not measured
    charts.py       gnuplot charts
    report_host.py, report_cuda.py
                    the results files
    cli.py          the options and the order of the work (what bench/train runs)
"""
