# Micro-batch mode and --exact (docs/exact.md): tests/e2e/test_exact.sh, one case a test.
#
#   exact_ranks_{seed,mlp,lenet}  --exact at 1, 2, 3, 4 and 6 ranks: one param_crc32, SGD and
#                                 AdamW; the control without --exact differs
#   exact_resume                  saved at 4 ranks, resumed at 2 and 1: the uninterrupted bits;
#                                 another --global-batch, --micro-batch or no --exact refused
#   exact_overflow                gradients out of the fixed-point range: status 1, every rank says so
#   exact_accumulate              1 rank of G=64 M=32 within float tolerance of 2 ranks; G=256 M=32
#                                 on 1 rank (accumulation alone) trains
#   exact_default                 without the flags, the seed's --epochs 1 at 2 ranks is c43ed6c5
# The bad sizes (G not a multiple of M, M above G, more ranks than micro-batches,
# --grad-reduce sum): e2e_bad_input. The simulated CUDA backend's cases (sim-*):
# mnist_train_sim_exact_* in 45-cudasim.cmake.
foreach(_case ranks-seed ranks-mlp ranks-lenet resume overflow accumulate default)
  string(REPLACE "-" "_" _name ${_case})
  add_test(NAME exact_${_name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_exact.sh ${_case}
                   $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
  # One slot: short jobs of 1 to 6 ranks one after another, mostly mpirun starting and ending
  # them (CPU seconds over wall seconds about 0.5; ranks-lenet 0.7).
  set_tests_properties(exact_${_name} PROPERTIES LABELS e2e TIMEOUT 240 PROCESSORS 1
                       ENVIRONMENT "PYTHON=${MNIST_PYTHON}"
                       PASS_REGULAR_EXPRESSION "PASS: ${_case}" FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()
