/*
 * head.c - a training step's head on a backend: see host/train/head.h.
 */
#include "train/head.h"

void head_run_parts(const struct backend *b, const struct head_req *r, const char *layer)
{
	for (int i = 0; i < r->n_below; i++) {
		backend_label(b, r->below[i].layer, "forward");
		backend_gemm(b, &r->below[i].forward);
	}
	backend_label(b, layer, "forward");
	backend_gemm(b, &r->forward);
	backend_label(b, "", "loss");
	backend_softmax_xent(b, &r->loss);
	if (r->input_grad.m > 0) {
		backend_label(b, layer, "input grad");
		backend_gemm(b, &r->input_grad);
	}
	if (r->weight_grad.m > 0) {
		backend_label(b, layer, "weight grad");
		backend_gemm(b, &r->weight_grad);
	}
	for (int i = r->n_below - 1; i >= 0; i--) {
		const struct head_below *s = &r->below[i];
		if (s->weight_grad.m > 0) {
			backend_label(b, s->layer, "weight grad");
			backend_gemm(b, &s->weight_grad);
		}
		if (s->input_grad.m > 0) {
			backend_label(b, s->layer, "input grad");
			backend_gemm(b, &s->input_grad);
		}
	}
	if (r->pool.conv) {
		backend_label(b, r->pool_layer, "pool grad");
		backend_pool_backward(b, &r->pool, head_lowest_input_grad(r)->c, r->pool_y,
				      r->pool_arg, r->pool_dz);
	}
}

void head_run(const struct backend *b, const struct head_req *r, const char *layer)
{
	if (!b->ops->head) {
		head_run_parts(b, r, layer);
		return;
	}
	backend_label(b, layer, "head");
	b->ops->head(b->ctx, r);
}
