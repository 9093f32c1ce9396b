/*
 * gpu_common.h - what the GPU parity programs (tests/gpu/, ctest label gpu)
 * share: start-up, the skip rule, the two backends, checks and the exit code.
 *
 * Each program holds the CUDA backend against the host backend (the oracle).
 * Where some rank has no driver or no device (a CPU machine), or a node has
 * fewer GPUs than the test's ranks on it ("needs 2 GPUs, 1 visible": one
 * rank per GPU), every rank exits 77 after rank 0 prints why; ctest, told
 * SKIP_RETURN_CODE 77, reports the test as skipped, never as passed. Where
 * GPUs are present but some rank cannot use them (driver too old, system not ready, no kernel image, device
 * busy, two ranks on one GPU or more ranks than GPUs although the node's
 * ranks see enough GPUs together), the test fails.
 *
 * --self-test puts a second host backend where the CUDA backend would be, so
 * the harness itself (comparisons, tolerances, the multi-rank plumbing) runs
 * on any machine; those runs are registered under their own names and never
 * stand in for the GPU runs.
 *
 * --quick shrinks each program's work (fewer steps, smaller buffers, no
 * timing loops) for runs on the CUDA simulator (tests/cudasim), where the
 * same programs run on the CPU; GPU runs never pass it.
 */
#ifndef MNIST_DDP_TESTS_GPU_COMMON_H
#define MNIST_DDP_TESTS_GPU_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "backend_module.h"
#include "dist.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_TEST_SKIP 77

struct gpu_test {
	const char *name;
	struct dist d;
	int self_test; /* --self-test: the host backend stands in for CUDA */
	const char *module; /* --module PATH: the CUDA module to load (default: this build's) */
	int quick;     /* --quick: less work (simulator runs) */
	int argc;      /* the command line, for gpu_test_option */
	char **argv;
	uint64_t seed; /* MNIST_TEST_SEED or the program's default */
	int checks, failures;
	struct backend dev;  /* under test: CUDA (or host in self-test) */
	struct backend host; /* the oracle */
};

/*
 * MPI start-up and the command line; prints the plan on rank 0. Besides
 * --self-test and --quick, the program's own flags: `options`, a list such
 * as "--upload --both" (NULL: none); anything else is refused.
 */
void gpu_test_init(struct gpu_test *t, const char *name, uint64_t default_seed,
		   const char *options, int *argc, char ***argv);

/* 1 when the command line holds `flag`, one of the program's options. */
int gpu_test_option(const struct gpu_test *t, const char *flag);

/*
 * Unless self-testing: every rank loads the CUDA module (as mnist-train does,
 * with the same loader) and probes its device. When some rank's GPUs are
 * unusable (or the module does not load where a driver is), rank 0 prints
 * "FAIL <name>: GPUs present but unusable ..." and every rank exits 1; else
 * when a node has fewer GPUs than ranks, or some rank has no driver or no
 * device, rank 0 prints "SKIP <name>: ..." and every rank exits 77. Then
 * creates t->dev and t->host (a failure to create is a failure, not a skip).
 */
void gpu_test_start(struct gpu_test *t);

/* Count a check; print it on this rank when it failed, or on rank 0 when verbose. */
void gpu_test_check(struct gpu_test *t, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Destroy both backends, agree on the outcome, print it, finalize MPI: the exit code. */
int gpu_test_finish(struct gpu_test *t);

/* Backend memory: alloc + upload (fatal when out of memory), and download. */
void *gpu_upload_new(const struct backend *b, const void *host, size_t bytes);
void gpu_download(const struct backend *b, void *host, const void *dev, size_t bytes);

/*
 * Normalised error max_i |got_i - ref_i| / max(max_i |ref_i|, 1e-30), and the
 * index of the largest difference in *at (may be NULL). NaN anywhere gives +inf.
 */
double gpu_norm_err(const float *got, const float *ref, size_t n, size_t *at);

/*
 * The error allowed in a float mean over `ranks` contributions of one sign
 * whose exact mean is want (ncclAvg, which NCCL computes as a sum of
 * contributions each multiplied by 1/ranks).
 */
double gpu_mean_tolerance(int ranks, double want);

/* Elements that differ bit for bit (as floats compare; NaN always differs). */
size_t gpu_count_diff(const float *a, const float *b, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_TESTS_GPU_COMMON_H */
