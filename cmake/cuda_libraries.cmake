# cuda_libraries.cmake - where NCCL and cuBLAS come from, and one configure line for each.
#
# Included by cmake/cuda.cmake once nvcc and the toolkit are found (CUDAToolkit_*).
#
# NCCL: the first of these that holds nccl.h and libnccl.so (or only libnccl.so.2):
#   1. NCCL_HOME (cache variable, else the environment variable): include/, lib/ or
#      lib64/. When it is set nothing else is tried: a wrong NCCL_HOME is reported,
#      not passed over for another NCCL.
#   2. the CUDA toolkit's include and library directories;
#   3. the system's (a distribution's libnccl-dev, CMAKE_PREFIX_PATH);
#   4. the nvidia-nccl-cu* Python wheel, nvidia/nccl/{include,lib}: in a site-packages
#      directory listed in MNIST_DDP_SITE_PACKAGES, else where the interpreter
#      MNIST_DDP_PYTHON (default python3) finds the package nvidia.nccl
#      (cmake/nvidia_wheels.py).
# cuBLAS: the toolkit's (CUDA::cublas) when it has one, else the nvidia-cublas wheel
#   found the same way: nvidia/cu13/{include,lib} (the CUDA 13 wheels share that
#   folder) or nvidia/cublas/{include,lib} (the cu12 wheels), of the toolkit's major
#   version.
# The wheels ship versioned names only (libnccl.so.2, libcublas.so.13): find_library
# is given those names, and the imported targets link the files themselves, so no
# unversioned link has to be made by hand.
#
# Sets, in the including scope:
#   mnist::nccl, mnist::cublas   imported targets
#   NCCL_INCLUDE_DIR, NCCL_LIBRARY, MNIST_NCCL_VERSION
#   MNIST_CUBLAS_INCLUDE_DIR, MNIST_CUBLAS_LIBRARY
#   MNIST_NCCL_LIBRARY_DIR, MNIST_CUBLAS_LIBRARY_DIR   for the module's RPATH
# prints "mnist-ddp: NCCL 2.28.9 from <where>: <file>" and the same for cuBLAS, and
# appends to _mnist_cuda_missing what it cannot find.

set(NCCL_HOME "$ENV{NCCL_HOME}" CACHE PATH
    "NCCL's prefix (include/nccl.h, lib/libnccl.so); empty: the toolkit, the system, the nvidia-nccl wheel")
set(MNIST_DDP_PYTHON python3 CACHE STRING
    "Python interpreter whose nvidia-nccl / nvidia-cublas wheels may provide NCCL and cuBLAS")
set(MNIST_DDP_SITE_PACKAGES "" CACHE STRING
    "site-packages directories holding the nvidia-nccl / nvidia-cublas wheels (looked in before MNIST_DDP_PYTHON's)")

# _mnist_find_pair(PREFIX HEADER NAMES INC_DIRS LIB_DIRS): HEADER in INC_DIRS and a library
# of NAMES in LIB_DIRS, nowhere else ("DEFAULT" for both: CMake's default search). Sets
# PREFIX_INC and PREFIX_LIB in the caller, both empty unless both are found.
function(_mnist_find_pair prefix header names inc_dirs lib_dirs)
  if(inc_dirs STREQUAL "DEFAULT")
    find_path(_mnist_pair_inc ${header})
    find_library(_mnist_pair_lib NAMES ${names})
  else()
    find_path(_mnist_pair_inc ${header} PATHS ${inc_dirs} NO_DEFAULT_PATH)
    find_library(_mnist_pair_lib NAMES ${names} PATHS ${lib_dirs} NO_DEFAULT_PATH)
  endif()
  set(inc "")
  set(lib "")
  if(_mnist_pair_inc AND _mnist_pair_lib)
    set(inc ${_mnist_pair_inc})
    set(lib ${_mnist_pair_lib})
  endif()
  unset(_mnist_pair_inc CACHE) # searched again at every configure, never stale
  unset(_mnist_pair_lib CACHE)
  set(${prefix}_INC ${inc} PARENT_SCOPE)
  set(${prefix}_LIB ${lib} PARENT_SCOPE)
endfunction()

# _mnist_header_version(OUT FILE PREFIX): "2.28.9" from #define PREFIXMAJOR 2 ... PATCH 9.
function(_mnist_header_version out file prefix)
  file(STRINGS ${file} lines REGEX "^#define ${prefix}(MAJOR|MINOR|PATCH) +[0-9]+")
  set(version "")
  foreach(part MAJOR MINOR PATCH)
    foreach(line IN LISTS lines)
      if(line MATCHES "^#define ${prefix}${part} +([0-9]+)")
        list(APPEND version ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()
  list(JOIN version "." version)
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# The wheels' package directories: "WHERE|PACKAGE|DIR" entries, MNIST_DDP_SITE_PACKAGES first.
set(_mnist_wheel_dirs "")
set(_mnist_wheel_packages nvidia.nccl nvidia.cu13 nvidia.cublas)
foreach(_site IN LISTS MNIST_DDP_SITE_PACKAGES)
  foreach(_pkg IN LISTS _mnist_wheel_packages)
    string(REPLACE "." "/" _pkg_dir ${_pkg})
    if(IS_DIRECTORY ${_site}/${_pkg_dir})
      list(APPEND _mnist_wheel_dirs "MNIST_DDP_SITE_PACKAGES|${_pkg}|${_site}/${_pkg_dir}")
    endif()
  endforeach()
endforeach()
set(_mnist_python_note "")
if(MNIST_DDP_PYTHON)
  execute_process(COMMAND ${MNIST_DDP_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/nvidia_wheels.py
                          ${_mnist_wheel_packages}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err TIMEOUT 60
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _out "${_out}")
    foreach(_line IN LISTS _out)
      if(_line MATCHES "^([a-z0-9.]+)=(.+)$")
        list(APPEND _mnist_wheel_dirs "${MNIST_DDP_PYTHON}|${CMAKE_MATCH_1}|${CMAKE_MATCH_2}")
      endif()
    endforeach()
  else()
    set(_mnist_python_note " (${MNIST_DDP_PYTHON} did not run: ${_rc})")
  endif()
endif()

# _mnist_wheel(PACKAGE OUT_WHERE OUT_DIRS): the directories of PACKAGE among the wheels,
# with what found each ("MNIST_DDP_SITE_PACKAGES" or the interpreter).
function(_mnist_wheel package out_where out_dirs)
  set(where "")
  set(dirs "")
  foreach(entry IN LISTS _mnist_wheel_dirs)
    string(REPLACE "|" ";" entry "${entry}")
    list(GET entry 1 pkg)
    if(pkg STREQUAL package)
      list(GET entry 0 w)
      list(GET entry 2 d)
      list(APPEND where ${w})
      list(APPEND dirs ${d})
    endif()
  endforeach()
  set(${out_where} "${where}" PARENT_SCOPE)
  set(${out_dirs} "${dirs}" PARENT_SCOPE)
endfunction()

# ---- NCCL --------------------------------------------------------------------
set(_nccl_names nccl libnccl.so.2)
set(_nccl_INC "")
set(_nccl_LIB "")
set(_nccl_from "")
if(NCCL_HOME)
  _mnist_find_pair(_nccl nccl.h "${_nccl_names}" "${NCCL_HOME}/include"
                   "${NCCL_HOME}/lib;${NCCL_HOME}/lib64")
  set(_nccl_from "NCCL_HOME")
  set(_nccl_looked "under NCCL_HOME=${NCCL_HOME} (include/nccl.h, lib/libnccl.so or lib/libnccl.so.2)")
else()
  _mnist_find_pair(_nccl nccl.h "${_nccl_names}" "${CUDAToolkit_INCLUDE_DIRS}" "${CUDAToolkit_LIBRARY_DIR}")
  set(_nccl_from "the CUDA toolkit")
  if(NOT _nccl_LIB)
    _mnist_find_pair(_nccl nccl.h "${_nccl_names}" DEFAULT DEFAULT)
    set(_nccl_from "the system")
  endif()
  if(NOT _nccl_LIB)
    _mnist_wheel(nvidia.nccl _wheel_where _wheel_dirs)
    foreach(_where _dir IN ZIP_LISTS _wheel_where _wheel_dirs)
      if(NOT _nccl_LIB)
        _mnist_find_pair(_nccl nccl.h "${_nccl_names}" "${_dir}/include" "${_dir}/lib")
        set(_nccl_from "the nvidia-nccl wheel (${_where})")
      endif()
    endforeach()
  endif()
  string(CONCAT _nccl_looked "beside the toolkit, in the system's directories and in the nvidia-nccl "
         "wheel of ${MNIST_DDP_PYTHON}${_mnist_python_note} and MNIST_DDP_SITE_PACKAGES: or set NCCL_HOME")
endif()
set(MNIST_NCCL_LIBRARY_DIR "")
if(_nccl_LIB)
  set(NCCL_INCLUDE_DIR ${_nccl_INC})
  set(NCCL_LIBRARY ${_nccl_LIB})
  get_filename_component(MNIST_NCCL_LIBRARY_DIR ${NCCL_LIBRARY} DIRECTORY)
  _mnist_header_version(MNIST_NCCL_VERSION ${NCCL_INCLUDE_DIR}/nccl.h NCCL_)
  if(NOT TARGET mnist::nccl)
    add_library(mnist::nccl SHARED IMPORTED)
    set_target_properties(mnist::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  endif()
  message(STATUS "mnist-ddp: NCCL ${MNIST_NCCL_VERSION} from ${_nccl_from}: ${NCCL_LIBRARY}")
else()
  list(APPEND _mnist_cuda_missing "NCCL (nccl.h and libnccl.so or libnccl.so.2, looked for ${_nccl_looked})")
endif()

# ---- cuBLAS ------------------------------------------------------------------
set(MNIST_CUBLAS_LIBRARY_DIR "")
set(_cublas_file "")
if(TARGET CUDA::cublas)
  get_target_property(_cublas_file CUDA::cublas IMPORTED_LOCATION)
  set(_cublas_header "")
  foreach(_dir ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_MATH_INCLUDE_DIR})
    if(NOT _cublas_header AND EXISTS ${_dir}/cublas_api.h)
      set(_cublas_header ${_dir}/cublas_api.h)
    endif()
  endforeach()
  set(_cublas_version "")
  if(_cublas_header)
    _mnist_header_version(_cublas_version ${_cublas_header} CUBLAS_VER_)
  endif()
  get_filename_component(MNIST_CUBLAS_INCLUDE_DIR "${_cublas_header}" DIRECTORY)
  set(MNIST_CUBLAS_LIBRARY ${_cublas_file})
  if(NOT TARGET mnist::cublas)
    add_library(mnist::cublas INTERFACE IMPORTED)
    set_target_properties(mnist::cublas PROPERTIES INTERFACE_LINK_LIBRARIES CUDA::cublas)
  endif()
  message(STATUS "mnist-ddp: cuBLAS ${_cublas_version} from the CUDA toolkit: ${_cublas_file}")
else()
  set(_cublas_skipped "")
  _mnist_wheel(nvidia.cu13 _where13 _dirs13)
  _mnist_wheel(nvidia.cublas _where12 _dirs12)
  set(_cublas_wheel_where ${_where13} ${_where12})
  set(_cublas_wheel_dirs ${_dirs13} ${_dirs12})
  foreach(_where _dir IN ZIP_LISTS _cublas_wheel_where _cublas_wheel_dirs)
    if(NOT _cublas_file)
      _mnist_find_pair(_cublas cublas_v2.h "libcublas.so.${CUDAToolkit_VERSION_MAJOR};cublas"
                       "${_dir}/include" "${_dir}/lib")
      if(_cublas_LIB)
        _mnist_header_version(_cublas_version ${_cublas_INC}/cublas_api.h CUBLAS_VER_)
        if(_cublas_version MATCHES "^${CUDAToolkit_VERSION_MAJOR}\\.")
          set(_cublas_file ${_cublas_LIB})
          set(_cublas_from "the nvidia-cublas wheel (${_where})")
        else()
          list(APPEND _cublas_skipped "${_dir} holds cuBLAS ${_cublas_version}, not ${CUDAToolkit_VERSION_MAJOR}.x")
        endif()
      endif()
    endif()
  endforeach()
  if(_cublas_file)
    get_filename_component(MNIST_CUBLAS_LIBRARY_DIR ${_cublas_file} DIRECTORY)
    set(MNIST_CUBLAS_INCLUDE_DIR ${_cublas_INC})
    set(MNIST_CUBLAS_LIBRARY ${_cublas_file})
    if(NOT TARGET mnist::cublas)
      add_library(mnist::cublas SHARED IMPORTED)
      set_target_properties(mnist::cublas PROPERTIES IMPORTED_LOCATION ${_cublas_file}
                            INTERFACE_INCLUDE_DIRECTORIES ${_cublas_INC})
    endif()
    message(STATUS "mnist-ddp: cuBLAS ${_cublas_version} from ${_cublas_from}: ${_cublas_file}")
  else()
    list(JOIN _cublas_skipped " and " _cublas_skipped)
    if(_cublas_skipped)
      set(_cublas_skipped ", refused: ${_cublas_skipped}")
    endif()
    string(CONCAT _cublas_missing "cuBLAS (libcublas, looked for in the toolkit and in the nvidia-cublas "
           "wheel of ${MNIST_DDP_PYTHON}${_mnist_python_note} and MNIST_DDP_SITE_PACKAGES${_cublas_skipped})")
    list(APPEND _mnist_cuda_missing "${_cublas_missing}")
  endif()
endif()
