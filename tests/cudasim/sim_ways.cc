/*
 * sim_ways.cc - cuda/ways.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds it with nvcc. An older
 * commit's backend (calibrate.sh) has none: then empty.
 */
#if __has_include("../../cuda/ways.cu")
#include "../../cuda/ways.cu"
#endif
