/*
 * checkpoint_compat.c - may this run continue from a whole checkpoint
 * (io/checkpoint.h)? Two questions, each with its own refusal:
 *   checkpoint_compat   was it written by a run this run may continue? (else another run's)
 *   checkpoint_extract  does it hold exactly this model's tensors?     (else another model's)
 * and the run's side they are asked with: a run's checkpoint_info and where
 * a global step stands (checkpoint_position).
 *
 * Tested by tests/test_checkpoint.c (position, fit, every mismatch).
 */
#include "io/checkpoint.h"

#include <stdio.h>
#include <string.h>

#include "io/checkpoint_tensors.h"
#include "text.h"

/* ---- configuration and position ------------------------------------------- */

void checkpoint_info_from_config(struct checkpoint_info *info, const struct train_config *c,
				 int ranks, int examples, uint32_t train_crc32)
{
	memset(info, 0, sizeof(*info));
	info->cfg = *c;
	info->ranks = ranks;
	info->examples = examples;
	info->train_crc32 = train_crc32;
}

struct checkpoint_position checkpoint_position(long long global_step, int steps_per_epoch)
{
	struct checkpoint_position p;
	long long last = global_step - 1; /* index of the last completed step */
	p.epoch = (int)(last / steps_per_epoch);
	p.step = (int)(last % steps_per_epoch);
	p.next_epoch = (int)(global_step / steps_per_epoch);
	p.next_step = (int)(global_step % steps_per_epoch);
	return p;
}

/* ---- this model, this run ------------------------------------------------------ */

struct checkpoint_model checkpoint_model_of(const struct train_config *c)
{
	struct checkpoint_model m;
	memset(&m, 0, sizeof(m));
	m.kind = (int)c->model;
	if (c->model == MODEL_MLP) {
		m.n_hidden = c->n_hidden;
		memcpy(m.hidden, c->hidden, sizeof(m.hidden));
	}
	return m;
}

void checkpoint_model_text(const struct checkpoint_model *m, char *buf, size_t len)
{
	struct text t;
	text_init(&t, buf, len);
	if (m->kind < 0) {
		text_add(&t, "any model");
		return;
	}
	text_add(&t, "--model %s", model_kind_name((enum model_kind)m->kind));
	for (int i = 0; m->kind == MODEL_MLP && i < m->n_hidden && i < CONFIG_MAX_HIDDEN; i++)
		text_add(&t, "%s%d", i ? "," : " --hidden ", m->hidden[i]);
}

/* "[a, b, ...]" of a shape. */
static void shape_text(const uint64_t *shape, int ndim, char *buf, size_t len)
{
	struct text t;
	text_init(&t, buf, len);
	text_add(&t, "[");
	for (int d = 0; d < ndim; d++)
		text_add(&t, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
	text_add(&t, "]");
}

enum status checkpoint_extract(const struct checkpoint_view *view, const struct model *m,
			       const struct checkpoint_info *info, const char *name, float *params,
			       float *state, char *err, size_t errlen)
{
	struct tensor_ref t[CKPT_MODEL_TENSORS];
	int nt = checkpoint_tensors(m, info->cfg.optimizer, t);
	int used[CHECKPOINT_MAX_TENSORS] = {0};
	const struct checkpoint_tensor *found[CKPT_MODEL_TENSORS];
	for (int i = 0; i < nt; i++) {
		found[i] = NULL;
		for (int k = 0; k < view->n_tensors; k++)
			if (!strcmp(view->tensors[k].name, t[i].name)) {
				found[i] = &view->tensors[k];
				used[k] = 1;
			}
		const struct checkpoint_tensor *f = found[i];
		if (!f)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: no tensor %s, which this model and --optimizer %s have", name,
					   t[i].name, optimizer_name(info->cfg.optimizer));
		int same = f->ndim == t[i].ndim && !strcmp(f->dtype, "F32");
		for (int d = 0; same && d < t[i].ndim; d++)
			same = f->shape[d] == t[i].shape[d];
		if (!same) {
			char got[192], want[96];
			shape_text(f->shape, f->ndim, got, sizeof(got));
			shape_text(t[i].shape, t[i].ndim, want, sizeof(want));
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s is %s %s, this model has F32 %s", name, t[i].name,
					   f->dtype, got, want);
		}
	}
	for (int k = 0; k < view->n_tensors; k++)
		if (!used[k])
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "%s: tensor %s is not part of this model with --optimizer %s", name,
					   view->tensors[k].name, optimizer_name(info->cfg.optimizer));
	for (int i = 0; i < nt; i++) {
		if (t[i].from == FROM_STEP) {
			float step;
			load_floats_le(&step, view->data + found[i]->begin, 1);
			if (step != (float)info->global_step)
				return status_fail(err, errlen, STATUS_BAD_INPUT,
						   "%s: optimizer.step is %g, but the checkpoint is at global "
						   "step %lld (one update per step)",
						   name, (double)step, info->global_step);
			continue;
		}
		if (t[i].from == FROM_STATE && !state)
			continue; /* the parameters alone */
		load_floats_le((t[i].from == FROM_STATE ? state : params) + t[i].offset,
			       view->data + found[i]->begin, t[i].count);
	}
	return STATUS_OK;
}

/* "; " before every difference but the first. */
static const char *sep(const struct text *t)
{
	return t->used ? "; " : "";
}

enum status checkpoint_compat(const struct checkpoint_info *ck, const struct checkpoint_info *run,
			      const char *name, char *err, size_t errlen)
{
	char list[1536], a[CHECKPOINT_VALUE_MAX], b[CHECKPOINT_VALUE_MAX];
	struct text d;
	text_init(&d, list, sizeof(list));
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		if (!(s->where & SETTING_RESUME))
			continue;
		/* Not applying on one side: the setting it depends on differs, and is named. */
		if (s->applies && (!s->applies(&ck->cfg) || !s->applies(&run->cfg)))
			continue;
		config_format(s, &ck->cfg, a, sizeof(a));
		config_format(s, &run->cfg, b, sizeof(b));
		/* "" where the setting applies: a value not given (--clip-grad-norm). */
		if (strcmp(a, b))
			text_add(&d, "%s--%s %s in the checkpoint, %s here", sep(&d), s->flag,
				 *a ? a : "not given", *b ? b : "not given");
	}
	if (ck->examples != run->examples)
		text_add(&d, "%s%d training images in the checkpoint (--limit), %d here", sep(&d),
			 ck->examples, run->examples);
	if (ck->train_crc32 != run->train_crc32)
		text_add(&d, "%straining data CRC-32 %08x in the checkpoint, %08x here (a different data set)",
			 sep(&d), (unsigned)ck->train_crc32, (unsigned)run->train_crc32);
	int sum = ck->cfg.grad_reduce == GRAD_REDUCE_SUM && run->cfg.grad_reduce == GRAD_REDUCE_SUM;
	long long gck = (long long)ck->ranks * ck->cfg.batch_size;
	long long grun = (long long)run->ranks * run->cfg.batch_size;
	int micro_ck = config_micro_mode(&ck->cfg), micro_run = config_micro_mode(&run->cfg);
	/*
	 * Micro-batch mode (docs/exact.md): a step is G rows in micro-batches of
	 * M whatever the rank count, so any rank count continues it; G and M
	 * must stay.
	 */
	if (micro_ck != micro_run)
		text_add(&d,
			 "%sthe checkpoint's run %s micro-batches (--micro-batch, --global-batch, "
			 "--exact), this one %s: their steps hold other images",
			 sep(&d), micro_ck ? "trained in" : "did not train in",
			 micro_run ? "does" : "does not");
	else if (micro_ck && (config_micro_batch(&ck->cfg) != config_micro_batch(&run->cfg) ||
			      config_global_batch(&ck->cfg, ck->ranks) !=
				      config_global_batch(&run->cfg, run->ranks)))
		text_add(&d,
			 "%s--global-batch %lld --micro-batch %d in the checkpoint (%d ranks), "
			 "--global-batch %lld --micro-batch %d here (%d ranks): a step must hold the "
			 "same images",
			 sep(&d), config_global_batch(&ck->cfg, ck->ranks), config_micro_batch(&ck->cfg),
			 ck->ranks, config_global_batch(&run->cfg, run->ranks),
			 config_micro_batch(&run->cfg), run->ranks);
	else if (micro_ck) {
		if (d.used == 0 && ck->steps_per_epoch != run->steps_per_epoch)
			text_add(&d, "%s%d steps per epoch in the checkpoint, %d here", sep(&d),
				 ck->steps_per_epoch, run->steps_per_epoch);
	} else if (gck != grun)
		text_add(&d,
			 "%sglobal batch %lld in the checkpoint (%d ranks x --batch-size %d), %lld here "
			 "(%d ranks x %d): the sampler position is a count of global batches, so a "
			 "different rank count needs --batch-size %lld / ranks",
			 sep(&d), gck, ck->ranks, ck->cfg.batch_size, grun, run->ranks, run->cfg.batch_size, gck);
	else if (ck->ranks != run->ranks && sum)
		text_add(&d,
			 "%s%d ranks in the checkpoint, %d here, with --grad-reduce sum: the sum of the "
			 "ranks' gradients scales with the rank count",
			 sep(&d), ck->ranks, run->ranks);
	else if (d.used == 0 && ck->steps_per_epoch != run->steps_per_epoch)
		text_add(&d, "%s%d steps per epoch in the checkpoint, %d here", sep(&d),
			 ck->steps_per_epoch, run->steps_per_epoch);
	/* A cosine schedule spans the whole run: its rates depend on --epochs. */
	if (ck->cfg.lr_schedule == LR_COSINE && run->cfg.lr_schedule == LR_COSINE &&
	    ck->cfg.epochs != run->cfg.epochs) {
		text_add(&d,
			 "%s--epochs %d in the checkpoint, %d here, with --lr-schedule cosine: the "
			 "schedule runs over all steps of the run, so the total must stay the same",
			 sep(&d), ck->cfg.epochs, run->cfg.epochs);
	} else if (ck->global_step > (long long)run->cfg.epochs * ck->steps_per_epoch) {
		struct checkpoint_position p = checkpoint_position(ck->global_step, ck->steps_per_epoch);
		text_add(&d,
			 "%s--epochs %d is the total, but the checkpoint is already at epoch %d step %d "
			 "(use --epochs %d or more)",
			 sep(&d), run->cfg.epochs, p.epoch, p.step, p.epoch + 1);
	}
	if (d.used == 0)
		return STATUS_OK;
	return status_fail(err, errlen, STATUS_BAD_INPUT, "%s does not fit this run: %s", name, list);
}
