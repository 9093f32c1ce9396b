/*
 * backend_module.h - how a backend is made: the host backend's constructor,
 * the loadable CUDA module's one entry point and table, its collective probe
 * of the devices, and the job's choice between them (host/backend_load.c).
 * The backend once made is include/backend.h's.
 */
#ifndef MNIST_DDP_BACKEND_MODULE_H
#define MNIST_DDP_BACKEND_MODULE_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host backend: OpenBLAS GEMM with `threads` threads (0: leave as is), MPI_Allreduce. */
int backend_host_create(const struct dist *d, int threads, struct backend *out);

/*
 * What a CUDA probe found on one rank, worst last (so the worst over the ranks
 * is their maximum). Only ABSENT (no driver or no device: a CPU machine) may
 * pass quietly; UNUSABLE means GPUs are there but cannot run this program
 * (driver too old, system not ready, no kernel image, device busy, two ranks
 * on one GPU, ...): the GPU suite fails on it and --backend auto says so.
 */
enum cuda_verdict {
	CUDA_USABLE = 0,
	CUDA_ABSENT = 1,
	CUDA_UNUSABLE = 2,
};
struct cuda_probe {
	enum cuda_verdict verdict;
	char reason[32]; /* a key for summaries: "no-driver", "driver-too-old", "shared-gpu", ... */
	char why[448];   /* what was seen, for people */
	int node_gpus;   /* distinct GPUs the ranks of this node see together; 0: unknown */
};

/*
 * Loadable backends. The CUDA backend is a shared module (build/libmnist-cuda.so,
 * cuda/backend_module.cu) that the program opens with dlopen only when
 * --backend is auto or cuda, so a host run opens no CUDA library and a binary
 * built with CUDA starts where CUDA is missing. The module exports one
 * function, BACKEND_MODULE_ENTRY, that returns its table below. It carries no
 * copy of the host program: what it calls of it (check_fail, die, check_rank,
 * ...) resolves to the executable's own (linked with ENABLE_EXPORTS), where
 * the rank and host identity live.
 *
 * A module from another build is refused: abi and interface come first and
 * keep their place in every version, so that the loader can read them from
 * any module. BACKEND_MODULE_ABI is raised by hand when this table changes;
 * interface (MNIST_DDP_INTERFACE_ID) is a hash of the shared headers in
 * include/, computed by CMake, so a header changed without that is caught too.
 */
#define BACKEND_MODULE_ABI 7
#define BACKEND_MODULE_ENTRY "backend_module_entry"

struct backend_module {
	int abi;               /* BACKEND_MODULE_ABI of the module's build */
	const char *interface; /* MNIST_DDP_INTERFACE_ID of the module's build */
	/*
	 * This rank's verdict on the backend's devices. Collective over the ranks
	 * of the node (they compare the devices they would use): every rank of
	 * the job calls it, or none.
	 */
	void (*probe)(const struct dist *d, struct cuda_probe *out);
	/* Collective over the job: 0, or non-zero with `why` filled, the same outcome on every rank. */
	int (*create)(const struct dist *d, struct backend *out, char *why, size_t whylen);
};

/* Defined by each module: the one symbol it exports. */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const struct backend_module *backend_module_entry(void);
typedef const struct backend_module *(*backend_module_entry_fn)(void);

/*
 * Collective: can every rank of the job run the CUDA backend? Loads the
 * module (`module`, or NULL for libmnist-cuda.so beside the executable, after
 * checking that a CUDA driver loads) on every rank,
 * then, when all loaded, runs its probe. Returns the worst verdict of any rank;
 * *m is this rank's module (NULL when it did not load), *mine what this rank
 * saw, and on every rank *worst_seen and *bad_rank what the lowest rank with
 * the worst verdict saw.
 */
enum cuda_verdict backend_cuda_job_probe(const struct dist *d, const char *module,
					 const struct backend_module **m, struct cuda_probe *mine,
					 struct cuda_probe *worst_seen, int *bad_rank);

/*
 * Choose and create the backend for `choice` (0 auto, 1 host, 2 cuda: enum
 * backend_choice in config.h). Collective: every rank calls it, and all ranks
 * agree on the outcome before any returns, so none is left waiting.
 * auto: cuda when every rank has a usable device, else host; `why` says which
 * and why, as a warning when GPUs are present but unusable (out->fallback then
 * names the reason). cuda: returns 1 on every rank when any rank cannot run
 * it, `why` saying what this rank saw (no module, no driver, a library
 * missing, a CUDA error, or which rank failed). A host choice opens no CUDA
 * library.
 */
int backend_select(int choice, const struct dist *d, int threads, struct backend *out,
		   char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_BACKEND_MODULE_H */
