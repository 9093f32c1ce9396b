# CUDA backend tests.
#
# test_kernels_host (label unit): cuda/kernels.cu compiled by the host C
# compiler with tests/fake_cuda.h and run on the CPU against the naive
# references and the host backend. Needs no CUDA toolkit: built in every build.
add_unit_test(test_kernels_host
  ${CMAKE_CURRENT_SOURCE_DIR}/test_kernels_host.c
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/kernels_host.c
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host/fake_cuda.c
  ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
target_include_directories(test_kernels_host PRIVATE ${CMAKE_SOURCE_DIR}/cuda)
