# mnist-train on the simulated CUDA backend (45-cudasim.cmake builds it: build/cudasim/) where
# launches of several steps (--graph-steps) meet what the host needs between steps, each a gap
# the suite once let a planted bug through (label cudasim, "sim" in the names):
#
#   mnist_train_sim_checkpoint_launches_2  a run that measured its own plan, --save-every 5
#                          inside launches of 8 steps at 2 ranks: every due checkpoint written
#                          and holding the plan, a --resume from a mid-epoch one (no
#                          --gpu-plan-from) following it (source "checkpoint") to the
#                          uninterrupted run's param_crc32; images= and images_per_second
#                          (tests/cudasim/checkpoint_launches.sh)
#   mnist_train_sim_short_batch_1          the epoch's short last batch (--limit 404, batch
#                          32) never in a launch of full batches: --graph-steps 8 bitwise
#                          --graph-steps 1 over 2 epochs; images= the images trained, as the
#                          host backend counts them, in the summary and the --metrics records
#                          (tests/cudasim/short_batch.sh)
# Each script's name and its ranks (the test's processors): mnist_train_sim_SCRIPT_RANKS.
foreach(_case "checkpoint_launches;2" "short_batch;1")
  list(GET _case 0 _script)
  list(GET _case 1 _ranks)
  add_test(NAME mnist_train_sim_${_script}_${_ranks}
           COMMAND ${MNIST_CUDASIM_DIR}/${_script}.sh ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR}
                   ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV} --)
  set_tests_properties(mnist_train_sim_${_script}_${_ranks} PROPERTIES LABELS cudasim TIMEOUT 300
                       PROCESSORS ${_ranks} PASS_REGULAR_EXPRESSION "PASS ${_script}"
                       FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()
