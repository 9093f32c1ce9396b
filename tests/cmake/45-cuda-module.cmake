# The CUDA backend as a loadable module (cmake/cuda.cmake, host/backend_load.c).
#
#   cuda_module_elf            readelf and the loader: mnist-train links no CUDA
#                              library; the module's DT_RPATH holds the toolkit's
#                              and NCCL's directories and serves without the
#                              loader cache; one export; what it takes from the
#                              program, mnist-train exports
#   cuda_module_<case>         2 ranks under mpirun (tests/module/test_module_load.sh
#                              says what each case proves): host, auto_no_driver, missing_with_driver,
#                              missing, missing_driver_node, beside_binary, libs_hidden, other_build
#
# Some cases need the toolkit's stub libcuda.so (a driver that loads and refuses
# to run: the module is then opened and probed without a GPU), one needs no
# driver on the machine, one needs unshare -m; each skips (77) with its reason
# where that is missing, and is never counted as passed.
if(MNIST_DDP_HAVE_CUDA)
  # The directories as one colon-separated argument (a list's escaped ";" would reach the script with its backslash).
  string(REPLACE ";" ":" _mnist_rpath_arg "${MNIST_CUDA_RPATH}")
  add_test(NAME cuda_module_elf
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/module/test_module_elf.sh
                   $<TARGET_FILE:mnist-train> $<TARGET_FILE:mnist-cuda> "${_mnist_rpath_arg}")
  set_tests_properties(cuda_module_elf PROPERTIES LABELS unit TIMEOUT 60)

  # The same backend as a module from another build: another interface id.
  add_library(mnist-cuda-other-build MODULE ${CMAKE_SOURCE_DIR}/cuda/backend_module.cu)
  target_compile_options(mnist-cuda-other-build PRIVATE ${MNIST_DDP_WARNINGS})
  target_compile_definitions(mnist-cuda-other-build PRIVATE MNIST_DDP_INTERFACE_ID="another-build")
  target_link_libraries(mnist-cuda-other-build PRIVATE mnist_cuda_objects)
  target_link_options(mnist-cuda-other-build PRIVATE LINKER:--disable-new-dtags)
  set_target_properties(mnist-cuda-other-build PROPERTIES CUDA_VISIBILITY_PRESET hidden
                        BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH "${MNIST_CUDA_RPATH}")

  find_library(MNIST_CUDA_STUB_DRIVER NAMES cuda PATHS ${CUDAToolkit_LIBRARY_DIR}/stubs
               NO_DEFAULT_PATH)
  if(NOT MNIST_CUDA_STUB_DRIVER)
    set(MNIST_CUDA_STUB_DRIVER "")
  endif()
  foreach(case host auto_no_driver missing missing_driver_node missing_with_driver beside_binary
               libs_hidden other_build)
    add_test(NAME cuda_module_${case}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/module/test_module_load.sh ${case}
                     $<TARGET_FILE:mnist-train> $<TARGET_FILE:mnist-cuda>
                     $<TARGET_FILE:mnist-cuda-other-build> "${MNIST_CUDA_STUB_DRIVER}"
                     ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
    set_tests_properties(cuda_module_${case} PROPERTIES LABELS e2e SKIP_RETURN_CODE 77
                         TIMEOUT 300 PROCESSORS 2)
  endforeach()
endif()
