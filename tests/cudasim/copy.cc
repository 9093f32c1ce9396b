/*
 * copy.cc - the simulator's allocation and copy calls (rules 1, 3 and 6 of
 * cudasim.h): cudaMalloc and cudaFree, pinned host memory, cudaMemcpy,
 * cudaMemcpyAsync and cudaMemsetAsync with the synchronization NVIDIA's
 * "API synchronization behavior" page gives each kind of copy.
 */
#include <string.h>

#include "cudasim.h"

namespace cudasim {

static const char *kind_name(mem_kind k)
{
	return k == MEM_DEVICE ? "device" : k == MEM_PINNED ? "pinned host" : "pageable host";
}

static bool is_host(mem_kind k)
{
	return k != MEM_DEVICE;
}

/*
 * The two sides of a copy, checked against its kind: device sides must lie
 * inside one allocation, host sides must not be device memory.
 */
static cudaError_t check_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			      mem_kind *dk, mem_kind *sk)
{
	*dk = classify(dst);
	*sk = classify(src);
	bool ok;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		ok = is_host(*sk) && *dk == MEM_DEVICE;
		break;
	case cudaMemcpyDeviceToHost:
		ok = *sk == MEM_DEVICE && is_host(*dk);
		break;
	case cudaMemcpyDeviceToDevice:
		ok = *sk == MEM_DEVICE && *dk == MEM_DEVICE;
		break;
	case cudaMemcpyHostToHost:
		ok = is_host(*sk) && is_host(*dk);
		break;
	case cudaMemcpyDefault:
		ok = true;
		break;
	default:
		return cudaErrorInvalidMemcpyDirection;
	}
	if (!ok)
		return cudaErrorInvalidValue;
	if ((*dk == MEM_DEVICE && !device_range(dst, bytes)) ||
	    (*sk == MEM_DEVICE && !device_range(src, bytes)))
		return cudaErrorInvalidValue;
	return cudaSuccess;
}

/* Wait for the stream's queued work (the copy's synchronization), then copy at once. */
static cudaError_t copy_after(cudaStream_t stream, const char *api, void *dst, const void *src,
			      size_t bytes)
{
	cudaError_t rc = drain(stream, api);
	if (rc == cudaSuccess) {
		window open;
		memmove(dst, src, bytes);
		host_pageable_copy(bytes); /* the time model (rule 10): the host waits for the copy */
	}
	return rc;
}

} /* namespace cudasim */

using namespace cudasim;

extern "C" {

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (!ptr)
		return set_error(cudaErrorInvalidValue);
	rc = refuse_during_capture();
	if (rc != cudaSuccess)
		return rc;
	if (bytes == 0) {
		*ptr = nullptr;
		return cudaSuccess;
	}
	return set_error(device_alloc(ptr, bytes));
}

/* cudaFree(NULL) creates the context and frees nothing; a real free waits for the device. */
cudaError_t cudaFree(void *ptr)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (!ptr)
		return fault("devices-unavailable") ? set_error(cudaErrorDevicesUnavailable) : cudaSuccess;
	rc = refuse_during_capture();
	if (rc != cudaSuccess)
		return rc;
	if (classify(ptr) != MEM_DEVICE)
		return set_error(cudaErrorInvalidValue);
	drain_all("cudaFree");
	return set_error(device_free(ptr));
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (!ptr || flags != cudaHostAllocDefault)
		return set_error(cudaErrorInvalidValue);
	rc = refuse_during_capture();
	if (rc != cudaSuccess)
		return rc;
	return set_error(pinned_alloc(ptr, bytes));
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
	return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
	if (!ptr)
		return cudaSuccess;
	cudaError_t rc = refuse_during_capture();
	if (rc != cudaSuccess)
		return rc;
	drain_all("cudaFreeHost");
	return set_error(pinned_free(ptr));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (bytes == 0)
		return cudaSuccess;
	mem_kind dk, sk;
	rc = check_copy(dst, src, bytes, kind, &dk, &sk);
	if (rc != cudaSuccess)
		return set_error(rc);
	cudaStreamCaptureStatus cap;
	rc = capture_status(stream, &cap);
	if (rc != cudaSuccess)
		return set_error(rc);
	if (cap == cudaStreamCaptureStatusActive && (dk == MEM_PAGEABLE || sk == MEM_PAGEABLE))
		return refuse_during_capture(); /* a graph cannot hold a pageable copy */

	if (cap == cudaStreamCaptureStatusNone && dk == MEM_PAGEABLE && sk == MEM_DEVICE) {
		/* Device to pageable: returns only once the copy has completed. */
		return copy_after(stream, "cudaMemcpyAsync (device to pageable host)", dst, src, bytes);
	}
	if (cap == cudaStreamCaptureStatusNone && (sk == MEM_PAGEABLE || (is_host(sk) && is_host(dk)))) {
		/* Pageable to device: staged after a stream synchronization; host to host: synchronous. */
		return copy_after(stream, "cudaMemcpyAsync (from pageable host memory)", dst, src, bytes);
	}
	/* Pinned host memory or device to device: asynchronous, reads its source when it runs. */
	op o;
	o.label = std::string("cudaMemcpyAsync ") + kind_name(sk) + " to " + kind_name(dk);
	o.run = [dst, src, bytes]() { memmove(dst, src, bytes); };
	o.us = bytes_us(2.0 * (double)bytes);
	return submit(stream, std::move(o));
}

/* On the legacy stream, which it waits for; refused during capture. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	rc = refuse_during_capture();
	if (rc != cudaSuccess)
		return rc;
	if (bytes == 0)
		return cudaSuccess;
	mem_kind dk, sk;
	rc = check_copy(dst, src, bytes, kind, &dk, &sk);
	if (rc != cudaSuccess)
		return set_error(rc);
	return copy_after(nullptr, "cudaMemcpy", dst, src, bytes);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
	cudaError_t rc = init_error();
	if (rc != cudaSuccess)
		return set_error(rc);
	if (bytes == 0)
		return cudaSuccess;
	if (!device_range(ptr, bytes))
		return set_error(cudaErrorInvalidValue);
	op o;
	o.label = "cudaMemsetAsync";
	o.run = [ptr, value, bytes]() { memset(ptr, value, bytes); };
	o.us = bytes_us((double)bytes);
	return submit(stream, std::move(o));
}

} /* extern "C" */
