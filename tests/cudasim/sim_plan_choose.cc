/*
 * sim_plan_choose.cc - cuda/plan_choose.cu, unchanged, compiled by the host
 * C++ compiler against the simulator's stand-in headers (tests/cudasim/,
 * first on the include path). Tests only: the product builds it with nvcc.
 * An older commit's backend (calibrate.sh) holds it in gemm_lt.cu: then empty.
 */
#if __has_include("../../cuda/plan_choose.cu")
#include "../../cuda/plan_choose.cu"
#endif
