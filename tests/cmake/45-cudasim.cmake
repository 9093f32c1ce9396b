# The CUDA simulator (tests/cudasim/, label cudasim): the unchanged .cu files of cuda/
# compiled by the host C++ compiler against stand-in CUDA runtime, cuBLAS and
# NCCL headers, run on the CPU under mpirun. Built in every build, with or
# without the CUDA toolkit; never linked into mnist-train. Its tests say
# "sim" in their names; nothing here runs on, or is reported as, a GPU.
#
#   cudasim              the simulator (tests/cudasim/cudasim.h says what it models)
#   mnist-cuda-sim       cuda/'s sources and entry point compiled against it: the CUDA
#                        module, simulated, as build/cudasim/libmnist-cuda.so, beside a
#                        copy of mnist-train (target mnist-train-cudasim) and a stand-in
#                        driver library (build/cudasim/driver/libcuda.so.1)
enable_language(CXX)
set(MNIST_CUDASIM_DIR ${CMAKE_CURRENT_SOURCE_DIR}/cudasim)
set(MNIST_CUDASIM_CXX_WARNINGS -Wall -Wextra -Wshadow -Wno-unused-parameter
    -Wno-missing-field-initializers -Wno-format-truncation)
if(MNIST_DDP_WERROR)
  list(APPEND MNIST_CUDASIM_CXX_WARNINGS -Werror)
endif()

add_library(cudasim STATIC
  ${MNIST_CUDASIM_DIR}/device.cc ${MNIST_CUDASIM_DIR}/memory.cc ${MNIST_CUDASIM_DIR}/stream.cc
  ${MNIST_CUDASIM_DIR}/copy.cc ${MNIST_CUDASIM_DIR}/cublas.cc ${MNIST_CUDASIM_DIR}/cublaslt.cc
  ${MNIST_CUDASIM_DIR}/nccl.cc ${MNIST_CUDASIM_DIR}/timing.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/block_fibers.c)
# The stand-in headers come before any other <cuda_runtime.h>, <cublas_v2.h>, <cublasLt.h>, <nccl.h>.
target_include_directories(cudasim BEFORE PUBLIC ${MNIST_CUDASIM_DIR})
target_compile_options(cudasim PRIVATE ${MNIST_CUDASIM_CXX_WARNINGS})
# The C API of MPI only (no C++ bindings to link).
target_compile_definitions(cudasim PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
target_link_libraries(cudasim PUBLIC MPI::MPI_C)
set_target_properties(cudasim PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
                      CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)

# The CUDA backend's module built against the simulator: the same cuda/ sources
# and entry point as build/libmnist-cuda.so, under the same name, in
# build/cudasim/ beside a copy of mnist-train, which loads it exactly as the
# real program loads the real module (it looks beside its own executable).
set(MNIST_CUDASIM_OUT ${CMAKE_BINARY_DIR}/cudasim)
add_library(mnist-cuda-sim MODULE ${MNIST_CUDASIM_DIR}/sim_backend_cuda.cc ${MNIST_CUDASIM_DIR}/sim_backend_cuda_start.cc
  ${MNIST_CUDASIM_DIR}/sim_kernels.cc ${MNIST_CUDASIM_DIR}/sim_gemm_lt.cc ${MNIST_CUDASIM_DIR}/sim_conv_plan.cc
  ${MNIST_CUDASIM_DIR}/sim_head_plan.cc ${MNIST_CUDASIM_DIR}/sim_plan.cc ${MNIST_CUDASIM_DIR}/sim_ways.cc ${MNIST_CUDASIM_DIR}/sim_backend_cuda_plan.cc
  ${MNIST_CUDASIM_DIR}/sim_backend_cuda_graph.cc
  ${MNIST_CUDASIM_DIR}/sim_cuda_check.cc ${MNIST_CUDASIM_DIR}/sim_probe.cc
  ${MNIST_CUDASIM_DIR}/sim_backend_module.cc ${CMAKE_SOURCE_DIR}/cuda/plan_json.c)
target_include_directories(mnist-cuda-sim PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/cuda
                           ${JANSSON_INCLUDE_DIR})
target_compile_options(mnist-cuda-sim PRIVATE ${MNIST_CUDASIM_CXX_WARNINGS})
target_compile_definitions(mnist-cuda-sim PRIVATE MNIST_DDP_INTERFACE_ID="${MNIST_DDP_INTERFACE_ID}")
target_link_libraries(mnist-cuda-sim PRIVATE cudasim ${JANSSON_LIBRARY})
set_target_properties(mnist-cuda-sim PROPERTIES OUTPUT_NAME mnist-cuda
  LIBRARY_OUTPUT_DIRECTORY ${MNIST_CUDASIM_OUT} CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
  CXX_EXTENSIONS OFF CXX_VISIBILITY_PRESET hidden)
# backend_module_entry its only export, as the real module's (cmake/module_exports.map): the
# simulator's cudaMalloc, ncclAllReduce, ... stay inside it.
target_link_options(mnist-cuda-sim PRIVATE
                    LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/module_exports.map)
set_property(TARGET mnist-cuda-sim APPEND PROPERTY LINK_DEPENDS
             ${CMAKE_SOURCE_DIR}/cmake/module_exports.map)
set(MNIST_CUDASIM_MODULE ${MNIST_CUDASIM_OUT}/$<TARGET_FILE_NAME:mnist-cuda-sim>)

# The stand-in driver library, so that the loader's driver check passes.
add_library(cudasim-driver SHARED ${MNIST_CUDASIM_DIR}/driver.c)
set_target_properties(cudasim-driver PROPERTIES OUTPUT_NAME cuda SOVERSION 1
                      LIBRARY_OUTPUT_DIRECTORY ${MNIST_CUDASIM_OUT}/driver)
set(MNIST_CUDASIM_ENV LD_LIBRARY_PATH=${MNIST_CUDASIM_OUT}/driver)

# A copy of mnist-train (not a link: the loader looks beside the executable's real path).
add_custom_command(OUTPUT ${MNIST_CUDASIM_OUT}/mnist-train
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:mnist-train> ${MNIST_CUDASIM_OUT}/mnist-train
  DEPENDS mnist-train VERBATIM)
add_custom_target(mnist-train-cudasim ALL DEPENDS ${MNIST_CUDASIM_OUT}/mnist-train mnist-cuda-sim
                  cudasim-driver)

# ---- the GPU suite (tests/gpu) on the simulator ----------------------------------
add_library(mnist_gpu_test_util_sim STATIC ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_common.c
            ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_train.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c
            ${CMAKE_SOURCE_DIR}/cuda/plan_json.c)
target_compile_options(mnist_gpu_test_util_sim PRIVATE ${MNIST_DDP_WARNINGS})
target_include_directories(mnist_gpu_test_util_sim PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/gpu
                           ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/cuda
                           PRIVATE ${JANSSON_INCLUDE_DIR})
target_link_libraries(mnist_gpu_test_util_sim PUBLIC mnist_core)
target_compile_definitions(mnist_gpu_test_util_sim PRIVATE
                           MNIST_TEST_CUDA_MODULE="${MNIST_CUDASIM_MODULE}")
set(MNIST_GPU_PROGRAMS gpu_ops gpu_plan gpu_train_parity gpu_graph gpu_allreduce gpu_deadline gpu_train_step)
foreach(prog ${MNIST_GPU_PROGRAMS})
  add_executable(${prog}_sim ${CMAKE_CURRENT_SOURCE_DIR}/gpu/${prog}.c)
  target_compile_options(${prog}_sim PRIVATE ${MNIST_DDP_WARNINGS})
  target_link_libraries(${prog}_sim PRIVATE mnist_gpu_test_util_sim)
  set_target_properties(${prog}_sim PROPERTIES ENABLE_EXPORTS ON)
  add_dependencies(${prog}_sim mnist-cuda-sim cudasim-driver)
endforeach()

# add_cudasim_test(NAME RANKS [TIMEOUT S] [ENV VAR=VALUE...] [EXPECT STATUS PATTERN...]
#                  [PASS REGEX] COMMAND PROGRAM ARGS...)
# PROGRAM under mpirun -n RANKS with the simulator's settings in ENV (label
# cudasim). EXPECT: through expect.sh (exit status and output patterns); PASS:
# passes on that output line whatever the exit status (a job ended by
# MPI_Abort); else on exit status 0. A GPU test that skips (77) fails here: the
# simulator always has a device unless a test takes it away. WAITS: its ranks mostly wait
# (a deadline, a hang): it holds one of ctest's processors, not one a rank.
function(add_cudasim_test name ranks)
  cmake_parse_arguments(A "WAITS" "TIMEOUT;PASS" "ENV;EXPECT;COMMAND" ${ARGN})
  set(cmd ${MNIST_MPIRUN} --timeout 170 -n ${ranks} -x ${MNIST_CUDASIM_ENV})
  foreach(e ${A_ENV})
    list(APPEND cmd -x ${e})
  endforeach()
  list(APPEND cmd ${A_COMMAND})
  if(A_EXPECT)
    list(GET A_EXPECT 0 status)
    list(REMOVE_AT A_EXPECT 0)
    set(cmd ${MNIST_CUDASIM_DIR}/expect.sh ${status} ${A_EXPECT} -- ${cmd})
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 180)
  endif()
  add_test(NAME ${name} COMMAND ${cmd})
  set(_processors ${ranks})
  if(A_WAITS)
    set(_processors 1)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS cudasim TIMEOUT ${A_TIMEOUT} PROCESSORS ${_processors}
                       ENVIRONMENT "MNIST_DATA_DIR=${MNIST_DATA_DIR}")
  if(A_PASS)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${A_PASS}")
  endif()
endfunction()

# ---- the simulator's own rules (cudasim.h), each broken by a wrong program -------
# test_cudasim_rules is a Criterion program: not built with MNIST_DDP_TESTS=gpu.
if(MNIST_TESTS_CRITERION)
  add_executable(test_cudasim_rules ${MNIST_CUDASIM_DIR}/test_cudasim_rules.cc
                 ${MNIST_CUDASIM_DIR}/test_cudasim_cublaslt.cc ${MNIST_CUDASIM_DIR}/test_cudasim_time.cc)
  target_include_directories(test_cudasim_rules PRIVATE ${CRITERION_INCLUDE_DIR})
  target_compile_options(test_cudasim_rules PRIVATE ${MNIST_CUDASIM_CXX_WARNINGS})
  target_link_libraries(test_cudasim_rules PRIVATE mnist_gpu_test_util_sim cudasim ${CRITERION_LIBRARY})
  set_target_properties(test_cudasim_rules PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
                        CXX_EXTENSIONS OFF)
  add_test(NAME test_cudasim_rules COMMAND test_cudasim_rules --jobs 1)
  set_tests_properties(test_cudasim_rules PROPERTIES LABELS cudasim)
endif()
add_executable(cudasim_nccl_rules ${MNIST_CUDASIM_DIR}/cudasim_nccl_rules.cc)
target_compile_options(cudasim_nccl_rules PRIVATE ${MNIST_CUDASIM_CXX_WARNINGS})
target_link_libraries(cudasim_nccl_rules PRIVATE cudasim)
set_target_properties(cudasim_nccl_rules PROPERTIES CXX_STANDARD 20
                      CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
add_cudasim_test(cudasim_nccl_rules_2 2 COMMAND $<TARGET_FILE:cudasim_nccl_rules> rules)
# Whichever rank finds the difference first names its own collective first: either order.
add_cudasim_test(cudasim_nccl_count_in_bytes_caught_2 2 TIMEOUT 60 WAITS
                 PASS "NCCL collective #1 differs across ranks.*allreduce of 256 x ncclFloat32.*allreduce of 1024 x ncclFloat32|NCCL collective #1 differs across ranks.*allreduce of 1024 x ncclFloat32.*allreduce of 256 x ncclFloat32"
                 COMMAND $<TARGET_FILE:cudasim_nccl_rules> count-in-bytes)
add_cudasim_test(cudasim_nccl_datatype_caught_2 2 TIMEOUT 60 WAITS
                 PASS "NCCL collective #1 differs across ranks.*allreduce of 64 x ncclInt64.*allreduce of 64 x ncclFloat64|NCCL collective #1 differs across ranks.*allreduce of 64 x ncclFloat64.*allreduce of 64 x ncclInt64"
                 COMMAND $<TARGET_FILE:cudasim_nccl_rules> datatype)
add_cudasim_test(cudasim_nccl_capture_not_uniform_caught_2 2 TIMEOUT 60 WAITS
                 PASS "NCCL collective #2 differs across ranks.*graph-captured.*not captured|NCCL collective #2 differs across ranks.*not captured.*graph-captured"
                 COMMAND $<TARGET_FILE:cudasim_nccl_rules> capture)
add_cudasim_test(cudasim_nccl_hang_then_abort_2 2 TIMEOUT 60 WAITS PASS "PASS hang"
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=1
                 COMMAND $<TARGET_FILE:cudasim_nccl_rules> hang)
add_cudasim_test(cudasim_nccl_hang_error_2 2 TIMEOUT 60 WAITS PASS "PASS hang-error"
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=1 CUDASIM_HANG_ERROR_AFTER=2
                 COMMAND $<TARGET_FILE:cudasim_nccl_rules> hang-error)
# Rule 2: a blocking wait behind a collective that never completes is stopped, named.
foreach(_call sync free)
  set(_api cudaStreamSynchronize)
  if(_call STREQUAL free)
    set(_api cudaFree)
  endif()
  add_cudasim_test(cudasim_nccl_hang_${_call}_caught_2 2 TIMEOUT 60 WAITS PASS "${_api} blocks forever"
                   ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=1
                   COMMAND $<TARGET_FILE:cudasim_nccl_rules> hang-${_call})
endforeach()

# Issue 22: a launch CUDA refuses ends the job through the product's own check (KERNEL_LAUNCH's
# CUDA_CHECK_LAUNCH in cuda/kernels.cu, compiled unchanged), with the product's message.
add_executable(cudasim_launch_check ${MNIST_CUDASIM_DIR}/launch_check.cc
  ${MNIST_CUDASIM_DIR}/sim_kernels.cc ${MNIST_CUDASIM_DIR}/sim_cuda_check.cc)
target_include_directories(cudasim_launch_check PRIVATE ${CMAKE_SOURCE_DIR}/include
                           ${CMAKE_SOURCE_DIR}/cuda)
target_compile_options(cudasim_launch_check PRIVATE ${MNIST_CUDASIM_CXX_WARNINGS})
target_link_libraries(cudasim_launch_check PRIVATE cudasim mnist_core)
set_target_properties(cudasim_launch_check PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
                      CXX_EXTENSIONS OFF)
add_cudasim_test(cudasim_launch_check_good_1 1 TIMEOUT 60 WAITS EXPECT 0 "^PASS launch_check"
                 COMMAND $<TARGET_FILE:cudasim_launch_check> good)
foreach(_case grid-0 block-2048 image)
  set(_error "error 9 \\(cudaErrorInvalidConfiguration\\)")
  set(_env)
  if(_case STREQUAL image)
    set(_error "error 209 \\(cudaErrorNoKernelImageForDevice\\)")
    set(_env ENV CUDASIM_FAULT=no-kernel-image)
  endif()
  string(REPLACE "-" "_" _name cudasim_launch_check_${_case}_caught_1)
  add_cudasim_test(${_name} 1 TIMEOUT 60 WAITS ${_env}
                   EXPECT 1 "rank 0 on .*: launch of bias_act_kernel failed: ${_error}" "!FAIL"
                   COMMAND $<TARGET_FILE:cudasim_launch_check> ${_case})
endforeach()

# The whole suite, on 1 and 2 ranks (3 for a mean that is not a power of two). The 1-rank
# runs on a node of one GPU (CUDASIM_DEVICES=1): what a single-GPU node can check.
set(_one_gpu ENV CUDASIM_DEVICES=1)
add_cudasim_test(gpu_ops_sim 1 ${_one_gpu} COMMAND $<TARGET_FILE:gpu_ops_sim>)
# CUDASIM_GRAPH_ORDER=early: a replayed head runs its second stream's branch as soon as it may.
add_cudasim_test(gpu_plan_sim 1 ${_one_gpu} CUDASIM_GRAPH_ORDER=early TIMEOUT 300
                 COMMAND $<TARGET_FILE:gpu_plan_sim>)
add_cudasim_test(gpu_train_parity_sim 1 ${_one_gpu} COMMAND $<TARGET_FILE:gpu_train_parity_sim> --quick)
add_cudasim_test(gpu_graph_sim 1 ${_one_gpu} COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_train_step_sim_1 1 ${_one_gpu} COMMAND $<TARGET_FILE:gpu_train_step_sim>)
add_cudasim_test(gpu_deadline_sim_1 1 ${_one_gpu} COMMAND $<TARGET_FILE:gpu_deadline_sim>)
# The 2-rank tests on that node skip, saying why (one rank per GPU), never pass or fail.
foreach(prog gpu_allreduce gpu_graph gpu_train_step gpu_deadline)
  add_cudasim_test(${prog}_sim_one_gpu_skips_2 2 ${_one_gpu}
                   EXPECT 77 "^SKIP ${prog}: needs 2 GPUs, 1 visible" "!FAIL"
                   COMMAND $<TARGET_FILE:${prog}_sim>)
endforeach()
add_cudasim_test(gpu_graph_sim_2 2 COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_allreduce_sim_2 2 COMMAND $<TARGET_FILE:gpu_allreduce_sim> --quick)
add_cudasim_test(gpu_allreduce_sim_3 3 COMMAND $<TARGET_FILE:gpu_allreduce_sim> --quick)
add_cudasim_test(gpu_train_step_sim_2 2 COMMAND $<TARGET_FILE:gpu_train_step_sim>)

# Defects 1 and 2 (issue 10): a collective a peer never completes ends the job by the
# deadline, within timeout + a few seconds, instead of blocking in a copy or in NCCL's
# lazy connection. --both: a collective both ranks issue never completes on rank 1
# (the 3rd: the backend's warm-up, the test's, then this one).
set(_deadline_line "allreduce at epoch 3 step 7 not complete after 2 s")
add_cudasim_test(gpu_deadline_sim_2 2 TIMEOUT 30 WAITS PASS "${_deadline_line}"
                 COMMAND $<TARGET_FILE:gpu_deadline_sim>)
add_cudasim_test(gpu_deadline_sim_no_warm_up_2 2 TIMEOUT 30 WAITS PASS "${_deadline_line}"
                 COMMAND $<TARGET_FILE:gpu_deadline_sim> --no-warm-up)
add_cudasim_test(gpu_deadline_sim_upload_2 2 TIMEOUT 30 WAITS PASS "${_deadline_line}"
                 COMMAND $<TARGET_FILE:gpu_deadline_sim> --upload)
add_cudasim_test(gpu_deadline_sim_hung_peer_2 2 TIMEOUT 30 WAITS PASS "${_deadline_line}"
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=3
                 COMMAND $<TARGET_FILE:gpu_deadline_sim> --both)
# Issue 15: the hung collective inside a replayed graph (the 4th: warm-ups, one replay
# waited for, then this one), and a free waiting behind it (cudaFree waits for the device).
add_cudasim_test(gpu_deadline_sim_replay_2 2 TIMEOUT 30 WAITS PASS "${_deadline_line}"
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=4
                 COMMAND $<TARGET_FILE:gpu_deadline_sim> --replay --both)
add_cudasim_test(gpu_deadline_sim_free_2 2 TIMEOUT 30 WAITS PASS "${_deadline_line}"
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=3
                 COMMAND $<TARGET_FILE:gpu_deadline_sim> --free --both)
# Their ranks wait out a 2 s deadline (0.13 cores busy, 2026-11-27): one slot each, so that
# ctest runs a test beside them (scripts/test.sh, PROCESSORS).
set_tests_properties(gpu_deadline_sim_2 gpu_deadline_sim_no_warm_up_2 gpu_deadline_sim_upload_2
                     gpu_deadline_sim_hung_peer_2 gpu_deadline_sim_replay_2 gpu_deadline_sim_free_2
                     PROPERTIES PROCESSORS 1)

# Defect 3: capture that fails on one rank leaves every rank uncaptured, in step.
add_cudasim_test(gpu_graph_sim_capture_fails_on_rank1_2 2 ENV CUDASIM_CAPTURE_FAIL_RANK=1
                 COMMAND $<TARGET_FILE:gpu_graph_sim> --expect-no-graph)
add_cudasim_test(gpu_graph_sim_capture_begin_fails_on_rank1_2 2
                 ENV CUDASIM_CAPTURE_FAIL_RANK=1 CUDASIM_CAPTURE_FAIL_AT=begin
                 COMMAND $<TARGET_FILE:gpu_graph_sim> --expect-no-graph)

# Defect 4: no driver or no device skips (77); GPUs present but unusable fail (1).
add_cudasim_test(gpu_graph_sim_no_driver_skips_2 2 ENV CUDASIM_DRIVER_VERSION=0
                 EXPECT 77 "SKIP gpu_graph: .*no CUDA driver" COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_no_device_skips_2 2 ENV CUDASIM_DEVICES=0
                 EXPECT 77 "SKIP gpu_graph: .*no CUDA device" COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_old_driver_fails_2 2 ENV CUDASIM_DRIVER_VERSION=12040
                 EXPECT 1 "FAIL gpu_graph: GPUs present but unusable.*driver-too-old"
                 COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_system_not_ready_fails_2 2 ENV CUDASIM_FAULT=system-not-ready
                 EXPECT 1 "FAIL gpu_graph: GPUs present but unusable.*system-not-ready"
                 COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_no_kernel_image_fails_2 2 ENV CUDASIM_FAULT=no-kernel-image
                 EXPECT 1 "FAIL gpu_graph: GPUs present but unusable.*no-kernel-image"
                 COMMAND $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_device_busy_on_rank1_fails_2 2
                 ENV CUDASIM_FAULT=devices-unavailable CUDASIM_FAULT_RANK=1
                 EXPECT 1 "FAIL gpu_graph: GPUs present but unusable.*rank 1.*device-busy"
                 COMMAND $<TARGET_FILE:gpu_graph_sim>)
# Two ranks on one GPU, and more ranks than a rank sees GPUs, where the node's ranks see
# enough GPUs together: misconfigured, so they fail (too few GPUs in the node skips, above).
add_cudasim_test(gpu_graph_sim_shared_gpu_fails_2 2 ENV CUDASIM_DEVICES=2
                 EXPECT 1 "FAIL gpu_graph: GPUs present but unusable.*shared-gpu"
                 COMMAND ${MNIST_CUDASIM_DIR}/visible_per_rank.sh 1 0,1 -- $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_too_many_ranks_fails_3 3 ENV CUDASIM_DEVICES=3
                 EXPECT 1 "FAIL gpu_graph: GPUs present but unusable.*too-many-ranks"
                 COMMAND ${MNIST_CUDASIM_DIR}/visible_per_rank.sh 2 0,1 0,1 -- $<TARGET_FILE:gpu_graph_sim>)
add_cudasim_test(gpu_graph_sim_two_gpus_skips_3 3 ENV CUDASIM_DEVICES=2
                 EXPECT 77 "^SKIP gpu_graph: needs 3 GPUs, 2 visible" COMMAND $<TARGET_FILE:gpu_graph_sim>)

# Issue 21: what runs where cuBLASLt offers less, the CUDA backend's fallbacks: only the
# plain product (our kernels for bias, ReLU, the ReLU's and the bias's gradients), and no
# algorithm at all (cublasSgemm with those kernels). Same results, more launches. The GEMMs
# and their epilogues alone (--gemm-only): the other ops run our kernels whatever cuBLASLt
# offers, and gpu_ops_sim runs them.
add_cudasim_test(gpu_ops_sim_lt_default_only 1 ENV CUDASIM_DEVICES=1 CUDASIM_LT_EPILOGUES=default
                 COMMAND $<TARGET_FILE:gpu_ops_sim> --gemm-only)
add_cudasim_test(gpu_ops_sim_no_cublaslt 1 ENV CUDASIM_DEVICES=1 CUDASIM_LT_EPILOGUES=none
                 COMMAND $<TARGET_FILE:gpu_ops_sim> --gemm-only)

# Defect 7: one visible device per rank (srun --gpus-per-task=1, or a wrapper): it is used
# (memory and the GEMMs on it, --gemm-only: which device a rank sees changes no op).
add_cudasim_test(gpu_ops_sim_one_visible_device_per_rank_2 2
                 COMMAND sh -c "CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK exec $<TARGET_FILE:gpu_ops_sim> --gemm-only")

# Defect 4 for --backend auto: GPUs present but unusable still train, on the host, and
# rank 0 says so loudly and the summary names the reason; no driver falls back quietly.
set(_train_sim ${MNIST_CUDASIM_OUT}/mnist-train --data ${MNIST_DATA_DIR}/train --limit 640 --epochs 1)
# Issue 44: micro-batch mode and --exact on the simulated CUDA backend (tests/e2e/test_exact.sh's
# sim-* cases; docs/exact.md): one param_crc32 at 1, 2 and 4 ranks, captured and not, the
# heuristic's plan, the control without --exact differing; the overflow read where the loss is.
# They compare param_crc32s, never an accuracy: on the training files alone (train_only_data.sh),
# so that no run scores the test set (sim-lenet's three runs: 10 of 11 s of CPU).
foreach(_case sim-seed sim-mlp sim-lenet sim-overflow)
  string(REPLACE "sim-" "" _name ${_case})
  add_test(NAME mnist_train_sim_exact_${_name}
           COMMAND ${MNIST_CUDASIM_DIR}/train_only_data.sh ${MNIST_DATA_DIR} --
                   bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_exact.sh ${_case} ${MNIST_CUDASIM_OUT}/mnist-train
                   @DATA@ ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -x CUDASIM_DEVICE_NAMES=same)
  set_tests_properties(mnist_train_sim_exact_${_name} PROPERTIES LABELS cudasim TIMEOUT 300
                       PROCESSORS 2 PASS_REGULAR_EXPRESSION "PASS: ${_case}"
                       FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()
add_cudasim_test(mnist_train_sim_auto_old_driver_2 2 ENV CUDASIM_DRIVER_VERSION=12040
                 EXPECT 0 "mnist-train: WARNING: GPUs are present but unusable.*driver-too-old"
                 "^summary: .*backend=host .* backend_fallback=driver-too-old$" COMMAND ${_train_sim})
add_cudasim_test(mnist_train_sim_auto_no_driver_2 2 ENV CUDASIM_DRIVER_VERSION=0
                 EXPECT 0 "backend auto: using host, because rank 0 cannot run the CUDA backend: .*no CUDA driver" "!WARNING"
                 "!backend_fallback" COMMAND ${_train_sim})

# Issue 15: mnist-train itself, a peer hung inside a replayed step (collective #6: warm-up,
# broadcast, then the captured step's allreduces) ended by --timeout.
add_cudasim_test(mnist_train_sim_replay_hang_timeout_2 2 TIMEOUT 30 WAITS
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=6
                 EXPECT 1 "collective #6 .*graph-captured\\) will never complete"
                 "rank [01] on .*: allreduce at epoch 0 step [0-9]+ not complete after 2 s"
                 COMMAND ${_train_sim} --backend cuda --timeout 2)

# Issue 22: a peer that goes away while this rank waits (rank 1 hung in collective #6, its
# loss reported to rank 0 as ncclRemoteError 2 s later) ends the job at once through the
# wait's check of the asynchronous error, not at --timeout (300 s).
add_cudasim_test(mnist_train_sim_peer_gone_async_error_2 2 TIMEOUT 30 WAITS
                 ENV CUDASIM_HANG_RANK=1 CUDASIM_HANG_AT=6 CUDASIM_HANG_ERROR_AFTER=2
                 EXPECT 1 "rank 0 on .*: NCCL communicator \\(asynchronous error\\) failed: error 6 \\(ncclRemoteError\\).*rank 1 went away during collective #6"
                 "!not complete after"
                 COMMAND ${_train_sim} --backend cuda --timeout 300)

# mnist-train --backend cuda on the simulator, captured and not, against the host backend.
# Every device of one name, as on a box of one GPU model: the runs that follow a plan
# (--gpu-plan-from, --resume) follow it on every rank only then (plan_foreign.sh).
foreach(_model seed mlp mlp_adamw)
  set(_args --limit 3200 --seed 1)
  if(_model STREQUAL mlp)
    list(APPEND _args --model mlp --hidden 64 --momentum 0.9 --lr 0.05)
  elseif(_model STREQUAL mlp_adamw) # the update count lives on the device: graph replay must see it move
    list(APPEND _args --model mlp --hidden 64 --optimizer adamw --lr 0.002 --weight-decay 0.01)
  endif()
  add_test(NAME mnist_train_sim_${_model}_cuda_vs_host_2
           COMMAND ${MNIST_CUDASIM_DIR}/train_sim.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                   2 ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -x CUDASIM_DEVICE_NAMES=same -- ${_args})
  set_tests_properties(mnist_train_sim_${_model}_cuda_vs_host_2 PROPERTIES LABELS cudasim TIMEOUT 300
                       PROCESSORS 2)
endforeach()

# --clip-grad-norm on the simulated CUDA backend, at 1 and 2 ranks: captured, its losses within
# 1e-5 of the host's clipped run, bitwise its uncaptured run; a bound never reached bitwise no
# flag; without the flag outside that bound (tests/e2e/test_clip.sh; e2e_clip_2 is the host's).
foreach(_ranks 1 2)
  add_test(NAME mnist_train_sim_clip_${_ranks}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_clip.sh sim ${_ranks}
                   ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR} ${MNIST_MPIRUN}
                   -x ${MNIST_CUDASIM_ENV} -x CUDASIM_DEVICE_NAMES=same)
  set_tests_properties(mnist_train_sim_clip_${_ranks} PROPERTIES LABELS cudasim TIMEOUT 300
                       PROCESSORS ${_ranks} PASS_REGULAR_EXPRESSION "PASS clip"
                       FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()

# --profile on the simulated CUDA backend: op times on the modelled clock, kernels per op
# (tests/e2e/test_profile.sh; e2e_profile is the host's run).
add_test(NAME mnist_train_sim_profile
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_profile.sh cuda ${MNIST_CUDASIM_OUT}/mnist-train
                 ${MNIST_DATA_DIR} ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV})
set_tests_properties(mnist_train_sim_profile PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 2)

# --eval-every 3 on the simulated CUDA backend: the same epochs scored as on the host
# (tests/e2e/test_eval_every.sh; e2e_eval_every is the host's run).
add_test(NAME mnist_train_sim_eval_every_2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_eval_every.sh cuda ${MNIST_CUDASIM_OUT}/mnist-train
                 ${MNIST_DATA_DIR} ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -x CUDASIM_DEVICE_NAMES=same)
set_tests_properties(mnist_train_sim_eval_every_2 PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 2)

# The epoch line on the simulated CUDA backend (tests/e2e/test_epoch_line.sh; e2e_epoch_line
# is the host's run, with the progress line's checks).
add_test(NAME mnist_train_sim_epoch_line_2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_epoch_line.sh ${MNIST_CUDASIM_OUT}/mnist-train
                 ${MNIST_DATA_DIR} ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- --backend cuda
                 --gpu-plan heuristic)
set_tests_properties(mnist_train_sim_epoch_line_2 PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 2
                     PASS_REGULAR_EXPRESSION "PASS epoch_line" FAIL_REGULAR_EXPRESSION "FAIL:")

# --eval-only on the simulated CUDA backend: a host run's checkpoint scored at 2 ranks, the
# host run's test accuracy and param_crc32 (tests/reliability/test_eval_only.sh; the host's
# own cases are reliability_eval_only).
add_test(NAME mnist_train_sim_eval_only_2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/reliability/test_eval_only.sh cuda
                 ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR} ${MNIST_MPIRUN}
                 -x ${MNIST_CUDASIM_ENV} -x CUDASIM_DEVICE_NAMES=same)
set_tests_properties(mnist_train_sim_eval_only_2 PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 2)
# --init-from on the simulated CUDA backend: a host run's checkpoint starts a run whose
# updates round away, which ends with the checkpoint's parameters to the bit
# (tests/reliability/test_init_from.sh; the host's own cases are reliability_init_from).
add_test(NAME mnist_train_sim_init_from_2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/reliability/test_init_from.sh cuda
                 ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR} ${MNIST_MPIRUN}
                 -x ${MNIST_CUDASIM_ENV} -x CUDASIM_DEVICE_NAMES=same)
set_tests_properties(mnist_train_sim_init_from_2 PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 2)

# The program's own kernels in one captured step, bounded per model at one rank (the
# same kernels and one node more, the allreduce, at two, and graph_nodes=0 reported with
# --no-graph: checked on the seed model): a change that adds a launch of ours to the step
# fails here. Library calls are not bounded (graph_nodes.sh says why): time is the figure.
foreach(_case "seed;2;" "mlp;2;" "mlp_adamw;2;--optimizer;adamw;--lr;0.001" "lenet;6;")
  list(GET _case 0 _name)
  list(GET _case 1 _bound)
  list(SUBLIST _case 2 -1 _extra)
  string(REGEX REPLACE "_.*" "" _model ${_name})
  add_test(NAME mnist_train_sim_graph_nodes_${_name}
           COMMAND ${MNIST_CUDASIM_DIR}/graph_nodes.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                   ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- ${_model} ${_bound} ${_extra})
  set_tests_properties(mnist_train_sim_graph_nodes_${_name} PROPERTIES LABELS cudasim TIMEOUT 300
                       PROCESSORS 2)
  if(NOT _name STREQUAL "seed")
    set_tests_properties(mnist_train_sim_graph_nodes_${_name} PROPERTIES
                         ENVIRONMENT GRAPH_NODES_ONE_RANK=1 PROCESSORS 1)
  endif()
endforeach()

# --graph-steps: several steps a graph launch, bitwise the same run as one a launch, the
# groups the loop promises (graphs of 1, 8 and 2 steps for --log-every 10), the loss lines
# unchanged, the modelled step shorter, at 1 and 2 ranks; bad values exit 2.
add_test(NAME mnist_train_sim_graph_steps_seed
         COMMAND ${MNIST_CUDASIM_DIR}/graph_steps.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                 ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- seed)
set_tests_properties(mnist_train_sim_graph_steps_seed PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 2
                     PASS_REGULAR_EXPRESSION "PASS graph_steps" FAIL_REGULAR_EXPRESSION "FAIL:")

# LeNet-5's plan at batch 32, measured once (about 6 s of CPU on the simulator) for the tests
# below that run on a measured plan without testing the measurement: side_stream_lenet and
# step_time_lenet follow it (PLAN_FROM, --gpu-plan-from). A fixture: ctest runs it first, also
# for a -R that names only those; they do not run when it fails. The measurement itself is
# tested by gpu_plan_sim, plan_lazy_load, plan_host_submit, plan_foreign and profile.
set(MNIST_CUDASIM_PLAN_LENET ${MNIST_CUDASIM_OUT}/plan-lenet-b32.jsonl)
add_test(NAME mnist_train_sim_plan_lenet
         COMMAND ${MNIST_CUDASIM_DIR}/plan_once.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                 ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- ${MNIST_CUDASIM_PLAN_LENET} lenet 32)
set_tests_properties(mnist_train_sim_plan_lenet PROPERTIES LABELS cudasim TIMEOUT 200 PROCESSORS 1
                     FIXTURES_SETUP cudasim_plan_lenet PASS_REGULAR_EXPRESSION "PASS plan_once"
                     FAIL_REGULAR_EXPRESSION "FAIL:")

# Issue 25: the weight gradients on a second stream, beside the input gradients: the same
# model as on one stream, captured (its branches replayed late and early in turn) or not, and
# a shorter modelled step; LeNet-5 sends its dense layers' and conv2's beside (our split GEMM
# on the second stream's own workspace), the mlp its two upper layers'.
foreach(_case "lenet;32" "mlp;32;--hidden;512,256")
  list(GET _case 0 _model)
  list(SUBLIST _case 1 -1 _rest)
  add_test(NAME mnist_train_sim_side_stream_${_model}
           COMMAND ${MNIST_CUDASIM_DIR}/side_stream.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                   ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- ${_model} ${_rest})
  set_tests_properties(mnist_train_sim_side_stream_${_model} PROPERTIES LABELS cudasim TIMEOUT 300
                       PROCESSORS 1 PASS_REGULAR_EXPRESSION "PASS side_stream"
                       FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()
# LeNet-5's runs on the plan measured once (above); the mlp's first run measures its own.
set_tests_properties(mnist_train_sim_side_stream_lenet PROPERTIES FIXTURES_REQUIRED cudasim_plan_lenet
                     ENVIRONMENT "PLAN_FROM=${MNIST_CUDASIM_PLAN_LENET}")

# Issue 25: the measured plan unbiased by CUDA's lazy loading (a kernel's first launch
# loading its module: on the H100 candidates took milliseconds at their first run and were
# passed over for it): the seed model's plan the same with each kernel's first launch
# costing 4 ms (CUDASIM_LAZY_LOAD_US) as without. Every op's candidates are timed by the
# same code (plan_time, cuda/plan.cu); LeNet-5's plan (its convolutions' too) passes the same way
# but takes 70 s here, the seed's 2.
add_test(NAME mnist_train_sim_plan_lazy_load
         COMMAND ${MNIST_CUDASIM_DIR}/plan_lazy_load.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                 ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- seed 32)
# The same unbiased by the host's submission of each call (the first run, timed on the
# stream, holds it: 12-20 us a run on the H100 at mlp b32, where a graph node should take 2-3):
# the mlp's plan at batch 32 the same with each launch on a stream costing the host 12 us
# (CUDASIM_HOST_LAUNCH_US) as with 2.5. Passing over every first run over 4 times the best,
# the plan chose differently for 6 of its 9 ops.
add_test(NAME mnist_train_sim_plan_host_submit
         COMMAND ${MNIST_CUDASIM_DIR}/plan_lazy_load.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                 ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- mlp 32 submit)
set_tests_properties(mnist_train_sim_plan_lazy_load mnist_train_sim_plan_host_submit PROPERTIES
                     LABELS cudasim TIMEOUT 300 PROCESSORS 1
                     PASS_REGULAR_EXPRESSION "PASS plan_lazy_load" FAIL_REGULAR_EXPRESSION "FAIL:")

# Issue 43: a given plan followed only on the GPU and library it was measured on: another
# device's or library's set aside on every rank (measured anew, rank 0 choosing), an op whose
# way this GPU lacks measured alone, a plan for this GPU followed, at 1 and 2 ranks; with the
# devices named apart, rank 1's differing sets rank 0's plan aside too.
add_test(NAME mnist_train_sim_plan_foreign
         COMMAND ${MNIST_CUDASIM_DIR}/plan_foreign.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                 ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- mlp 32 --hidden 64)
set_tests_properties(mnist_train_sim_plan_foreign PROPERTIES LABELS cudasim TIMEOUT 300
                     PROCESSORS 2 PASS_REGULAR_EXPRESSION "PASS plan_foreign"
                     FAIL_REGULAR_EXPRESSION "FAIL:")

# Issue 26: the modelled step (cudasim.h rule 10) of each model at one rank, batch 32, each
# launch synchronised (--metrics), 20 steps, the run's set-up apart: bounded at this tree's
# prediction when the bound was set plus 25% (first at c143872's backend: seed 33.8, mlp
# 74.8, LeNet-5 667.6 us, LeNet-5's weight-gradient GEMMs walking k in 1-5 blocks; with
# measured plans: seed 19.9, mlp 47.5 us; with launches of 8 steps, --graph-steps, and the
# tile GEMM candidate: seed 11.4, mlp 35.4, LeNet-5 60.6 us, once the median left out the
# intervals that set the run up, which LeNet-5's 4 steps had put in it: 140.9 us before;
# with programmatic dependent launch and the weight gradients on a second stream: seed 10.4,
# mlp 29.8, LeNet-5 36.5 us; with the step's head planned, fused: seed 6.3, mlp 25.0, LeNet-5
# 34.6 us; with the split GEMM's loader batched: LeNet-5 35.2 us).
# A change that makes a step slower on the model fails here, as c143872 would have against
# 092b1c6 (LeNet-5 b32 on the model 139.6 -> 667.3 us; on the H100 160 -> 782). A faster
# step passes, with a note once under half its bound: lower the bound then
# (docs/benchmarks.md, "The simulator's time model").
foreach(_case "seed;8" "mlp;31" "lenet;43")
  list(GET _case 0 _model)
  list(GET _case 1 _bound)
  add_test(NAME mnist_train_sim_step_time_${_model}
           COMMAND ${MNIST_CUDASIM_DIR}/step_time.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                   ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- ${_model} 32 ${_bound})
  set_tests_properties(mnist_train_sim_step_time_${_model} PROPERTIES LABELS cudasim TIMEOUT 200
                       PROCESSORS 1 PASS_REGULAR_EXPRESSION "PASS sim_step_us"
                       FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()
# LeNet-5's on the plan measured once (mnist_train_sim_plan_lenet): the same modelled step as
# on a plan of its own, the measurement's intervals being left out of the median.
set_tests_properties(mnist_train_sim_step_time_lenet PROPERTIES FIXTURES_REQUIRED cudasim_plan_lenet
                     ENVIRONMENT "PLAN_FROM=${MNIST_CUDASIM_PLAN_LENET}")

# ---- the same new GPU tests on a real GPU (label gpu; skipped, with the reason, without one) ----
# 40-cuda.cmake registers the rest of the suite and builds mnist_gpu_test_util.
if(MNIST_DDP_HAVE_CUDA)
  add_executable(gpu_train_step ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_train_step.c)
  target_compile_options(gpu_train_step PRIVATE ${MNIST_DDP_WARNINGS})
  target_link_libraries(gpu_train_step PRIVATE mnist_gpu_test_util)
  set_target_properties(gpu_train_step PROPERTIES ENABLE_EXPORTS ON)
  add_dependencies(gpu_train_step mnist-cuda)
  foreach(case gpu_train_step gpu_graph)
    add_test(NAME ${case}_2 COMMAND ${MNIST_MPIRUN} --timeout 500 -n 2 $<TARGET_FILE:${case}>)
    set_tests_properties(${case}_2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600 PROCESSORS 2)
  endforeach()
  # What one GPU can check: the trainer's loop and the armed deadline at 1 rank.
  foreach(case gpu_train_step gpu_deadline)
    add_test(NAME ${case}_1 COMMAND ${MNIST_MPIRUN} --timeout 500 -n 1 $<TARGET_FILE:${case}>)
    set_tests_properties(${case}_1 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
  endforeach()
  foreach(variant no-warm-up upload replay free)
    string(REPLACE "-" "_" _name gpu_deadline_${variant}_2)
    add_test(NAME ${_name} COMMAND ${MNIST_MPIRUN} --timeout 100 -n 2 $<TARGET_FILE:gpu_deadline> --${variant})
    set_tests_properties(${_name} PROPERTIES LABELS gpu TIMEOUT 120 PROCESSORS 2
                         SKIP_REGULAR_EXPRESSION "SKIP gpu_deadline"
                         PASS_REGULAR_EXPRESSION "${_deadline_line}")
  endforeach()
endif()
# The harness of gpu_train_step with the host backend in place of CUDA (label mpi, any build).
add_test(NAME gpu_train_step_selftest_2
         COMMAND ${MNIST_MPIRUN} --timeout 250 -n 2 $<TARGET_FILE:gpu_train_step_sim> --self-test)
set_tests_properties(gpu_train_step_selftest_2 PROPERTIES LABELS mpi TIMEOUT 300 PROCESSORS 2)
# The harness of gpu_deadline's 1-rank run with the host backend in place of CUDA.
add_test(NAME gpu_deadline_selftest_1
         COMMAND ${MNIST_MPIRUN} --timeout 100 -n 1 $<TARGET_FILE:gpu_deadline_sim> --self-test)
set_tests_properties(gpu_deadline_selftest_1 PROPERTIES LABELS mpi TIMEOUT 120)
