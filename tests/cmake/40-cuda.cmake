# CUDA backend tests.
#
# test_kernels_host (label unit): cuda/kernels.cu compiled by the host C
# compiler with the stand-in tests/cuda_host/cuda_runtime.h and run on the CPU against the naive
# references and the host backend. Needs no CUDA toolkit: built in every build
# but MNIST_DDP_TESTS=gpu (it is a Criterion program).
if(MNIST_TESTS_CRITERION)
  add_unit_test(test_kernels_host
    ${CMAKE_CURRENT_SOURCE_DIR}/test_kernels_host.c
    ${CMAKE_CURRENT_SOURCE_DIR}/test_kernels_conv.c
    ${CMAKE_CURRENT_SOURCE_DIR}/test_kernels_barrier.c
    ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/kernel_check.c
    ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/kernels_host.c
    ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/fake_cuda.c
    ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/block_fibers.c
    ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
  # The stand-in <cuda_runtime.h> comes before any other on the path.
  target_include_directories(test_kernels_host BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host
                             ${CMAKE_SOURCE_DIR}/cuda)
  # The convolution kernels against the host's lower ISA paths too (tests/cmake/20-core.cmake).
  foreach(_isa avx2 generic)
    add_test(NAME test_kernels_host_conv_isa_${_isa}
             COMMAND test_kernels_host --jobs 1 --filter "kernels_conv/*")
    set_tests_properties(test_kernels_host_conv_isa_${_isa} PROPERTIES LABELS unit
                         ENVIRONMENT "MNIST_DATA_DIR=${MNIST_DATA_DIR};MNIST_DDP_HOST_ISA=${_isa}")
  endforeach()
  # test_plan_json (label unit): the CUDA backend's plan as text (cuda/plan_json.c, plain C).
  add_unit_test(test_plan_json ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_json.c
                ${CMAKE_SOURCE_DIR}/cuda/plan_json.c)
  target_include_directories(test_plan_json PRIVATE ${CMAKE_SOURCE_DIR}/cuda ${JANSSON_INCLUDE_DIR})
endif()

# kernels_wait_first (label unit, no build): every __global__ of cuda/ begins with
# KERNEL_WAIT_PREVIOUS(), before any memory access, as programmatic dependent launch needs
# (a kernel may start while the one before it runs); neither the runner above nor the
# simulator can see an access before the wait. With a control that must fail.
add_test(NAME kernels_wait_first
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/kernels_wait_first.py ${CMAKE_SOURCE_DIR}/cuda)
set_tests_properties(kernels_wait_first PROPERTIES LABELS unit TIMEOUT 60)

# The GPU parity suite (label gpu), built with the CUDA backend only:
#   gpu_ops             every backend op, CUDA vs host, several shapes (1 rank)
#   gpu_plan            every candidate of every GEMM and convolution of seed, mlp, LeNet-5, run by name (1 rank)
#   gpu_train_parity    200 training steps on both backends from one seed (1 rank)
#   gpu_graph           a captured-and-replayed step vs plain launches (1 rank)
#   gpu_allreduce_2     NCCL allreduce (avg, sum) and broadcast across 2 ranks
#   gpu_deadline_2      a peer that never joins: the collective deadline fires
# Where no device is usable every rank exits 77 after rank 0 prints why, and
# ctest reports the test as skipped (SKIP_RETURN_CODE), never as passed.
# The programs load the CUDA backend as mnist-train does: this build's module
# (build/libmnist-cuda.so, or --module PATH) through host/backend_load.c, so on
# a GPU they test what ships (its RPATH, its one entry point, its calls into
# the executable); they are linked with ENABLE_EXPORTS for the latter. A module
# that does not load fails the test; only a missing driver or device skips.
# The same programs with --self-test (a host backend in place of CUDA) check
# the harness itself on any machine: label mpi (plain programs under mpirun),
# names *_selftest*.
if(MNIST_DDP_HAVE_CUDA)
  add_library(mnist_gpu_test_util STATIC
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_common.c
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_train.c
    ${CMAKE_CURRENT_SOURCE_DIR}/ref.c
    ${CMAKE_SOURCE_DIR}/cuda/plan_json.c) # gpu_plan reads and gives the backend's plan text
  target_compile_options(mnist_gpu_test_util PRIVATE ${MNIST_DDP_WARNINGS})
  target_include_directories(mnist_gpu_test_util PUBLIC
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/cuda
    PRIVATE ${JANSSON_INCLUDE_DIR})
  target_link_libraries(mnist_gpu_test_util PUBLIC mnist_core)
  target_compile_definitions(mnist_gpu_test_util PRIVATE
                             MNIST_TEST_CUDA_MODULE="$<TARGET_FILE:mnist-cuda>")

  foreach(prog gpu_ops gpu_plan gpu_train_parity gpu_graph gpu_allreduce gpu_deadline)
    add_executable(${prog} ${CMAKE_CURRENT_SOURCE_DIR}/gpu/${prog}.c)
    target_compile_options(${prog} PRIVATE ${MNIST_DDP_WARNINGS})
    target_link_libraries(${prog} PRIVATE mnist_gpu_test_util)
    set_target_properties(${prog} PROPERTIES ENABLE_EXPORTS ON)
    add_dependencies(${prog} mnist-cuda)
  endforeach()

  foreach(prog gpu_ops gpu_plan gpu_train_parity gpu_graph)
    add_test(NAME ${prog} COMMAND ${MNIST_MPIRUN} --timeout 500 -n 1 $<TARGET_FILE:${prog}>)
    set_tests_properties(${prog} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
    add_test(NAME ${prog}_selftest
             COMMAND ${MNIST_MPIRUN} --timeout 250 -n 1 $<TARGET_FILE:${prog}> --self-test)
    set_tests_properties(${prog}_selftest PROPERTIES LABELS mpi TIMEOUT 300)
  endforeach()

  add_test(NAME gpu_allreduce_2 COMMAND ${MNIST_MPIRUN} --timeout 500 -n 2 $<TARGET_FILE:gpu_allreduce>)
  set_tests_properties(gpu_allreduce_2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
                       PROCESSORS 2)
  add_test(NAME gpu_allreduce_selftest_3
           COMMAND ${MNIST_MPIRUN} --timeout 250 -n 3 $<TARGET_FILE:gpu_allreduce> --self-test)
  set_tests_properties(gpu_allreduce_selftest_3 PROPERTIES LABELS mpi TIMEOUT 300 PROCESSORS 3)

  # The deadline test passes on its message (the job itself ends by MPI_Abort).
  set(_mnist_deadline_line "allreduce at epoch 3 step 7 not complete after 2 s")
  add_test(NAME gpu_deadline_2 COMMAND ${MNIST_MPIRUN} --timeout 100 -n 2 $<TARGET_FILE:gpu_deadline>)
  set_tests_properties(gpu_deadline_2 PROPERTIES LABELS gpu TIMEOUT 120 PROCESSORS 2
                       SKIP_REGULAR_EXPRESSION "SKIP gpu_deadline"
                       PASS_REGULAR_EXPRESSION "${_mnist_deadline_line}")
  add_test(NAME gpu_deadline_selftest_2
           COMMAND ${MNIST_MPIRUN} --timeout 100 -n 2 $<TARGET_FILE:gpu_deadline> --self-test)
  set_tests_properties(gpu_deadline_selftest_2 PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
                       PASS_REGULAR_EXPRESSION "${_mnist_deadline_line}")
endif()
