# Checks of the training loop that tests/mutants_host.sh found missing (a bug it plants that
# the rest of the suite let through): tests/e2e/test_host_gaps.sh says what each case proves.
#
#   host_gaps_param_crc   (e2e) the summary's param_crc32 covers every parameter
# (The gaps it found in launches of several steps are 46-cudasim-gaps.cmake's tests.)
set(_gaps ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_host_gaps.sh)
add_test(NAME host_gaps_param_crc
         COMMAND bash ${_gaps} $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN} -- param-crc)
# One slot: two short 2-rank jobs, mostly mpirun's start and end (0.26 s of CPU in 0.45 s).
set_tests_properties(host_gaps_param_crc PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 1)
