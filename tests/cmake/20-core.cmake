# Single-process unit tests of the foundation: host backend ops against naive
# double references, GEMM mapping, gradient checks, sampler, config, report.
# tests/ref.c (the references and the compare helper) is shared with the GPU tests.
add_unit_test(test_ops ${CMAKE_CURRENT_SOURCE_DIR}/test_ops.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
add_unit_test(test_gradcheck ${CMAKE_CURRENT_SOURCE_DIR}/test_gradcheck.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c
              ${CMAKE_CURRENT_SOURCE_DIR}/model_point.c)
add_unit_test(test_model ${CMAKE_CURRENT_SOURCE_DIR}/test_model.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c
              ${CMAKE_CURRENT_SOURCE_DIR}/model_point.c)
add_unit_test(test_conv ${CMAKE_CURRENT_SOURCE_DIR}/test_conv.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
add_unit_test(test_blas_info ${CMAKE_CURRENT_SOURCE_DIR}/test_blas_info.c)
add_unit_test(test_sampler ${CMAKE_CURRENT_SOURCE_DIR}/test_sampler.c)
add_unit_test(test_config ${CMAKE_CURRENT_SOURCE_DIR}/test_config.c)
add_unit_test(test_schedule ${CMAKE_CURRENT_SOURCE_DIR}/test_schedule.c)
add_unit_test(test_report ${CMAKE_CURRENT_SOURCE_DIR}/test_report.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
# The host's direct convolution kernels (cpu/conv_direct.c) are built for AVX-512, AVX2 and
# the baseline and chosen at run time; these run the convolution tests again on the lower
# paths, named by MNIST_DDP_HOST_ISA (test_conv checks the name is taken), so that the
# baseline is tested on a machine that would never choose it. test_conv holds every stage's
# forward pass and gradients to double-precision references on each path; test_gradcheck's
# central differences (5 s a path, three times that under ASan) run on the CPU's own path.
foreach(_isa avx2 generic)
  foreach(_prog test_conv test_model test_ops)
    add_test(NAME ${_prog}_isa_${_isa} COMMAND ${_prog} --jobs 1)
    set_tests_properties(${_prog}_isa_${_isa} PROPERTIES LABELS unit
                         ENVIRONMENT "MNIST_DATA_DIR=${MNIST_DATA_DIR};MNIST_DDP_HOST_ISA=${_isa}")
  endforeach()
endforeach()
