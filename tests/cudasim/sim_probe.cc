/*
 * sim_probe.cc - cuda/probe.cu, unchanged, compiled by the host C++ compiler
 * against the simulator's stand-in headers (tests/cudasim/, first on the
 * include path). Tests only: the product builds cuda/probe.cu with nvcc.
 */
#include "../../cuda/probe.cu"
