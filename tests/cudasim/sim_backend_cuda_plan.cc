/*
 * sim_backend_cuda_plan.cc - cuda/backend_cuda_plan.cu, unchanged, compiled by the host C++
 * compiler against the simulator's stand-in headers (tests/cudasim/, first on
 * the include path). Tests only: the product builds it with nvcc. An older
 * commit's backend (calibrate.sh) has none: then empty.
 */
#if __has_include("../../cuda/backend_cuda_plan.cu")
#include "../../cuda/backend_cuda_plan.cu"
#endif
