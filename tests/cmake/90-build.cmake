# Builds where GPUs live (cmake/cuda_libraries.cmake, MNIST_DDP_TESTS). Label build:
# each test configures the project afresh in a temporary directory
# (tests/build/test_find_libs.sh says what each case proves):
#
#   build_nccl_wheel       NCCL, cuBLAS and cuBLASLt from wheel-shaped site-packages made of
#                          the toolkit's files (libnccl.so.2; nvidia/cu13/lib/libcublas.so.13,
#                          libcublasLt.so.13), with a toolkit in NVIDIA's installer layout
#                          whose cuBLAS is its stubs only; the module linked (from this
#                          build's objects) and checked with readelf and the loader
#   build_nccl_home        NCCL from NCCL_HOME (libnccl.so.2 only), cuBLAS and cuBLASLt from
#                          the cu12 wheel layout (nvidia/cublas/lib) in MNIST_DDP_SITE_PACKAGES,
#                          the same stubs-only toolkit; a wrong NCCL_HOME refused
#   build_toolkit_targets  cuBLAS and cuBLASLt from a toolkit that has them under
#                          targets/x86_64-linux/lib only (stubs/ beside them), never a stub
#   build_tests_gpu        MNIST_DDP_TESTS=gpu with Criterion's paths leading nowhere
#
# A test build reuses this build's compilers and libraries through an initial cache
# (build_test_seed.cmake, cmake -C).
if(MNIST_DDP_HAVE_CUDA)
  set(_seed ${CMAKE_CURRENT_BINARY_DIR}/build_test_seed.cmake)
  set(_seed_text "# Written by tests/cmake/90-build.cmake: what a test build takes from this one.\n")
  foreach(_var CMAKE_C_COMPILER CMAKE_CUDA_COMPILER CMAKE_PREFIX_PATH MPI_C_COMPILER
               CBLAS_INCLUDE_DIR OPENBLAS_LIBRARY JANSSON_INCLUDE_DIR JANSSON_LIBRARY
               MNIST_DATA_DIR MNIST_DDP_WERROR CUDA_CUDART CUDA_cudart_LIBRARY)
    if(DEFINED ${_var})
      string(APPEND _seed_text "set(${_var} \"${${_var}}\" CACHE STRING \"\")\n")
    endif()
  endforeach()
  file(CONFIGURE OUTPUT ${_seed} CONTENT "${_seed_text}" @ONLY)

  # The toolkit's directories and NCCL's, hidden from a test build's search.
  get_filename_component(_nccl_lib_dir ${NCCL_LIBRARY} DIRECTORY)
  set(_hide ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${NCCL_INCLUDE_DIR} ${_nccl_lib_dir}
            ${MNIST_CUBLAS_INCLUDE_DIR} ${MNIST_CUBLAS_LIBRARY_DIR})
  list(REMOVE_DUPLICATES _hide)
  string(REPLACE ";" ":" _hide "${_hide}")

  # The toolkit the cases make others of: its bin/ (where nvcc finds nvcc.profile, hence the
  # toolkit: never CMAKE_CUDA_COMPILER's directory, which may hold a wrapper such as
  # /usr/local/bin/nvcc that execs the real one), the headers (cuda_runtime.h), libcudart's.
  set(_nvcc_dir ${CUDAToolkit_BIN_DIR})
  set(_cuda_inc "")
  foreach(_dir ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT _cuda_inc AND EXISTS ${_dir}/cuda_runtime.h)
      set(_cuda_inc ${_dir})
    endif()
  endforeach()
  foreach(_case nccl_wheel nccl_home toolkit_targets tests_gpu)
    add_test(NAME build_${_case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/build/test_find_libs.sh ${_case}
                     ${CMAKE_SOURCE_DIR} ${_seed} ${NCCL_INCLUDE_DIR} ${NCCL_LIBRARY}
                     ${MNIST_CUBLAS_INCLUDE_DIR} ${MNIST_CUBLAS_LIBRARY} ${MNIST_CUBLASLT_LIBRARY}
                     ${_nvcc_dir} ${_cuda_inc} ${CUDAToolkit_LIBRARY_DIR} ${_hide})
    set_tests_properties(build_${_case} PROPERTIES LABELS build TIMEOUT 300)
  endforeach()
endif()
