# Slurm (docs/multi-node.md, section "Slurm"): mnist-train started by srun,
# salloc + mpirun and sbatch of scripts/slurm/train.sbatch, on a Slurm cluster
# that each test starts on the namespace cluster (tests/slurm/slurm_cluster.sh)
# and stops, checking that no daemon, step or task is left. Label slurm:
#   ctest --test-dir build -L slurm --output-on-failure
#
# slurm_one_node   srun --mpi=pmix, salloc mpirun, sbatch: each equal to mpirun -n 2;
#                  srun --mpi=none and pmi2 stop in MPI_Init with Open MPI's message
# slurm_two_nodes  srun -N 2 --ntasks-per-node=2, salloc -N 2 mpirun and the job script
#                  equal to mpirun -n 4 on one node, bit for bit; the start-up line says 2 nodes;
#                  srun -N 2 --ntasks-per-node=2 --exact equal to mpirun -n 1
# slurm_failures   kill -9 and SIGSTOP (--timeout) of a task under the job script
# slurm_cudasim    the simulated CUDA backend under srun: device per local rank,
#                  --gpus-per-task=1, the NCCL id broadcast (simulated, not a GPU)
# Need root (network namespaces): skipped (status 77, reason printed) without.
# Slurm (slurm-wlm, munge) comes from scripts/test.sh (its set-up); without it they fail.
set(_slurm_cases one_node two_nodes failures cudasim)
foreach(_case ${_slurm_cases})
  string(REPLACE "_" "-" _arg ${_case})
  if(_case STREQUAL cudasim)
    set(_trainer ${MNIST_CUDASIM_OUT}/mnist-train)
    set(_labels "slurm;multinode;cudasim")
  else()
    set(_trainer $<TARGET_FILE:mnist-train>)
    set(_labels "slurm;multinode")
  endif()
  add_test(NAME slurm_${_case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/slurm.sh ${_arg} ${_trainer}
                   ${CMAKE_SOURCE_DIR} ${MNIST_DATA_DIR} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(slurm_${_case} PROPERTIES LABELS "${_labels}" SKIP_RETURN_CODE 77
                       TIMEOUT 300 PROCESSORS 2)
endforeach()
# Mostly waiting on Slurm's daemons and a stopped task: 0.5-0.7 cores busy (2026-11-27),
# one slot each (scripts/test.sh, PROCESSORS); two_nodes keeps more than one core busy.
set_tests_properties(slurm_one_node slurm_two_nodes slurm_failures slurm_cudasim PROPERTIES PROCESSORS 1)
# srun passes the caller's environment on to the tasks: run slurm_cudasim as a root
# user who exported Open MPI's run-as-root variables would (its check of the tasks'
# OMPI_* variables once failed exactly then), whoever starts ctest.
set_tests_properties(slurm_cudasim PROPERTIES ENVIRONMENT
                     "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
