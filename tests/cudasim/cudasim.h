/*
 * cudasim.h - a CUDA simulator for the tests: the parts of the CUDA runtime,
 * cuBLAS, cuBLASLt and NCCL that cuda/ uses, run on the CPU, under mpirun, so
 * that the unchanged .cu files of cuda/ (compiled by the host C++ compiler
 * against the stand-in headers beside this one) run end to end without a GPU. A test
 * tool only: the product always links the real libraries, and what runs here
 * is reported as simulated ("cudasim" in device names, test names, labels).
 *
 * Each rule below follows NVIDIA's documentation (CUDA runtime API reference
 * and its "API synchronization behavior" page, the CUDA programming guide's
 * stream-capture rules, the cuBLAS and NCCL user guides). A program that
 * breaks a rule gets what a GPU would give it, or worse, never better: an
 * error code where CUDA documents one, a stale value where CUDA would race,
 * and where a GPU would crash or hang, a fatal "cudasim: rank R: ..." message
 * on stderr and abort().
 *
 * Modelled:
 *  1. Device memory is not host memory. cudaMalloc returns memory that the
 *     host cannot touch: it is mapped PROT_NONE except while the simulator
 *     runs queued work, and a host access is caught (SIGSEGV handler) and
 *     named. Each allocation sits between guard pages, aligned to 256 bytes
 *     and ending at its last page, so a kernel or copy running past either
 *     end is caught too (up to the 256-byte alignment slack). New
 *     allocations hold garbage (all bits set: NaN as float), as cudaMalloc
 *     does not clear. Kernel pointer arguments, copies, cuBLAS operands and
 *     NCCL buffers must lie inside one live device allocation.
 *     cudaFree waits for all queued work first (device-wide synchronization).
 *  2. Streams run in order and lazily: queued work runs only when the host
 *     waits for it (cudaStreamSynchronize, cudaEventSynchronize,
 *     cudaDeviceSynchronize, a copy that blocks) or polls it
 *     (cudaEventQuery, cudaStreamQuery), never earlier, so a missing wait
 *     reads a stale value. Work on one stream never waits for another's,
 *     except behind a cudaStreamWaitEvent, which runs the other stream's
 *     work up to the event's record first (and only that far).
 *     A host call that blocks until work completes (cudaStreamSynchronize,
 *     cudaDeviceSynchronize, cudaFree, a copy to or from pageable memory, ...)
 *     behind a collective injected never to complete (CUDASIM_HANG_RANK) is
 *     fatal at once, naming the call: on a GPU it would block forever, out of
 *     reach of any deadline the program keeps; only polling (cudaEventQuery,
 *     cudaStreamQuery) can wait for a collective that may hang.
 *  3. Copies (the "API synchronization behavior" rules): device-to-pageable
 *     returns only once the copy is done, so it waits for all earlier work on
 *     its stream; pageable-to-device synchronizes the stream first, then
 *     copies; host-to-host is synchronous; copies involving pinned memory
 *     (cudaMallocHost, cudaHostAlloc) and device-to-device are asynchronous
 *     and read their source when they run. The synchronous cudaMemcpy runs on
 *     the legacy stream and waits for it.
 *  4. Events: a record marks a point in its stream; query runs the stream up
 *     to it as far as it can and says cudaErrorNotReady while a collective
 *     ahead of it cannot complete; an event never recorded is complete.
 *  5. Kernels run through the raw launch of the project's launch macro
 *     (KERNEL_LAUNCH_ON, which the stand-in cuda_runtime.h provides where nvcc
 *     has <<<grid, block, 0, stream>>>) as loops over blocks and threads
 *     (tests/cuda_host's model); arguments are taken by value at launch. A
 *     launch CUDA refuses runs nothing and, as the programming guide says of
 *     kernel launches (they return no error code; cudaGetLastError reports
 *     it), leaves its error as the thread's last error:
 *     cudaErrorInvalidConfiguration outside CUDA's geometry limits (1 to
 *     2^31-1 blocks, 1 to 1024 threads per block),
 *     cudaErrorNoKernelImageForDevice without a kernel image for the device
 *     (CUDASIM_FAULT=no-kernel-image), the initialization error without a
 *     usable device, cudaErrorStreamCaptureInvalidated on an invalidated
 *     capture. Not sticky: reading it clears it. What stops the program is its
 *     own check (the project's CUDA_CHECK_LAUNCH), never the simulator. A
 *     pointer argument that is not device memory is fatal (an illegal address
 *     on a GPU). A kernel whose block's threads share memory and wait at
 *     __syncthreads (KERNEL_LAUNCH_COOP_ON) runs each block's threads as
 *     fibers (tests/cuda_host/block_fibers.h): __syncthreads waits until
 *     every thread of the block has reached it, and writes before it are seen
 *     after it, as the programming guide says; between barriers threads run
 *     in descending order (the unit tests' runner ascending), so a missing
 *     barrier shows in one of the two; a barrier that some threads of a block
 *     never reach (CUDA allows conditional barriers only where the condition
 *     is the block's) and a barrier in a kernel launched as a plain one are
 *     fatal. __shared__ is one static copy per kernel: it is not poisoned
 *     between blocks, so a read before any write in a block is not caught.
 *     Programmatic dependent launch (the programming guide's section of that
 *     name; KERNEL_LAUNCH_PDL_ON, KERNEL_LAUNCH_COOP_PDL_ON: the launch
 *     attribute cudaLaunchAttributeProgrammaticStreamSerialization): the
 *     kernel may start before the one ahead of it in the stream has finished,
 *     so each of its threads must call cudaGridDependencySynchronize before
 *     it uses that kernel's results. Kernels run one after another here, so
 *     nothing overlaps; a launch in which some thread never called it is
 *     fatal (not whether a thread touched memory before it).
 *     cudaTriggerProgrammaticLaunchCompletion is a hint: nothing. The device
 *     is of compute capability 9.0, which has the attribute. The time model
 *     (rule 10) hides such a launch's overhead behind the kernel before it.
 *  6. Graph capture (cudaStreamCaptureModeGlobal and ThreadLocal): work
 *     queued on a capturing stream is recorded, not run. What CUDA forbids
 *     during capture fails with cudaErrorStreamCaptureUnsupported and
 *     invalidates the capture: synchronizing or querying the capturing stream
 *     or an event recorded in it, device synchronization, cudaMalloc, cudaFree
 *     and pinned allocation, the synchronous cudaMemcpy, and copies to or from
 *     pageable memory. Work queued on an invalidated capture fails with
 *     cudaErrorStreamCaptureInvalidated, and so does cudaStreamEndCapture,
 *     returning a NULL graph. cudaGraphInstantiate and cudaGraphLaunch replay
 *     exactly what was recorded: the pointers and scalars baked in at capture.
 *     Across streams (the programming guide's "cross-stream dependencies"):
 *     a stream that waits for an event recorded in an open capture joins it,
 *     its next node depending on the nodes the event stands for (a fork); a
 *     capturing stream's wait for such an event adds them to its next node's
 *     dependencies (a join). cudaStreamEndCapture on a stream that joined is
 *     cudaErrorStreamCaptureUnmatched; with a node that nothing depends on
 *     and the origin stream's work does not end in (a fork never joined
 *     back), cudaErrorStreamCaptureUnjoined and a NULL graph; either way the
 *     capture ends on every stream that joined it. A capturing stream waiting
 *     for an event recorded outside the capture fails with
 *     cudaErrorStreamCaptureIsolation, one recorded in another capture with
 *     cudaErrorStreamCaptureMerge, and both invalidate. A replay runs the
 *     nodes one after another in an order their dependencies allow, never
 *     favouring the recording order (CUDASIM_GRAPH_ORDER: "late", a joined
 *     stream's node only when none of the origin stream's can run; "early",
 *     as soon as it can; "capture"; by default late and early on alternate
 *     replays), so a branch that reads what its origin overwrites beside it,
 *     or that lacks its fork, gives another result in one of the two.
 *     cudaGraphGetNodes gives one node per operation recorded (a kernel, a
 *     copy, a memset, a cuBLAS call, a collective; two for a split-K cuBLASLt
 *     matmul with a separate reduction, rule 7), filling the array as the
 *     runtime API reference says (the rest NULL; nodes NULL: the count). How
 *     many kernels a library call is on a GPU is undocumented; the count here
 *     is what the simulator records.
 *  7. cuBLAS: a handle bound to a stream (the legacy stream until
 *     cublasSetStream), a workspace (device memory, 256-byte aligned) and a
 *     math mode. cublasSgemm and cublasSgemv check their arguments as cuBLAS
 *     documents (CUBLAS_STATUS_INVALID_VALUE for negative sizes, short leading
 *     dimensions, zero increments), read alpha and beta from host memory at
 *     the call, and compute C = alpha op(A) op(B) + beta C column-major with
 *     a naive reference written from that definition (double accumulation;
 *     beta == 0 ignores C), independent of the project's GEMM mapping. The
 *     math mode counts: CUBLAS_DEFAULT_MATH and CUBLAS_PEDANTIC_MATH compute
 *     in float32; CUBLAS_TF32_TENSOR_OP_MATH rounds every element of A and B
 *     to TF32 (10-bit mantissa, to nearest, ties away from zero, as Ampere
 *     and later GPUs convert) before a cublasSgemm multiplies them, unless
 *     NVIDIA_TF32_OVERRIDE=0 is set; cublasSgemv is float32 in every mode.
 *     cuBLASLt (the cuBLAS guide's chapter "Using the cuBLASLt API"): handles,
 *     matmul descriptors, layouts and preferences of the real sizes and enum
 *     values (a destroyed or foreign one is fatal); float32 only (CUDA_R_32F
 *     layouts and scale type; CUBLAS_COMPUTE_32F, _32F_PEDANTIC,
 *     _32F_FAST_TF32), column-major, host pointer mode: anything else is
 *     CUBLAS_STATUS_NOT_SUPPORTED. cublasLtMatmulAlgoGetHeuristic and
 *     cublasLtMatmul refuse with CUBLAS_STATUS_INVALID_VALUE a leading
 *     dimension below the rows, sizes that disagree with the transposes,
 *     TRANSC other than N, C's shape not D's, and an epilogue without what it
 *     needs: a bias pointer for BIAS, RELU_BIAS, RELU_AUX_BIAS (read, D's rows
 *     long), DRELU_BGRAD, BGRADA (written, D's rows) and BGRADB (written, D's
 *     columns); for RELU_AUX, RELU_AUX_BIAS, DRELU and DRELU_BGRAD an aux
 *     pointer and an aux ld (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, in bits)
 *     that cublasLt.h says "must be divisible by 128 and be no less than the
 *     number of rows in the output matrix" (D's rows as the ld, 120 say, is
 *     refused; a note on stderr says why, as a GPU's cuBLASLt would not). The
 *     heuristic needs requestedAlgoCount > 0 and returns algorithms best
 *     first, none needing more workspace than CUBLASLT_MATMUL_PREF_MAX_-
 *     WORKSPACE_BYTES allows (default 0) or using a reduction scheme the
 *     preference's mask leaves out; none at all is CUBLAS_STATUS_NOT_SUPPORTED.
 *     An algorithm is chosen for operands aligned as the preference's
 *     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES say (default 256: a
 *     smaller value excludes algorithms that need more, as documented) and for
 *     the alignment of the bias and mask pointers the descriptor holds when the
 *     heuristic runs (the header: the heuristic reads them for that); a
 *     cublasLtMatmul with that algorithm and a less aligned operand, bias or
 *     mask is fatal (a misaligned access on a GPU).
 *     Which ones is the simulator's own rule (NVIDIA documents none), after
 *     what cuBLAS chose on our H100 (split-K GEMMs followed by a separate
 *     cublasLt::splitKreduce_kernel for the forward GEMMs, whose k is long:
 *     shared/gpu-runs/2026-11-25-h100/ncu-*.csv): when k^2 > 4 m n, first
 *     split-K into min(8, k) parts reduced in a separate step
 *     (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, workspace parts x m x n x 4
 *     bytes), then no split-K, then split-K reduced in place (INPLACE, a
 *     workspace of counters, 4 bytes per 32 x 32 tile of D rounded up to
 *     256); otherwise no split-K only. (No split-K before in-place: the step
 *     times of the H100 run at c143872, where the backend takes the first
 *     algorithm with no reduction kernel, fit no split-K for the long-k GEMMs
 *     and not a split in place: rule 10, docs/benchmarks.md.) cublasLtMatmul reads alpha and beta at the
 *     call (a graph keeps them), takes no algorithm as the heuristic's first
 *     that needs no workspace, and refuses (INVALID_VALUE) a workspace smaller
 *     than the algorithm needs or not 256-byte aligned, and C == D with
 *     another layout than D's (in place needs Cdesc == Ddesc; Cdesc NULL is
 *     Ddesc); beta == 0 ignores C, NaN included. Operands, bias, mask and
 *     workspace must lie inside live device allocations (fatal, as for
 *     cublasSgemm). It is one operation on the stream, or two (the partial
 *     products, then the "split-K reduction") when the algorithm's scheme is
 *     COMPUTE_TYPE or OUTPUT_TYPE, so a captured graph holds the extra node
 *     the H100 ran. The product comes from the definition, each part of k
 *     accumulated in double; the parts meet as the scheme documents: stored
 *     as float in the workspace and summed by the second operation
 *     (COMPUTE_TYPE, OUTPUT_TYPE), or added into D in float one after another
 *     (INPLACE). CUBLAS_COMPUTE_32F_FAST_TF32 rounds A and B to TF32 as above,
 *     unless NVIDIA_TF32_OVERRIDE=0. Epilogues act on that float result v: BIAS
 *     adds bias[i] in float; RELU gives max(v, 0), and 0 for NaN, as
 *     cuBLASLt's does (NVIDIA's forum: https://forums.developer.nvidia.com/t/
 *     incorrect-result-of-cublasltmatmul-with-cublaslt-epilogue-relu-when-
 *     input-is-nan/329783); RELU_BIAS, bias then ReLU; RELU_AUX and
 *     RELU_AUX_BIAS also store the ReLU bit-mask, bit i + j ld of the aux
 *     buffer, least significant bit first (the simulator's own layout:
 *     cuBLASLt's is undocumented and only cuBLASLt reads it; all ld x n bits
 *     must be allocated); DRELU gives mask ? v : 0; DRELU_BGRAD also writes
 *     bias[i] = sum over j of D[i, j]; BGRADA bias[i] = sum over l of
 *     op(A)[i, l]; BGRADB bias[j] = sum over l of op(B)[l, j] (sums in double
 *     from the unrounded inputs, unscaled, rounded once). All of these are
 *     offered for float32 (cuBLASLt's datatype table restricts epilogues only
 *     for row-major D and integer and complex types) unless
 *     CUDASIM_LT_EPILOGUES (rule 9) lists fewer; the GELU family is not
 *     modelled (CUBLAS_STATUS_NOT_SUPPORTED).
 *  8. NCCL on MPI. ncclGetUniqueId works without a device (as NCCL's does);
 *     ncclCommInitRank is collective, needs a usable device, and every rank
 *     must present the same id, distinct ranks and distinct GPUs (NCCL's
 *     "duplicate GPU" refusal). Lazy connection (NCCL 2.22 and later,
 *     NCCL_RUNTIME_CONNECT=1, the default): a communicator's first collective
 *     call blocks on the host until every rank has made its first call
 *     (NCCL_RUNTIME_CONNECT=0 connects in ncclCommInitRank instead).
 *     ncclAllReduce and ncclBroadcast run in stream order with counts in
 *     elements of the given datatype; buffers must be device memory. A
 *     collective completes only once every rank has reached it, and before
 *     any data moves the ranks compare what each one issued as that
 *     collective (operation, count, datatype, reduction, root, and whether it
 *     was graph-captured, which NCCL requires to be uniform over the ranks):
 *     a difference is fatal, naming both sides. ncclAvg on floating types is
 *     a sum of contributions each premultiplied by 1/nranks (NCCL's
 *     PreMulSum); on integers, a sum then a division. Sums run in ring order,
 *     each 1024-element chunk starting at another rank; every rank gets the
 *     same result. ncclCommGetAsyncError, ncclCommAbort (pending collectives
 *     are dropped, and the other ranks' ncclCommGetAsyncError then reports
 *     ncclRemoteError, as for a peer that went away), ncclCommFinalize (waits
 *     for what is queued) and ncclCommDestroy. A peer that goes away
 *     (CUDASIM_HANG_ERROR_AFTER, rule 9): S seconds after a rank reached the
 *     collective the hung rank never completes, its ncclCommGetAsyncError
 *     reports ncclRemoteError (NCCL's result for "a remote process exited or
 *     there was a network error"), and the collective stays pending until
 *     ncclCommAbort, so a blocking wait behind it is then fatal (rule 2); the
 *     hung rank itself sees no error. The delay is the fault's: NCCL documents
 *     none.
 *  9. Devices and faults, by environment variable:
 *       CUDASIM_DEVICES=N          GPUs in the simulated node (default 8; 0: none)
 *       CUDASIM_DEVICE_NAMES=N     per-device (default): device i calls itself "cudasim
 *                                  device i (...)", so placements can be read off; same:
 *                                  every device the same name, as a box of one GPU model
 *                                  has ("cudasim device (...)")
 *       CUDA_VISIBLE_DEVICES=...   as CUDA reads it: a list of indices, cut at the first invalid one
 *       CUDASIM_DRIVER_VERSION=V   the driver's CUDA version, 1000*major + 10*minor
 *                                  (default the runtime's, 13000; 0: no driver installed)
 *       CUDASIM_FAULT=F            system-not-ready (cudaErrorSystemNotReady at
 *                                  initialization), devices-unavailable (the context
 *                                  cannot be created: exclusive-process mode, device
 *                                  busy), no-kernel-image (cudaFuncGetAttributes and
 *                                  launches fail with cudaErrorNoKernelImageForDevice)
 *       CUDASIM_FAULT_RANK=R       only rank R sees CUDASIM_FAULT (default every rank)
 *       CUDASIM_CAPTURE_FAIL_RANK=R    on rank R, stream capture fails at
 *       CUDASIM_CAPTURE_FAIL_AT=W      W: begin, end (default) or instantiate
 *       CUDASIM_HANG_RANK=R        on rank R, the K-th collective of each communicator
 *       CUDASIM_HANG_AT=K          (default 1, counted in stream order) never completes
 *       CUDASIM_HANG_ERROR_AFTER=S and the other ranks' communicators report it gone
 *                                  (ncclRemoteError) S s after reaching that collective
 *       CUDASIM_LT_EPILOGUES=L     the cuBLASLt epilogues the simulated library offers: a
 *                                  comma list (BIAS,RELU_AUX_BIAS,DRELU_BGRAD,...), "default"
 *                                  for DEFAULT only, "none" for no algorithm at all
 *                                  (default: every modelled one, rule 7)
 *       CUDASIM_DEVICE_MEMORY=MiB  device memory per GPU (default 16384)
 *       CUDASIM_GRAPH_ORDER=O      the order a replay runs a graph's branches in (rule 6):
 *                                  late, early, capture or alternate (the default)
 *       CUDASIM_STUCK_NOTE=S       a host blocked this long in the simulator says on
 *                                  what (default 10 s; 0: never)
 *     No driver: cudaGetDeviceCount fails with cudaErrorInsufficientDriver and
 *     cudaDriverGetVersion gives 0 (what these development machines show);
 *     too old a driver: the same error, with the driver's version.
 *
 * 10. Time (timing.cc), a model of one H100 SXM (132 SMs, ~60 TFLOP/s fp32
 *     SIMT, ~3.35 TB/s HBM3), its figures set from the project's two H100 runs
 *     (shared/gpu-runs/: Nsight Compute per kernel, step medians) and checked
 *     against them by calibrate.sh (docs/benchmarks.md). Every operation gets a
 *     modelled duration when it runs:
 *       - a kernel: a launch overhead (1.8 us per kernel node of a replayed
 *         graph, 2.5 us launched on a stream), plus the larger of its serial
 *         time and its throughput time. Serial: the blocks run in waves over
 *         the SMs (min(32, 2048 / threads per block) blocks per SM), each wave
 *         as long as its slowest thread, whose time is measured as the
 *         simulator runs it: its grid-stride steps (reads of gridDim, 0.2 us
 *         each: an item from and to HBM) and its other loop trips (3 ns each:
 *         a cached load and a multiply-add). Throughput: all items at 24 bytes
 *         against HBM, all trips at 3.7e6 per us. The counting: loop_hook.h,
 *         included by sim_kernels.cc (the only translation unit that compiles
 *         kernels.cu) after every header but kernels.cu and the element bodies
 *         it includes (include/elem.h), defines `for` to count a trip before
 *         each run of the body (the statement stays one statement; break and
 *         continue keep their meaning) and gridDim to count its reads. nvcc
 *         never sees either macro: cuda/kernels.cu stays plain CUDA C.
 *       - a GEMM (cublasSgemm, cublasLtMatmul): blocks of 32 x 32 tiles of D
 *         with 64 threads (16 FMAs per thread per k, 1.3 ns each: a SIMT
 *         kernel, no tensor cores), 4 blocks per SM, times the split-K parts,
 *         each block walking k / parts; at least 2mnk FLOPs at the fp32 rate
 *         and A, B and the parts of D through HBM. A cuBLASLt split-K with a
 *         separate reduction (COMPUTE_TYPE, OUTPUT_TYPE) adds its reduction
 *         kernel (rule 7's second operation); a bias-gradient epilogue
 *         (DRELU_BGRAD, BGRADA, BGRADB) adds the separate kernel the H100 runs
 *         (epilogue::globalKernelBgradAB: 64 threads per output's sum).
 *         cublasSgemm splits k as cuBLAS did on the H100 where k^2 > 4mn:
 *         into min(k / 8, 132 / tiles) parts (about one block per SM), plus a
 *         reduction kernel; with m or n 1, and cublasSgemv, it is a dot kernel
 *         and a reduction kernel, bound by reading the operands.
 *       - copies and memsets: one kernel's overhead and their bytes through
 *         HBM (twice for a copy); a collective: one kernel moving its buffer
 *         twice (the wait for other ranks and the links are not modelled).
 *     Each stream has a clock: an operation starts at the later of the end of
 *     the one before it and the moment the host's launch reaches the device,
 *     and ends its duration later. A kernel launched by programmatic dependent
 *     launch (rule 5) after a kernel of the program (whose every thread lets
 *     its dependents start at its beginning: cuda/kernel_launch.cuh) pays its
 *     launch overhead from the moment that kernel's work began, not from its
 *     end, and its work starts once that kernel has ended: the overhead is
 *     hidden behind the kernel before as far as that one lasts. How much of
 *     the 1.8 us an H100 hides is not yet measured (the figure is the
 *     overhead calibrated without it): an upper bound, until bench/train's
 *     --no-pdl column calibrates it. After a library's kernel, a copy, a
 *     collective or an event the launch overlaps nothing. A replayed graph's
 *     node starts once the nodes it depends on have ended, so its branches
 *     overlap, sharing the SMs: each op occupies a share of them (a kernel's
 *     grid over the blocks 132 SMs hold at once, min(32, 2048 / threads) an
 *     SM; a GEMM's blocks over 4 an SM; a copy or collective all of them),
 *     and while the shares of the nodes at work add up to more than 1 each
 *     works at 1 / that sum of its speed alone (the times are worked out once
 *     the replay's nodes have all run). A node waiting on another stream
 *     (cudaStreamWaitEvent) starts no earlier than the event's record was
 *     reached. The host has a clock too: a kernel or
 *     library launch costs it 2.5 us per kernel (the device may start the
 *     work 1 us later), cudaGraphLaunch 2.5 us (its nodes may start 2.5 us
 *     later), cudaEventRecord 0.3 us, a pageable copy 8 us plus its bytes at
 *     20 GB/s; a blocking wait returns 2 us after the work's end, and a poll
 *     that sees an event complete moves the host to its time. cudaEventRecord
 *     stamps the modelled time its stream reaches it; cudaEventElapsedTime
 *     gives the modelled milliseconds between two completed records (as CUDA
 *     documents: cudaErrorInvalidResourceHandle for an event never recorded,
 *     recorded only into a graph, or created with cudaEventDisableTiming;
 *     cudaErrorNotReady until both have run; it runs nothing itself). So a
 *     step timed with events on the simulator is modelled time, host overhead
 *     of its launches and of a per-step synchronisation included.
 *       CUDASIM_TIME_REPORT=1      at exit, rank 0 writes on stderr the median
 *       CUDASIM_TIME_REPORT=PATH   interval between launches of one graph (the
 *                                  modelled step, graph replay) and the ops of
 *                                  the last replay with their modelled times,
 *                                  longest first (or into PATH)
 *       CUDASIM_LAZY_LOAD_US=N     the first launch of each kernel, captured or
 *                                  not, costs the host N us more: CUDA's lazy
 *                                  loading (CUDA_MODULE_LOADING=LAZY, the
 *                                  default since CUDA 12.2) loads a module's
 *                                  kernels at their first launch; a kernel is
 *                                  one of ours by name, a cuBLASLt algorithm
 *                                  by its id, tile, stages and epilogue,
 *                                  cublasSgemm, cublasSgemv, cuBLASLt's
 *                                  split-K reduction. On the H100 (2026-11-27)
 *                                  plan candidates took 3.8-4.8 ms at their
 *                                  first run where their twins took 13-75 us.
 *                                  0 (the default): not modelled
 *       CUDASIM_HOST_LAUNCH_US=N   the host side of a kernel or library launch
 *                                  on a stream, N us a kernel (default 2.5);
 *                                  a graph's replay is not affected. On the H100
 *                                  (2026-11-27) mlp b32's GEMM candidates, timed
 *                                  as launches on the stream, took 12-20 us a
 *                                  run, the host's submission included
 *     What the model leaves out: clocks and power states, caches beyond the
 *     per-trip figures, occupancy limits from registers and shared memory,
 *     how concurrent kernels share an SM beyond their resident blocks (the
 *     share above; caches, memory bandwidth), the real cuBLAS kernels' tiles (one tile shape stands for all),
 *     and timing across ranks.
 *
 * Not modelled: real concurrency (one host thread runs
 * everything, streams never run at the same time, so a race between streams
 * shows only as the orders of rule 2's lazy streams and rule 6's replays); a
 * GPU's progress on its own: queued work runs only when its own process waits
 * for it or polls it, so a rank that blocks elsewhere (in an MPI call, say)
 * while a peer waits for one of its queued collectives stalls that peer here,
 * where a GPU would have run the collective; the memory model beyond stream
 * order (no caches, no weak ordering; atomics only as cuda_runtime.h's
 * integer atomicAdd, a plain add); reduced precision other than TF32 GEMM
 * inputs (accumulation is in double in every mode, but for the float
 * partial sums of a split-K cuBLASLt algorithm; FP16, BF16 and their math
 * modes are not offered); transports (NVLink, PCIe, InfiniBand, sockets: MPI carries
 * everything); sticky errors after a fault in a kernel; unified and managed
 * memory, peer access, multiple devices per process, stream priorities,
 * implicit synchronization between the legacy stream and blocking streams,
 * cross-stream events, cudaStreamCaptureModeRelaxed beyond accepting it, cuBLAS
 * pointer mode device, cuBLASLt beyond rule 7's subset (batches, other orders
 * and types, layout attributes, setting an algorithm's configuration, GELU
 * epilogues, a cublasHandle_t used as a cublasLtHandle_t), NCCL groups,
 * point-to-point and communicator splitting, and communicators that do not span every
 * rank of the job.
 *
 * This header is the simulator's own (the .cc files beside it); programs include
 * the stand-in cuda_runtime.h, cublas_v2.h, cublasLt.h and nccl.h.
 */
#ifndef MNIST_DDP_CUDASIM_H
#define MNIST_DDP_CUDASIM_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_runtime.h"

namespace cudasim {

/* ---- diagnostics and settings (device.cc) ---------------------------------- */

/* "cudasim: rank R: <message>" on stderr, then abort(): a rule broken where a GPU would crash or hang. */
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same line without ending anything. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* This process's rank in MPI_COMM_WORLD (0 before MPI_Init or without MPI). */
int rank();
/* An integer from the environment, or fallback when unset or empty. */
long env_long(const char *name, long fallback);
/* Seconds on a monotonic clock. */
double now();

/* ---- device state (device.cc) ------------------------------------------------- */

/* What every call needing the driver returns: cudaSuccess, or the reason there is none. */
cudaError_t init_error();
/* Whether CUDASIM_FAULT names this fault for this rank. */
bool fault(const char *name);
/* Record rc as the thread's last error (when it is one) and return it. */
cudaError_t set_error(cudaError_t rc);
/* Device memory per GPU, bytes. */
size_t device_memory_limit();

/* ---- memory (memory.cc) --------------------------------------------------------- */

enum mem_kind {
	MEM_PAGEABLE, /* ordinary host memory: anything the simulator did not allocate */
	MEM_PINNED,   /* cudaMallocHost / cudaHostAlloc */
	MEM_DEVICE,   /* cudaMalloc */
};
/* What kind of memory p points into. */
mem_kind classify(const void *p);
/* Whether [p, p + bytes) lies inside one live device allocation. */
bool device_range(const void *p, size_t bytes);
/* A description of p for messages: "byte 12 of a 4096-byte device allocation", "host memory". */
std::string describe(const void *p);

/*
 * Device memory reachable by the host thread while one of these lives: the
 * simulator opens one around queued work it runs (kernels, copies, GEMMs,
 * collectives moving data). Nested windows cost nothing.
 */
class window {
public:
	window();
	~window();
	window(const window &) = delete;
	window &operator=(const window &) = delete;
};

cudaError_t device_alloc(void **ptr, size_t bytes);
cudaError_t device_free(void *ptr);
cudaError_t pinned_alloc(void **ptr, size_t bytes);
cudaError_t pinned_free(void *ptr);

/* ---- streams, events, graphs (stream.cc) ---------------------------------------- */

/* Queued work that needs other ranks (a collective): advanced by polling. */
class async_work {
public:
	virtual ~async_work() = default;
	/* Make what progress is possible without blocking; true once complete. */
	virtual bool advance() = 0;
	/* What it waits for, for the simulator's notes. */
	virtual std::string describe() const = 0;
	/* True when it is known never to complete (an injected hang): a blocking wait is then fatal. */
	virtual bool never_completes() const { return false; }
};

/* One operation on a stream, or recorded in a graph (then replayed as often as launched). */
struct op {
	std::string label;                 /* "kernel sgd_update_kernel", "cublasSgemm", ... */
	std::function<void()> run;         /* synchronous work, run inside a window */
	std::function<std::unique_ptr<async_work>()> start; /* or: a fresh collective per run */
	/* The time model (rule 10). */
	double us = 0.0;   /* modelled device time of the work, launch overhead apart (a kernel's run sets it) */
	int kernels = 1;   /* kernels it is on a GPU, each paying the launch overhead; 0: a marker */
	std::string detail; /* what the time report names it by (the label when empty) */
	std::function<void(double start)> stamp; /* a marker's: told the modelled time it is reached */
	std::string module; /* the code its kernels come from, loaded at its first launch (rule 10) */
	bool pdl = false;   /* a kernel launched by programmatic dependent launch (rules 5, 10) */
	double share = 1.0; /* the fraction of the SMs its work occupies (rule 10; a kernel's: its grid) */
};

/* Queue o on stream (or record it while the stream captures). */
cudaError_t submit(cudaStream_t stream, op o);
/* The stream's capture status; cudaErrorInvalidResourceHandle for an unknown stream. */
cudaError_t capture_status(cudaStream_t stream, cudaStreamCaptureStatus *status);
/*
 * A call CUDA forbids during capture (allocation, device synchronization, a
 * synchronous copy): while any capture is active it invalidates the captures
 * and returns cudaErrorStreamCaptureUnsupported; cudaSuccess otherwise.
 */
cudaError_t refuse_during_capture();
/* Run every stream's queued work to the end, blocking (api names the caller in notes). */
void drain_all(const char *api);
/* Run stream's queued work to the end, blocking. */
cudaError_t drain(cudaStream_t stream, const char *api);

/* ---- the time model (timing.cc; rule 10) ---------------------------------------------- */

/*
 * The kernel thread being run: its loop trips (every `for` of kernels.cu and
 * the element bodies) and its grid-stride steps (reads of gridDim), counted
 * by sim_kernels.cc's hooks.
 */
extern unsigned long long trips, strides;
/* The op being run sets this to its modelled device time (a kernel, from the trips it measured). */
extern double run_us;
/* And this to the fraction of the GPU's SMs its work occupies (a kernel, from its grid). */
extern double run_share;
/* That fraction for `blocks` blocks of which `per_sm` fit an SM, at most 1. */
double sm_share(double blocks, double per_sm);
/* A kernel's: grid blocks of `block` threads. */
double kernel_share(unsigned grid, unsigned block);
/*
 * The launch of an op whose kernels come from `module` (none when empty):
 * the first one of each module costs the host CUDASIM_LAZY_LOAD_US (rule 10).
 */
void lazy_load(const std::string &module);
/* One thread's serial time: items (grid-stride steps) and the loop trips in all. */
double thread_us(unsigned long long items, unsigned long long loop_trips);
/* Modelled time of a kernel: each block's slowest thread, all threads' items and trips. */
double kernel_us(unsigned block, const std::vector<double> &block_us, unsigned long long total_items,
		 unsigned long long total_trips);
/* Moving bytes through HBM. */
double bytes_us(double bytes);
/* Per kernel: in a replayed graph or launched on a stream. */
double launch_overhead_us(bool graph);
/* A SIMT GEMM of m x n x k split into parts along k: blocks, k per block, time (no launch). */
struct gemm_cost {
	double blocks, k_per_block, us;
};
gemm_cost gemm_model(double m, double n, double k, double parts);
/* The fraction of the SMs a GEMM's blocks occupy (rule 10). */
double gemm_share(const gemm_cost &g);
/* The separate split-K reduction kernel, and cuBLASLt's separate bias-gradient kernel. */
double splitk_reduce_us(double m, double n, double parts);
double bgrad_us(double outputs, double len);
/* The split cublasSgemm chooses (as cuBLAS did on the H100): 1 for none. */
double cublas_sgemm_parts(double m, double n, double k);
/* The host's modelled clock, microseconds. */
double host_now();
void host_spend(double us);
/* A blocking wait for work that ends at device_time; polling that saw it done. */
void host_waited(double device_time);
void host_observed(double device_time);
void host_pageable_copy(size_t bytes);
double host_launch_cost_us();
double host_event_cost_us();
double host_graph_launch_cost_us();
double graph_latency_us();
double stream_latency_us();
/* For CUDASIM_TIME_REPORT: a graph launched at host_time; an op of a replay done in us. */
void note_graph_launch(const void *exec, double host_time);
void note_op_time(uint64_t replay, const std::string &what, double us);

/* ---- cuBLAS and cuBLASLt (cublas.cc, cublaslt.cc) ------------------------------------- */

/* x rounded to TF32 as CUBLAS_TF32_TENSOR_OP_MATH rounds GEMM inputs (rule 7), for the tests. */
float tf32_round(float x);
/* NVIDIA_TF32_OVERRIDE=0: no TF32, whatever a handle or a compute type asks (rule 7). */
bool tf32_disabled();

/* ---- collectives (nccl.cc) --------------------------------------------------------- */

/*
 * What an allreduce computes (rule 8), exposed for the tests: out (count) =
 * op over n contributions of count elements of datatype, stored one after
 * another in gathered, in the order and manner of the simulated NCCL.
 */
void nccl_reduce(int datatype, const void *gathered, size_t count, int n, int op, void *out);

} /* namespace cudasim */

#endif /* MNIST_DDP_CUDASIM_H */
