/*
 * backend_load.c - which backend a run uses, agreed by every rank before any
 * of them starts, and the loading of the CUDA backend's module.
 *
 * The host backend is linked in. The CUDA backend is a shared module,
 * libmnist-cuda.so, built beside mnist-train and looked for in the running
 * executable's own directory (/proc/self/exe), so build/mnist-train finds
 * build/libmnist-cuda.so from any working directory. It is opened only for
 * --backend auto or cuda, and only after libcuda.so.1 (the driver, which the
 * CUDA runtime would load first anyway) has loaded: a machine without a
 * driver maps neither the module nor cuBLAS, cuBLASLt, NCCL or the runtime.
 * The module carries an RPATH to the toolkit and NCCL it was built against
 * (cmake/cuda.cmake).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "backend_module.h"
#include "check.h"
#include "config.h"
#include "dist.h"

#ifndef MNIST_DDP_INTERFACE_ID
#error "MNIST_DDP_INTERFACE_ID must be defined (the top-level CMakeLists.txt computes it)"
#endif

/* The CUDA driver's library: what the CUDA runtime loads to reach the GPU. */
#define CUDA_DRIVER_LIBRARY "libcuda.so.1"

#define LOAD_PATH_MAX 4096

/*
 * What this process has loaded, kept until it exits: the CUDA runtime and
 * NCCL leave threads and exit handlers in them.
 */
static void *cuda_driver;
static const struct backend_module *cuda_module;

/*
 * Where the program looks for the CUDA module: libmnist-cuda.so in the
 * running executable's own directory; 0, or non-zero with `why` filled.
 */
static int cuda_module_path(char *path, size_t len, char *why, size_t whylen)
{
#ifdef MNIST_DDP_CUDA_MODULE_NAME
	char exe[LOAD_PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		status_fail(why, whylen, STATUS_RUNTIME,
			    "cannot find the CUDA backend module: readlink /proc/self/exe: %s",
			    strerror(errno));
		return 1;
	}
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	if ((size_t)snprintf(path, len, "%s/%s", exe, MNIST_DDP_CUDA_MODULE_NAME) >= len) {
		status_fail(why, whylen, STATUS_RUNTIME, "the CUDA backend module's path is too long (%s/...)",
			    exe);
		return 1;
	}
	return 0;
#else
	(void)path;
	(void)len;
	status_fail(why, whylen, STATUS_RUNTIME,
		    "this build has no CUDA backend (configured with MNIST_DDP_CUDA=OFF or without the "
		    "CUDA toolkit)");
	return 1;
#endif
}

/* 0 when the module's table comes from a build of this program's interface; else why. */
static int check_module(const char *path, const struct backend_module *m, char *why,
			size_t whylen)
{
	if (!m) {
		status_fail(why, whylen, STATUS_RUNTIME, "%s: %s() returned no backend", path,
			    BACKEND_MODULE_ENTRY);
		return 1;
	}
	if (m->abi == BACKEND_MODULE_ABI && m->interface &&
	    !strcmp(m->interface, MNIST_DDP_INTERFACE_ID))
		return 0;
	status_fail(why, whylen, STATUS_RUNTIME,
		    "%s is from another build (module interface %d %s; this program's %d %s): "
		    "use the module built with this mnist-train",
		    path, m->abi, m->abi == BACKEND_MODULE_ABI && m->interface ? m->interface : "?",
		    BACKEND_MODULE_ABI, MNIST_DDP_INTERFACE_ID);
	return 1;
}

/*
 * The module at `path`, after checking that a CUDA driver is installed
 * (libcuda.so.1 loads), so that a machine without one opens no CUDA library.
 * Returns its table, or NULL with `why` filled (dlopen's own text when a
 * library is missing); *no_driver is 1 when no driver is installed, whatever
 * else is wrong. The module stays loaded until the process ends.
 */
static const struct backend_module *cuda_open(const char *path, int *no_driver, char *why,
					      size_t whylen)
{
	*no_driver = 0;
	if (cuda_module)
		return cuda_module;
	/* A missing module is said as such, wherever the driver is. */
	if (access(path, F_OK) != 0) {
		status_fail(why, whylen, STATUS_RUNTIME, "no CUDA backend module: %s: %s", path,
			    strerror(errno));
		*no_driver = !cuda_driver &&
			     !(cuda_driver = dlopen(CUDA_DRIVER_LIBRARY, RTLD_LAZY | RTLD_LOCAL));
		return NULL;
	}
	if (!cuda_driver && !(cuda_driver = dlopen(CUDA_DRIVER_LIBRARY, RTLD_LAZY | RTLD_LOCAL))) {
		*no_driver = 1;
		status_fail(why, whylen, STATUS_RUNTIME, "no CUDA driver on this node (%s)", dlerror());
		return NULL;
	}
	/* RTLD_NOW: a library or a symbol of the executable that is missing shows here, not later. */
	void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		status_fail(why, whylen, STATUS_RUNTIME, "loading the CUDA backend: %s", dlerror());
		return NULL;
	}
	backend_module_entry_fn entry = (backend_module_entry_fn)dlsym(handle, BACKEND_MODULE_ENTRY);
	if (!entry) {
		status_fail(why, whylen, STATUS_RUNTIME, "%s: no %s(): %s", path, BACKEND_MODULE_ENTRY,
			    dlerror());
		return NULL;
	}
	const struct backend_module *m = entry();
	if (check_module(path, m, why, whylen))
		return NULL;
	cuda_module = m;
	return m;
}

/*
 * This rank's part of loading the CUDA module: its verdict when the module
 * cannot be used at all. No driver (or no module in this build) is a CPU
 * machine: absent. A driver without a loadable module (it is missing, a CUDA
 * library is missing, or it is from another build) is a GPU machine that
 * cannot run the CUDA backend: unusable.
 */
static const struct backend_module *cuda_load(const char *module, struct cuda_probe *p)
{
	char path[LOAD_PATH_MAX];
	int no_driver = 0;
	const struct backend_module *m = NULL;
	memset(p, 0, sizeof(*p));
	if (module)
		snprintf(path, sizeof(path), "%s", module);
	else if (cuda_module_path(path, sizeof(path), p->why, sizeof(p->why))) {
		p->verdict = CUDA_ABSENT;
		snprintf(p->reason, sizeof(p->reason), "not-built");
		return NULL;
	}
	m = cuda_open(path, &no_driver, p->why, sizeof(p->why));
	if (!m) {
		p->verdict = no_driver ? CUDA_ABSENT : CUDA_UNUSABLE;
		snprintf(p->reason, sizeof(p->reason), "%s", no_driver ? "no-driver" : "module-not-loaded");
	}
	return m;
}

enum cuda_verdict backend_cuda_job_probe(const struct dist *d, const char *module,
					 const struct backend_module **m, struct cuda_probe *mine,
					 struct cuda_probe *worst_seen, int *bad_rank)
{
	/* The module on every rank first: its probe is collective over a node's ranks. */
	*m = cuda_load(module, mine);
	int worst = dist_agree(d, *m ? CUDA_USABLE : (int)mine->verdict, bad_rank);
	if (worst == CUDA_USABLE) {
		(*m)->probe(d, mine);
		worst = dist_agree(d, (int)mine->verdict, bad_rank);
	}
	*worst_seen = *mine;
	if (worst != CUDA_USABLE) {
		dist_bcast(d, worst_seen, sizeof(*worst_seen), *bad_rank, "backend choice");
		worst_seen->reason[sizeof(worst_seen->reason) - 1] = '\0';
		worst_seen->why[sizeof(worst_seen->why) - 1] = '\0';
	}
	return (enum cuda_verdict)worst;
}

int backend_select(int choice, const struct dist *d, int threads, struct backend *out,
		   char *why, size_t whylen)
{
	struct cuda_probe mine, theirs;
	const struct backend_module *m = NULL;
	int bad_rank = -1;
	why[0] = '\0';
	memset(out, 0, sizeof(*out));

	if (choice == BACKEND_HOST)
		return backend_host_create(d, threads, out);

	enum cuda_verdict worst = backend_cuda_job_probe(d, NULL, &m, &mine, &theirs, &bad_rank);
	if (choice == BACKEND_AUTO && worst != CUDA_USABLE) {
		if (worst == CUDA_UNUSABLE)
			snprintf(why, whylen,
				 "WARNING: GPUs are present but unusable, so this run trains on the CPU "
				 "(host backend): rank %d: %s [%s]; fix the GPU set-up (docs/gpu.md) or "
				 "pass --backend host",
				 bad_rank, theirs.why, theirs.reason);
		else
			snprintf(why, whylen, "backend auto: using host, because rank %d cannot run the CUDA backend: %s",
				 bad_rank, theirs.why);
		int rc = backend_host_create(d, threads, out);
		if (rc == 0 && worst == CUDA_UNUSABLE)
			snprintf(out->fallback, sizeof(out->fallback), "%s", theirs.reason);
		return rc;
	}
	int own_failure = mine.verdict != CUDA_USABLE;
	int failed = worst != CUDA_USABLE;
	if (!failed) {
		int rc = m->create(d, out, mine.why, sizeof(mine.why));
		own_failure = rc != 0;
		failed = dist_agree(d, own_failure, &bad_rank);
		if (!failed) {
			if (choice == BACKEND_AUTO)
				snprintf(why, whylen, "backend auto: using cuda, every rank has a device");
			return 0;
		}
		if (rc == 0)
			backend_destroy(out);
	}
	if (own_failure)
		snprintf(why, whylen, "--backend cuda: %s", mine.why);
	else
		snprintf(why, whylen, "--backend cuda: stopping because rank %d could not start the CUDA backend",
			 bad_rank);
	return 1;
}
