# gpu-tests: what the GPU-node kit's default run needs built (scripts/gpu-node/run.sh, step
# build): mnist-train, the CUDA module and the programs of the GPU suite (label gpu) and of
# gpu-sanitize, and bench/allreduce (bench/CMakeLists.txt adds it: quick's matrix runs its
# NCCL tables on a node of 2 GPUs or more). One target, so that make builds them all in parallel; the kit's step all
# builds the rest. In this fragment's name "cuda", so MNIST_DDP_TESTS=gpu has it too.
# A GPU test whose program is left out of it fails in the kit's quick step ("mpiexec was
# unable to launch ... Executable: .../tests/gpu_plan", the H100 node of 2026-11-27), never
# passes: kit_gpu_tests_builds (below) fails first, on any machine.
if(MNIST_DDP_HAVE_CUDA)
  add_custom_target(gpu-tests)
  add_dependencies(gpu-tests mnist-train mnist-cuda)
  foreach(_prog gpu_ops gpu_plan gpu_train_parity gpu_graph gpu_allreduce gpu_deadline gpu_train_step)
    if(TARGET ${_prog})
      add_dependencies(gpu-tests ${_prog})
    endif()
  endforeach()

  # _mnist_gpu_tests_programs(OUT): once every directory is configured (deferred to the end
  # of the top directory), OUT gets one line per executable, shared library and module of
  # the project: its file, its target, and "yes" when building gpu-tests builds it (gpu-tests'
  # dependencies, added by hand or linked, followed to the end), else "no".
  function(_mnist_gpu_tests_programs out)
    set(_todo gpu-tests)
    set(_built "")
    while(_todo)
      list(POP_FRONT _todo _t)
      get_target_property(_alias ${_t} ALIASED_TARGET)
      if(_alias)
        set(_t ${_alias})
      endif()
      if(_t IN_LIST _built)
        continue()
      endif()
      list(APPEND _built ${_t})
      foreach(_prop MANUALLY_ADDED_DEPENDENCIES LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
        get_target_property(_deps ${_t} ${_prop})
        if(NOT _deps)
          continue()
        endif()
        foreach(_d IN LISTS _deps)
          string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _d "${_d}")
          if(TARGET "${_d}")
            get_target_property(_imported ${_d} IMPORTED)
            if(NOT _imported)
              list(APPEND _todo ${_d})
            endif()
          endif()
        endforeach()
      endforeach()
    endwhile()
    set(_dirs ${CMAKE_SOURCE_DIR})
    set(_lines "")
    while(_dirs)
      list(POP_FRONT _dirs _dir)
      get_property(_sub DIRECTORY ${_dir} PROPERTY SUBDIRECTORIES)
      list(APPEND _dirs ${_sub})
      get_property(_targets DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
      foreach(_t IN LISTS _targets)
        get_target_property(_type ${_t} TYPE)
        if(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
          set(_yes no)
          if(_t IN_LIST _built)
            set(_yes yes)
          endif()
          string(APPEND _lines "$<TARGET_FILE:${_t}>\t${_t}\t${_yes}\n")
        endif()
      endforeach()
    endwhile()
    file(GENERATE OUTPUT ${out} CONTENT "${_lines}")
  endfunction()
  set(_mnist_gpu_tests_tsv ${CMAKE_CURRENT_BINARY_DIR}/kit/gpu-tests-programs.tsv)
  # (A deferred call's arguments are expanded when it runs, in the top directory's scope: EVAL
  # puts the file's name in now.)
  cmake_language(EVAL CODE "cmake_language(DEFER DIRECTORY [[${CMAKE_SOURCE_DIR}]]
                                           CALL _mnist_gpu_tests_programs [[${_mnist_gpu_tests_tsv}]])")

  # kit_gpu_tests_builds (label kit, a second, no GPU, nothing built): every file a test
  # labelled gpu or gpu-sanitize runs that is one of the project's programs (the command's
  # program and its arguments, as ctest --show-only=json-v1 has them) is built by gpu-tests;
  # with a control: the same check, told that gpu-tests leaves out a program the suite
  # runs, must fail (tests/kit/test_gpu_tests_builds.py).
  add_test(NAME kit_gpu_tests_builds
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/kit/test_gpu_tests_builds.py
                   ${CMAKE_CTEST_COMMAND} ${CMAKE_BINARY_DIR} ${_mnist_gpu_tests_tsv})
  set_tests_properties(kit_gpu_tests_builds PROPERTIES LABELS kit TIMEOUT 60)
endif()
