# Fuzzing of the readers of untrusted files: the IDX reader (host/io/idx.c) and
# the checkpoint reader (host/io/checkpoint_read.c, its JSON through jansson, the GPU plan
# in its metadata through the CUDA backend's reader, cuda/plan_json.c, as --resume hands it on).
# Targets and seed corpora in tests/fuzz/.
#
# Every build: fuzz_idx_corpus and fuzz_checkpoint_corpus (label unit) replay
# the seed corpora (and any reproducer added to them) through the targets with
# a plain main(), so they also run under -DMNIST_DDP_SANITIZE=ON.
#
# With clang and -DMNIST_DDP_FUZZ=ON: the libFuzzer targets fuzz_idx and
# fuzz_checkpoint, built with AddressSanitizer and UndefinedBehaviorSanitizer
# from the reader sources themselves, and fuzz_*_smoke (label fuzz): a fixed number of
# inputs each, about 20 s (tests/fuzz/run_fuzz.sh; longer runs by hand, docs/reliability.md):
#   CC=clang cmake -S . -B build-fuzz -DMNIST_DDP_FUZZ=ON -DMNIST_DDP_CUDA=OFF
#   cmake --build build-fuzz --target fuzz_idx fuzz_checkpoint
#   ctest --test-dir build-fuzz -L fuzz
option(MNIST_DDP_FUZZ "Build the libFuzzer targets (clang only)" OFF)
set(_fz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

foreach(_t idx checkpoint)
  add_executable(fuzz_${_t}_replay ${_fz}/fuzz_${_t}.c ${_fz}/replay_main.c
                 $<$<STREQUAL:${_t},checkpoint>:${CMAKE_SOURCE_DIR}/cuda/plan_json.c>)
  target_include_directories(fuzz_${_t}_replay PRIVATE ${CMAKE_SOURCE_DIR}/cuda ${JANSSON_INCLUDE_DIR})
  target_compile_options(fuzz_${_t}_replay PRIVATE ${MNIST_DDP_WARNINGS})
  target_link_libraries(fuzz_${_t}_replay PRIVATE mnist_core)
  add_test(NAME fuzz_${_t}_corpus COMMAND fuzz_${_t}_replay ${_fz}/corpus/${_t})
  add_dependencies(unit-tests fuzz_${_t}_replay)
  set_tests_properties(fuzz_${_t}_corpus PROPERTIES LABELS unit TIMEOUT 60)
endforeach()

if(MNIST_DDP_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MNIST_DDP_FUZZ needs clang (libFuzzer): configure with CC=clang "
                        "(Debian: apt-get install clang libclang-rt-14-dev)")
  endif()
  set(_fz_flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
                -fno-omit-frame-pointer -g -O1)
  add_executable(fuzz_idx ${_fz}/fuzz_idx.c ${CMAKE_SOURCE_DIR}/host/io/idx.c
                 ${CMAKE_SOURCE_DIR}/host/dist/check.c)
  target_link_libraries(fuzz_idx PRIVATE MPI::MPI_C ZLIB::ZLIB)
  add_executable(fuzz_checkpoint ${_fz}/fuzz_checkpoint.c ${CMAKE_SOURCE_DIR}/host/io/checkpoint_write.c
                 ${CMAKE_SOURCE_DIR}/host/io/checkpoint_read.c ${CMAKE_SOURCE_DIR}/host/io/checkpoint_compat.c
                 ${CMAKE_SOURCE_DIR}/host/io/checkpoint_tensors.c ${CMAKE_SOURCE_DIR}/cuda/plan_json.c
                 ${CMAKE_SOURCE_DIR}/host/io/checkpoint_dir.c ${CMAKE_SOURCE_DIR}/host/train/model.c
                 ${CMAKE_SOURCE_DIR}/host/train/head.c
                 ${CMAKE_SOURCE_DIR}/host/io/idx.c ${CMAKE_SOURCE_DIR}/host/config.c
                 ${CMAKE_SOURCE_DIR}/host/io/report.c ${CMAKE_SOURCE_DIR}/host/train/schedule.c
                 ${CMAKE_SOURCE_DIR}/host/dist/check.c)
  target_include_directories(fuzz_checkpoint PRIVATE ${JANSSON_INCLUDE_DIR})
  target_link_libraries(fuzz_checkpoint PRIVATE MPI::MPI_C ZLIB::ZLIB ${JANSSON_LIBRARY} ${MATH_LIBRARY})
  foreach(_t idx checkpoint)
    target_include_directories(fuzz_${_t} PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/host
                               ${CMAKE_SOURCE_DIR}/cuda)
    target_compile_definitions(fuzz_${_t} PRIVATE MNIST_DDP_VERSION="${PROJECT_VERSION}")
    # The project's warning list has GCC-only entries; clang gets the common ones.
    target_compile_options(fuzz_${_t} PRIVATE ${_fz_flags} -Wall -Wextra -Wshadow
                           -Wno-unused-parameter $<$<BOOL:${MNIST_DDP_WERROR}>:-Werror>)
    target_link_options(fuzz_${_t} PRIVATE ${_fz_flags})
    # A fixed number of inputs (about 20 s of one core of the 2-core machine each, in
    # 2026-11), not a fixed time: scripts/test.sh runs these beside the main suite at the
    # lowest priority, where 20 s could be a few inputs.
    if(_t STREQUAL idx)
      set(_runs 200000)
    else()
      set(_runs 100000)
    endif()
    add_test(NAME fuzz_${_t}_smoke
             COMMAND bash ${_fz}/run_fuzz.sh $<TARGET_FILE:fuzz_${_t}> ${_fz}/corpus/${_t} 600
                     -runs=${_runs})
    set_tests_properties(fuzz_${_t}_smoke PROPERTIES LABELS fuzz TIMEOUT 900)
  endforeach()
endif()
