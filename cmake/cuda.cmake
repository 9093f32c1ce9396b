# cuda.cmake - the CUDA backend's toolchain: nvcc, cudart, cuBLAS, cuBLASLt and NCCL.
#
# Included by the top CMakeLists.txt when MNIST_DDP_CUDA is AUTO or ON.
# AUTO builds the backend when nvcc, cuBLAS and NCCL are all found and says
# what is missing otherwise; ON stops the configure with that message.
#
# Sets, in the including scope:
#   MNIST_DDP_HAVE_CUDA   ON when the backend is built
#   MNIST_CUDA_RPATH, MNIST_CUDA_LIBRARIES_FILE, mnist_cuda_module()   for the
#                         module's variants that tests/cmake/45-cuda-module.cmake builds
# and builds, when it is:
#   mnist_cuda_objects    cuda/*.cu but the entry point, as an object library
#   mnist-cuda            the module build/libmnist-cuda.so: those objects and
#                         cuda/backend_module.cu, linked with cudart, cuBLAS, cuBLASLt
#                         and NCCL (found by cmake/cuda_libraries.cmake: the toolkit,
#                         NCCL_HOME, the system or NVIDIA's Python wheels; where each
#                         came from in build/mnist-cuda-libraries.txt), exporting
#                         backend_module_entry only (a linker version script,
#                         cmake/module_exports.map, whatever the toolchain), carrying a
#                         DT_RPATH (not RUNPATH) to NCCL's, the toolkit's and
#                         cuBLAS's library directories (MNIST_CUDA_RPATH), so that a node
#                         whose loader configuration lacks them still finds them.
#                         What it calls of the host program (check_fail, die,
#                         ...) it finds in the executable that loads it.
#
# Device code is built for sm_80 and sm_90 plus compute_90 PTX (newer GPUs JIT
# it), never "native": these machines have no GPU to detect. Override with
# -DCMAKE_CUDA_ARCHITECTURES=... as usual.
#
# Also rewrites MNIST_DDP_WARNINGS (set by the top CMakeLists for the C
# compiler) so that each C flag applies to C sources only and nvcc gets its own
# equivalents, and keeps the sanitizer flags away from nvcc.

set(_mnist_cuda_missing "")

# nvcc: honour CMAKE_CUDA_COMPILER / CUDACXX / PATH, else the usual install prefix.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(MNIST_NVCC nvcc HINTS ENV CUDA_PATH PATHS /usr/local/cuda/bin PATH_SUFFIXES bin)
  if(MNIST_NVCC)
    set(CMAKE_CUDA_COMPILER ${MNIST_NVCC})
  endif()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  list(APPEND _mnist_cuda_missing "nvcc (the CUDA toolkit)")
endif()

if(CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  # Link libcudart.so, not the static runtime, so ldd shows what runs.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # C++20 for designated initializers (struct backend_ops). CMake 3.25 does not
  # know nvcc 13's flag for it, so pass it by hand where CMake cannot.
  if(CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
  else()
    string(APPEND CMAKE_CUDA_FLAGS " -std=c++20")
  endif()
  find_package(CUDAToolkit)
  if(NOT CUDAToolkit_FOUND)
    list(APPEND _mnist_cuda_missing "the CUDA runtime (libcudart)")
  else()
    # NCCL and cuBLAS: the toolkit, NCCL_HOME, the system or NVIDIA's Python wheels.
    include(${CMAKE_CURRENT_LIST_DIR}/cuda_libraries.cmake)
  endif()
endif()

if(_mnist_cuda_missing)
  list(JOIN _mnist_cuda_missing ", " _mnist_cuda_missing_text)
  if(MNIST_DDP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MNIST_DDP_CUDA=ON but the CUDA backend cannot be built: "
      "not found: ${_mnist_cuda_missing_text}. Install them, point CUDAToolkit_ROOT / "
      "NCCL_HOME / MNIST_DDP_PYTHON at them, or configure with -DMNIST_DDP_CUDA=AUTO or OFF.")
  endif()
  message(STATUS "mnist-ddp: CUDA backend not built (not found: ${_mnist_cuda_missing_text})")
  return()
endif()

message(STATUS "mnist-ddp: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}), "
  "architectures ${CMAKE_CUDA_ARCHITECTURES}")

# Warnings: the top-level list holds C compiler flags; give each to C only and
# add nvcc's own (-Werror all-warnings for nvcc, the C flags for its host compiler).
set(_mnist_c_warnings ${MNIST_DDP_WARNINGS})
set(MNIST_DDP_WARNINGS "")
foreach(_flag IN LISTS _mnist_c_warnings)
  list(APPEND MNIST_DDP_WARNINGS "$<$<COMPILE_LANGUAGE:C>:${_flag}>")
endforeach()
# As in C, members a C++ designated initializer leaves out are zero: the
# optional backend_ops entries, so -Wextra's warning about them is off.
list(JOIN _mnist_c_warnings "," _mnist_host_warnings)
string(APPEND _mnist_host_warnings ",-Wno-missing-field-initializers")
list(APPEND MNIST_DDP_WARNINGS "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_mnist_host_warnings}>")
if(MNIST_DDP_WERROR)
  list(APPEND MNIST_DDP_WARNINGS "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
endif()

# Sanitizers instrument C code only: nvcc does not take -fsanitize.
get_directory_property(_mnist_dir_options COMPILE_OPTIONS)
set(_mnist_new_options "")
foreach(_opt IN LISTS _mnist_dir_options)
  if(_opt MATCHES "^-f(no-)?(sanitize|omit-frame-pointer)")
    list(APPEND _mnist_new_options "$<$<COMPILE_LANGUAGE:C>:${_opt}>")
  else()
    list(APPEND _mnist_new_options "${_opt}")
  endif()
endforeach()
set_directory_properties(PROPERTIES COMPILE_OPTIONS "${_mnist_new_options}")

# --fmad=false: no contraction into FMA, so the shared element bodies round
# on the GPU as they do on the host (the kernels are memory-bound anyway).
set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --fmad=false")

set(MNIST_DDP_HAVE_CUDA ON)

# The NCCL, toolkit and cuBLAS this module is built against, in that order (NCCL_HOME's
# NCCL before a toolkit's own), as real paths (a symlink such as /usr/local/cuda may
# name another toolkit on another node); a system directory (NCCL from a distribution
# package) the loader searches anyway.
set(MNIST_CUDA_RPATH "")
foreach(_dir ${MNIST_NCCL_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_DIR} ${MNIST_CUBLAS_LIBRARY_DIR})
  file(REAL_PATH ${_dir} _dir)
  if(NOT _dir IN_LIST CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES
     AND NOT _dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
    list(APPEND MNIST_CUDA_RPATH ${_dir})
  endif()
endforeach()
list(REMOVE_DUPLICATES MNIST_CUDA_RPATH)

# build/mnist-cuda-libraries.txt: each CUDA library the module links, where this configure
# took it from and the file, and whether the module's RPATH or the loader's own search
# ("system") finds it; tests/module/test_module_elf.sh expects the loader to load those files.
get_target_property(_cudart_file CUDA::cudart IMPORTED_LOCATION)
set(_mnist_libs_text "# Written by cmake/cuda.cmake: the CUDA libraries libmnist-cuda.so links.\n")
string(APPEND _mnist_libs_text "# library\twhere from\tfile\tfound through\n")
foreach(_entry "cudart|the CUDA toolkit|${_cudart_file}"
               "nccl|${MNIST_NCCL_FROM}|${NCCL_LIBRARY}"
               "cublas|${MNIST_CUBLAS_FROM}|${MNIST_CUBLAS_LIBRARY}"
               "cublasLt|${MNIST_CUBLAS_FROM}|${MNIST_CUBLASLT_LIBRARY}")
  string(REPLACE "|" ";" _entry "${_entry}")
  list(GET _entry 0 _name)
  list(GET _entry 1 _from)
  list(GET _entry 2 _file)
  if(NOT EXISTS "${_file}")
    message(FATAL_ERROR "mnist-ddp: ${_name} was taken from ${_from}, but its file '${_file}' "
                        "does not exist")
  endif()
  get_filename_component(_dir ${_file} DIRECTORY)
  file(REAL_PATH ${_dir} _dir)
  set(_through system)
  if(_dir IN_LIST MNIST_CUDA_RPATH)
    set(_through rpath)
  endif()
  string(APPEND _mnist_libs_text "${_name}\t${_from}\t${_file}\t${_through}\n")
endforeach()
set(MNIST_CUDA_LIBRARIES_FILE ${CMAKE_BINARY_DIR}/mnist-cuda-libraries.txt)
file(CONFIGURE OUTPUT ${MNIST_CUDA_LIBRARIES_FILE} CONTENT "${_mnist_libs_text}" @ONLY)

# mnist_cuda_module(TARGET): link TARGET as a backend module: a DT_RPATH (not DT_RUNPATH: it
# also serves the libraries those load, and LD_LIBRARY_PATH cannot shadow it) holding
# MNIST_CUDA_RPATH, and backend_module_entry its only export, whatever the toolchain links
# into it (cmake/module_exports.map).
set(MNIST_MODULE_EXPORTS_MAP ${CMAKE_SOURCE_DIR}/cmake/module_exports.map)
function(mnist_cuda_module target)
  target_link_options(${target} PRIVATE LINKER:--disable-new-dtags
                      LINKER:--version-script=${MNIST_MODULE_EXPORTS_MAP})
  set_target_properties(${target} PROPERTIES
    CUDA_VISIBILITY_PRESET hidden
    LINK_DEPENDS ${MNIST_MODULE_EXPORTS_MAP}
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "${MNIST_CUDA_RPATH}")
endfunction()

add_library(mnist_cuda_objects OBJECT
  ${CMAKE_SOURCE_DIR}/cuda/backend_cuda.cu
  ${CMAKE_SOURCE_DIR}/cuda/backend_cuda_start.cu
  ${CMAKE_SOURCE_DIR}/cuda/backend_cuda_plan.cu
  ${CMAKE_SOURCE_DIR}/cuda/backend_cuda_graph.cu
  ${CMAKE_SOURCE_DIR}/cuda/probe.cu
  ${CMAKE_SOURCE_DIR}/cuda/conv_plan.cu
  ${CMAKE_SOURCE_DIR}/cuda/cuda_check.cu
  ${CMAKE_SOURCE_DIR}/cuda/gemm_lt.cu
  ${CMAKE_SOURCE_DIR}/cuda/gemm_cublaslt.cu
  ${CMAKE_SOURCE_DIR}/cuda/gemm_names.cu
  ${CMAKE_SOURCE_DIR}/cuda/head_plan.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels_conv.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels_conv_patch.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels_gemm.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels_epilogue.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels_head.cu
  ${CMAKE_SOURCE_DIR}/cuda/kernels_dense.cu
  ${CMAKE_SOURCE_DIR}/cuda/plan.cu
  ${CMAKE_SOURCE_DIR}/cuda/plan_json.c
  ${CMAKE_SOURCE_DIR}/cuda/ways.cu)
set_target_properties(mnist_cuda_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CUDA_VISIBILITY_PRESET hidden)
target_include_directories(mnist_cuda_objects PUBLIC ${CMAKE_SOURCE_DIR}/include
                           ${CMAKE_SOURCE_DIR}/cuda PRIVATE ${JANSSON_INCLUDE_DIR})
target_compile_options(mnist_cuda_objects PRIVATE ${MNIST_DDP_WARNINGS})
target_link_libraries(mnist_cuda_objects PUBLIC MPI::MPI_C CUDA::cudart mnist::cublas
                      mnist::cublasLt mnist::nccl ${JANSSON_LIBRARY})

add_library(mnist-cuda MODULE ${CMAKE_SOURCE_DIR}/cuda/backend_module.cu)
target_compile_options(mnist-cuda PRIVATE ${MNIST_DDP_WARNINGS})
target_compile_definitions(mnist-cuda PRIVATE MNIST_DDP_INTERFACE_ID="${MNIST_DDP_INTERFACE_ID}")
target_link_libraries(mnist-cuda PRIVATE mnist_cuda_objects)
mnist_cuda_module(mnist-cuda)
set_target_properties(mnist-cuda PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
