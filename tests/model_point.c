/* model_point.c - a model at a random test point: see model_point.h. */
#include "model_point.h"

#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "io/idx.h"
#include "ref.h"

static void *need(void *p)
{
	if (!p)
		abort();
	return p;
}

void model_point_upload_input(struct model_point *p, const float *x)
{
	if (!p->ws.plan.input_batch_last) {
		backend_upload(&p->be, p->ws.act[0], x, p->nx * sizeof(float));
		return;
	}
	/* The model reads (784, rows), as the gather's batch_last layout writes it. */
	float *t = need(malloc(p->nx * sizeof(float)));
	for (int r = 0; r < p->rows; r++)
		for (int i = 0; i < IDX_PIXELS; i++)
			t[(size_t)i * p->rows + r] = x[(size_t)r * IDX_PIXELS + i];
	backend_upload(&p->be, p->ws.act[0], t, p->nx * sizeof(float));
	free(t);
}

void model_point_make(struct model_point *p, enum model_kind kind, const int *hidden,
		      int n_hidden, int rows, uint64_t seed, uint64_t stream, float scale)
{
	memset(p, 0, sizeof(*p));
	if (backend_host_create(NULL, 1, &p->be))
		abort();
	model_init(&p->m, kind, hidden, n_hidden);
	p->rows = rows;
	if (model_ws_create(&p->be, &p->m, rows, &p->ws))
		abort();
	p->np = p->m.n_params;
	p->nx = (size_t)rows * IDX_PIXELS;
	p->params = need(calloc(p->np, sizeof(float)));
	p->pd = need(calloc(p->np, sizeof(double)));
	p->x = need(calloc(p->nx, sizeof(float)));
	p->labels = need(calloc((size_t)rows, sizeof(int32_t)));
	struct rng r = rng_make(seed, stream);
	model_init_params(&p->m, seed, p->params);
	for (size_t i = 0; i < p->np; i++)
		p->params[i] *= scale;
	for (size_t i = 0; i < p->nx; i++)
		p->x[i] = normalize_pixel_elem((uint8_t)rng_below(&r, 256));
	ref_fill_labels(&r, p->labels, (size_t)rows, IDX_CLASSES);
	ref_widen(p->params, p->pd, p->np);
	p->params_d = need(backend_alloc(&p->be, p->np * sizeof(float)));
	p->grads_d = need(backend_alloc(&p->be, p->np * sizeof(float)));
	backend_upload(&p->be, p->params_d, p->params, p->np * sizeof(float));
	model_point_upload_input(p, p->x);
	backend_upload(&p->be, p->ws.labels, p->labels, (size_t)rows * sizeof(int32_t));
}

void model_point_run(struct model_point *p)
{
	model_forward(&p->be, &p->m, &p->ws, p->params_d, p->rows, 1);
	model_backward(&p->be, &p->m, &p->ws, p->params_d, p->grads_d, p->rows);
	backend_synchronize(&p->be);
}

void model_point_free(struct model_point *p)
{
	backend_free(&p->be, p->params_d);
	backend_free(&p->be, p->grads_d);
	model_ws_destroy(&p->be, &p->ws);
	backend_destroy(&p->be);
	free(p->params);
	free(p->pd);
	free(p->x);
	free(p->labels);
	memset(p, 0, sizeof(*p));
}
