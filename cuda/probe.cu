/*
 * probe.cu - the CUDA backend's probe: can this rank run the backend, and on
 * which device? A verdict (include/backend.h) that tells "no driver, no
 * device" (a CPU machine) from GPUs that are present but unusable (driver
 * too old, system not ready, no kernel image for the device, device busy,
 * more ranks than devices, two ranks on one GPU), with a reason key and what
 * was seen, and how many GPUs the node's ranks see together (so that a test
 * can tell a node with fewer GPUs than its ranks from a misconfigured one).
 * backend_cuda_create probes again before it sets the device up.
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_module.h"
#include "backend_cuda.h"
#include "check.h"
#include "cuda_check.cuh"
#include "dist.h"
#include "kernels.h"

/* Fill p with a verdict, a reason key and a message; clears CUDA's last error. */
__attribute__((format(printf, 4, 5))) static void cuda_probe_set(struct cuda_probe *p,
								   enum cuda_verdict v,
								   const char *reason,
								   const char *fmt, ...)
{
	va_list ap;
	p->verdict = v;
	snprintf(p->reason, sizeof(p->reason), "%s", reason);
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	(void)cudaGetLastError();
}

/*
 * The verdict for a failed cudaGetDeviceCount: no driver (cudaDriverGetVersion
 * gives 0) or no device is absent; a driver older than the runtime, a system
 * not ready (NVSwitch fabric manager) or anything else is unusable.
 */
static void cuda_probe_count_error(struct cuda_probe *p, cudaError_t rc)
{
	char text[CUDA_CHECK_MSG_LEN];
	int driver = 0, runtime = 0;
	cuda_error_text(rc, text, sizeof(text));
	if (rc == cudaErrorInsufficientDriver) {
		cudaDriverGetVersion(&driver); /* 0 when no driver is installed */
		cudaRuntimeGetVersion(&runtime);
		if (driver == 0)
			cuda_probe_set(p, CUDA_ABSENT, "no-driver",
				       "no CUDA driver is installed (cudaGetDeviceCount: %s; "
				       "cudaDriverGetVersion gives 0)",
				       text);
		else
			cuda_probe_set(p, CUDA_UNUSABLE, "driver-too-old",
				       "the driver supports CUDA %d.%d, this build's runtime needs CUDA "
				       "%d.%d or newer (for CUDA 13, driver R580 or later; docs/gpu.md): "
				       "cudaGetDeviceCount: %s",
				       driver / 1000, driver % 1000 / 10, runtime / 1000,
				       runtime % 1000 / 10, text);
	} else if (rc == cudaErrorNoDevice) {
		cuda_probe_set(p, CUDA_ABSENT, "no-device",
			       "no CUDA device is visible (cudaGetDeviceCount: %s)", text);
	} else if (rc == cudaErrorSystemNotReady) {
		cuda_probe_set(p, CUDA_UNUSABLE, "system-not-ready",
			       "cudaGetDeviceCount: %s (on NVSwitch systems such as HGX, "
			       "nvidia-fabricmanager must be running)",
			       text);
	} else {
		cuda_probe_set(p, CUDA_UNUSABLE, "cuda-init-failed", "cudaGetDeviceCount: %s", text);
	}
}

/* A context on device, and this build's kernels on it. */
static void probe_context(struct cuda_probe *p, int device)
{
	char text[CUDA_CHECK_MSG_LEN];
	struct cudaDeviceProp prop;
	cudaError_t rc = cudaSetDevice(device);
	if (rc == cudaSuccess)
		rc = cudaFree(NULL); /* creates the context */
	if (rc != cudaSuccess) {
		int busy = rc == cudaErrorDevicesUnavailable;
		cuda_error_text(rc, text, sizeof(text));
		cuda_probe_set(p, CUDA_UNUSABLE, busy ? "device-busy" : "context-failed",
			       "device %d: creating a context: %s%s", device, text,
			       busy ? " (exclusive-process or prohibited compute mode, device in use: "
				      "nvidia-smi -q -d COMPUTE)"
				    : "");
		return;
	}
	rc = kernels_image_check();
	if (rc != cudaSuccess) {
		int major = 0, minor = 0;
		if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
			major = prop.major;
			minor = prop.minor;
		}
		cuda_error_text(rc, text, sizeof(text));
		cuda_probe_set(p, CUDA_UNUSABLE,
			       rc == cudaErrorNoKernelImageForDevice ? "no-kernel-image"
								     : "kernel-check-failed",
			       "device %d (compute capability %d.%d): this build's kernels: %s (build for "
			       "it with -DCMAKE_CUDA_ARCHITECTURES; docs/gpu.md)",
			       device, major, minor, text);
	}
}

/*
 * How many distinct GPUs the ranks of this node see together (their PCI bus
 * ids, pooled over the node); count is this rank's visible devices (0 where
 * the count failed). Collective over the node.
 */
static int node_gpus(const struct dist *d, int count)
{
	enum { BUS = 32 };
	int mine = count > 0 ? count : 0, total = 0, distinct = 0;
	int *counts = (int *)xcalloc((size_t)d->local_size, sizeof(int));
	int *offsets = (int *)xcalloc((size_t)d->local_size, sizeof(int));
	char *buses = (char *)xcalloc((size_t)(mine ? mine : 1), BUS), *all;

	for (int i = 0; i < mine; i++)
		if (cudaDeviceGetPCIBusId(buses + (size_t)i * BUS, BUS, i) != cudaSuccess)
			buses[(size_t)i * BUS] = '\0';
	(void)cudaGetLastError();
	mine *= BUS;
	MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, d->local_comm));
	for (int r = 0; r < d->local_size; r++) {
		offsets[r] = total;
		total += counts[r];
	}
	all = (char *)xcalloc((size_t)(total ? total : 1), 1);
	MPI_CHECK(MPI_Allgatherv(buses, mine, MPI_CHAR, all, counts, offsets, MPI_CHAR,
				 d->local_comm));
	for (int i = 0; i < total / BUS; i++) {
		const char *id = all + (size_t)i * BUS;
		int seen = !id[0];
		for (int j = 0; j < i && !seen; j++)
			seen = !strcmp(id, all + (size_t)j * BUS);
		distinct += !seen;
	}
	free(all);
	free(buses);
	free(offsets);
	free(counts);
	return distinct;
}

void cuda_probe_device(const struct dist *d, struct cuda_probe *p, int *device)
{
	int count = 0; /* left unwritten when there is no driver */
	char bus[32] = "", *all_bus;
	memset(p, 0, sizeof(*p));
	*device = -1;
	cudaError_t rc = cudaGetDeviceCount(&count);
	if (rc != cudaSuccess) {
		cuda_probe_count_error(p, rc);
	} else if (count <= 0) {
		cuda_probe_set(p, CUDA_ABSENT, "no-device", "cudaGetDeviceCount: no CUDA device");
	} else if (count < d->local_size && count != 1) {
		cuda_probe_set(p, CUDA_UNUSABLE, "too-many-ranks",
			       "%d ranks on %s but %d visible CUDA devices: the CUDA backend runs one "
			       "rank per GPU (start at most %d ranks per node, or give each its own GPU)",
			       d->local_size, d->host, count, count);
	} else {
		/* Every GPU visible to every rank: the local rank's; one visible GPU: that one. */
		*device = count == 1 ? 0 : d->local_rank;
		probe_context(p, *device);
		if (p->verdict == CUDA_USABLE &&
		    cudaDeviceGetPCIBusId(bus, sizeof(bus), *device) != cudaSuccess)
			bus[0] = '\0';
	}
	all_bus = (char *)xcalloc((size_t)d->local_size, sizeof(bus));
	MPI_CHECK(MPI_Allgather(bus, (int)sizeof(bus), MPI_CHAR, all_bus, (int)sizeof(bus), MPI_CHAR,
				d->local_comm));
	for (int r = 0; r < d->local_size && p->verdict == CUDA_USABLE; r++) {
		int lo = r < d->local_rank ? r : d->local_rank, hi = r < d->local_rank ? d->local_rank : r;
		if (r != d->local_rank && bus[0] && !strcmp(bus, all_bus + (size_t)r * sizeof(bus)))
			cuda_probe_set(p, CUDA_UNUSABLE, "shared-gpu",
				       "local ranks %d and %d on %s would share GPU %s (one rank per GPU: "
				       "with CUDA_VISIBLE_DEVICES or srun --gpus-per-task, give each its "
				       "own)",
				       lo, hi, d->host, bus);
	}
	free(all_bus);
	p->node_gpus = node_gpus(d, rc == cudaSuccess ? count : 0);
	if (p->verdict == CUDA_USABLE)
		snprintf(p->why, sizeof(p->why), "device %d (%s)", *device, bus);
}

void backend_cuda_probe(const struct dist *d, struct cuda_probe *out)
{
	int device;
	cuda_probe_device(d, out, &device);
}

