/*
 * step.c - one training step on the backend: see host/train/step.h.
 */
#include "train/step.h"

#include <string.h>

int device_set_upload(const struct backend *be, const struct mnist_set *s, int count,
		      struct device_set *out)
{
	out->count = count;
	out->images = backend_alloc(be, (size_t)count * IDX_PIXELS);
	out->labels = backend_alloc(be, (size_t)count);
	if (!out->images || !out->labels)
		return -1;
	backend_upload(be, out->images, s->images, (size_t)count * IDX_PIXELS);
	backend_upload(be, out->labels, s->labels, (size_t)count);
	return 0;
}

void device_set_free(const struct backend *be, struct device_set *s)
{
	backend_free(be, s->images);
	backend_free(be, s->labels);
	memset(s, 0, sizeof(*s));
}

struct gather_req step_gather(const struct step_state *s)
{
	struct gather_req g = {.images = s->data.images, .labels = s->data.labels,
			       .pixels = IDX_PIXELS, .index = s->index, .len = s->index_len,
			       .cursor = &s->counters->cursor, .count = s->batch,
			       .batch_last = s->ws->plan.input_batch_last, .x = s->ws->act[0],
			       .y = s->ws->labels};
	return g;
}

void step_ops(const struct step_state *s, int rows)
{
	const struct backend *be = s->be;
	/*
	 * The mean over ranks is folded into the loss gradient's scale, 1/(rows * ranks),
	 * and the ranks' gradients are summed: one bare allreduce, no extra pass over the
	 * gradient buffer to divide it. For a power-of-two rank count the result is
	 * bitwise the same as summing then dividing.
	 */
	int fold = s->reduce == REDUCE_MEAN && s->ranks > 1;
	model_step(be, s->m, s->ws, s->params, s->grads, rows,
		   1.0f / ((float)rows * (float)(fold ? s->ranks : 1)), s->counters);
	backend_label(be, "", "allreduce");
	backend_allreduce(be, s->grads, s->m->n_params, fold ? REDUCE_SUM : s->reduce);
	/* --clip-grad-norm: the averaged gradients, the same on every rank, clipped alike. */
	if (s->opt.max_norm > 0.0f) {
		backend_label(be, "", "clip");
		optim_clip(be, &s->opt, s->grads);
	}
	backend_label(be, "", "optimizer");
	struct gather_req next = step_gather(s);
	optim_update(be, &s->opt, s->params, s->grads, s->lr, s->counters, &next);
}

float step_loss(const struct step_state *s, int rows, float *host_rows)
{
	backend_download(s->be, host_rows, s->ws->row_loss, (size_t)rows * sizeof(float));
	double sum = 0.0;
	for (int i = 0; i < rows; i++)
		sum += host_rows[i];
	return (float)(sum / rows);
}
