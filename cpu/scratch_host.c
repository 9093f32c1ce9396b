/*
 * scratch_host.c - the host backend's scratch buffers (cpu/host_internal.h),
 * kept between the steps of the fused ops in cpu/backend_host.c,
 * cpu/conv_host.c and cpu/gemm_host.c.
 */
#include <stdlib.h>

#include "check.h"
#include "host_internal.h"

float *host_scratch(struct host_ctx *h, enum host_scratch_slot slot, size_t bytes)
{
	if (h->scratch_bytes[slot] < bytes) {
		free(h->scratch[slot]);
		size_t rounded = (bytes + 63) & ~(size_t)63;
		h->scratch[slot] = aligned_alloc(64, rounded);
		if (!h->scratch[slot])
			die(1, "out of host memory for a scratch buffer of %zu bytes", bytes);
		h->scratch_bytes[slot] = rounded;
		if (slot == HOST_SCRATCH_ONES)
			h->ones = 0;
	}
	return h->scratch[slot];
}
