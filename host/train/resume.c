/*
 * resume.c - the checkpoint policy: see host/train/resume.h. The format and
 * the validation are io/checkpoint_*.c's; this file decides which checkpoint,
 * where to continue and when to save.
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
	if (p.next_epoch >= c->epochs)
		fprintf(stderr,
			"mnist-train: the checkpoint is at the end of --epochs %d: nothing left to "
			"train, only the test set is scored\n",
			c->epochs);
	fprintf(stderr,
		"mnist-train: resuming from %s (after epoch %d step %d, global step %lld); "
		"continuing at epoch %d step %d\n",
		used, p.epoch, p.step, ck.global_step, p.next_epoch, p.next_step);
	if (ck.ranks != run->ranks)
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

enum status resume_prepare(const struct train_config *c, const struct dist *d,
			   const struct model *m, int examples, uint32_t train_crc32,
			   int steps_per_epoch, struct resume_state *rs, char *err, size_t errlen)
{
	int pos[2] = {0, 0};
	enum status rc = STATUS_OK;
	memset(rs, 0, sizeof(*rs));
	checkpoint_info_from_config(&rs->run, c, d->size, examples, train_crc32);
	rs->run.steps_per_epoch = steps_per_epoch;
	if (!c->resume[0] && !c->gpu_plan_from[0])
		return STATUS_OK;
	if (d->rank == 0) /* the two are never given together (config.c) */
		rc = c->resume[0] ? load_on_rank0(c, m, rs, pos, err, errlen)
				  : plan_on_rank0(c, m, rs, err, errlen);
	int worst = dist_agree(d, rc, NULL);
	if (worst) {
		if (d->rank != 0)
			status_fail(err, errlen, (enum status)worst,
				    "rank %d on %s: stopping because rank 0 failed to %s %s", d->rank,
				    d->host, c->resume[0] ? "resume from --resume" : "read --gpu-plan-from",
				    c->resume[0] ? c->resume : c->gpu_plan_from);
		free(rs->params);
		free(rs->state);
		free(rs->plan);
		rs->params = rs->state = NULL;
		rs->plan = NULL;
		return (enum status)worst;
	}
	dist_bcast(d, pos, sizeof(pos), 0, "resume position");
	plan_bcast(d, rs);
	rs->epoch = pos[0];
	rs->step = pos[1];
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
