# Reliability (docs/reliability.md): checkpoints, resume, failures.
#
#   test_checkpoint (unit)        the safetensors format: round trips, corrupt files, position, fit
#   test_checkpoint_dir (unit)    checkpoint files: atomic save, resume fallback, pruning, flags
#   reliability_* (reliability)   mnist-train under a real mpirun: bitwise resume, rank-count
#                                 change, corrupt-newest fallback, Python reader accuracy,
#                                 kill -9 of a rank, SIGSTOP with --timeout, diverging loss,
#                                 --eval-only and a finished run resumed, --init-from
#   reliability_valgrind (valgrind) a short 2-rank run under memcheck, MPI's reports suppressed;
#                                 skipped (77, "valgrind not installed") where there is no valgrind
# Every script bounds each mpirun with timeout(1), and ctest's TIMEOUT bounds the
# script, so a hang fails the test instead of stalling the suite.
add_unit_test(test_checkpoint ${CMAKE_CURRENT_SOURCE_DIR}/test_checkpoint.c
              ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_fixture.c)
add_unit_test(test_checkpoint_dir ${CMAKE_CURRENT_SOURCE_DIR}/test_checkpoint_dir.c
              ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_fixture.c)

# A Python 3 with numpy for the independent checkpoint reader: /usr/bin/python3
# (Debian's python3-numpy, and python3-torch when installed) or the first python3
# on PATH that has numpy. Without one the reader test fails and says why.
if(NOT MNIST_PYTHON)
  set(_mnist_python_found "")
  find_program(_mnist_path_python python3)
  foreach(_candidate /usr/bin/python3 ${_mnist_path_python})
    if(NOT _mnist_python_found AND EXISTS ${_candidate})
      execute_process(COMMAND ${_candidate} -c "import numpy" RESULT_VARIABLE _rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        set(_mnist_python_found ${_candidate})
      endif()
    endif()
  endforeach()
  if(NOT _mnist_python_found)
    set(_mnist_python_found /usr/bin/python3)
    message(STATUS "mnist-ddp: no python3 with numpy found; reliability_python_reader will fail until one is installed")
  endif()
  set(MNIST_PYTHON ${_mnist_python_found} CACHE FILEPATH "Python 3 with numpy for tests/reliability/read_checkpoint.py")
endif()

set(_rel ${CMAKE_CURRENT_SOURCE_DIR}/reliability)
set(_rel_args $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})

add_test(NAME reliability_resume COMMAND bash ${_rel}/test_resume.sh ${_rel_args})
add_test(NAME reliability_python_reader COMMAND bash ${_rel}/test_python_reader.sh ${_rel_args})
set_tests_properties(reliability_resume reliability_python_reader PROPERTIES
  LABELS reliability TIMEOUT 300 PROCESSORS 1 ENVIRONMENT "PYTHON=${MNIST_PYTHON}")
# Using a checkpoint without resuming it: --eval-only (and a finished run resumed), --init-from.
# The simulated CUDA backend's --eval-only and --init-from: 45-cudasim.cmake.
add_test(NAME reliability_eval_only COMMAND bash ${_rel}/test_eval_only.sh host ${_rel_args})
add_test(NAME reliability_init_from COMMAND bash ${_rel}/test_init_from.sh host ${_rel_args})
set_tests_properties(reliability_eval_only reliability_init_from PROPERTIES
  LABELS reliability TIMEOUT 300 PROCESSORS 1)
foreach(_case kill kill-writer stop nonfinite)
  string(REPLACE "-" "_" _name ${_case})
  add_test(NAME reliability_${_name} COMMAND bash ${_rel}/test_failures.sh ${_case} ${_rel_args})
  set_tests_properties(reliability_${_name} PROPERTIES
    LABELS reliability TIMEOUT 180 PROCESSORS 1 ENVIRONMENT "PYTHON=${MNIST_PYTHON}")
endforeach()
# A rank frozen as it enters MPI_Finalize (tests/reliability/stop_at_end.c, under LD_PRELOAD):
# the others' end of the job is bounded by --timeout too.
add_library(stop_at_end MODULE ${_rel}/stop_at_end.c)
target_link_libraries(stop_at_end PRIVATE MPI::MPI_C)
add_test(NAME reliability_stop_at_end
         COMMAND env STOP_AT_END_LIB=$<TARGET_FILE:stop_at_end>
                 bash ${_rel}/test_failures.sh stop-at-end ${_rel_args})
set_tests_properties(reliability_stop_at_end PROPERTIES
  LABELS reliability TIMEOUT 180 PROCESSORS 1)
# One slot each (PROCESSORS 1), as for every test here but valgrind's: their 2 or 3 ranks
# train a fraction of the run; mpirun's start and end, a deadline, a sleep or Python take the
# rest (each alone on 2 cores, CPU seconds over wall seconds: 0.55 to 0.85 (resume 0.65,
# kill 0.8), python_reader 1.0 on one process at a time). Declared by their ranks they left
# the second core idle.

# valgrind: not with the sanitizers (an ASan binary cannot run under memcheck).
if(NOT MNIST_DDP_SANITIZE)
  add_executable(leak_control ${_rel}/leak_control.c)
  target_compile_options(leak_control PRIVATE -O0 -g)
  target_link_libraries(leak_control PRIVATE MPI::MPI_C)
  add_test(NAME reliability_valgrind
           COMMAND bash ${_rel}/test_valgrind.sh $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR}
                   $<TARGET_FILE:leak_control> ${MNIST_MPIRUN})
  set_tests_properties(reliability_valgrind PROPERTIES LABELS "reliability;valgrind" TIMEOUT 600
                       PROCESSORS 2 SKIP_RETURN_CODE 77)
  # Without valgrind it skips (77) and says so; never a pass.
  add_test(NAME reliability_valgrind_missing_skips
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cudasim/expect.sh 77
                   "^SKIP reliability_valgrind: valgrind not installed" "!^ok:"
                   -- bash ${_rel}/test_valgrind.sh $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR}
                   $<TARGET_FILE:leak_control> ${MNIST_MPIRUN})
  set_tests_properties(reliability_valgrind_missing_skips PROPERTIES LABELS reliability TIMEOUT 60
                       ENVIRONMENT "VALGRIND=/nonexistent/valgrind")
endif()

# The host backend's collective deadline (host/dist/deadline.c) on its own, without MPI.
add_unit_test(test_deadline ${CMAKE_CURRENT_SOURCE_DIR}/test_deadline.c)
