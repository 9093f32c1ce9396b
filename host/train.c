/*
 * train.c - the data-parallel training loop. Each step, on every rank:
 *   gather the rank's batch (indices from the sampler, pixels normalised on the fly)
 *   forward, softmax cross-entropy, backward into one flat gradient buffer
 *   one allreduce of that buffer (mean over ranks by default)
 *   SGD update of the flat parameter buffer
 * Everything goes through the backend, so the loop is the same on the host and
 * on a GPU, where the whole step can be captured once and replayed.
 */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "report.h"
#include "sampler.h"

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
	be->ops->upload(be->ctx, out->images, s->images, (size_t)count * IDX_PIXELS);
	be->ops->upload(be->ctx, out->labels, s->labels, (size_t)count);
	return 0;
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
	int32_t *cursor; /* (1) position in index of the next batch */
	float *params, *grads, *velocity; /* (n_params) each */
	float lr, momentum;
	enum reduce_op reduce;
	int ranks;
};

static void step_ops(const struct step_state *s, int rows)
{
	const struct backend *be = s->be;
	be->ops->gather(be->ctx, s->data.images, s->data.labels, IDX_PIXELS, s->index, s->cursor,
			rows, s->ws->act[0], s->ws->labels);
	be->ops->advance(be->ctx, s->cursor, rows);
	model_forward(be, s->m, s->ws, s->params, rows);
	/*
	 * The mean over ranks is folded into the loss gradient's scale, 1/(rows * ranks),
	 * and the ranks' gradients are summed: one bare allreduce, no extra pass over the
	 * gradient buffer to divide it. For a power-of-two rank count the result is
	 * bitwise the same as summing then dividing.
	 */
	int fold = s->reduce == REDUCE_MEAN && s->ranks > 1;
	model_backward_scaled(be, s->m, s->ws, s->params, s->grads, rows,
			      1.0f / ((float)rows * (float)(fold ? s->ranks : 1)));
	be->ops->allreduce(be->ctx, s->grads, s->m->n_params, fold ? REDUCE_SUM : s->reduce);
	be->ops->sgd_update(be->ctx, s->params, s->grads, s->velocity, s->m->n_params, s->lr,
			    s->momentum);
}

/* The mean of this rank's per-example losses of the last step. */
static float step_loss(const struct step_state *s, int rows, float *host_rows)
{
	s->be->ops->download(s->be->ctx, host_rows, s->ws->row_loss, (size_t)rows * sizeof(float));
	double sum = 0.0;
	for (int i = 0; i < rows; i++)
		sum += host_rows[i];
	return (float)(sum / rows);
}

double train_evaluate(const struct dist *d, const struct backend *be, const struct model *m,
		      struct model_ws *ws, const float *params, const struct mnist_set *test)
{
	struct device_set data = {0};
	int shard = test->count > d->rank ? (test->count - d->rank + d->size - 1) / d->size : 0;
	int32_t *host_index = xmalloc((size_t)(shard + 1) * sizeof(int32_t));
	int32_t *host_hits = xmalloc((size_t)ws->max_rows * sizeof(int32_t));
	int32_t *index = backend_alloc(be, (size_t)(shard + 1) * sizeof(int32_t));
	int32_t *cursor = backend_alloc(be, sizeof(int32_t));
	if (!index || !cursor || device_set_upload(be, test, test->count, &data))
		die(1, "out of device memory for the test set (%d examples)", test->count);
	for (int j = 0; j < shard; j++)
		host_index[j] = d->rank + j * d->size;
	be->ops->upload(be->ctx, index, host_index, (size_t)shard * sizeof(int32_t));
	memset(host_hits, 0, (size_t)ws->max_rows * sizeof(int32_t));
	be->ops->upload(be->ctx, ws->hits, host_hits, (size_t)ws->max_rows * sizeof(int32_t));

	for (int done = 0; done < shard; done += ws->max_rows) {
		int rows = shard - done < ws->max_rows ? shard - done : ws->max_rows;
		be->ops->gather(be->ctx, data.images, data.labels, IDX_PIXELS, index, cursor, rows,
				ws->act[0], ws->labels);
		be->ops->advance(be->ctx, cursor, rows);
		model_forward(be, m, ws, params, rows);
		model_score(be, m, ws, rows);
	}
	be->ops->download(be->ctx, host_hits, ws->hits, (size_t)ws->max_rows * sizeof(int32_t));
	long long counts[2] = {0, shard};
	for (int i = 0; i < ws->max_rows; i++)
		counts[0] += host_hits[i];
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_LONG_LONG, MPI_SUM, d->comm));

	backend_free(be, index);
	backend_free(be, cursor);
	device_set_free(be, &data);
	free(host_index);
	free(host_hits);
	return counts[1] ? (double)counts[0] / (double)counts[1] : NAN;
}

int train_validate(const struct train_config *c, const struct dist *d,
		   const struct mnist_set *train, char *err, size_t errlen)
{
	int n = train->count;
	if (c->limit > n) {
		snprintf(err, errlen, "--limit: %ld is more than the %d training images in %s",
			 c->limit, n, c->data_dir);
		return 2;
	}
	if (c->limit > 0)
		n = (int)c->limit;
	struct sampler smp;
	if (sampler_create(&smp, n, d->rank, d->size, c->batch_size, c->drop_last, c->seed, err,
			   errlen))
		return 2;
	sampler_destroy(&smp);
	return 0;
}

/* Steps timed with --metrics: at most this many (the first ones), 4 MiB of floats. */
#define TRAIN_STEP_TIMES_MAX (1 << 20)

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* One JSON line with the step-time distribution (sorts secs). */
static void write_step_times(FILE *f, float *secs, int n)
{
	if (!n)
		return;
	qsort(secs, (size_t)n, sizeof(*secs), cmp_float);
	double sum = 0.0;
	for (int i = 0; i < n; i++)
		sum += secs[i];
	int p95 = (int)(0.95 * (n - 1) + 0.5);
	fprintf(f,
		"{\"event\": \"step_times\", \"steps\": %d, \"median_ms\": %.6f, \"p95_ms\": %.6f, "
		"\"mean_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f}\n",
		n, 1e3 * (n % 2 ? secs[n / 2] : 0.5 * (secs[n / 2 - 1] + secs[n / 2])),
		1e3 * secs[p95], 1e3 * sum / n, 1e3 * secs[0], 1e3 * secs[n - 1]);
}

/* Every replica must hold the same parameters; a difference is a bug worth stopping for. */
static void check_replicas(const struct dist *d, const float *params, size_t n)
{
	uint32_t crc = idx_crc32(0, (const uint8_t *)params, n * sizeof(float));
	unsigned lo = crc, hi = crc;
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED, MPI_MIN, d->comm));
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED, MPI_MAX, d->comm));
	if (lo != hi)
		die(1, "replicas diverged: parameter checksums differ across ranks (%08x vs %08x)", lo, hi);
}

/*
 * The checkpoint and deadline flags must be the same on every rank (an MPMD
 * launch could give them differently): a rank alone in the resume agreement
 * would wait forever. One small allreduce of a CRC of them. 0, or 2 with err.
 */
static int reliability_agree(const struct train_config *c, const struct dist *d, char *err,
			     size_t errlen)
{
	char text[2 * CONFIG_PATH_MAX + 128];
	int len = snprintf(text, sizeof(text), "%s\n%s\n%d\n%d\n%.17g\n%d", c->resume,
			   c->checkpoint_dir, c->save_every, c->keep, c->timeout, c->allow_nonfinite);
	unsigned crc = idx_crc32(0, (const uint8_t *)text, len > 0 ? (size_t)len : 0);
	unsigned lo = crc, hi = crc;
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED, MPI_MIN, d->comm));
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED, MPI_MAX, d->comm));
	if (lo == hi)
		return 0;
	snprintf(err, errlen,
		 "rank %d on %s: --resume, --checkpoint-dir, --save-every, --keep, --timeout and "
		 "--allow-nonfinite differ between ranks (launched with different arguments?); "
		 "give every rank the same",
		 d->rank, d->host);
	return 2;
}

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

/* Where a resumed run starts, and rank 0's copy of the state it starts from. */
struct resume_state {
	int epoch, step;          /* the first step to run */
	float *params, *velocity; /* (n_params) each, rank 0 only; NULL elsewhere */
};

/*
 * --resume: rank 0 finds, validates and reads the checkpoint (a directory's
 * newest valid one, warning about each corrupt one it skips); every rank
 * agrees on the outcome and learns where to continue. The step after the
 * checkpoint's is the same global step whatever the rank count: the sampler
 * position is next_step global batches into the epoch's permutation, and
 * checkpoint_compat has made sure the global batch is the same.
 * Returns 0, or 2 on every rank with err saying why.
 */
static int train_resume(const struct train_config *c, const struct dist *d,
			const struct model *m, const struct checkpoint_info *run,
			struct resume_state *rs, char *err, size_t errlen)
{
	long long pos[2] = {0, 0};
	int rc = 0;
	memset(rs, 0, sizeof(*rs));
	if (d->rank == 0) {
		struct checkpoint_info ck;
		char used[CONFIG_PATH_MAX + 96], why[2048];
		rs->params = xmalloc(m->n_params * sizeof(float));
		rs->velocity = xmalloc(m->n_params * sizeof(float));
		if (checkpoint_resume(c->resume, m, run, &ck, rs->params, rs->velocity, used,
				      sizeof(used), stderr, why, sizeof(why)) != CHECKPOINT_OK) {
			snprintf(err, errlen, "--resume %s: %s", c->resume, why);
			rc = 2;
		} else {
			pos[0] = ck.next_epoch;
			pos[1] = ck.next_step;
			if (c->checkpoint_dir[0])
				warn_newer_checkpoints(c->checkpoint_dir, ck.global_step);
			if (ck.next_epoch >= c->epochs)
				fprintf(stderr,
					"mnist-train: the checkpoint is at the end of --epochs %d: nothing "
					"left to train, only the test set is scored\n",
					c->epochs);
			fprintf(stderr,
				"mnist-train: resuming from %s (after epoch %d step %d, global step %lld); "
				"continuing at epoch %d step %d\n",
				used, ck.epoch, ck.step, ck.global_step, ck.next_epoch, ck.next_step);
			if (ck.ranks != run->ranks)
				fprintf(stderr,
					"mnist-train: the checkpoint was written by %d ranks x batch %d, this run "
					"has %d x %d: the same global batch of %d examples per step, split "
					"differently, so results match a run on %d ranks up to floating-point "
					"rounding, not bitwise\n",
					ck.ranks, ck.batch_size, run->ranks, run->batch_size,
					run->ranks * run->batch_size, ck.ranks);
			fflush(stderr);
		}
	}
	if (dist_agree(d, rc, NULL)) {
		if (d->rank != 0)
			snprintf(err, errlen, "rank %d on %s: stopping because rank 0 could not resume from --resume %s",
				 d->rank, d->host, c->resume);
		free(rs->params);
		free(rs->velocity);
		memset(rs, 0, sizeof(*rs));
		return 2;
	}
	MPI_CHECK(MPI_Bcast(pos, 2, MPI_LONG_LONG, 0, d->comm));
	rs->epoch = (int)pos[0];
	rs->step = (int)pos[1];
	return 0;
}

/*
 * Rank 0 saves a checkpoint after `global_step` steps (atomically) and prunes
 * to --keep. Unless --allow-nonfinite, parameters that are not all finite
 * stop the run here, so no checkpoint ever holds a diverged model. A failed
 * write ends the job: training on without the checkpoints asked for would
 * lose work silently.
 */
static void train_save(const struct train_config *c, const struct dist *d,
		       const struct step_state *st, struct checkpoint_info *info,
		       long long global_step, int steps_per_epoch, float *host_params,
		       float *host_velocity)
{
	const struct backend *be = st->be;
	size_t n = st->m->n_params;
	char path[CONFIG_PATH_MAX + 96], why[2048];
	if (d->rank != 0)
		return;
	be->ops->download(be->ctx, host_params, st->params, n * sizeof(float));
	be->ops->download(be->ctx, host_velocity, st->velocity, n * sizeof(float));
	checkpoint_info_set_position(info, global_step, steps_per_epoch);
	if (!c->allow_nonfinite)
		for (size_t i = 0; i < n; i++)
			if (!isfinite(host_params[i]) || !isfinite(host_velocity[i]))
				die(1, "parameter %zu is not finite after epoch %d step %d: training diverged; "
				       "no checkpoint saved (--allow-nonfinite keeps going)",
				    i, info->epoch, info->step);
	if (checkpoint_save(c->checkpoint_dir, st->m, info, host_params, host_velocity, path,
			    sizeof(path), why, sizeof(why)))
		die(1, "checkpoint not saved: %s", why);
	if (checkpoint_prune(c->checkpoint_dir, global_step, c->keep, why, sizeof(why)) < 0)
		fprintf(stderr, "mnist-train: warning: --keep %d: %s\n", c->keep, why);
	fprintf(stderr, "mnist-train: saved %s\n", path);
	fflush(stderr);
}

int train_run(const struct train_config *c, const struct dist *d, const struct backend *be,
	      const struct mnist_set *train, const struct mnist_set *test,
	      FILE *metrics, struct train_result *res, char *err, size_t errlen)
{
	struct model m;
	struct model_ws ws;
	struct sampler smp;
	struct step_state st = {.be = be, .m = &m, .ws = &ws, .lr = c->lr,
				.momentum = c->momentum, .reduce = c->grad_reduce, .ranks = d->size};
	memset(res, 0, sizeof(*res));
	res->test_accuracy = NAN;

	if (train_validate(c, d, train, err, errlen))
		return 2;
	int n = c->limit > 0 ? (int)c->limit : train->count;
	if (sampler_create(&smp, n, d->rank, d->size, c->batch_size, c->drop_last, c->seed, err,
			   errlen))
		return 2;

	model_init(&m, c->model, c->hidden, c->n_hidden);
	size_t pbytes = m.n_params * sizeof(float);
	struct checkpoint_info ckpt;
	struct resume_state rs = {0};
	checkpoint_info_from_config(&ckpt, c, d->size, n, train->checksum);
	ckpt.steps_per_epoch = smp.steps;
	if (reliability_agree(c, d, err, errlen) ||
	    (c->resume[0] && train_resume(c, d, &m, &ckpt, &rs, err, errlen))) {
		sampler_destroy(&smp);
		return 2;
	}
	backend_set_timeout(be, c->timeout);
	backend_set_position(be, rs.epoch, rs.step);
	int ws_rows = c->batch_size > TRAIN_EVAL_ROWS ? c->batch_size : TRAIN_EVAL_ROWS;
	if (model_ws_create(be, &m, ws_rows, &ws))
		die(1, "out of %s memory for a batch of %d", be->ops->name, ws_rows);
	st.params = backend_alloc(be, pbytes);
	st.grads = backend_alloc(be, pbytes);
	st.velocity = backend_alloc(be, pbytes);
	st.index = backend_alloc(be, (size_t)smp.shard_len * sizeof(int32_t));
	st.cursor = backend_alloc(be, sizeof(int32_t));
	if (!st.params || !st.grads || !st.velocity || !st.index || !st.cursor ||
	    device_set_upload(be, train, n, &st.data))
		die(1, "out of %s memory for the model and the training set", be->ops->name);

	/* Rank 0's initial parameters, broadcast so every replica starts identical. */
	float *host_params = xmalloc(pbytes);
	/* Touched here, so that the first epoch's shuffle does not pay the page faults. */
	int32_t *host_index = xmalloc((size_t)smp.shard_len * sizeof(int32_t));
	memset(host_index, 0, (size_t)smp.shard_len * sizeof(int32_t));
	float *host_rows = xmalloc((size_t)c->batch_size * sizeof(float));
	model_init_params(&m, c->seed, host_params);
	be->ops->upload(be->ctx, st.params, rs.params ? rs.params : host_params, pbytes);
	be->ops->broadcast(be->ctx, st.params, m.n_params, 0);
	if (c->resume[0]) {
		/* The optimizer state too: every replica holds the same velocity. */
		if (rs.velocity)
			be->ops->upload(be->ctx, st.velocity, rs.velocity, pbytes);
		be->ops->broadcast(be->ctx, st.velocity, m.n_params, 0);
	}
	float *host_velocity = c->checkpoint_dir[0] && d->rank == 0 ? xmalloc(pbytes) : NULL;
	free(rs.params);
	free(rs.velocity);

	struct progress prog;
	progress_start(&prog, d->rank == 0);
	void *graph = NULL;
	int capture = c->use_graph && backend_can_capture(be);
	long long images = 0;
	res->steps_per_epoch = smp.steps;
	/*
	 * With --metrics (rank 0), each step's wall time, the backend synchronized at
	 * its end, into a buffer allocated here: the step itself allocates nothing.
	 */
	long long max_steps = (long long)c->epochs * smp.steps;
	int n_timed = 0, max_timed = max_steps < TRAIN_STEP_TIMES_MAX ? (int)max_steps : TRAIN_STEP_TIMES_MAX;
	float *step_secs = metrics ? xmalloc((size_t)max_timed * sizeof(float)) : NULL;

	backend_synchronize(be);
	MPI_CHECK(MPI_Barrier(d->comm));
	double t0 = report_now();
	for (int epoch = rs.epoch; epoch < c->epochs; epoch++) {
		/* A resumed run starts its first epoch at the step after the checkpoint's. */
		int first = epoch == rs.epoch ? rs.step : 0;
		const int32_t cursor0 = (int32_t)first * c->batch_size;
		sampler_epoch(&smp, epoch, host_index);
		be->ops->upload(be->ctx, st.index, host_index, (size_t)smp.shard_len * sizeof(int32_t));
		be->ops->upload(be->ctx, st.cursor, &cursor0, sizeof(cursor0));
		for (int step = first; step < smp.steps; step++) {
			double t_step = step_secs ? report_now() : 0.0;
			int rows = sampler_batch_rows(&smp, step);
			backend_set_position(be, epoch, step);
			if (capture && rows == c->batch_size && !graph) {
				/* Record the step once; capture only records, nothing runs yet. */
				if (be->ops->capture_begin(be->ctx) == 0) {
					step_ops(&st, rows);
					graph = be->ops->capture_end(be->ctx);
				}
				if (!graph)
					capture = 0; /* plain launches from now on */
			}
			if (graph && rows == c->batch_size)
				be->ops->replay(be->ctx, graph);
			else
				step_ops(&st, rows);
			images += (long long)rows * d->size;
			if (step_secs && n_timed < max_timed) {
				backend_synchronize(be);
				step_secs[n_timed++] = (float)(report_now() - t_step);
			}

			int last = epoch == c->epochs - 1 && step == smp.steps - 1;
			if (step % c->log_every == 0 || last) {
				float loss = step_loss(&st, rows, host_rows);
				if (epoch == 0 && step == 0)
					res->first_loss = loss;
				res->final_loss = loss;
				if (step % c->log_every == 0)
					report_loss_line(stdout, epoch, step, loss);
				if (metrics) {
					double el = report_now() - t0;
					fprintf(metrics,
						"{\"epoch\": %d, \"step\": %d, \"global_step\": %lld, \"loss\": %.8g, "
						"\"images_per_second\": %.1f, \"elapsed\": %.6f}\n",
						epoch, step, (long long)epoch * smp.steps + step, (double)loss,
						el > 0 ? (double)images / el : 0.0, el);
				}
				/*
				 * Non-finite loss: checked where the loss is downloaded anyway (logging
				 * steps and the last step), so the step itself stays free of host
				 * syncs; train_save checks the parameters before every checkpoint.
				 */
				if (!isfinite(loss) && !c->allow_nonfinite)
					die(1, "loss is %s at epoch %d step %d: training diverged; stopping "
					       "(--allow-nonfinite keeps going)",
					    isnan(loss) ? "nan" : "inf", epoch, step);
			}
			long long done = (long long)epoch * smp.steps + step + 1;
			if (c->checkpoint_dir[0] &&
			    (step == smp.steps - 1 || (c->save_every > 0 && done % c->save_every == 0)))
				train_save(c, d, &st, &ckpt, done, smp.steps, host_params, host_velocity);
			if (prog.tty) {
				double now = report_now();
				progress_update(&prog, epoch, c->epochs, step, smp.steps,
						now > t0 ? (double)images / (now - t0) : 0.0, now);
			}
		}
	}
	backend_synchronize(be);
	res->train_seconds = report_now() - t0;
	progress_end(&prog);
	res->images = images;
	if (step_secs) {
		write_step_times(metrics, step_secs, n_timed);
		free(step_secs);
	}

	be->ops->download(be->ctx, host_params, st.params, pbytes);
	check_replicas(d, host_params, m.n_params);
	if (test)
		res->test_accuracy = train_evaluate(d, be, &m, &ws, st.params, test);
	res->params = host_params;
	res->n_params = m.n_params;

	if (graph)
		be->ops->graph_destroy(be->ctx, graph);
	free(host_index);
	free(host_rows);
	free(host_velocity);
	backend_free(be, st.params);
	backend_free(be, st.grads);
	backend_free(be, st.velocity);
	backend_free(be, st.index);
	backend_free(be, st.cursor);
	device_set_free(be, &st.data);
	model_ws_destroy(be, &ws);
	sampler_destroy(&smp);
	return 0;
}
