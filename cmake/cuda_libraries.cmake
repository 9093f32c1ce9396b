# cuda_libraries.cmake - where NCCL, cuBLAS and cuBLASLt come from, and one configure line for each.
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
# cuBLAS and cuBLASLt: both from one library directory (a cuBLAS calls the cuBLASLt of its
#   own release), with cublas_v2.h and cublasLt.h in one include directory; the first of:
#   1. the toolkit's: its include directories, and its library directory (that of
#      libcudart), targets/<arch>/lib or lib64, or NVHPC's math_libs. Never lib/stubs/:
#      a stub is for linking only (FindCUDAToolkit's CUDA::cublas falls back to one when
#      the toolkit's own library is missing, and CMake 3.28 and later then give it no
#      IMPORTED_LOCATION at all);
#   2. the nvidia-cublas wheel found as NCCL's is: nvidia/cu13/{include,lib} (the CUDA 13
#      wheels share that folder: libcublas.so.13, libcublasLt.so.13) or
#      nvidia/cublas/{include,lib} (the cu12 wheels), of the toolkit's major version.
# The wheels ship versioned names only (libnccl.so.2, libcublas.so.13): find_library
# is given those names, and the imported targets link the files themselves, so no
# unversioned link has to be made by hand.
#
# Sets, in the including scope:
#   mnist::nccl, mnist::cublas, mnist::cublasLt   imported targets (the files found)
#   NCCL_INCLUDE_DIR, NCCL_LIBRARY, MNIST_NCCL_VERSION, MNIST_NCCL_FROM
#   MNIST_CUBLAS_INCLUDE_DIR, MNIST_CUBLAS_LIBRARY, MNIST_CUBLASLT_LIBRARY,
#   MNIST_CUBLAS_VERSION, MNIST_CUBLAS_FROM
#   MNIST_NCCL_LIBRARY_DIR, MNIST_CUBLAS_LIBRARY_DIR   for the module's RPATH
# prints "mnist-ddp: NCCL 2.28.9 from <where>: <file>" and the same for cuBLAS and
# cuBLASLt (never a path that was not found), and appends to _mnist_cuda_missing what it
# cannot find.

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
# Where the wheels were looked for, for the messages.
if(MNIST_DDP_PYTHON)
  set(_mnist_wheel_looked "${MNIST_DDP_PYTHON}${_mnist_python_note} and MNIST_DDP_SITE_PACKAGES")
else()
  set(_mnist_wheel_looked "MNIST_DDP_SITE_PACKAGES (MNIST_DDP_PYTHON is empty)")
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
         "wheel of ${_mnist_wheel_looked}: or set NCCL_HOME")
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
  set(MNIST_NCCL_FROM ${_nccl_from})
  message(STATUS "mnist-ddp: NCCL ${MNIST_NCCL_VERSION} from ${_nccl_from}: ${NCCL_LIBRARY}")
else()
  list(APPEND _mnist_cuda_missing "NCCL (nccl.h and libnccl.so or libnccl.so.2, looked for ${_nccl_looked})")
endif()

# ---- cuBLAS and cuBLASLt -----------------------------------------------------
# _mnist_find_cublas(PREFIX INC_DIRS LIB_DIRS): cublas_v2.h and cublasLt.h in one of INC_DIRS,
# libcublas and libcublasLt in one of LIB_DIRS (the same one), nowhere else. Sets PREFIX_INC,
# PREFIX_LIB, PREFIX_LT and PREFIX_VERSION in the caller, all empty unless all are found, and
# PREFIX_NOTE to what was found incomplete ("" when nothing was).
function(_mnist_find_cublas prefix inc_dirs lib_dirs)
  set(names cublas libcublas.so.${CUDAToolkit_VERSION_MAJOR})
  set(lt_names cublasLt libcublasLt.so.${CUDAToolkit_VERSION_MAJOR})
  find_path(_mnist_cublas_inc cublas_v2.h PATHS ${inc_dirs} NO_DEFAULT_PATH)
  find_library(_mnist_cublas_lib NAMES ${names} PATHS ${lib_dirs} NO_DEFAULT_PATH)
  set(inc "")
  set(lib "")
  set(lt "")
  set(version "")
  set(note "")
  if(_mnist_cublas_lib)
    get_filename_component(dir ${_mnist_cublas_lib} DIRECTORY)
    find_library(_mnist_cublas_lt NAMES ${lt_names} PATHS ${dir} NO_DEFAULT_PATH)
    if(NOT _mnist_cublas_lt)
      set(note "${_mnist_cublas_lib} without libcublasLt beside it")
    elseif(NOT _mnist_cublas_inc)
      set(note "${_mnist_cublas_lib} without cublas_v2.h (looked for in ${inc_dirs})")
    elseif(NOT EXISTS ${_mnist_cublas_inc}/cublasLt.h OR NOT EXISTS ${_mnist_cublas_inc}/cublas_api.h)
      set(note "${_mnist_cublas_inc} holds cublas_v2.h without cublasLt.h and cublas_api.h")
    else()
      set(inc ${_mnist_cublas_inc})
      set(lib ${_mnist_cublas_lib})
      set(lt ${_mnist_cublas_lt})
      _mnist_header_version(version ${inc}/cublas_api.h CUBLAS_VER_)
    endif()
  endif()
  unset(_mnist_cublas_inc CACHE) # searched again at every configure, never stale
  unset(_mnist_cublas_lib CACHE)
  unset(_mnist_cublas_lt CACHE)
  foreach(out INC LIB LT VERSION NOTE)
    string(TOLOWER ${out} var)
    set(${prefix}_${out} "${${var}}" PARENT_SCOPE)
  endforeach()
endfunction()

set(_cublas_LIB "")
set(_cublas_refused "")
# 1. The toolkit's, never its stubs/ (not among these directories): libcudart's directory, the
# toolkit's targets/<arch>/lib (where NVIDIA's installer puts the libraries), lib64 and lib,
# and NVHPC's math_libs beside the toolkit (FindCUDAToolkit's CUDAToolkit_MATH_INCLUDE_DIR).
get_filename_component(_cuda_top "${CUDAToolkit_BIN_DIR}" DIRECTORY)
file(GLOB _cuda_target_incs LIST_DIRECTORIES true ${_cuda_top}/targets/*/include)
file(GLOB _cuda_target_libs LIST_DIRECTORIES true ${_cuda_top}/targets/*/lib)
set(_cublas_inc_dirs "")
foreach(_dir ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_MATH_INCLUDE_DIR} ${_cuda_target_incs})
  cmake_path(NORMAL_PATH _dir)
  if(IS_DIRECTORY ${_dir})
    list(APPEND _cublas_inc_dirs ${_dir})
  endif()
endforeach()
set(_cublas_lib_dirs "")
foreach(_dir ${CUDAToolkit_LIBRARY_DIR} ${_cuda_target_libs} ${_cuda_top}/lib64 ${_cuda_top}/lib
             ${CUDAToolkit_TARGET_DIR}/lib64 ${CUDAToolkit_TARGET_DIR}/lib
             ${_cuda_top}/../../math_libs/${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}/lib64
             ${_cuda_top}/../../math_libs/lib64)
  cmake_path(NORMAL_PATH _dir)
  if(IS_DIRECTORY ${_dir})
    list(APPEND _cublas_lib_dirs ${_dir})
  endif()
endforeach()
list(REMOVE_DUPLICATES _cublas_inc_dirs)
list(REMOVE_DUPLICATES _cublas_lib_dirs)
_mnist_find_cublas(_cublas "${_cublas_inc_dirs}" "${_cublas_lib_dirs}")
set(MNIST_CUBLAS_FROM "the CUDA toolkit")
if(_cublas_NOTE)
  list(APPEND _cublas_refused "in the toolkit ${_cublas_NOTE}")
endif()
# 2. The nvidia-cublas wheel: the CUDA 13 layout, then the cu12 one.
if(NOT _cublas_LIB)
  _mnist_wheel(nvidia.cu13 _where13 _dirs13)
  _mnist_wheel(nvidia.cublas _where12 _dirs12)
  set(_cublas_wheel_where ${_where13} ${_where12})
  set(_cublas_wheel_dirs ${_dirs13} ${_dirs12})
  foreach(_where _dir IN ZIP_LISTS _cublas_wheel_where _cublas_wheel_dirs)
    if(NOT _cublas_LIB)
      _mnist_find_cublas(_cublas "${_dir}/include" "${_dir}/lib")
      if(_cublas_NOTE)
        list(APPEND _cublas_refused "${_cublas_NOTE}")
      elseif(_cublas_LIB AND NOT _cublas_VERSION MATCHES "^${CUDAToolkit_VERSION_MAJOR}\\.")
        list(APPEND _cublas_refused "${_dir} holds cuBLAS ${_cublas_VERSION}, not ${CUDAToolkit_VERSION_MAJOR}.x")
        set(_cublas_LIB "")
      elseif(_cublas_LIB)
        set(MNIST_CUBLAS_FROM "the nvidia-cublas wheel (${_where})")
      endif()
    endif()
  endforeach()
endif()

set(MNIST_CUBLAS_LIBRARY_DIR "")
if(_cublas_LIB)
  set(MNIST_CUBLAS_INCLUDE_DIR ${_cublas_INC})
  set(MNIST_CUBLAS_LIBRARY ${_cublas_LIB})
  set(MNIST_CUBLASLT_LIBRARY ${_cublas_LT})
  set(MNIST_CUBLAS_VERSION ${_cublas_VERSION})
  get_filename_component(MNIST_CUBLAS_LIBRARY_DIR ${MNIST_CUBLAS_LIBRARY} DIRECTORY)
  foreach(_lib cublas cublasLt)
    string(TOUPPER ${_lib} _var)
    if(NOT TARGET mnist::${_lib})
      add_library(mnist::${_lib} SHARED IMPORTED)
      set_target_properties(mnist::${_lib} PROPERTIES IMPORTED_LOCATION ${MNIST_${_var}_LIBRARY}
                            INTERFACE_INCLUDE_DIRECTORIES ${MNIST_CUBLAS_INCLUDE_DIR})
    endif()
  endforeach()
  message(STATUS "mnist-ddp: cuBLAS ${MNIST_CUBLAS_VERSION} from ${MNIST_CUBLAS_FROM}: ${MNIST_CUBLAS_LIBRARY}")
  message(STATUS "mnist-ddp: cuBLASLt ${MNIST_CUBLAS_VERSION} from ${MNIST_CUBLAS_FROM}: ${MNIST_CUBLASLT_LIBRARY}")
else()
  list(JOIN _cublas_refused "; " _cublas_refused)
  if(_cublas_refused)
    set(_cublas_refused ", refused: ${_cublas_refused}")
  endif()
  list(JOIN _cublas_lib_dirs " " _cublas_looked)
  string(CONCAT _cublas_missing "cuBLAS and cuBLASLt (libcublas and libcublasLt in one directory, "
         "cublas_v2.h and cublasLt.h, looked for in the toolkit's ${_cublas_looked} (not its stubs/, which "
         "are for linking only) and in the nvidia-cublas wheel (nvidia/cu13 or nvidia/cublas) of "
         "${_mnist_wheel_looked}${_cublas_refused})")
  list(APPEND _mnist_cuda_missing "${_cublas_missing}")
endif()
