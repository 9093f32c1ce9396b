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

/*
 * After the allreduce, on every rank alike: --clip-grad-norm's clip of the
 * reduced gradients, then the optimizer's update, followed in the same op by
 * the next batch's gather.
 */
static void step_update(const struct step_state *s)
{
	const struct backend *be = s->be;
	if (s->opt.max_norm > 0.0f) {
		backend_label(be, "", "clip");
		optim_clip(be, &s->opt, s->grads);
	}
	backend_label(be, "", "optimizer");
	struct gather_req next = step_gather(s);
	optim_update(be, &s->opt, s->params, s->grads, s->lr, s->counters, &next);
}

/*
 * Micro-batch mode: the rank's micro-batches, each forward and backward with
 * the loss scaled by 1/G and its gradients added up (in fixed point with
 * --exact), the next one gathered after it (the first is gathered already);
 * the last one's loss op moves the step's counters on, the others' cursor is
 * advanced here. Then one allreduce of the sum (integer with --exact, then
 * converted back once), and the update as in a plain step.
 */
static void step_micro_ops(const struct step_state *s)
{
	const struct backend *be = s->be;
	size_t n = s->m->n_params;
	float scale = 1.0f / (float)s->global;
	for (int j = 0; j < s->micro; j++) {
		int last = j == s->micro - 1;
		float *g = s->fixed || j == 0 ? s->grads : s->scratch;
		model_step(be, s->m, s->ws, s->params, g, s->batch, scale, last ? s->counters : NULL);
		backend_label(be, "", "accumulate");
		if (s->fixed)
			backend_fixed_accumulate(be, s->fixed, g, n, s->fixed_limit, j == 0);
		else if (j > 0)
			backend_grad_accumulate(be, s->grads, g, n);
		if (!last) {
			backend_advance(be, &s->counters->cursor, s->batch);
			struct gather_req next = step_gather(s);
			backend_gather(be, &next);
		}
	}
	backend_label(be, "", "allreduce");
	if (s->fixed) {
		backend_allreduce_i64(be, s->fixed, n + 1); /* the out-of-range count with the sums */
		backend_fixed_decode(be, s->grads, s->fixed, n);
	} else {
		backend_allreduce(be, s->grads, n, REDUCE_SUM);
	}
	step_update(s);
}

long long step_fixed_overflow(const struct step_state *s)
{
	int64_t bad = 0;
	if (s->fixed) /* fixed_decode's running count (backend.h) */
		backend_download(s->be, &bad, s->fixed + s->m->n_params + 1, sizeof(bad));
	return (long long)bad;
}

void step_ops(const struct step_state *s, int rows)
{
	const struct backend *be = s->be;
	if (s->global) {
		step_micro_ops(s);
		return;
	}
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
	step_update(s);
}

float step_loss(const struct step_state *s, int rows, float *host_rows)
{
	backend_download(s->be, host_rows, s->ws->row_loss, (size_t)rows * sizeof(float));
	double sum = 0.0;
	for (int i = 0; i < rows; i++)
		sum += host_rows[i];
	return (float)(sum / rows);
}
