/*
 * sim_conv_plan.cc - cuda/conv_plan.cu, unchanged, compiled by the host C++
 * compiler against the simulator's stand-in headers (tests/cudasim/, first
 * on the include path). Tests only: the product builds cuda/conv_plan.cu
 * with nvcc. An older commit's backend (calibrate.sh) has none: then empty.
 */
#if __has_include("../../cuda/conv_plan.cu")
#include "../../cuda/conv_plan.cu"
#endif
