/*
 * sim_head_plan.cc - cuda/head_plan.cu, unchanged, compiled by the host C++
 * compiler against the simulator's stand-in headers (tests/cudasim/, first
 * on the include path). Tests only: the product builds cuda/head_plan.cu
 * with nvcc. An older commit's backend (calibrate.sh) has none: then empty.
 */
#if __has_include("../../cuda/head_plan.cu")
#include "../../cuda/head_plan.cu"
#endif
