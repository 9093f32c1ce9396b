# IDX reading (test_idx) and validation (test_idx_malformed) of host/io/idx.c;
# real MNIST from MNIST_DATA_DIR.
add_unit_test(test_idx ${CMAKE_CURRENT_SOURCE_DIR}/test_idx.c ${CMAKE_CURRENT_SOURCE_DIR}/idx_fixture.c)
add_unit_test(test_idx_malformed ${CMAKE_CURRENT_SOURCE_DIR}/test_idx_malformed.c
              ${CMAKE_CURRENT_SOURCE_DIR}/idx_fixture.c)
