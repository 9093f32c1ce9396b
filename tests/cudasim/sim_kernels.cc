/*
 * sim_kernels.cc - cuda/kernels.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/kernels.cu with nvcc.
 *
 * The loop hooks (cudasim.h, rule 10): from here on, every `for` statement
 * counts its trips in cudasim::trips before each run of its body, and every
 * read of gridDim (a grid-stride loop reads it once per step) counts in
 * cudasim::strides, so that the simulator measures each thread's serial work
 * (a grid-stride loop's items, a serial sum's terms, a row's columns in
 * include/elem.h) as it runs the thread. The macro lives in this file only: nvcc never sees it, and
 * kernels.cu stays plain CUDA C. The headers that hold code of their own
 * (the C and C++ libraries, the stand-ins) are included first, so it reaches
 * only kernels.cu and the element bodies it includes (include/elem.h). The
 * expansion keeps the statement one statement, and break and continue act on
 * the loop as written.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "cudasim.h"

#pragma GCC diagnostic ignored "-Wdangling-else"
#pragma GCC diagnostic ignored "-Wparentheses"
#define for(...) for (__VA_ARGS__) if ((void)++cudasim::trips, false) {} else
#define gridDim (++cudasim::strides, ::gridDim)

#include "../../cuda/kernels.cu"
