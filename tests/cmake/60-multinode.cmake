# Multi-node launch (run_mpirun_1.sh, run_mpirun_2.sh, hostfile) and the
# start-up agreement check (host/agree.c). Label multinode:
#   ctest --test-dir build -L multinode --output-on-failure
#
# test_agree          the fingerprint and its comparison (Criterion)
# multinode_scripts   both launch scripts against a stand-in mpirun: the command
#                     they build, pass-through, refusals with status 2
# multinode_agree     MPMD launches with different flags or data: refused by
#                     every rank with status 2, rank 0 printing the differences
# multinode_namespaces 2 nodes x 2 ranks in network namespaces joined by a
#                     bridge, through both scripts; equal to a 1-node run;
#                     with --exact, run_mpirun_2.sh's 2 x 2 equal to 1 rank.
#                     Needs root: skipped (status 77, reason printed) without.
# multinode_restart   the launch scripts' MAX_RESTARTS on that cluster: a rank
#                     killed or stopped, a node lost, bad input, restarts used
#                     up (scripts/restart.sh); with --exact, the restart shrunk
#                     to node 1 ends at the uninterrupted run's bits. Needs root, as above.
# multinode_restart_scripts the restart policy against a stand-in mpirun and
#                     agent: refusals, statuses retried or not, shrinking
add_unit_test(test_agree ${CMAKE_CURRENT_SOURCE_DIR}/multinode/test_agree.c)
set_property(TEST test_agree APPEND PROPERTY LABELS multinode)

add_test(NAME multinode_scripts
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/scripts.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(multinode_scripts PROPERTIES LABELS "multinode;unit" TIMEOUT 120)

add_test(NAME multinode_agree
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/agree.sh
                 $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} -- ${MNIST_MPIRUN})
set_tests_properties(multinode_agree PROPERTIES LABELS "multinode;mpi" TIMEOUT 300)

add_test(NAME multinode_namespaces
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/namespaces.sh
                 $<TARGET_FILE:mnist-train> ${CMAKE_SOURCE_DIR} ${MNIST_DATA_DIR}
                 ${MPIEXEC_EXECUTABLE})
set_tests_properties(multinode_namespaces PROPERTIES
  LABELS "multinode;mpi;e2e" SKIP_RETURN_CODE 77 TIMEOUT 300 PROCESSORS 1)

# multinode_restart mostly waits (jobs starting on the cluster, a deadline, a lost node):
# about 9 s of CPU in 30 s, one slot.
add_test(NAME multinode_restart
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/restart.sh
                 $<TARGET_FILE:mnist-train> ${CMAKE_SOURCE_DIR} ${MNIST_DATA_DIR}
                 ${MPIEXEC_EXECUTABLE})
set_tests_properties(multinode_restart PROPERTIES
  LABELS "multinode;mpi;e2e" SKIP_RETURN_CODE 77 TIMEOUT 600 PROCESSORS 1)

add_test(NAME multinode_restart_scripts
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multinode/restart_scripts.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(multinode_restart_scripts PROPERTIES LABELS "multinode;unit" TIMEOUT 120)
