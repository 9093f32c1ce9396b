/*
 * resume.c - the checkpoint policy: see host/train/resume.h. The format and
 * the validation are io/checkpoint_*.c's; this file decides which checkpoint,
 * where to continue and when to save, and reads a checkpoint's parameters
 * alone for --init-from and --eval-only.
 */
#include "train/resume.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/metrics_read.h"
#include "train/optim.h"

/*
 * Resuming from an earlier point than the newest checkpoint in --checkpoint-dir
 * (an older FILE, or a fallback past a corrupt one): those newer files stay,
 * and a later --resume DIR would pick them, so say so.
 */
static void warn_newer_checkpoints(const char *dir, long long global_step)
{
	struct checkpoint_entry *list = NULL;
	char why[1024];
	int n = checkpoint_list(dir, &list, why, sizeof(why));
	int newer = 0;
	for (int i = 0; i < n; i++)
		newer += list[i].global_step > global_step;
	if (newer)
		fprintf(stderr,
			"mnist-train: warning: %s holds %d checkpoint%s newer than the one resumed from "
			"(newest: %s); they are kept, and a later --resume %s would pick %s first\n",
			dir, newer, newer == 1 ? "" : "s", list[0].file, dir, newer == 1 ? "it" : "them");
	free(list);
}

/*
 * Rank 0's part of --resume: read the checkpoint into rs and say where the run
 * continues. The step after the checkpoint's is the same global step whatever
 * the rank count: the sampler position is next_step global batches into the
 * epoch's permutation, and checkpoint_compat has made sure the global batch
 * is the same.
 */
static enum status load_on_rank0(const struct train_config *c, const struct model *m,
				 struct resume_state *rs, int pos[2], char *err, size_t errlen)
{
	const struct checkpoint_info *run = &rs->run;
	struct checkpoint_info ck;
	char used[CONFIG_PATH_MAX + 96], why[2048];
	rs->params = xmalloc(m->n_params * sizeof(float));
	rs->state = xmalloc(optim_state_floats(c->optimizer, m->n_params) * sizeof(float));
	enum status rc = checkpoint_resume(c->resume, m, run, &ck, rs->params, rs->state, used,
					   sizeof(used), stderr, why, sizeof(why));
	if (rc)
		return status_fail(err, errlen, rc, "--resume %s: %s", c->resume, why);
	struct checkpoint_position p = checkpoint_position(ck.global_step, ck.steps_per_epoch);
	pos[0] = p.next_epoch;
	pos[1] = p.next_step;
	/* The way the GPU ran each op: the resumed run runs them the same way (train/gpu_plan.c). */
	if (ck.gpu_plan[0]) {
		rs->plan = xmalloc(strlen(ck.gpu_plan) + 1);
		memcpy(rs->plan, ck.gpu_plan, strlen(ck.gpu_plan) + 1);
		snprintf(rs->plan_from, sizeof(rs->plan_from), "%s's GPU plan", used);
	}
	if (c->checkpoint_dir[0])
		warn_newer_checkpoints(c->checkpoint_dir, ck.global_step);
	fprintf(stderr, "mnist-train: resuming from %s (after epoch %d step %d, global step %lld)",
		used, p.epoch, p.step, ck.global_step);
	if (p.next_epoch < c->epochs)
		fprintf(stderr, "; continuing at epoch %d step %d\n", p.next_epoch, p.next_step);
	else
		fprintf(stderr,
			"\nmnist-train: the run is finished (all %d epochs trained): nothing left to "
			"train, only the test set is scored\n",
			c->epochs);
	if (ck.ranks != run->ranks && config_micro_mode(&run->cfg))
		fprintf(stderr,
			"mnist-train: the checkpoint was written by %d ranks, this run has %d: the same "
			"steps of --global-batch %lld in micro-batches of %d, %s\n",
			ck.ranks, run->ranks, config_global_batch(&run->cfg, run->ranks),
			config_micro_batch(&run->cfg),
			run->cfg.exact ? "summed exactly (--exact): bitwise the run the checkpoint's would "
					 "have been"
				       : "summed in another order: the same up to floating-point rounding, "
					 "not bitwise (--exact makes it bitwise)");
	else if (ck.ranks != run->ranks)
		fprintf(stderr,
			"mnist-train: the checkpoint was written by %d ranks x batch %d, this run has "
			"%d x %d: the same global batch of %d examples per step, split differently, so "
			"results match a run on %d ranks up to floating-point rounding, not bitwise\n",
			ck.ranks, ck.cfg.batch_size, run->ranks, run->cfg.batch_size,
			run->ranks * run->cfg.batch_size, ck.ranks);
	fflush(stderr);
	return STATUS_OK;
}

/*
 * What a checkpoint holds, for messages:
 * "--model mlp --hidden 64, after epoch 1 step 30, global step 62".
 */
static void checkpoint_about(const struct checkpoint_info *ck, char *buf, size_t len)
{
	char model[128];
	struct checkpoint_model held = checkpoint_model_of(&ck->cfg);
	struct checkpoint_position p = checkpoint_position(ck->global_step, ck->steps_per_epoch);
	checkpoint_model_text(&held, model, sizeof(model));
	snprintf(buf, len, "%s, after epoch %d step %d, global step %lld", model, p.epoch, p.step,
		 ck->global_step);
}

/*
 * Rank 0's part of --init-from: the parameters of a checkpoint of this run's
 * model into rs->params, and nothing else: no optimizer state, no position,
 * no plan. The run starts at (0, 0) with its own settings.
 */
static enum status init_on_rank0(const struct train_config *c, struct resume_state *rs, char *err,
				 size_t errlen)
{
	struct checkpoint_model want = checkpoint_model_of(c), got;
	struct checkpoint_info *ck = xmalloc(sizeof(*ck));
	char used[CONFIG_PATH_MAX + 96], why[2048], about[256];
	int other_model = 0;
	enum status rc = checkpoint_load_params(c->init_from, &want, &got, &rs->params, ck,
						&other_model, used, sizeof(used), stderr, why,
						sizeof(why));
	static const char advice[] = " (--init-from takes the parameters of this run's own model: "
				     "give the checkpoint's --model and --hidden, or another checkpoint)";
	if (rc)
		status_fail(err, errlen, rc, "--init-from %s: %s%s", c->init_from, why,
			    other_model ? advice : "");
	else {
		checkpoint_about(ck, about, sizeof(about));
		fprintf(stderr,
			"mnist-train: --init-from: the parameters of %s (%s) and nothing else: a new run "
			"from epoch 0 step 0 with this run's settings and a fresh optimizer state\n",
			used, about);
		fflush(stderr);
	}
	free(ck);
	return rc;
}

/*
 * Rank 0's part of --gpu-plan-from: the plan of an earlier run, the
 * backend's text, which only the backend reads: from a checkpoint's
 * metadata, or the last gpu_plan record of a --metrics file.
 */
static enum status plan_on_rank0(const struct train_config *c, const struct model *m,
				 struct resume_state *rs, char *err, size_t errlen)
{
	char why[1536];
	long line = 0;
	enum status rc;
	if (checkpoint_is_file(c->gpu_plan_from)) {
		rs->plan = xmalloc(CHECKPOINT_PLAN_MAX);
		rc = checkpoint_read_plan(c->gpu_plan_from, m, rs->plan, CHECKPOINT_PLAN_MAX, why,
					  sizeof(why));
		snprintf(rs->plan_from, sizeof(rs->plan_from), "--gpu-plan-from %s", c->gpu_plan_from);
		return rc ? status_fail(err, errlen, rc, "--gpu-plan-from %s", why) : STATUS_OK;
	}
	if (metrics_last_event(c->gpu_plan_from, "gpu_plan",
			       "the --metrics file of a run on the CUDA backend", &rs->plan, &line, why,
			       sizeof(why)))
		return status_fail(err, errlen, STATUS_BAD_INPUT, "--gpu-plan-from %s", why);
	snprintf(rs->plan_from, sizeof(rs->plan_from), "--gpu-plan-from %s line %ld",
		 c->gpu_plan_from, line);
	return STATUS_OK;
}

/* Rank 0's plan (NULL: none), and where it came from, to every rank. */
static void plan_bcast(const struct dist *d, struct resume_state *rs)
{
	long long len = rs->plan ? (long long)strlen(rs->plan) + 1 : 0;
	dist_bcast(d, &len, sizeof(len), 0, "the given plan's length");
	if (!len)
		return;
	if (d->rank != 0)
		rs->plan = xmalloc((size_t)len);
	dist_bcast(d, rs->plan, (size_t)len, 0, "the given plan");
	dist_bcast(d, rs->plan_from, sizeof(rs->plan_from), 0, "where the given plan is from");
}

/*
 * Rank 0 has done its part of a collective read (rc, which it alone knows):
 * every rank learns the worst outcome, and the others say why they stop
 * ("rank 1 on HOST: stopping because rank 0 failed to read --init-from X").
 */
static enum status after_rank0(const struct dist *d, enum status rc, const char *what,
			       const char *path, char *err, size_t errlen)
{
	int worst = dist_agree(d, rc, NULL);
	if (worst && d->rank != 0)
		status_fail(err, errlen, (enum status)worst,
			    "rank %d on %s: stopping because rank 0 failed to %s %s", d->rank, d->host,
			    what, path);
	return (enum status)worst;
}

enum status resume_prepare(const struct train_config *c, const struct dist *d,
			   const struct model *m, int examples, uint32_t train_crc32,
			   int steps_per_epoch, struct resume_state *rs, char *err, size_t errlen)
{
	int pos[2] = {0, 0};
	enum status rc = STATUS_OK;
	memset(rs, 0, sizeof(*rs));
	checkpoint_info_from_config(&rs->run, c, d->size, examples, train_crc32);
	rs->run.steps_per_epoch = steps_per_epoch;
	if (!c->resume[0] && !c->init_from[0] && !c->gpu_plan_from[0])
		return STATUS_OK;
	/* --resume excludes the other two (config.c); --init-from and --gpu-plan-from go together. */
	if (c->resume[0])
		rc = after_rank0(d, d->rank == 0 ? load_on_rank0(c, m, rs, pos, err, errlen) : STATUS_OK,
				 "resume from --resume", c->resume, err, errlen);
	if (!rc && c->init_from[0])
		rc = after_rank0(d, d->rank == 0 ? init_on_rank0(c, rs, err, errlen) : STATUS_OK,
				 "read --init-from", c->init_from, err, errlen);
	if (!rc && c->gpu_plan_from[0])
		rc = after_rank0(d, d->rank == 0 ? plan_on_rank0(c, m, rs, err, errlen) : STATUS_OK,
				 "read --gpu-plan-from", c->gpu_plan_from, err, errlen);
	if (rc) {
		free(rs->params);
		free(rs->state);
		free(rs->plan);
		rs->params = rs->state = NULL;
		rs->plan = NULL;
		return rc;
	}
	dist_bcast(d, pos, sizeof(pos), 0, "resume position");
	plan_bcast(d, rs);
	rs->epoch = pos[0];
	rs->step = pos[1];
	return STATUS_OK;
}

/*
 * Rank 0's part of --eval-only: the checkpoint's model (a --model or
 * --hidden given must be its) and parameters.
 */
static enum status eval_on_rank0(const struct train_config *c, struct checkpoint_model *got,
				 float **params, char *err, size_t errlen)
{
	const struct setting *model = config_setting("model"), *hidden = config_setting("hidden");
	struct checkpoint_model want = checkpoint_model_of(c);
	struct checkpoint_info *ck = xmalloc(sizeof(*ck));
	char used[CONFIG_PATH_MAX + 96], why[2048], about[256];
	int other_model = 0;
	if (!config_given(c, model))
		want.kind = -1; /* the checkpoint's */
	if (!config_given(c, hidden))
		want.n_hidden = 0;
	enum status rc = checkpoint_load_params(c->eval_only, &want, got, params, ck, &other_model,
						used, sizeof(used), stderr, why, sizeof(why));
	if (rc)
		status_fail(err, errlen, rc, "--eval-only %s: %s%s", c->eval_only, why,
			    other_model ? " (leave --model and --hidden out to score the checkpoint's "
					  "own model)"
					: "");
	else {
		checkpoint_about(ck, about, sizeof(about));
		fprintf(stderr, "mnist-train: --eval-only: scoring %s (%s); nothing is trained\n", used,
			about);
		fflush(stderr);
	}
	free(ck);
	return rc;
}

enum status resume_eval_prepare(struct train_config *c, const struct dist *d, float **params,
				char *err, size_t errlen)
{
	struct checkpoint_model got;
	memset(&got, 0, sizeof(got));
	*params = NULL;
	enum status rc = after_rank0(d, d->rank == 0 ? eval_on_rank0(c, &got, params, err, errlen)
						       : STATUS_OK,
				     "read --eval-only", c->eval_only, err, errlen);
	if (rc) {
		free(*params);
		*params = NULL;
		return rc;
	}
	dist_bcast(d, &got, sizeof(got), 0, "the --eval-only checkpoint's model");
	c->model = (enum model_kind)got.kind;
	if (got.kind == MODEL_MLP) {
		c->n_hidden = got.n_hidden;
		memcpy(c->hidden, got.hidden, sizeof(c->hidden));
	}
	return STATUS_OK;
}

int resume_save_due(const struct resume_state *rs, long long global_step)
{
	const struct train_config *c = &rs->run.cfg;
	return c->checkpoint_dir[0] && (global_step % rs->run.steps_per_epoch == 0 ||
					(c->save_every > 0 && global_step % c->save_every == 0));
}

void resume_save(struct resume_state *rs, const struct model *m, long long global_step,
		 const float *host_params, const float *host_state)
{
	struct checkpoint_info *info = &rs->run;
	const struct train_config *c = &info->cfg;
	size_t n = m->n_params, ns = optim_state_floats(c->optimizer, n);
	char path[CONFIG_PATH_MAX + 96], why[2048];
	info->global_step = global_step;
	if (!c->allow_nonfinite)
		for (size_t i = 0; i < ns; i++)
			if ((i < n && !isfinite(host_params[i])) || !isfinite(host_state[i])) {
				struct checkpoint_position p = checkpoint_position(global_step, info->steps_per_epoch);
				die(1, "%s %zu is not finite after epoch %d step %d: training diverged; "
				       "no checkpoint saved (--allow-nonfinite keeps going)",
				    i < n && !isfinite(host_params[i]) ? "parameter" : "optimizer state", i,
				    p.epoch, p.step);
			}
	if (checkpoint_save(c->checkpoint_dir, m, info, host_params, host_state, path,
			    sizeof(path), why, sizeof(why)))
		die(1, "checkpoint not saved: %s", why);
	if (checkpoint_prune(c->checkpoint_dir, global_step, c->keep, why, sizeof(why)) < 0)
		fprintf(stderr, "mnist-train: warning: --keep %d: %s\n", c->keep, why);
	fprintf(stderr, "mnist-train: saved %s\n", path);
	fflush(stderr);
}
