/*
 * driver.c - the simulator's stand-in for the CUDA driver's library: built as
 * build/cudasim/driver/libcuda.so.1 and put on LD_LIBRARY_PATH by the cudasim
 * tests, so that mnist-train's loader (host/backend_load.c), which opens
 * libcuda.so.1 to see whether a driver is installed before it opens the
 * module, finds one. Nothing calls into it: the simulated runtime in the
 * module answers every CUDA call. Tests only.
 */
const char cudasim_driver[] = "the CUDA simulator's stand-in driver (tests/cudasim)";
