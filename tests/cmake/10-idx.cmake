# IDX reading and validation (host/idx.c); real MNIST from MNIST_DATA_DIR.
add_unit_test(test_idx ${CMAKE_CURRENT_SOURCE_DIR}/test_idx.c)
