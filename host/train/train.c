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
 */
#include "train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "io/crc32.h"
#include "io/plan_json.h"
#include "io/report.h"
#include "train/optim.h"
#include "train/profile.h"
#include "train/resume.h"
#include "train/sampler.h"
#include "train/schedule.h"

/* Rows per evaluation batch (the workspace holds at least this many). */
#define TRAIN_EVAL_ROWS 500

/* Backend copies of one split. */
struct device_set {
	uint8_t *images; /* (count, 784) */
	uint8_t *labels; /* (count) */
	int count;
};

static int device_set_upload(const struct backend *be, const struct mnist_set *s, int count,
			     struct device_set *out)
{
	out->count = count;
	out->images = backend_alloc(be, (size_t)count * IDX_PIXELS);
	out->labels = backend_alloc(be, (size_t)count);
	if (!out->images || !out->labels)
		return -1;
	backend_upload(be, out->images, s->images, (size_t)count * IDX_PIXELS);
	backend_upload(be, out->labels, s->labels, (size_t)count);
	return STATUS_OK;
}

static void device_set_free(const struct backend *be, struct device_set *s)
{
	backend_free(be, s->images);
	backend_free(be, s->labels);
	memset(s, 0, sizeof(*s));
}

/* Everything one step reads and writes, in backend memory. */
struct step_state {
	const struct backend *be;
	const struct model *m;
	struct model_ws *ws;
	struct device_set data;
	int32_t *index;  /* (shard_len) this rank's examples of the epoch */
	int index_len;
	int batch;       /* rows of a full batch */
	struct step_counters *counters; /* (1) the step's position (backend.h) */
	float *lr;       /* (steps_per_epoch) the epoch's learning rates (train/schedule.h) */
	float *params, *grads; /* (n_params) each */
	struct optim opt;      /* its state, and which update */
	enum reduce_op reduce;
	int ranks;
};

/* The gather of the batch at the counters' cursor into the model's input. */
static struct gather_req batch_gather(const struct step_state *s)
{
	struct gather_req g = {.images = s->data.images, .labels = s->data.labels,
			       .pixels = IDX_PIXELS, .index = s->index, .len = s->index_len,
			       .cursor = &s->counters->cursor, .count = s->batch,
			       .batch_last = s->ws->plan.input_batch_last, .x = s->ws->act[0],
			       .y = s->ws->labels};
	return g;
}

/*
 * One step on the batch already gathered into the model's input (by the
 * epoch's first gather, or by the step before). The loss op moves the
 * counters on; the optimizer's update is followed, in the same op, by the
 * next batch's gather, so that a captured step holds no launch of its own
 * for the data.
 */
static void step_ops(const struct step_state *s, int rows)
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
	backend_label(be, "", "optimizer");
	struct gather_req next = batch_gather(s);
	optim_update(be, &s->opt, s->params, s->grads, s->lr, s->counters, &next);
}

/* The mean of this rank's per-example losses of the last step. */
static float step_loss(const struct step_state *s, int rows, float *host_rows)
{
	backend_download(s->be, host_rows, s->ws->row_loss, (size_t)rows * sizeof(float));
	double sum = 0.0;
	for (int i = 0; i < rows; i++)
		sum += host_rows[i];
	return (float)(sum / rows);
}

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
	if (sampler_create(smp, n, d->rank, d->size, c->batch_size, c->drop_last, c->seed, err,
			   errlen))
		return STATUS_BAD_INPUT;
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
	/* graphs[n]: n steps captured as one graph, once recorded (--graph-steps, run_steps). */
	void *graphs[CONFIG_GRAPH_STEPS_MAX + 1];
	int capture;  /* whether to try */
	int log_steps; /* the steps some rank reports at are its multiples (run_log_steps) */
	int planned;  /* a full step ran uncaptured: the backend's plan for it is made */
	long long images;
	double t0, paused; /* the training clock's start; seconds of --eval-every scoring */
	float *step_secs;  /* --metrics: the first steps' wall times */
	int n_timed, max_timed;
};

/*
 * Whether the backend's new problems are planned by every rank together
 * (rank 0 measures, all take its choice): during training, where every rank
 * meets a step's ops in the same order; not while scoring the test set, whose
 * batches differ between ranks.
 */
static void plan_collective(const struct run *r, int on)
{
	backend_plan_mode(r->be, (enum plan_policy)r->c->gpu_plan, on);
}

/* Backend memory for the model, its workspace, the step and the training set. */
static void run_allocate(struct run *r, const struct mnist_set *train)
{
	const struct train_config *c = r->c;
	const struct backend *be = r->be;
	struct step_state *st = &r->st;
	backend_set_timeout(be, c->timeout);
	backend_set_position(be, r->rs.epoch, r->rs.step);
	int ws_rows = c->batch_size > TRAIN_EVAL_ROWS ? c->batch_size : TRAIN_EVAL_ROWS;
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
	st->batch = c->batch_size;
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
	r->host_rows = xmalloc((size_t)c->batch_size * sizeof(float));
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
	progress_start(&r->prog, r->d->rank == 0);
	r->capture = r->c->use_graph && backend_can_capture(r->be);
	r->res->steps_per_epoch = r->smp.steps;
	long long max_steps = (long long)r->c->epochs * r->smp.steps;
	r->max_timed = max_steps < TRAIN_STEP_TIMES_MAX ? (int)max_steps : TRAIN_STEP_TIMES_MAX;
	r->step_secs = r->metrics ? xmalloc((size_t)r->max_timed * sizeof(float)) : NULL;
	backend_synchronize(r->be); /* the start state's broadcast done before the host's collectives */
	r->log_steps = run_log_steps(r);
	dist_barrier(r->d, "start of training");
	plan_collective(r, 1);
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
	const struct step_counters pos0 = {(int32_t)first * r->c->batch_size, (int32_t)first,
					   (int32_t)((long long)epoch * r->smp.steps + first), 0};
	sampler_epoch(&r->smp, epoch, r->host_index);
	schedule_fill(&r->sched, (long long)epoch * r->smp.steps, r->smp.steps, r->host_lr);
	backend_upload(be, r->st.index, r->host_index, (size_t)r->smp.shard_len * sizeof(int32_t));
	backend_upload(be, r->st.lr, r->host_lr, (size_t)r->smp.steps * sizeof(float));
	backend_upload(be, r->st.counters, &pos0, sizeof(pos0));
	/* The epoch's first batch; each step gathers the next one. */
	struct gather_req first_batch = batch_gather(&r->st);
	backend_gather(be, &first_batch);
}

/*
 * --resume: the checkpoint's plan (checked when it was read), so that every
 * op runs as it did before the checkpoint and the resumed run is bitwise the
 * one saved. --gpu-plan-from: the plan of an earlier run's --metrics file, so
 * that runs compared on it differ only in what they change. A plan for
 * another GPU or library, on any rank, is set aside on every rank (the
 * backend decides, collectively): the ops are planned anew, and rank 0 says
 * so. Each op the plan names reports that plan as its source.
 */
static void plan_restore(struct run *r)
{
	struct plan_info p;
	char why[512];
	int resumed = r->c->resume[0] != '\0';
	const char *whose = resumed ? "the checkpoint's GPU plan" : "the --gpu-plan-from plan";
	if (!r->rs.run.gpu_plan[0] || !backend_has_plan(r->be))
		return;
	if (plan_json_parse(r->rs.run.gpu_plan, &p, why, sizeof(why)))
		die(2, "%s: %s", whose, why); /* checked on reading */
	for (int i = 0; i < p.n_ops; i++)
		snprintf(p.ops[i].source, sizeof(p.ops[i].source), "%s",
			 resumed ? "checkpoint" : "gpu-plan-from");
	if (backend_plan_set(r->be, &p, why, sizeof(why)) && r->d->rank == 0)
		fprintf(stderr, "mnist-train: %s does not fit here (%s): measuring a new plan%s\n", whose,
			why, resumed ? "; the resumed run is not bitwise the one saved" : "");
	plan_json_free(&p);
}

/* The plan so far, as checkpoints keep it (the ways chosen, not the candidates weighed). */
static void plan_keep(struct run *r)
{
	struct plan_info p;
	if (!backend_has_plan(r->be))
		return;
	backend_plan_get(r->be, &p);
	char *kept = plan_json_dump(&p, 0, NULL);
	if (strlen(kept) < sizeof(r->rs.run.gpu_plan)) {
		snprintf(r->rs.run.gpu_plan, sizeof(r->rs.run.gpu_plan), "%s", kept);
	} else {
		r->rs.run.gpu_plan[0] = '\0';
		if (r->d->rank == 0)
			fprintf(stderr,
				"mnist-train: warning: the GPU plan (%zu bytes) does not fit a "
				"checkpoint's %d: a resumed run will plan anew\n",
				strlen(kept), CHECKPOINT_PLAN_MAX);
	}
	free(kept);
}

/*
 * After the first full step, on rank 0: the plan it made, reported: the
 * --metrics record {"event": "gpu_plan", ...} and, with --verbose, the table.
 */
static void plan_publish(struct run *r)
{
	struct plan_info p;
	if (!backend_has_plan(r->be) || r->d->rank != 0)
		return;
	backend_plan_get(r->be, &p);
	if (r->metrics) {
		char *record = plan_json_dump(&p, 1, "gpu_plan");
		fprintf(r->metrics, "%s\n", record);
		fflush(r->metrics);
		free(record);
	}
	if (r->c->verbose)
		plan_print_table(stderr, &p);
}

/*
 * Whether the host needs the step's end before the next step starts: to read
 * its loss (step_report, on this rank or another), to save a checkpoint
 * (save_if_due) or to end the epoch. The same on every rank (run_log_steps;
 * --save-every and --checkpoint-dir agree), so every rank launches the same
 * groups and meets each graph's capture, a collective, with the others.
 */
static int step_needs_host(const struct run *r, int epoch, int step)
{
	long long done = (long long)epoch * r->smp.steps + step + 1;
	return step == r->smp.steps - 1 || step % r->log_steps == 0 || resume_save_due(&r->rs, done);
}

/*
 * The steps one launch runs from `step`: once the step is captured, as many
 * full steps as --graph-steps allows that the host need not see end (the
 * last of them may need it), rounded down to a length that is captured: a
 * power of two or --graph-steps itself, so that a run records few graphs
 * (--log-every 10, --graph-steps 8: groups of 8 and 2). Otherwise one.
 */
static int group_length(const struct run *r, int epoch, int step)
{
	int most = r->c->graph_steps, n = 1;
	if (!r->capture || !r->planned)
		return 1;
	while (n < most && step + n < r->smp.steps && !step_needs_host(r, epoch, step + n - 1) &&
	       sampler_batch_rows(&r->smp, step + n) == r->c->batch_size)
		n++;
	if (n == most)
		return n;
	int p = 1;
	while (p * 2 <= n)
		p *= 2;
	return p;
}

/*
 * The graph of n steps, recorded at its first use, or NULL when capture
 * failed: plain launches from then on. Capture only records, nothing runs;
 * it starts on an idle stream, the steps queued before it complete (a rank
 * meets the capture's agreement with no collective of its own pending). The
 * first recording also records one step alone, whose nodes the summary's
 * graph_nodes counts (a graph of n steps may hold more than n steps' nodes).
 */
static void *group_graph(struct run *r, int n)
{
	const struct backend *be = r->be;
	if (r->graphs[n] || !r->capture)
		return r->graphs[n];
	if (n > 1 && !group_graph(r, 1))
		return NULL;
	backend_synchronize(be);
	if (backend_capture_begin(be) == 0) {
		for (int i = 0; i < n; i++)
			step_ops(&r->st, r->c->batch_size);
		r->graphs[n] = backend_capture_end(be);
		if (n == 1 && r->graphs[1])
			r->res->graph_nodes = (long long)backend_graph_nodes(be, r->graphs[1]);
	}
	if (!r->graphs[n])
		r->capture = 0;
	return r->graphs[n];
}

/*
 * One launch's steps from `step`: a group of full steps replayed from its
 * graph (group_length), else one step launched op by op. The first full
 * step runs uncaptured, so that its plan can be measured (plan_collective).
 * With --metrics, rank 0 waits for the group's end and each of its steps is
 * timed as the group's wall time over its steps. Returns the steps run;
 * *rows: the rows of the last.
 */
static int run_steps(struct run *r, int epoch, int step, int *rows)
{
	const struct backend *be = r->be;
	double t_start = r->step_secs ? clock_seconds() : 0.0;
	*rows = sampler_batch_rows(&r->smp, step);
	int full = *rows == r->c->batch_size;
	int n = full ? group_length(r, epoch, step) : 1;
	backend_set_position(be, epoch, step);
	void *graph = full && r->planned ? group_graph(r, n) : NULL;
	if (graph)
		backend_replay(be, graph);
	else
		for (int i = 0; i < n; i++)
			step_ops(&r->st, *rows);
	if (full && !r->planned) {
		r->planned = 1;
		plan_publish(r);
	}
	r->images += (long long)*rows * r->d->size * n;
	if (r->step_secs && r->n_timed < r->max_timed) {
		backend_synchronize(be);
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
	if (step % c->log_every == 0)
		report_loss_line(stdout, epoch, step, loss);
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

/* Rank 0: a checkpoint after this step when one is due (train/resume.h). */
static void save_if_due(struct run *r, int epoch, int step)
{
	long long done = (long long)epoch * r->smp.steps + step + 1;
	if (r->d->rank != 0 || !resume_save_due(&r->rs, done))
		return;
	backend_download(r->be, r->host_params, r->st.params, r->pbytes);
	backend_download(r->be, r->host_state, r->st.opt.state, r->state_bytes);
	plan_keep(r); /* every problem met so far, the epoch's short last batch's too */
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

/* --eval-every: score the test set after `epoch`, off the training clock. */
static void eval_pause(struct run *r, const struct mnist_set *test, int epoch)
{
	backend_synchronize(r->be);
	double t_eval = clock_seconds();
	long long scored = 0;
	plan_collective(r, 0);
	double acc = train_evaluate(r->d, r->be, &r->m, &r->ws, r->st.params, test, &scored);
	plan_collective(r, 1);
	double now = clock_seconds();
	eval_report(r->d, r->metrics, epoch, (long long)(epoch + 1) * r->smp.steps, acc, scored,
		    run_elapsed(r, t_eval));
	r->paused += now - t_eval;
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

	backend_download(r->be, r->host_params, r->st.params, r->pbytes);
	res->param_crc = check_replicas(r->d, r->host_params, r->m.n_params);
	if (test) {
		plan_collective(r, 0);
		res->test_accuracy = train_evaluate(r->d, r->be, &r->m, &r->ws, r->st.params, test,
						    &res->test_images);
		if (eval_due(c, c->epochs - 1) && r->rs.epoch < c->epochs)
			eval_report(r->d, r->metrics, c->epochs - 1, (long long)c->epochs * r->smp.steps,
				    res->test_accuracy, res->test_images, res->train_seconds);
	}
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
	struct gather_req first_batch = batch_gather(&r->st);
	backend_gather(be, &first_batch);
	plan_collective(r, 1);
	profile_run(be, profiled_step, &r->st, &prof);
	plan_collective(r, 0);
	if (r->d->rank == 0) {
		char title[160];
		snprintf(title, sizeof(title), "one step of %s, batch %d, on %s", model_kind_name(r->c->model),
			 r->c->batch_size, be->device);
		profile_print(stdout, &prof, title);
		if (r->metrics)
			profile_metrics(r->metrics, &prof);
	}
	profile_free(&prof);
}

static void run_free(struct run *r)
{
	const struct backend *be = r->be;
	for (int n = 1; n <= CONFIG_GRAPH_STEPS_MAX; n++)
		if (r->graphs[n])
			backend_graph_destroy(be, r->graphs[n]);
	free(r->step_secs);
	free(r->host_index);
	free(r->host_rows);
	free(r->host_lr);
	free(r->host_state);
	backend_free(be, r->st.params);
	backend_free(be, r->st.grads);
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

	/* Set-up: the plan, where to start (--resume), memory, the starting state, the clock. */
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
	plan_restore(&r);
	run_start_clock(&r);

	/* The loop: epochs of steps, each step reported and maybe saved; --eval-every between epochs. */
	for (int epoch = r.rs.epoch; epoch < c->epochs; epoch++) {
		/* A resumed run starts its first epoch at the step after the checkpoint's. */
		int first = epoch == r.rs.epoch ? r.rs.step : 0;
		epoch_begin(&r, epoch, first);
		for (int step = first, rows; step < r.smp.steps;) {
			step += run_steps(&r, epoch, step, &rows);
			step_report(&r, epoch, step - 1, rows);
			save_if_due(&r, epoch, step - 1);
			show_progress(&r, epoch, step - 1);
		}
		backend_set_position(r.be, epoch, r.smp.steps); /* the epoch's end */
		/* The last epoch's score is the final evaluation's (run_finish). */
		if (test && eval_due(c, epoch) && epoch < c->epochs - 1)
			eval_pause(&r, test, epoch);
	}

	run_finish(&r, test);
	if (c->profile)
		run_profile(&r);
	run_free(&r);
	return STATUS_OK;
}
