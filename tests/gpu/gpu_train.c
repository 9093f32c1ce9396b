/* gpu_train.c - the training step of the GPU parity programs: see gpu_train.h. */
#include "gpu_train.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_common.h"
#include "io/idx.h"
#include "train/rng.h"

void gpu_data_make(struct gpu_data *g, uint64_t seed, int n_images, int index_len, int block)
{
	struct rng r = rng_make(seed, 0xda7a);
	uint8_t proto[IDX_CLASSES][IDX_PIXELS];
	g->n_images = n_images;
	g->index_len = index_len;
	g->images = xmalloc((size_t)n_images * IDX_PIXELS);
	g->labels = xmalloc((size_t)n_images);
	g->index = xmalloc((size_t)index_len * sizeof(int32_t));
	for (int c = 0; c < IDX_CLASSES; c++)
		for (int p = 0; p < IDX_PIXELS; p++) {
			/* The first pixel of each block x block square draws; the others copy it. */
			int y = p / IDX_COLS, x = p % IDX_COLS;
			int first = (y - y % block) * IDX_COLS + (x - x % block);
			proto[c][p] = p == first ? (uint8_t)(rng_below(&r, 4) == 0 ? 255 : 0) : proto[c][first];
		}
	for (int i = 0; i < n_images; i++) {
		int c = (int)rng_below(&r, IDX_CLASSES);
		for (int p = 0; p < IDX_PIXELS; p++) /* half of the pixels replaced by noise */
			g->images[(size_t)i * IDX_PIXELS + p] =
				rng_below(&r, 2) == 0 ? (uint8_t)rng_below(&r, 256) : proto[c][p];
		/* One label in five is random, so the loss stays well above zero. */
		g->labels[i] = (uint8_t)(rng_below(&r, 5) == 0 ? (int)rng_below(&r, IDX_CLASSES) : c);
	}
	for (int i = 0; i < index_len; i++)
		g->index[i] = (int32_t)rng_below(&r, (uint64_t)n_images);
}

void gpu_data_free(struct gpu_data *g)
{
	free(g->images);
	free(g->labels);
	free(g->index);
	memset(g, 0, sizeof(*g));
}

void gpu_run_create(struct gpu_run *r, const struct backend *be, const struct model *m,
		    const struct gpu_data *g, const float *params0, int batch, float lr,
		    float momentum, enum reduce_op reduce)
{
	const struct step_counters zero = {0, 0, 0, 0};
	size_t pbytes = m->n_params * sizeof(float);
	memset(r, 0, sizeof(*r));
	r->be = be;
	r->m = m;
	r->batch = batch;
	r->lr = lr;
	r->momentum = momentum;
	r->reduce = reduce;
	if (model_ws_create(be, m, batch, &r->ws) != 0)
		die(1, "%s backend: out of memory for the model workspace", backend_name(be));
	r->images = gpu_upload_new(be, g->images, (size_t)g->n_images * IDX_PIXELS);
	r->labels = gpu_upload_new(be, g->labels, (size_t)g->n_images);
	r->index = gpu_upload_new(be, g->index, (size_t)g->index_len * sizeof(int32_t));
	r->index_len = g->index_len;
	r->counters = gpu_upload_new(be, &zero, sizeof(zero));
	int steps = g->index_len / batch > 0 ? g->index_len / batch : 1;
	float *rates = xmalloc((size_t)steps * sizeof(float));
	for (int i = 0; i < steps; i++)
		rates[i] = lr;
	r->lr_table = gpu_upload_new(be, rates, (size_t)steps * sizeof(float));
	free(rates);
	r->params = gpu_upload_new(be, params0, pbytes);
	r->grads = gpu_upload_new(be, NULL, pbytes);
	r->velocity = gpu_upload_new(be, NULL, pbytes);
	/* The first batch; each step gathers the next one, as the trainer's does. */
	struct gather_req first = gpu_run_gather(r);
	backend_gather(be, &first);
}

struct gather_req gpu_run_gather(const struct gpu_run *r)
{
	struct gather_req g = {.images = r->images, .labels = r->labels, .pixels = IDX_PIXELS,
			       .index = r->index, .len = r->index_len, .cursor = &r->counters->cursor,
			       .count = r->batch, .batch_last = r->ws.plan.input_batch_last,
			       .x = r->ws.act[0], .y = r->ws.labels};
	return g;
}

void gpu_run_destroy(struct gpu_run *r)
{
	const struct backend *be = r->be;
	model_ws_destroy(be, &r->ws);
	backend_free(be, r->images);
	backend_free(be, r->labels);
	backend_free(be, r->index);
	backend_free(be, r->counters);
	backend_free(be, r->lr_table);
	backend_free(be, r->params);
	backend_free(be, r->grads);
	backend_free(be, r->velocity);
	memset(r, 0, sizeof(*r));
}

void gpu_run_step(struct gpu_run *r)
{
	const struct backend *be = r->be;
	model_step(be, r->m, &r->ws, r->params, r->grads, r->batch, 1.0f / (float)r->batch,
		   r->counters);
	backend_allreduce(be, r->grads, r->m->n_params, r->reduce);
	struct gather_req next = gpu_run_gather(r);
	backend_sgd_update(be, r->params, r->grads, r->velocity, r->m->n_params, r->lr_table,
			   r->counters, r->momentum, 0.0f, &next);
}

double gpu_run_loss(const struct gpu_run *r)
{
	float *rows = xmalloc((size_t)r->batch * sizeof(float));
	double sum = 0.0;
	gpu_download(r->be, rows, r->ws.row_loss, (size_t)r->batch * sizeof(float));
	for (int i = 0; i < r->batch; i++)
		sum += rows[i];
	free(rows);
	return sum / r->batch;
}

void gpu_run_params(const struct gpu_run *r, float *host)
{
	gpu_download(r->be, host, r->params, r->m->n_params * sizeof(float));
}

int32_t gpu_run_cursor(const struct gpu_run *r)
{
	struct step_counters c;
	gpu_download(r->be, &c, r->counters, sizeof(c));
	return c.cursor;
}

void gpu_run_get_state(const struct gpu_run *r, float *params, float *velocity)
{
	size_t bytes = r->m->n_params * sizeof(float);
	gpu_download(r->be, params, r->params, bytes);
	gpu_download(r->be, velocity, r->velocity, bytes);
}

void gpu_run_set_state(const struct gpu_run *r, const float *params, const float *velocity)
{
	size_t bytes = r->m->n_params * sizeof(float);
	backend_upload(r->be, r->params, params, bytes);
	backend_upload(r->be, r->velocity, velocity, bytes);
}
