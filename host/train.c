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
};

static void step_ops(const struct step_state *s, int rows)
{
	const struct backend *be = s->be;
	be->ops->gather(be->ctx, s->data.images, s->data.labels, IDX_PIXELS, s->index, s->cursor,
			rows, s->ws->act[0], s->ws->labels);
	be->ops->advance(be->ctx, s->cursor, rows);
	model_forward(be, s->m, s->ws, s->params, rows);
	model_backward(be, s->m, s->ws, s->params, s->grads, rows);
	be->ops->allreduce(be->ctx, s->grads, s->m->n_params, s->reduce);
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

int train_run(const struct train_config *c, const struct dist *d, const struct backend *be,
	      const struct mnist_set *train, const struct mnist_set *test,
	      FILE *metrics, struct train_result *res, char *err, size_t errlen)
{
	struct model m;
	struct model_ws ws;
	struct sampler smp;
	struct step_state st = {.be = be, .m = &m, .ws = &ws, .lr = c->lr,
				.momentum = c->momentum, .reduce = c->grad_reduce};
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
	int32_t *host_index = xmalloc((size_t)smp.shard_len * sizeof(int32_t));
	float *host_rows = xmalloc((size_t)c->batch_size * sizeof(float));
	model_init_params(&m, c->seed, host_params);
	be->ops->upload(be->ctx, st.params, host_params, pbytes);
	be->ops->broadcast(be->ctx, st.params, m.n_params, 0);

	struct progress prog;
	progress_start(&prog, d->rank == 0);
	void *graph = NULL;
	int capture = c->use_graph && backend_can_capture(be);
	const int zero = 0;
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
	for (int epoch = 0; epoch < c->epochs; epoch++) {
		sampler_epoch(&smp, epoch, host_index);
		be->ops->upload(be->ctx, st.index, host_index, (size_t)smp.shard_len * sizeof(int32_t));
		be->ops->upload(be->ctx, st.cursor, &zero, sizeof(zero));
		for (int step = 0; step < smp.steps; step++) {
			double t_step = step_secs ? report_now() : 0.0;
			int rows = sampler_batch_rows(&smp, step);
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
			}
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
