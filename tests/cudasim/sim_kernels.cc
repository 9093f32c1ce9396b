/*
 * sim_kernels.cc - cuda/kernels.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/kernels.cu with nvcc.
 *
 * The loop hooks (loop_hook.h; cudasim.h, rule 10) count each thread's
 * serial work as the simulator runs it: every header that holds code of its
 * own comes first, so that they reach only kernels.cu and the element bodies
 * it includes (include/elem.h).
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

#include "loop_hook.h"

#include "../../cuda/kernels.cu"
/* An older commit's backend (calibrate.sh) may hold its convolutions in kernels.cu. */
#if __has_include("../../cuda/kernels_conv.cu")
#include "../../cuda/kernels_conv.cu"
#endif
/* And its patch kernels in kernels_conv_patch.cu since 2026-11-29. */
#if __has_include("../../cuda/kernels_conv_patch.cu")
#include "../../cuda/kernels_conv_patch.cu"
#endif
/* And its GEMM ways in kernels_gemm.cu since 2026-11-27. */
#if __has_include("../../cuda/kernels_gemm.cu")
#include "../../cuda/kernels_gemm.cu"
#endif
/* And the GEMM's epilogue kernels in kernels_epilogue.cu since 2026-11-29. */
#if __has_include("../../cuda/kernels_epilogue.cu")
#include "../../cuda/kernels_epilogue.cu"
#endif
/* And its loss and head in kernels_head.cu since 2026-11-28. */
#if __has_include("../../cuda/kernels_head.cu")
#include "../../cuda/kernels_head.cu"
#endif
/* And its dense layers' kernels in kernels_dense.cu since a later 2026-11-28. */
#if __has_include("../../cuda/kernels_dense.cu")
#include "../../cuda/kernels_dense.cu"
#endif
