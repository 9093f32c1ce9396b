# The CUDA backend under NVIDIA's compute-sanitizer (label gpu-sanitize):
#
#   gpu_sanitize_<tool>_<model>   memcheck, initcheck, racecheck, synccheck over seed, mlp
#                                 and lenet: 4 short runs each (graph and --no-graph, SGD and
#                                 AdamW), zero errors required (tests/sanitize/gpu_sanitize.sh);
#                                 MNIST_SANITIZE_RUNS=one in the environment: one run each
#                                 (the GPU-node kit's step sanitize, scripts/gpu-node/run.sh)
#
#   ctest --test-dir build -L gpu-sanitize --output-on-failure
#
# Where no GPU is usable (no driver, no device) or compute-sanitizer is missing, each
# skips (77) and says why; GPUs present but unusable fail, as the GPU suite does.
# (-L is a regular expression: `ctest -L gpu` runs these too; `-L '^gpu$'` the GPU
# suite alone.) In this fragment's name "cuda", so MNIST_DDP_TESTS=gpu builds it too.
if(MNIST_DDP_HAVE_CUDA)
  foreach(_tool memcheck initcheck racecheck synccheck)
    foreach(_model seed mlp lenet)
      add_test(NAME gpu_sanitize_${_tool}_${_model}
               COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sanitize/gpu_sanitize.sh ${_tool} ${_model}
                       $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} "${CUDAToolkit_BIN_DIR}"
                       ${MNIST_MPIRUN})
      set_tests_properties(gpu_sanitize_${_tool}_${_model} PROPERTIES LABELS gpu-sanitize
                           SKIP_RETURN_CODE 77 TIMEOUT 700)
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
  set_tests_properties(gpu_sanitize_sim_clean_passes gpu_sanitize_sim_errors_fail PROPERTIES
                       LABELS cudasim TIMEOUT 300 PROCESSORS 1)
  set_tests_properties(gpu_sanitize_sim_clean_passes PROPERTIES ENVIRONMENT
                       "COMPUTE_SANITIZER=${CMAKE_CURRENT_SOURCE_DIR}/sanitize/fake-compute-sanitizer")
  set_tests_properties(gpu_sanitize_sim_errors_fail PROPERTIES ENVIRONMENT
                       "COMPUTE_SANITIZER=${CMAKE_CURRENT_SOURCE_DIR}/sanitize/fake-compute-sanitizer;FAKE_SANITIZER_ERRORS=3")
endif()
