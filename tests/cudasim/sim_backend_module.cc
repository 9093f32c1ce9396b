/*
 * sim_backend_module.cc - cuda/backend_module.cu, the module's entry point,
 * unchanged, compiled by the host C++ compiler for the simulated module
 * (build/cudasim/libmnist-cuda.so). Tests only.
 */
#include "../../cuda/backend_module.cu"
