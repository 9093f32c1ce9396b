# The CUDA backend under NVIDIA's compute-sanitizer (label gpu-sanitize):
#
#   gpu_sanitize_<tool>_<model>   memcheck, initcheck, racecheck, synccheck over seed, mlp
#                                 and lenet (--gpu-plan heuristic) and lenet_measure (LeNet-5
#                                 with --gpu-plan measure: the GEMM candidates timed at the
#                                 first step, the cooperative
#                                 gemm_ksplit_micro_kernel and bias_grad_block_kernel among
#                                 them): 4 short runs each (graph
#                                 and --no-graph, SGD and AdamW), zero errors required;
#                                 racecheck, synccheck and lenet_measure check the project's
#                                 kernels only (--kernel-name), memcheck and initcheck on the
#                                 other models every kernel (tests/sanitize/gpu_sanitize.sh says
#                                 why, citing NVIDIA's manual); MNIST_SANITIZE_RUNS=one in the
#                                 environment: one run each (the GPU-node kit's step sanitize,
#                                 all 16 at once, scripts/gpu-node/run.sh)
#
#   ctest --test-dir build -L gpu-sanitize --output-on-failure
#
# Where no GPU is usable (no driver, no device) or compute-sanitizer is missing, each
# skips (77) and says why; GPUs present but unusable fail, as the GPU suite does.
# (-L is a regular expression: `ctest -L gpu` runs these too; `-L '^gpu$'` the GPU
# suite alone.) In this fragment's name "cuda", so MNIST_DDP_TESTS=gpu builds it too.
# TIMEOUT: a probe (60 s at most) and 4 runs of 280 s at most (MNIST_SANITIZE_RUN_TIMEOUT).
if(MNIST_DDP_HAVE_CUDA)
  foreach(_tool memcheck initcheck racecheck synccheck)
    foreach(_model seed mlp lenet lenet-measure)
      string(REPLACE "-" "_" _name gpu_sanitize_${_tool}_${_model})
      add_test(NAME ${_name}
               COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sanitize/gpu_sanitize.sh ${_tool} ${_model}
                       $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} "${CUDAToolkit_BIN_DIR}"
                       ${MNIST_MPIRUN})
      set_tests_properties(${_name} PROPERTIES LABELS gpu-sanitize SKIP_RETURN_CODE 77 TIMEOUT 1200)
    endforeach()
  endforeach()
endif()

# The script itself, on the CUDA simulator with a stand-in sanitizer that runs the program
# and reports FAKE_SANITIZER_ERRORS errors (tests/sanitize/fake-compute-sanitizer): clean runs
# pass, reported errors fail. Labels cudasim; nothing here is sanitized.
if(TARGET mnist-train-cudasim)
  set(_sanitize_sim bash ${CMAKE_CURRENT_SOURCE_DIR}/sanitize/gpu_sanitize.sh memcheck seed
      ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR} none ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV})
  add_test(NAME gpu_sanitize_sim_clean_passes
           COMMAND ${MNIST_CUDASIM_DIR}/expect.sh 0 "^# device: backend cuda \\(cuda:0 cudasim device 0"
                   "^PASS gpu_sanitize_memcheck_seed: 4 runs" "^ok: memcheck seed no-graph adamw: ERROR SUMMARY: 0 errors"
                   -- ${_sanitize_sim})
  add_test(NAME gpu_sanitize_sim_errors_fail
           COMMAND ${MNIST_CUDASIM_DIR}/expect.sh 1 "FAIL gpu_sanitize_memcheck_seed: memcheck seed graph sgd: status 9"
                   "FAIL gpu_sanitize_memcheck_seed: 4 of 4 runs not clean" "!^ok:" -- ${_sanitize_sim})
  # The kit's run of lenet_measure under racecheck (MNIST_SANITIZE_RUNS=one): --gpu-plan
  # measure, each of the project's kernels named in a filter (the cooperative ones among
  # them), lazy loading, the application alone tracked.
  add_test(NAME gpu_sanitize_sim_filter
           COMMAND ${MNIST_CUDASIM_DIR}/expect.sh 0
                   "^# racecheck, --gpu-plan measure, the project's [0-9]+ kernels only, CUDA_MODULE_LOADING=LAZY"
                   "^# run: env CUDA_MODULE_LOADING=LAZY .*fake-compute-sanitizer --tool racecheck .*--target-processes application-only "
                   "^# run: .* --kernel-name kns=19softmax_xent_kernel "
                   "^# run: .* --kernel-name kns=24gemm_ksplit_micro_kernel "
                   "^# run: .* --kernel-name kns=22bias_grad_block_kernel "
                   "^# run: .* --kernel-name kns=11head_kernel "
                   "^# run: .*/mnist-train .*--model lenet .*--gpu-plan measure --backend cuda --optimizer adamw --no-graph$"
                   "^PASS gpu_sanitize_racecheck_lenet_measure: 1 run \\(no-graph adamw"
                   -- bash ${CMAKE_CURRENT_SOURCE_DIR}/sanitize/gpu_sanitize.sh racecheck lenet-measure
                      ${MNIST_CUDASIM_OUT}/mnist-train ${MNIST_DATA_DIR} none ${MNIST_MPIRUN} -x ${MNIST_CUDASIM_ENV})
  set_tests_properties(gpu_sanitize_sim_filter PROPERTIES ENVIRONMENT
                       "COMPUTE_SANITIZER=${CMAKE_CURRENT_SOURCE_DIR}/sanitize/fake-compute-sanitizer;MNIST_SANITIZE_RUNS=one")
  set_tests_properties(gpu_sanitize_sim_clean_passes gpu_sanitize_sim_errors_fail gpu_sanitize_sim_filter
                       PROPERTIES LABELS cudasim TIMEOUT 300 PROCESSORS 1)
  set_tests_properties(gpu_sanitize_sim_clean_passes PROPERTIES ENVIRONMENT
                       "COMPUTE_SANITIZER=${CMAKE_CURRENT_SOURCE_DIR}/sanitize/fake-compute-sanitizer")
  set_tests_properties(gpu_sanitize_sim_errors_fail PROPERTIES ENVIRONMENT
                       "COMPUTE_SANITIZER=${CMAKE_CURRENT_SOURCE_DIR}/sanitize/fake-compute-sanitizer;FAKE_SANITIZER_ERRORS=3")
endif()

# The kernel filter's names, without a GPU: a filter that does not name a kernel the run
# must check (here gemm_ksplit_micro_kernel and bias_grad_block_kernel, for lenet_measure) fails
# the test before anything runs, never passes by checking nothing. Label kit: the GPU-node
# kit's step sanitize runs these tests.
if(MNIST_DDP_HAVE_CUDA)
  add_test(NAME kit_sanitize_filter_names
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cudasim/expect.sh 1
                   "^FAIL gpu_sanitize_memcheck_lenet_measure: the kernel filter does not name gemm_ksplit_micro_kernel"
                   "!^# device"
                   -- bash ${CMAKE_CURRENT_SOURCE_DIR}/sanitize/gpu_sanitize.sh memcheck lenet-measure
                      $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} none ${MNIST_MPIRUN})
  set_tests_properties(kit_sanitize_filter_names PROPERTIES LABELS kit TIMEOUT 60
                       ENVIRONMENT "MNIST_SANITIZE_KERNELS=softmax_xent_kernel,sgd_update_kernel")
endif()
