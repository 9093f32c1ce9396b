# Single-process unit tests of the foundation: host backend ops against naive
# double references, GEMM mapping, gradient checks, sampler, config, report.
# tests/ref.c (the references and the compare helper) is shared with the GPU tests.
add_unit_test(test_ops ${CMAKE_CURRENT_SOURCE_DIR}/test_ops.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
add_unit_test(test_gradcheck ${CMAKE_CURRENT_SOURCE_DIR}/test_gradcheck.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c
              ${CMAKE_CURRENT_SOURCE_DIR}/model_point.c)
add_unit_test(test_model ${CMAKE_CURRENT_SOURCE_DIR}/test_model.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c
              ${CMAKE_CURRENT_SOURCE_DIR}/model_point.c)
add_unit_test(test_conv ${CMAKE_CURRENT_SOURCE_DIR}/test_conv.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
add_unit_test(test_sampler ${CMAKE_CURRENT_SOURCE_DIR}/test_sampler.c)
add_unit_test(test_config ${CMAKE_CURRENT_SOURCE_DIR}/test_config.c)
add_unit_test(test_schedule ${CMAKE_CURRENT_SOURCE_DIR}/test_schedule.c)
add_unit_test(test_report ${CMAKE_CURRENT_SOURCE_DIR}/test_report.c ${CMAKE_CURRENT_SOURCE_DIR}/ref.c)
