# Multi-rank and end-to-end tests, each started by a real mpirun (MNIST_MPIRUN).
#   label mpi: plain MPI programs in tests/mpi/ linked with mnist_core
#   label e2e: bash scripts in tests/e2e/ driving mnist-train through mpirun
# They read real MNIST from MNIST_DATA_DIR and fail (never skip) without it,
# saying to run scripts/get-mnist.sh. mpirun's own --timeout and the ctest
# TIMEOUT bound every run, so a hung rank fails the test instead of stalling it.

add_library(mnist_mpi_test_util STATIC ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi_util.c)
target_compile_options(mnist_mpi_test_util PRIVATE ${MNIST_DDP_WARNINGS})
target_link_libraries(mnist_mpi_test_util PUBLIC mnist_core)
target_include_directories(mnist_mpi_test_util PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/mpi)

add_executable(test_dp_equiv ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_dp_equiv.c)
target_compile_options(test_dp_equiv PRIVATE ${MNIST_DDP_WARNINGS})
target_link_libraries(test_dp_equiv PRIVATE mnist_mpi_test_util)

foreach(ranks 2 4)
  add_test(NAME mpi_dp_equiv_${ranks}
           COMMAND ${MNIST_MPIRUN} --timeout 100 -n ${ranks} $<TARGET_FILE:test_dp_equiv>
                   ${MNIST_DATA_DIR}/train)
  set_tests_properties(mpi_dp_equiv_${ranks} PROPERTIES LABELS mpi TIMEOUT 120
                       PROCESSORS ${ranks})
endforeach()

add_executable(test_replicas ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_replicas.c)
target_compile_options(test_replicas PRIVATE ${MNIST_DDP_WARNINGS})
target_link_libraries(test_replicas PRIVATE mnist_mpi_test_util)
add_test(NAME mpi_replicas_3
         COMMAND ${MNIST_MPIRUN} --timeout 100 -n 3 $<TARGET_FILE:test_replicas>
                 ${MNIST_DATA_DIR}/train)
set_tests_properties(mpi_replicas_3 PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 3)

# End to end: the trainer itself under mpirun. Arguments: the binary, the data
# directory, then the mpirun command line.
add_test(NAME e2e_train
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_train_e2e.sh
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_train PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2)
# --eval-every 3: which epochs are scored (the simulator's twin: 45-cudasim.cmake).
add_test(NAME e2e_eval_every
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_eval_every.sh host
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_eval_every PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2)
# Rank 0's epoch line against every rank's loss lines, and where the progress line is drawn
# (the simulator's twin: 45-cudasim.cmake).
add_test(NAME e2e_epoch_line
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_epoch_line.sh
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN} -- progress --backend host)
set_tests_properties(e2e_epoch_line PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2
                     PASS_REGULAR_EXPRESSION "PASS epoch_line" FAIL_REGULAR_EXPRESSION "FAIL:")
# --profile: one step op by op, timed (the simulator's twin: 45-cudasim.cmake).
add_test(NAME e2e_profile
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_profile.sh host
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_profile PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2)
# --clip-grad-norm at 2 ranks: clipped alike on every rank, a bound never reached bitwise no
# flag, the value kept by a checkpoint (the simulator's twin: 45-cudasim.cmake).
add_test(NAME e2e_clip_2
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_clip.sh host 2
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_clip_2 PROPERTIES LABELS e2e TIMEOUT 300 PROCESSORS 2
                     PASS_REGULAR_EXPRESSION "PASS clip" FAIL_REGULAR_EXPRESSION "FAIL:")
add_test(NAME e2e_bad_input
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_bad_input.sh
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_bad_input PROPERTIES LABELS e2e TIMEOUT 600 PROCESSORS 2)
# The same against a copy of MNIST_DATA_DIR holding .gz files only (scripts/gpu-node's kit):
# the copies of the data the script makes, and the cases that read data files.
add_test(NAME e2e_bad_input_gz_only_data
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gz_only_data.sh ${MNIST_DATA_DIR} --
                 bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_bad_input.sh
                 $<TARGET_FILE:mnist-train> @DATA@ ${MNIST_MPIRUN})
set_tests_properties(e2e_bad_input_gz_only_data PROPERTIES LABELS e2e TIMEOUT 600 PROCESSORS 2
                     ENVIRONMENT "MNIST_BAD_INPUT_ONLY=^(data-|images-|label-|test-data-|limit-too-large|eval-every|mpmd-rank1-bad-file)")
add_test(NAME e2e_collectives
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_collectives.sh
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_collectives PROPERTIES LABELS e2e TIMEOUT 400 PROCESSORS 3)
# One slot each: their ranks are busy a fraction of the run, the rest is mpirun starting and
# ending jobs (each alone on 2 cores, CPU seconds over wall seconds: 0.4 to 0.65; e2e_bad_input
# 8 s of CPU in 22 s, 60 jobs). Declared by their ranks, they kept the second core idle.
set_tests_properties(e2e_train e2e_eval_every e2e_epoch_line e2e_profile e2e_clip_2 e2e_bad_input
                     e2e_bad_input_gz_only_data e2e_collectives PROPERTIES PROCESSORS 1)
