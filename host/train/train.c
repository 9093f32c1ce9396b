/*
 * train.c - the data-parallel training loop. Each step, on every rank:
 *   gather the rank's batch (indices from the sampler, pixels normalised on the fly)
 *   forward, softmax cross-entropy, backward into one flat gradient buffer
 *   one allreduce of that buffer (mean over ranks by default)
 *   the optimizer's update of the flat parameter buffer (train/optim.h)
 * Everything goes through the backend, so the loop is the same on the host and
 * on a GPU, where the whole step can be captured once and replayed. The loop
 * calls no MPI (dist.h carries its few collectives) and writes no file format
 * (io/: log lines, metrics, checkpoints; train/resume.c decides when to save).
 * A step's ops are train/step.c's, their grouping into launches (captured
 * graphs) train/launch.c's, the backend's plan kept and published by
 * train/gpu_plan.c.
 */
#include "train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "io/crc32.h"
#include "io/report.h"
#include "train/gpu_plan.h"
#include "train/launch.h"
#include "train/optim.h"
#include "train/profile.h"
#include "train/resume.h"
#include "train/sampler.h"
#include "train/schedule.h"
#include "train/step.h"

/* Rows per evaluation batch (the workspace holds at least this many). */
#define TRAIN_EVAL_ROWS 500

int train_test_shard(int count, int rank, int size)
{
	return count > rank ? (count - rank + size - 1) / size : 0;
}

double train_evaluate(const struct dist *d, const struct backend *be, const struct model *m,
		      struct model_ws *ws, const float *params, const struct mnist_set *test,
		      long long *scored)
{
	struct device_set data = {0};
	int shard = train_test_shard(test->count, d->rank, d->size);
	int32_t *host_index = xmalloc((size_t)(shard + 1) * sizeof(int32_t));
	int32_t *host_hits = xmalloc((size_t)ws->max_rows * sizeof(int32_t));
	int32_t *index = backend_alloc(be, (size_t)(shard + 1) * sizeof(int32_t));
	int32_t *cursor = backend_alloc(be, sizeof(int32_t));
	if (!index || !cursor || device_set_upload(be, test, test->count, &data))
		die(1, "out of device memory for the test set (%d examples)", test->count);
	for (int j = 0; j < shard; j++)
		host_index[j] = d->rank + j * d->size;
	backend_upload(be, index, host_index, (size_t)shard * sizeof(int32_t));
	memset(host_hits, 0, (size_t)ws->max_rows * sizeof(int32_t));
	backend_upload(be, ws->hits, host_hits, (size_t)ws->max_rows * sizeof(int32_t));

	for (int done = 0; done < shard; done += ws->max_rows) {
		int rows = shard - done < ws->max_rows ? shard - done : ws->max_rows;
		struct gather_req g = {.images = data.images, .labels = data.labels,
				       .pixels = IDX_PIXELS, .index = index, .len = shard,
				       .cursor = cursor, .count = rows,
				       .batch_last = ws->plan.input_batch_last, .x = ws->act[0],
				       .y = ws->labels};
		backend_gather(be, &g);
		backend_advance(be, cursor, rows);
		model_forward(be, m, ws, params, rows, 0);
		model_score(be, m, ws, rows);
	}
	backend_download(be, host_hits, ws->hits, (size_t)ws->max_rows * sizeof(int32_t));
	long long counts[2] = {0, shard};
	for (int i = 0; i < ws->max_rows; i++)
		counts[0] += host_hits[i];
	dist_sum_ll(d, counts, 2, "evaluation");
	if (scored)
		*scored = counts[1];

	backend_free(be, index);
	backend_free(be, cursor);
	device_set_free(be, &data);
	free(host_index);
	free(host_hits);
	return counts[1] ? (double)counts[0] / (double)counts[1] : NAN;
}

/*
 * Micro-batch mode's sizes (docs/exact.md): M at most G, G a multiple of M,
 * at least one micro-batch a step for every rank, and the mean over the
 * global batch (a sum over the ranks would depend on their count).
 */
static enum status micro_check(const struct train_config *c, int ranks, char *err, size_t errlen)
{
	int m = config_micro_batch(c);
	long long g = config_global_batch(c, ranks);
	const char *m_from = c->micro_batch > 0 ? "" : " (--batch-size's)";
	const char *g_from = c->global_batch > 0 ? "" : " (ranks x --micro-batch)";
	if (c->grad_reduce == GRAD_REDUCE_SUM)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--grad-reduce sum: with --micro-batch, --global-batch or --exact a "
				   "step's gradient is the mean over the global batch, whatever the rank "
				   "count (leave --grad-reduce out, or drop those flags)");
	if (m > g)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--micro-batch %d%s is more than --global-batch %lld%s (a step holds "
				   "whole micro-batches)",
				   m, m_from, g, g_from);
	if (g % m)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--global-batch %lld%s is not a multiple of --micro-batch %d%s (%lld "
				   "rows left over)",
				   g, g_from, m, m_from, g % m);
	if (c->exact && c->gpu_plan == PLAN_MEASURE && config_given(c, config_setting("gpu-plan")))
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--gpu-plan measure: an --exact run takes the GPU's ways from "
				   "--gpu-plan-from or the heuristic, never from a measurement, which "
				   "depends on timing (drop --gpu-plan measure)");
	if (g / m < ranks)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%d ranks, but --global-batch %lld%s / --micro-batch %d%s is %lld "
				   "micro-batch%s a step: at most %lld rank%s (or a larger --global-batch, "
				   "a smaller --micro-batch)",
				   ranks, g, g_from, m, m_from, g / m, g / m == 1 ? "" : "es", g / m,
				   g / m == 1 ? "" : "s");
	return STATUS_OK;
}

/*
 * The run's sampler and learning-rate schedule, checked: --limit against the
 * data, a sampler that leaves at least one step, a schedule that fits the
 * run. On success the caller destroys smp.
 */
static enum status train_plan(const struct train_config *c, const struct dist *d,
			      const struct mnist_set *train, struct sampler *smp,
			      struct schedule *sch, char *err, size_t errlen)
{
	int n = train->count;
	if (c->limit > n)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--limit: %ld is more than the %d training images in %s", c->limit, n,
				   c->data_dir);
	if (c->limit > 0)
		n = (int)c->limit;
	if (config_micro_mode(c)) {
		enum status rc = micro_check(c, d->size, err, errlen);
		if (rc)
			return rc;
		if (sampler_create_micro(smp, n, d->rank, d->size, config_micro_batch(c),
					 (int)config_global_batch(c, d->size), c->drop_last, c->seed,
					 err, errlen))
			return STATUS_BAD_INPUT;
	} else if (sampler_create(smp, n, d->rank, d->size, c->batch_size, c->drop_last, c->seed,
				  err, errlen)) {
		return STATUS_BAD_INPUT;
	}
	schedule_init(sch, c->lr_schedule, c->lr, c->warmup_steps, (long long)c->epochs * smp->steps);
	enum status rc = schedule_validate(sch, err, errlen);
	if (rc)
		sampler_destroy(smp);
	return rc;
}

enum status train_validate(const struct train_config *c, const struct dist *d,
			   const struct mnist_set *train, char *err, size_t errlen)
{
	struct sampler smp;
	struct schedule sch;
	enum status rc = train_plan(c, d, train, &smp, &sch, err, errlen);
	if (rc == STATUS_OK)
		sampler_destroy(&smp);
	return rc;
}

/* --eval-every: whether the test set is scored after epoch `epoch` (from 0). */
static int eval_due(const struct train_config *c, int epoch)
{
	return c->eval_every > 0 && (epoch + 1) % c->eval_every == 0;
}

/* Rank 0's report of a score after epoch `epoch`: the line, and with --metrics the eval event. */
static void eval_report(const struct dist *d, FILE *metrics, int epoch, long long global_step,
			double accuracy, long long scored, double elapsed)
{
	if (d->rank != 0)
		return;
	report_eval_line(stdout, epoch, accuracy);
	if (metrics)
		report_metrics_eval(metrics, epoch, global_step, accuracy, scored, elapsed);
}

/* Steps timed with --metrics: at most this many (the first ones), 4 MiB of floats. */
#define TRAIN_STEP_TIMES_MAX (1 << 20)

/*
 * Every replica must hold the same parameters; a difference is a bug worth
 * stopping for. MNIST_DDP_TEST_PERTURB_RANK=R (a test hook, tests/e2e) makes
 * rank R change one parameter by one ulp first, so a test can see this fire.
 */
static uint32_t check_replicas(const struct dist *d, float *params, size_t n)
{
	const char *perturb = getenv("MNIST_DDP_TEST_PERTURB_RANK");
	if (perturb && *perturb && atoi(perturb) == d->rank && n > 0)
		params[0] = nextafterf(params[0], INFINITY);
	uint32_t lo, hi, crc = crc32_bytes(0, params, n * sizeof(float));
	if (!dist_same_u32(d, crc, &lo, &hi, "replica check"))
		die(1, "replicas diverged: parameter checksums differ across ranks (%08x vs %08x)", lo, hi);
	return crc;
}

/*
 * The epoch line's figures: this rank's logged losses of the epoch, and the
 * training clock and image count at its start; epoch_close adds every rank's
 * losses (rank 0).
 */
struct epoch_tally {
	double loss_sum; /* this rank's loss lines of the epoch */
	long long losses;
	double t0;       /* run_elapsed at the epoch's start */
	long long images0;
	int epoch;       /* the epoch closed and not yet reported; -1: none */
	struct epoch_line line;
};

/* Everything a run holds from its set-up to its end. */
struct run {
	const struct train_config *c;
	const struct dist *d;
	const struct backend *be;
	FILE *metrics;
	struct train_result *res;
	struct model m;
	struct model_ws ws;
	struct sampler smp;
	struct schedule sched;
	struct resume_state rs; /* where the run starts; its checkpoints */
	struct step_state st;
	size_t pbytes, state_bytes;
	float *host_params, *host_rows, *host_lr, *host_state; /* host copies */
	int32_t *host_index;
	struct progress prog;
	struct epoch_tally ep; /* the running epoch's line (epoch_close) */
	struct launch launch; /* the steps grouped into launches (train/launch.h) */
	long long images;
	double t0, paused; /* the training clock's start; seconds of --eval-every scoring */
	float *step_secs;  /* --metrics: the first steps' wall times */
	int n_timed, max_timed;
	int unchecked; /* --exact: the epoch's first step not yet checked for overflow */
};


/* Backend memory for the model, its workspace, the step and the training set. */
static void run_allocate(struct run *r, const struct mnist_set *train)
{
	const struct train_config *c = r->c;
	const struct backend *be = r->be;
	struct step_state *st = &r->st;
	backend_set_timeout(be, c->timeout);
	backend_set_position(be, r->rs.epoch, r->rs.step);
	int ws_rows = r->smp.batch > TRAIN_EVAL_ROWS ? r->smp.batch : TRAIN_EVAL_ROWS;
	if (model_ws_create(be, &r->m, ws_rows, &r->ws))
		die(1, "out of %s memory for a batch of %d", backend_name(be), ws_rows);
	*st = (struct step_state){.be = be, .m = &r->m, .ws = &r->ws,
				  .reduce = c->grad_reduce == GRAD_REDUCE_SUM ? REDUCE_SUM : REDUCE_MEAN,
				  .ranks = r->d->size};
	r->pbytes = r->m.n_params * sizeof(float);
	st->params = backend_alloc(be, r->pbytes);
	st->grads = backend_alloc(be, r->pbytes);
	st->index = backend_alloc(be, (size_t)r->smp.shard_len * sizeof(int32_t));
	st->index_len = r->smp.shard_len;
	st->batch = r->smp.batch;
	if (r->smp.global) { /* micro-batch mode */
		st->global = r->smp.global;
		st->micro = r->smp.micro;
		if (c->exact) {
			st->fixed = backend_alloc(be, (r->m.n_params + 2) * sizeof(int64_t)); /* zeroed */
			st->fixed_limit = fixed_limit_elem(r->smp.global / r->smp.batch);
		} else if (st->micro > 1) {
			st->scratch = backend_alloc(be, r->pbytes);
		}
		if ((c->exact && !st->fixed) || (!c->exact && st->micro > 1 && !st->scratch))
			die(1, "out of %s memory for the micro-batches' gradients", backend_name(be));
	}
	st->counters = backend_alloc(be, sizeof(struct step_counters));
	st->lr = backend_alloc(be, (size_t)r->smp.steps * sizeof(float));
	if (!st->params || !st->grads || optim_create(&st->opt, be, c, r->m.n_params) || !st->index ||
	    !st->counters || !st->lr || device_set_upload(be, train, r->smp.n, &st->data))
		die(1, "out of %s memory for the model and the training set", backend_name(be));
	r->state_bytes = optim_state_count(&st->opt) * sizeof(float);

	r->host_params = xmalloc(r->pbytes);
	/* Touched here, so that the first epoch's shuffle does not pay the page faults. */
	r->host_index = xmalloc((size_t)r->smp.shard_len * sizeof(int32_t));
	memset(r->host_index, 0, (size_t)r->smp.shard_len * sizeof(int32_t));
	r->host_rows = xmalloc((size_t)r->smp.batch * sizeof(float));
	r->host_lr = xmalloc((size_t)r->smp.steps * sizeof(float));
	r->host_state = c->checkpoint_dir[0] && r->d->rank == 0 ? xmalloc(r->state_bytes) : NULL;
}

/*
 * The state training starts from, the same on every replica: rank 0's initial
 * parameters, or the checkpoint's parameters and optimizer state, broadcast.
 */
static void run_start_state(struct run *r)
{
	const struct backend *be = r->be;
	model_init_params(&r->m, r->c->seed, r->host_params);
	backend_upload(be, r->st.params, r->rs.params ? r->rs.params : r->host_params, r->pbytes);
	backend_broadcast(be, r->st.params, r->m.n_params, 0);
	if (r->c->resume[0]) {
		if (r->rs.state)
			optim_load(&r->st.opt, be, r->rs.state);
		backend_broadcast(be, r->st.opt.state, optim_state_count(&r->st.opt), 0);
	}
	free(r->rs.params);
	free(r->rs.state);
	r->rs.params = r->rs.state = NULL;
}

static int gcd(int a, int b)
{
	while (b) {
		int t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/*
 * --log-every may differ between ranks (each rank prints its own loss lines):
 * the greatest common divisor of every rank's, so that the steps at which
 * some rank reads its loss are its multiples, the same on every rank, and
 * every rank launches the same groups of steps (run_steps).
 */
static int run_log_steps(const struct run *r)
{
	int mine = r->c->log_every, all = mine;
	int *each = r->d->rank == 0 ? xmalloc((size_t)r->d->size * sizeof(int)) : NULL;
	dist_gather(r->d, &mine, sizeof(mine), each, 0, "--log-every");
	for (int i = 0; each && i < r->d->size; i++)
		all = gcd(all, each[i]);
	free(each);
	dist_bcast(r->d, &all, sizeof(all), 0, "--log-every");
	return all;
}

/*
 * The progress display, the step-time buffer of --metrics (rank 0: each
 * step's wall time, the backend synchronized at its end, into a buffer
 * allocated here, so the step itself allocates nothing), and the training
 * clock, started together on every rank.
 */
static void run_start_clock(struct run *r)
{
	progress_start(&r->prog, r->d->rank == 0 && progress_wanted(r->c->progress));
	r->res->steps_per_epoch = r->smp.steps;
	long long max_steps = (long long)r->c->epochs * r->smp.steps;
	r->max_timed = max_steps < TRAIN_STEP_TIMES_MAX ? (int)max_steps : TRAIN_STEP_TIMES_MAX;
	r->step_secs = r->metrics ? xmalloc((size_t)r->max_timed * sizeof(float)) : NULL;
	backend_synchronize(r->be); /* the start state's broadcast done before the host's collectives */
	launch_init(&r->launch, &r->st, &r->smp, &r->rs, r->c->graph_steps, run_log_steps(r),
		    r->c->use_graph);
	dist_barrier(r->d, "start of training");
	gpu_plan_collective(r->be, r->c, 1);
	r->t0 = clock_seconds();
}

/* Seconds trained so far, --eval-every's pauses left out. */
static double run_elapsed(const struct run *r, double now)
{
	return now - r->t0 - r->paused;
}

/* An epoch's shuffle, learning rates and counters on the backend, and its first batch gathered. */
static void epoch_begin(struct run *r, int epoch, int first)
{
	const struct backend *be = r->be;
	/* Every step makes one update: the count so far is the steps trained. */
	const struct step_counters pos0 = {(int32_t)sampler_step_start(&r->smp, first), (int32_t)first,
					   (int32_t)((long long)epoch * r->smp.steps + first), 0};
	sampler_epoch(&r->smp, epoch, r->host_index);
	schedule_fill(&r->sched, (long long)epoch * r->smp.steps, r->smp.steps, r->host_lr);
	backend_upload(be, r->st.index, r->host_index, (size_t)r->smp.shard_len * sizeof(int32_t));
	backend_upload(be, r->st.lr, r->host_lr, (size_t)r->smp.steps * sizeof(float));
	backend_upload(be, r->st.counters, &pos0, sizeof(pos0));
	/* The epoch's first batch; each step gathers the next one. */
	struct gather_req first_batch = step_gather(&r->st);
	backend_gather(be, &first_batch);
}







/*
 * One launch's steps from `step` (train/launch.h), counted, and with
 * --metrics timed: rank 0 waits for the launch's end and each of its steps
 * is timed as the launch's wall time over its steps. After the first full
 * step, rank 0 publishes the plan it made. Returns the steps run; *rows: the
 * rows of the last.
 */
static int run_steps(struct run *r, int epoch, int step, int *rows)
{
	double t_start = r->step_secs ? clock_seconds() : 0.0;
	int first_full, n = launch_steps(&r->launch, epoch, step, rows, &first_full);
	if (first_full)
		gpu_plan_publish(r->be, r->d, r->metrics, r->c->verbose);
	r->images += sampler_step_images(&r->smp, *rows) * n;
	if (r->step_secs && r->n_timed < r->max_timed) {
		backend_synchronize(r->be);
		float each = (float)((clock_seconds() - t_start) / n);
		for (int i = 0; i < n && r->n_timed < r->max_timed; i++)
			r->step_secs[r->n_timed++] = each;
	}
	return n;
}

/*
 * Every --log-every steps and at the last: the loss line, the metrics, and the
 * stop on a non-finite loss, checked where the loss is downloaded anyway, so
 * the step itself stays free of host syncs (resume_save checks the
 * parameters before every checkpoint).
 */
static void step_report(struct run *r, int epoch, int step, int rows)
{
	const struct train_config *c = r->c;
	int last = epoch == c->epochs - 1 && step == r->smp.steps - 1;
	if (step % c->log_every != 0 && !last)
		return;
	float loss = step_loss(&r->st, rows, r->host_rows);
	if (epoch == 0 && step == 0)
		r->res->first_loss = loss;
	r->res->final_loss = loss;
	if (step % c->log_every == 0) {
		progress_clear(&r->prog);
		report_loss_line(stdout, epoch, step, loss);
		r->ep.loss_sum += loss;
		r->ep.losses++;
	}
	if (r->metrics) {
		double el = run_elapsed(r, clock_seconds());
		report_metrics_step(r->metrics, epoch, step, (long long)epoch * r->smp.steps + step, loss,
				    el > 0 ? (double)r->images / el : 0.0, el);
	}
	if (!isfinite(loss) && !c->allow_nonfinite)
		die(1, "loss is %s at epoch %d step %d: training diverged; stopping "
		       "(--allow-nonfinite keeps going)",
		    isnan(loss) ? "nan" : "inf", epoch, step);
}

/*
 * --exact: every rank stops, with the same message, when a micro-batch's
 * gradient had an element out of fixed point's range in the steps run so
 * far (the count is reduced with the sums, so every rank reads the same),
 * before anything is reported or saved. Reading it waits for the steps
 * launched: on a backend whose ops are done when called (the host's) it is
 * read after every launch; on a device backend only where the host waits
 * anyway, at the steps whose loss is read (the log steps, the epoch's last)
 * and before a checkpoint, the same steps on every rank. An overflow then
 * stops the run there, naming the steps since the last read.
 */
static void exact_check(struct run *r, int epoch, int step)
{
	long long done = (long long)epoch * r->smp.steps + step + 1;
	if (!r->st.fixed)
		return;
	if (!backend_is_synchronous(r->be) && step % r->launch.log_steps != 0 &&
	    step != r->smp.steps - 1 && !resume_save_due(&r->rs, done))
		return;
	long long bad = step_fixed_overflow(&r->st);
	int from = r->unchecked;
	r->unchecked = step + 1;
	if (!bad)
		return;
	char steps[64];
	if (from == step)
		snprintf(steps, sizeof(steps), "step %d", step);
	else
		snprintf(steps, sizeof(steps), "steps %d to %d", from, step);
	/* Every rank read the same count here: each says so, and none stops the job before. */
	say("--exact: %lld gradient element%s out of the fixed-point range at epoch %d %s "
	       "(a micro-batch's |gradient| must stay below 2^%d = %g for %d micro-batches a "
	       "step, and be finite): training diverged, or the model needs another scale "
	       "(docs/exact.md); stopping",
	    bad, bad == 1 ? "" : "s", epoch, steps,
	    (int)lrint(log2(r->st.fixed_limit)) - FIXED_SHIFT,
	    ldexp(r->st.fixed_limit, -FIXED_SHIFT), r->smp.global / r->smp.batch);
	dist_barrier(r->d, "--exact's stop");
	check_stop(1);
}

/* Rank 0: a checkpoint after this step when one is due (train/resume.h). */
static void save_if_due(struct run *r, int epoch, int step)
{
	long long done = (long long)epoch * r->smp.steps + step + 1;
	if (r->d->rank != 0 || !resume_save_due(&r->rs, done))
		return;
	backend_download(r->be, r->host_params, r->st.params, r->pbytes);
	backend_download(r->be, r->host_state, r->st.opt.state, r->state_bytes);
	/* The plan: every problem met so far, the epoch's short last batch's too. */
	gpu_plan_keep(r->be, r->d, r->rs.run.gpu_plan, sizeof(r->rs.run.gpu_plan));
	resume_save(&r->rs, &r->m, done, r->host_params, r->host_state);
}

static void show_progress(struct run *r, int epoch, int step)
{
	if (!r->prog.tty)
		return;
	double now = clock_seconds();
	progress_update(&r->prog, epoch, r->c->epochs, step, r->smp.steps,
			now > r->t0 + r->paused ? (double)r->images / run_elapsed(r, now) : 0.0, now);
}

/* --eval-every: score the test set after `epoch`, off the training clock; the accuracy. */
static double eval_pause(struct run *r, const struct mnist_set *test, int epoch)
{
	backend_synchronize(r->be);
	double t_eval = clock_seconds();
	long long scored = 0;
	gpu_plan_collective(r->be, r->c, 0);
	double acc = train_evaluate(r->d, r->be, &r->m, &r->ws, r->st.params, test, &scored);
	gpu_plan_collective(r->be, r->c, 1);
	double now = clock_seconds();
	eval_report(r->d, r->metrics, epoch, (long long)(epoch + 1) * r->smp.steps, acc, scored,
		    run_elapsed(r, t_eval));
	r->paused += now - t_eval;
	return acc;
}

/* The running epoch's tally started: the training clock and the images so far. */
static void epoch_tally_start(struct run *r)
{
	r->ep = (struct epoch_tally){.t0 = run_elapsed(r, clock_seconds()), .images0 = r->images,
				     .epoch = -1};
}

/*
 * The epoch's end, on every rank: the backend waited for (the epoch's time is
 * its work's), and every rank's loss lines added up on rank 0 in rank order,
 * so that the same job prints the same mean every time.
 */
static void epoch_close(struct run *r, int epoch)
{
	struct epoch_tally *ep = &r->ep;
	struct {
		double sum;
		long long n;
	} mine = {ep->loss_sum, ep->losses}, *each = NULL;
	backend_synchronize(r->be);
	double seconds = run_elapsed(r, clock_seconds()) - ep->t0;
	if (r->d->rank == 0)
		each = xmalloc((size_t)r->d->size * sizeof(*each));
	dist_gather(r->d, &mine, sizeof(mine), each, 0, "the epoch line");
	double sum = 0.0;
	long long n = 0;
	for (int i = 0; each && i < r->d->size; i++) {
		sum += each[i].sum;
		n += each[i].n;
	}
	free(each);
	ep->line = (struct epoch_line){.epoch = epoch,
				       .global_step = (long long)(epoch + 1) * r->smp.steps,
				       .mean_loss = n ? (float)(sum / (double)n) : NAN,
				       .losses = n,
				       .seconds = seconds,
				       .images = r->images - ep->images0,
				       .test_accuracy = NAN};
	ep->epoch = epoch;
}

/*
 * Rank 0: the closed epoch's line, with its --eval-every score (NAN: none),
 * and its --metrics record; the run's epoch_loss is the last one reported.
 */
static void epoch_report(struct run *r, double accuracy)
{
	if (r->ep.epoch < 0)
		return;
	r->ep.line.test_accuracy = accuracy;
	r->res->epoch_loss = r->ep.line.mean_loss;
	if (r->d->rank == 0) {
		progress_clear(&r->prog);
		report_epoch_line(stdout, &r->ep.line);
		if (r->metrics)
			report_metrics_epoch(r->metrics, &r->ep.line);
	}
	r->ep.epoch = -1;
}

/*
 * The clock stopped, the replicas checked, the final score (reported as the
 * last epoch's when --eval-every asks for it and that epoch ran here), the
 * metrics' last line, and the parameters handed to the caller.
 */
static void run_finish(struct run *r, const struct mnist_set *test)
{
	const struct train_config *c = r->c;
	struct train_result *res = r->res;
	backend_synchronize(r->be);
	res->train_seconds = run_elapsed(r, clock_seconds());
	progress_end(&r->prog);
	res->images = r->images;
	res->graph_nodes = r->launch.graph_nodes;

	backend_download(r->be, r->host_params, r->st.params, r->pbytes);
	res->param_crc = check_replicas(r->d, r->host_params, r->m.n_params);
	if (test) {
		gpu_plan_collective(r->be, r->c, 0);
		res->test_accuracy = train_evaluate(r->d, r->be, &r->m, &r->ws, r->st.params, test,
						    &res->test_images);
		if (eval_due(c, c->epochs - 1) && r->rs.epoch < c->epochs)
			eval_report(r->d, r->metrics, c->epochs - 1, (long long)c->epochs * r->smp.steps,
				    res->test_accuracy, res->test_images, res->train_seconds);
	}
	/* The last epoch's line, after its score when --eval-every asks for one. */
	epoch_report(r, test && eval_due(c, c->epochs - 1) ? res->test_accuracy : NAN);
	if (r->step_secs) /* the metrics' last line */
		report_metrics_step_times(r->metrics, r->step_secs, r->n_timed);
	res->params = r->host_params;
	res->n_params = r->m.n_params;
	r->host_params = NULL;
}

/* --profile's step: a full batch from the start of epoch 0 through profile.c's wrapper. */
static void profiled_step(void *arg, const struct backend *wrapped)
{
	struct step_state s = *(const struct step_state *)arg;
	s.be = wrapped;
	step_ops(&s, s.batch);
}

/*
 * --profile, after everything the run reports (the parameters handed on,
 * the score, the metrics' step times): a step, op by op, from the first
 * batch of epoch 0, timed (profile.c: five runs, medians); rank 0 prints the
 * table and writes op_times.
 */
static void run_profile(struct run *r)
{
	const struct backend *be = r->be;
	const struct step_counters pos0 = {0, 0, 0, 0};
	struct profile prof;
	backend_upload(be, r->st.counters, &pos0, sizeof(pos0));
	struct gather_req first_batch = step_gather(&r->st);
	backend_gather(be, &first_batch);
	gpu_plan_collective(r->be, r->c, 1);
	profile_run(be, profiled_step, &r->st, &prof);
	gpu_plan_collective(r->be, r->c, 0);
	if (r->d->rank == 0) {
		char title[160];
		snprintf(title, sizeof(title), "one step of %s, batch %d%s, on %s",
			 model_kind_name(r->c->model), r->st.batch,
			 r->st.global ? " a micro-batch" : "", be->device);
		profile_print(stdout, &prof, title);
		if (r->metrics)
			profile_metrics(r->metrics, &prof);
	}
	profile_free(&prof);
}

static void run_free(struct run *r)
{
	const struct backend *be = r->be;
	launch_free(&r->launch);
	free(r->step_secs);
	free(r->host_index);
	free(r->host_rows);
	free(r->host_lr);
	free(r->host_state);
	backend_free(be, r->st.params);
	backend_free(be, r->st.grads);
	backend_free(be, r->st.scratch);
	backend_free(be, r->st.fixed);
	optim_destroy(&r->st.opt, be);
	backend_free(be, r->st.index);
	backend_free(be, r->st.counters);
	backend_free(be, r->st.lr);
	device_set_free(be, &r->st.data);
	model_ws_destroy(be, &r->ws);
	sampler_destroy(&r->smp);
}

enum status train_run(const struct train_config *c, const struct dist *d, const struct backend *be,
	      const struct mnist_set *train, const struct mnist_set *test,
	      FILE *metrics, struct train_result *res, char *err, size_t errlen)
{
	struct run r = {.c = c, .d = d, .be = be, .metrics = metrics, .res = res};
	memset(res, 0, sizeof(*res));
	res->test_accuracy = NAN;
	res->epoch_loss = NAN;
	res->first_loss = res->final_loss = NAN; /* until a step trains (none after the last epoch) */

	/* Set-up: the plan, where to start (--resume), memory, the starting state, the clock. */
	if (config_micro_mode(c) && !backend_can_accumulate(be))
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "--micro-batch, --global-batch and --exact: not yet on the %s backend "
				   "(run with --backend host)",
				   strcmp(backend_name(be), "cuda") ? backend_name(be) : "CUDA");
	if (train_plan(c, d, train, &r.smp, &r.sched, err, errlen))
		return STATUS_BAD_INPUT;
	model_init(&r.m, c->model, c->hidden, c->n_hidden);
	enum status rc = resume_prepare(c, d, &r.m, r.smp.n, train->checksum, r.smp.steps, &r.rs,
					err, errlen);
	if (rc) {
		sampler_destroy(&r.smp);
		return rc;
	}
	run_allocate(&r, train);
	run_start_state(&r);
	rc = gpu_plan_restore(be, d, c, c->resume[0] != '\0', r.rs.plan, r.rs.plan_from, err,
			      errlen);
	free(r.rs.plan);
	r.rs.plan = NULL;
	if (rc) {
		run_free(&r);
		return rc;
	}
	run_start_clock(&r);

	/*
	 * The loop: epochs of steps, each step reported and maybe saved; after
	 * each epoch its line, and --eval-every's score.
	 */
	r.ep.epoch = -1;
	for (int epoch = r.rs.epoch; epoch < c->epochs; epoch++) {
		/* A resumed run starts its first epoch at the step after the checkpoint's. */
		int first = epoch == r.rs.epoch ? r.rs.step : 0;
		epoch_tally_start(&r);
		epoch_begin(&r, epoch, first);
		r.unchecked = first;
		for (int step = first, rows; step < r.smp.steps;) {
			step += run_steps(&r, epoch, step, &rows);
			exact_check(&r, epoch, step - 1);
			step_report(&r, epoch, step - 1, rows);
			save_if_due(&r, epoch, step - 1);
			show_progress(&r, epoch, step - 1);
		}
		backend_set_position(r.be, epoch, r.smp.steps); /* the epoch's end */
		epoch_close(&r, epoch);
		/* The last epoch's score and line are the final evaluation's (run_finish). */
		if (epoch < c->epochs - 1)
			epoch_report(&r, test && eval_due(c, epoch) ? eval_pause(&r, test, epoch) : NAN);
	}

	run_finish(&r, test);
	if (c->profile)
		run_profile(&r);
	run_free(&r);
	return STATUS_OK;
}

enum status train_eval_only(struct train_config *c, const struct dist *d, const struct backend *be,
			    const struct mnist_set *test, struct train_result *res, char *err,
			    size_t errlen)
{
	float *loaded = NULL; /* rank 0's copy of the checkpoint's parameters */
	struct model m;
	struct model_ws ws;
	memset(res, 0, sizeof(*res));
	res->test_accuracy = res->first_loss = res->final_loss = res->epoch_loss = NAN;
	enum status rc = resume_eval_prepare(c, d, &loaded, err, errlen);
	if (rc)
		return rc;

	/* The checkpoint's model; its parameters uploaded by rank 0 and broadcast to every replica. */
	model_init(&m, c->model, c->hidden, c->n_hidden);
	backend_set_timeout(be, c->timeout);
	size_t pbytes = m.n_params * sizeof(float);
	float *params = backend_alloc(be, pbytes);
	if (!params || model_ws_create(be, &m, TRAIN_EVAL_ROWS, &ws))
		die(1, "out of %s memory for the model", backend_name(be));
	if (loaded)
		backend_upload(be, params, loaded, pbytes);
	free(loaded);
	backend_broadcast(be, params, m.n_params, 0);
	res->params = xmalloc(pbytes);
	res->n_params = m.n_params;
	backend_synchronize(be);
	backend_download(be, res->params, params, pbytes);
	res->param_crc = check_replicas(d, res->params, m.n_params);

	gpu_plan_collective(be, c, 0);
	res->test_accuracy = train_evaluate(d, be, &m, &ws, params, test, &res->test_images);
	backend_free(be, params);
	model_ws_destroy(be, &ws);
	return STATUS_OK;
}
