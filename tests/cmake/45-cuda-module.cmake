# The CUDA backend as a loadable module (cmake/cuda.cmake, host/backend_load.c).
#
#   cuda_module_elf            readelf and the loader: mnist-train links no CUDA
#                              library; the module's DT_RPATH holds the toolkit's
#                              and NCCL's directories; without the loader cache it
#                              loads the very files the configure linked
#                              (build/mnist-cuda-libraries.txt: RPATH or system); one
#                              export; what it takes from the program, mnist-train
#                              (or the dynamic loader) exports
#   cuda_module_elf_static_cxx the same checks of the module linked with
#                              -static-libstdc++, as a toolchain whose g++ links its C++
#                              runtime statically does (a GCC in /opt/gcc did): the C++
#                              runtime inside, not exported (the version script), and
#                              its __tls_get_addr the loader's; skips (77) where the
#                              host compiler has no libstdc++.a
#   cuda_module_cublaslt_link  a module calling cuBLASLt (tests/build/cublaslt_link.cu),
#                              linked as the backend's: it compiles against the
#                              cublasLt.h found, needs libcublasLt, and loads the file
#                              the configure chose
#   cuda_module_sim_exports    the simulated module (tests/cmake/45-cudasim.cmake)
#                              exports backend_module_entry only
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
                   $<TARGET_FILE:mnist-train> $<TARGET_FILE:mnist-cuda> "${_mnist_rpath_arg}"
                   ${MNIST_CUDA_LIBRARIES_FILE})
  set_tests_properties(cuda_module_elf PROPERTIES LABELS unit TIMEOUT 60)
  add_dependencies(unit-tests mnist-train mnist-cuda)

  # The module linked with the C++ runtime inside it, where the host compiler has one to link.
  execute_process(COMMAND ${CMAKE_CUDA_HOST_LINK_LAUNCHER} -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE _mnist_libstdcxx_a OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND IS_ABSOLUTE "${_mnist_libstdcxx_a}" AND EXISTS "${_mnist_libstdcxx_a}")
    add_library(mnist-cuda-static-cxx MODULE ${CMAKE_SOURCE_DIR}/cuda/backend_module.cu)
    target_compile_options(mnist-cuda-static-cxx PRIVATE ${MNIST_DDP_WARNINGS})
    target_compile_definitions(mnist-cuda-static-cxx PRIVATE
                               MNIST_DDP_INTERFACE_ID="${MNIST_DDP_INTERFACE_ID}")
    target_link_libraries(mnist-cuda-static-cxx PRIVATE mnist_cuda_objects)
    target_link_options(mnist-cuda-static-cxx PRIVATE -static-libstdc++)
    mnist_cuda_module(mnist-cuda-static-cxx)
    add_test(NAME cuda_module_elf_static_cxx
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/module/test_module_elf.sh
                     $<TARGET_FILE:mnist-train> $<TARGET_FILE:mnist-cuda-static-cxx>
                     "${_mnist_rpath_arg}" ${MNIST_CUDA_LIBRARIES_FILE})
    add_dependencies(unit-tests mnist-cuda-static-cxx)
  else()
    add_test(NAME cuda_module_elf_static_cxx
             COMMAND sh -c "echo \"$1\"; exit 77" sh
                     "SKIP cuda_module_elf_static_cxx: ${CMAKE_CUDA_HOST_LINK_LAUNCHER} has no libstdc++.a to link the module with (-print-file-name=libstdc++.a: ${_mnist_libstdcxx_a})")
  endif()
  set_tests_properties(cuda_module_elf_static_cxx PROPERTIES LABELS unit TIMEOUT 60
                       SKIP_RETURN_CODE 77)

  # A module that calls cuBLASLt, linked as the backend's is.
  add_library(mnist-cublaslt-link MODULE ${CMAKE_CURRENT_SOURCE_DIR}/build/cublaslt_link.cu)
  target_compile_options(mnist-cublaslt-link PRIVATE ${MNIST_DDP_WARNINGS})
  target_link_libraries(mnist-cublaslt-link PRIVATE CUDA::cudart mnist::cublasLt)
  mnist_cuda_module(mnist-cublaslt-link)
  add_test(NAME cuda_module_cublaslt_link
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/build/test_cublaslt_link.sh
                   $<TARGET_FILE:mnist-cublaslt-link> ${MNIST_CUDA_LIBRARIES_FILE})
  set_tests_properties(cuda_module_cublaslt_link PROPERTIES LABELS unit TIMEOUT 60)
  add_dependencies(unit-tests mnist-cublaslt-link)

  # The same backend as a module from another build: another interface id.
  add_library(mnist-cuda-other-build MODULE ${CMAKE_SOURCE_DIR}/cuda/backend_module.cu)
  target_compile_options(mnist-cuda-other-build PRIVATE ${MNIST_DDP_WARNINGS})
  target_compile_definitions(mnist-cuda-other-build PRIVATE MNIST_DDP_INTERFACE_ID="another-build")
  target_link_libraries(mnist-cuda-other-build PRIVATE mnist_cuda_objects)
  mnist_cuda_module(mnist-cuda-other-build)

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

# The simulated module (tests/cmake/45-cudasim.cmake, built with or without CUDA): one export.
# Label build, as the other checks of what a build made: a check of the module's ELF, not a
# program for the sanitizers to watch, so the sanitizer pass (unit-tests) need not build the
# simulator under them (40 s of CPU on 2 cores, half that build).
add_test(NAME cuda_module_sim_exports
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/module/test_module_elf.sh --exports-only
                 $<TARGET_FILE:mnist-cuda-sim>)
set_tests_properties(cuda_module_sim_exports PROPERTIES LABELS build TIMEOUT 60)
