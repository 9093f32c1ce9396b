# Reliability (docs/reliability.md): checkpoints, resume, failures.
#
#   test_checkpoint (unit)        safetensors write/read/validate, discovery, pruning, flags
#   reliability_* (reliability)   mnist-train under a real mpirun: bitwise resume, rank-count
#                                 change, corrupt-newest fallback, Python reader accuracy,
#                                 kill -9 of a rank, SIGSTOP with --timeout, diverging loss
#   reliability_valgrind (valgrind) a short 2-rank run under memcheck, MPI's reports suppressed
# Every script bounds each mpirun with timeout(1), and ctest's TIMEOUT bounds the
# script, so a hang fails the test instead of stalling the suite.
add_unit_test(test_checkpoint ${CMAKE_CURRENT_SOURCE_DIR}/test_checkpoint.c)
