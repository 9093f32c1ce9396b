/*
 * loop_hook.h (tests/cudasim/) - the simulator's counting of a kernel
 * thread's serial work (cudasim.h, rule 10): from the point of inclusion,
 * every `for` statement counts a trip in cudasim::trips before each run of
 * its body, and every read of gridDim (a grid-stride loop reads it once per
 * step) counts in cudasim::strides. The expansion keeps a `for` one
 * statement, and break and continue act on the loop as written.
 *
 * Include it last, after every header that holds code of its own (the C and
 * C++ libraries, the stand-ins), and only in a translation unit of kernels:
 * sim_kernels.cc (cuda/kernels.cu and the element bodies it includes) and the
 * simulator's time tests. nvcc never sees it: cuda/kernels.cu stays plain CUDA C.
 */
#ifndef MNIST_DDP_CUDASIM_LOOP_HOOK_H
#define MNIST_DDP_CUDASIM_LOOP_HOOK_H

#include "cudasim.h"

#pragma GCC diagnostic ignored "-Wdangling-else"
#pragma GCC diagnostic ignored "-Wparentheses"
#define for(...) for (__VA_ARGS__) if ((void)++cudasim::trips, false) {} else
#define gridDim (++cudasim::strides, ::gridDim)

#endif /* MNIST_DDP_CUDASIM_LOOP_HOOK_H */
