/*
 * optim.c - the optimizers' state and update dispatch: see train/optim.h.
 * The arithmetic is include/elem.h's (sgd_update_elem, adamw_update_elem,
 * clip_coef_elem), run by the backend's ops.
 */
#include "train/optim.h"

#include <string.h>

int optim_create(struct optim *o, const struct backend *be, const struct train_config *c,
		 size_t n)
{
	memset(o, 0, sizeof(*o));
	o->kind = c->optimizer;
	o->momentum = c->momentum;
	o->weight_decay = c->weight_decay;
	o->adamw.beta1 = c->beta1;
	o->adamw.beta2 = c->beta2;
	o->adamw.eps = c->eps;
	o->adamw.weight_decay = c->weight_decay;
	o->max_norm = c->clip_grad_norm;
	o->n = n;
	o->state = backend_alloc(be, optim_state_count(o) * sizeof(float));
	if (o->max_norm > 0.0f)
		o->norm = backend_alloc(be, sizeof(float));
	return o->state && (o->max_norm <= 0.0f || o->norm) ? 0 : -1;
}

void optim_destroy(struct optim *o, const struct backend *be)
{
	backend_free(be, o->state);
	backend_free(be, o->norm);
	memset(o, 0, sizeof(*o));
}

size_t optim_state_count(const struct optim *o)
{
	return optim_state_floats(o->kind, o->n);
}

void optim_load(const struct optim *o, const struct backend *be, const float *state)
{
	backend_upload(be, o->state, state, optim_state_count(o) * sizeof(float));
}

void optim_clip(const struct backend *be, const struct optim *o, float *g)
{
	if (o->max_norm > 0.0f)
		backend_clip_grad_norm(be, g, o->n, o->max_norm, o->norm);
}

void optim_update(const struct backend *be, const struct optim *o, float *p, const float *g,
		  const float *lr, const struct step_counters *counters,
		  const struct gather_req *then)
{
	switch (o->kind) {
	case OPTIMIZER_SGD:
		backend_sgd_update(be, p, g, o->state, o->n, lr, counters, o->momentum,
				   o->weight_decay, then);
		break;
	case OPTIMIZER_ADAMW:
		backend_adamw_update(be, p, g, o->state, o->state + o->n, o->n, lr, counters,
				     o->adamw, then);
		break;
	}
}
