/*
 * device.cc - the simulator's devices, driver, faults and errors: the
 * runtime's device management calls, cudaGetLastError and the error names
 * (rules 9 of cudasim.h), and its diagnostics.
 */
#include <mpi.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <vector>

#include "cudasim.h"

namespace cudasim {

/* ---- diagnostics and settings --------------------------------------------------- */

static void vsay(const char *fmt, va_list ap)
{
	char msg[2048];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "cudasim: rank %d: %s\n", rank(), msg);
	fflush(stderr);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	abort();
}

void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

int rank()
{
	int up = 0, down = 0, r = 0;
	MPI_Initialized(&up);
	MPI_Finalized(&down);
	if (up && !down && MPI_Comm_rank(MPI_COMM_WORLD, &r) == MPI_SUCCESS)
		return r;
	const char *env = getenv("OMPI_COMM_WORLD_RANK");
	return env && *env ? atoi(env) : 0;
}

long env_long(const char *name, long fallback)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return fallback;
	char *end = NULL;
	long x = strtol(v, &end, 10);
	if (*end)
		fatal("%s=%s: expected a whole number", name, v);
	return x;
}

double now()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- devices ---------------------------------------------------------------------- */

/* The simulated node's GPUs that this process sees: physical indices, in CUDA order. */
static std::vector<int> visible_devices()
{
	long physical = env_long("CUDASIM_DEVICES", 8);
	std::vector<int> out;
	const char *list = getenv("CUDA_VISIBLE_DEVICES");
	if (!list) {
		for (int i = 0; i < physical; i++)
			out.push_back(i);
		return out;
	}
	/* CUDA reads indices up to the first one that is not a valid device. */
	std::string s(list);
	size_t at = 0;
	while (at <= s.size()) {
		size_t comma = s.find(',', at);
		std::string tok = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
		char *end = NULL;
		long idx = strtol(tok.c_str(), &end, 10);
		if (tok.empty() || *end || idx < 0 || idx >= physical)
			break;
		out.push_back((int)idx);
		if (comma == std::string::npos)
			break;
		at = comma + 1;
	}
	return out;
}

static int current_device = 0;
static cudaError_t last_error = cudaSuccess;

static long driver_version()
{
	return env_long("CUDASIM_DRIVER_VERSION", CUDART_VERSION);
}

bool fault(const char *name)
{
	const char *f = getenv("CUDASIM_FAULT");
	if (!f || strcmp(f, name) != 0)
		return false;
	long only = env_long("CUDASIM_FAULT_RANK", -1);
	return only < 0 || only == rank();
}

cudaError_t init_error()
{
	long drv = driver_version();
	if (drv <= 0 || drv < CUDART_VERSION)
		return cudaErrorInsufficientDriver;
	if (fault("system-not-ready"))
		return cudaErrorSystemNotReady;
	if (visible_devices().empty())
		return cudaErrorNoDevice;
	return cudaSuccess;
}

cudaError_t set_error(cudaError_t rc)
{
	if (rc != cudaSuccess)
		last_error = rc;
	return rc;
}

size_t device_memory_limit()
{
	return (size_t)env_long("CUDASIM_DEVICE_MEMORY", 16384) << 20;
}

/* A device ordinal's physical index, or -1. */
static int physical_of(int device)
{
	std::vector<int> v = visible_devices();
	return device >= 0 && device < (int)v.size() ? v[(size_t)device] : -1;
}

cudaError_t func_attributes(struct cudaFuncAttributes *attr, const void *kernel)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (!attr || !kernel)
		return set_error(cudaErrorInvalidValue);
	if (fault("no-kernel-image"))
		return set_error(cudaErrorNoKernelImageForDevice);
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = 1024;
	attr->ptxVersion = attr->binaryVersion = 90;
	return cudaSuccess;
}

} /* namespace cudasim */

using namespace cudasim;

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc); /* *count is left as it was, as CUDA leaves it */
	*count = (int)visible_devices().size();
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	if (!version)
		return set_error(cudaErrorInvalidValue);
	long v = driver_version();
	*version = v > 0 ? (int)v : 0; /* 0: no driver installed */
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	if (!version)
		return set_error(cudaErrorInvalidValue);
	*version = CUDART_VERSION;
	return cudaSuccess;
}

/* Since CUDA 12 cudaSetDevice creates the device's primary context, so its failures show here. */
cudaError_t cudaSetDevice(int device)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (physical_of(device) < 0)
		return set_error(cudaErrorInvalidDevice);
	if (fault("devices-unavailable"))
		return set_error(cudaErrorDevicesUnavailable);
	current_device = device;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	*device = current_device;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	int phys = physical_of(device);
	if (phys < 0 || !prop)
		return set_error(phys < 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
	memset(prop, 0, sizeof(*prop));
	/* CUDASIM_DEVICE_NAMES=same: one name for every device, as a box of one GPU model has. */
	const char *names = getenv("CUDASIM_DEVICE_NAMES");
	if (names && !strcmp(names, "same"))
		snprintf(prop->name, sizeof(prop->name),
			 "cudasim device (simulated on the CPU, not a GPU)");
	else if (names && *names && strcmp(names, "per-device"))
		fatal("CUDASIM_DEVICE_NAMES=%s: expected same or per-device", names);
	else
		snprintf(prop->name, sizeof(prop->name),
			 "cudasim device %d (simulated on the CPU, not a GPU)", phys);
	prop->totalGlobalMem = device_memory_limit();
	prop->major = 9;
	prop->minor = 0;
	prop->multiProcessorCount = 1;
	prop->pciBusID = 0x18 + phys;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	int phys = physical_of(device);
	if (phys < 0)
		return set_error(cudaErrorInvalidDevice);
	if (!bus_id || len < 13)
		return set_error(cudaErrorInvalidValue);
	snprintf(bus_id, (size_t)len, "0000:%02x:00.0", 0x18 + phys);
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t rc = last_error;
	last_error = cudaSuccess;
	return rc;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

/* Names are the API's; the texts are the simulator's own words. */
static const struct {
	cudaError_t rc;
	const char *name, *text;
} error_table[] = {
	{cudaSuccess, "cudaSuccess", "no error"},
	{cudaErrorInvalidValue, "cudaErrorInvalidValue", "an argument is out of range"},
	{cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of device memory"},
	{cudaErrorInitializationError, "cudaErrorInitializationError", "the CUDA driver could not be initialized"},
	{cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid launch configuration"},
	{cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "not a device pointer"},
	{cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction"},
	{cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "the CUDA driver is missing or older than this CUDA runtime"},
	{cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable", "the device is busy or unavailable (exclusive-process or prohibited compute mode)"},
	{cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is visible"},
	{cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
	{cudaErrorNoKernelImageForDevice, "cudaErrorNoKernelImageForDevice", "this binary holds no kernel image the device can run"},
	{cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid stream, event or graph handle"},
	{cudaErrorIllegalState, "cudaErrorIllegalState", "the call is not valid in the current state"},
	{cudaErrorNotReady, "cudaErrorNotReady", "the work is not complete yet"},
	{cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access"},
	{cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "the kernel failed"},
	{cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
	{cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
	{cudaErrorSystemNotReady, "cudaErrorSystemNotReady", "the system is not ready (on NVSwitch systems: is nvidia-fabricmanager running?)"},
	{cudaErrorSystemDriverMismatch, "cudaErrorSystemDriverMismatch", "the kernel driver and the user-space driver differ in version"},
	{cudaErrorCompatNotSupportedOnDevice, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility is not supported on this device"},
	{cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted while a stream is capturing"},
	{cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "the stream capture was invalidated by an earlier error"},
	{cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "the operation would merge two independent capture sequences"},
	{cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "the capture was not begun in this stream"},
	{cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "the capture holds a fork not joined to the stream it began in"},
	{cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation", "a dependency would cross the capture's boundary"},
	{cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "the legacy stream would depend on a capturing stream"},
	{cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

const char *cudaGetErrorName(cudaError_t error)
{
	for (const auto &e : error_table)
		if (e.rc == error)
			return e.name;
	return "cudaErrorUnrecognized";
}

const char *cudaGetErrorString(cudaError_t error)
{
	for (const auto &e : error_table)
		if (e.rc == error)
			return e.text;
	return "unrecognized error code";
}

} /* extern "C" */
