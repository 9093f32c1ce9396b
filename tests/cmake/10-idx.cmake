# IDX reading (test_idx) and validation (test_idx_malformed) of host/io/idx.c;
# real MNIST from MNIST_DATA_DIR.
add_unit_test(test_idx ${CMAKE_CURRENT_SOURCE_DIR}/test_idx.c ${CMAKE_CURRENT_SOURCE_DIR}/idx_fixture.c)
add_unit_test(test_idx_malformed ${CMAKE_CURRENT_SOURCE_DIR}/test_idx_malformed.c
              ${CMAKE_CURRENT_SOURCE_DIR}/idx_fixture.c)

# test_idx against a copy of MNIST_DATA_DIR holding .gz files only (what
# scripts/gpu-node's kit carries): no test may need the raw files.
add_test(NAME test_idx_gz_only_data
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gz_only_data.sh ${MNIST_DATA_DIR} --
                 $<TARGET_FILE:test_idx> --jobs 1)
set_tests_properties(test_idx_gz_only_data PROPERTIES LABELS unit TIMEOUT 120)
