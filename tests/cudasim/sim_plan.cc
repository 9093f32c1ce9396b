/*
 * sim_plan.cc - cuda/plan.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds it with nvcc. An older
 * commit's backend (calibrate.sh) has none: then empty.
 */
#if __has_include("../../cuda/plan.cu")
#include "../../cuda/plan.cu"
#endif
