/*
 * checkpoint_tensors.c - a model's checkpoint tensors and their bytes: see
 * io/checkpoint_tensors.h.
 */
#include "io/checkpoint_tensors.h"

#include <stdio.h>
#include <string.h>

static int host_is_little_endian(void)
{
	const uint16_t one = 1;
	return *(const uint8_t *)&one == 1;
}

int checkpoint_tensors(const struct model *m, enum optimizer_kind opt, struct tensor_ref *t)
{
	struct optim_desc od = optim_desc_of(opt);
	int n = 0, per = model_n_tensors(m);
	for (int set = 0; set <= od.n_state; set++)
		for (int i = 0; i < per; i++) {
			struct model_tensor mt;
			model_tensor_at(m, i, &mt);
			if (set == 0)
				snprintf(t[n].name, sizeof(t[n].name), "%s", mt.name);
			else
				snprintf(t[n].name, sizeof(t[n].name), "optimizer.%s%s", mt.name,
					 od.state_suffix[set - 1]);
			t[n].from = set ? FROM_STATE : FROM_PARAMS;
			t[n].ndim = mt.ndim;
			for (int d = 0; d < 4; d++)
				t[n].shape[d] = d < mt.ndim ? (uint64_t)mt.shape[d] : 0;
			t[n].offset = mt.offset + (set ? (size_t)(set - 1) * m->n_params : 0);
			t[n].count = mt.count;
			n++;
		}
	if (od.counts_steps) {
		memset(&t[n], 0, sizeof(t[n]));
		snprintf(t[n].name, sizeof(t[n].name), "optimizer.step");
		t[n].from = FROM_STEP;
		t[n].count = 1; /* a scalar: shape [] */
		n++;
	}
	return n;
}

void store_floats_le(uint8_t *dst, const float *src, size_t n)
{
	if (host_is_little_endian()) {
		memcpy(dst, src, n * sizeof(float));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &src[i], 4);
		dst[4 * i + 0] = (uint8_t)u;
		dst[4 * i + 1] = (uint8_t)(u >> 8);
		dst[4 * i + 2] = (uint8_t)(u >> 16);
		dst[4 * i + 3] = (uint8_t)(u >> 24);
	}
}

void load_floats_le(float *dst, const uint8_t *src, size_t n)
{
	if (host_is_little_endian()) {
		memcpy(dst, src, n * sizeof(float));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
			     (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24;
		memcpy(&dst[i], &u, 4);
	}
}
