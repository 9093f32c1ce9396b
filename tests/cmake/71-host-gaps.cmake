# Checks of the training loop that tests/mutants_host.sh found missing (a bug it plants that
# the rest of the suite let through): tests/e2e/test_host_gaps.sh says what each case proves.
#
#   host_gaps_sim_graph_save_every    (cudasim) --save-every checkpoints due inside launches of
#                                     several steps (--graph-steps) all written
#   host_gaps_sim_graph_short_batch   (cudasim) the epoch's short last batch never replayed as a
#                                     full one; images= counts every step of a launch
#   host_gaps_param_crc               (e2e) the summary's param_crc32 covers every parameter
set(_gaps ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_host_gaps.sh)
foreach(_case graph-save-every graph-short-batch)
  string(REPLACE "-" "_" _name host_gaps_sim_${_case})
  add_test(NAME ${_name}
           COMMAND bash ${_gaps} ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                   ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} -- ${_case})
  set_tests_properties(${_name} PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 1)
endforeach()
add_test(NAME host_gaps_param_crc
         COMMAND bash ${_gaps} $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN} -- param-crc)
set_tests_properties(host_gaps_param_crc PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2)
