/*
 * gpu_train_step.c - the trainer's own loop (host/train/train.c, train_run)
 * on the CUDA backend across ranks, with and without graph capture, against
 * the host backend (ctest label gpu; 2 ranks, one GPU each).
 *
 *   mpirun -n 2 build/tests/gpu_train_step [--self-test]
 *
 * train_run is the production path, step for step: rank 0's parameters
 * broadcast; every full batch replayed from a graph captured once (or
 * launched op by op, as --no-graph does); the mean over ranks folded into the
 * loss gradient's scale, 1/(rows * ranks), and a REDUCE_SUM allreduce; the
 * short last batch of each epoch run uncaptured between replays; the replica
 * check and the evaluation at the end. Synthetic MNIST-shaped data
 * (gpu_train.h): 1000 training images, so on 2 ranks each epoch has 16 steps
 * and its last batch 20 rows; 200 test images.
 *
 * For each case (the linear model and an MLP with --grad-reduce mean, the MLP
 * with sum), three runs from one seed: cuda with capture, cuda without, host.
 * - capture changes nothing: the graph and plain runs must end with the same
 *   parameters (bit for bit expected, normalised error 1e-6 required), the
 *   same last loss and the same test accuracy;
 * - the device agrees with the host: final parameters within a normalised
 *   error of 1e-4 for the linear model and 2e-1 for the MLP (ReLU kinks
 *   amplify rounding differences, as in gpu_train_parity), test accuracy
 *   within 0.05;
 * - every rank ends with the same parameters (train_run checks it, fatally);
 * - every rank runs each op the way rank 0 chose (the CUDA backend's plan,
 *   measured by default: rank 0 times the candidates in the first full step
 *   and broadcasts its choice): each rank's ->plan_text against rank 0's, op
 *   by op, and rank 0's choice the fastest of its own timed candidates (its
 *   record holds each candidate's time). At least one op must be chosen
 *   otherwise than the first candidate (the heuristic's) on the simulator,
 *   whose time model gives such ops, else a rank left on the heuristic's ways
 *   would pass unseen; on a GPU that is the measurement's to say, and noted.
 * --self-test: a second host backend as the device (capture then unused).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "gpu_common.h"
#include "gpu_train.h"
#include "io/idx.h"
#include "plan_json.h"
#include "train/train.h"

struct step_case {
	const char *name;
	enum model_kind model;
	enum grad_reduce reduce;
	double param_limit; /* device vs host, normalised error */
};

static void run(struct gpu_test *t, const struct backend *be, const struct train_config *c,
		const struct mnist_set *train, const struct mnist_set *test, struct train_result *res)
{
	char err[512];
	if (train_run(c, &t->d, be, train, test, NULL, res, err, sizeof(err)) != STATUS_OK)
		die(1, "gpu_train_step: train_run on the %s backend: %s", backend_name(be), err);
}

static void step_case(struct gpu_test *t, const struct step_case *sc, const struct mnist_set *train,
		      const struct mnist_set *test)
{
	struct train_config c;
	struct train_result graph, plain, host;
	config_defaults(&c);
	c.model = sc->model;
	c.hidden[0] = 64;
	c.n_hidden = sc->model == MODEL_MLP ? 1 : 0;
	c.epochs = 2;
	c.batch_size = 32;
	c.lr = 0.05f;
	c.momentum = 0.9f;
	c.seed = t->seed;
	c.log_every = 8;
	c.grad_reduce = sc->reduce;
	c.timeout = 60.0;

	c.use_graph = 1;
	run(t, &t->dev, &c, train, test, &graph);
	c.use_graph = 0;
	run(t, &t->dev, &c, train, test, &plain);
	run(t, &t->host, &c, train, test, &host);

	size_t n = graph.n_params;
	double e = gpu_norm_err(graph.params, plain.params, n, NULL);
	gpu_test_check(t, e <= 1e-6 && graph.final_loss == plain.final_loss &&
				  graph.test_accuracy == plain.test_accuracy,
		       "%s: captured vs plain on %s, %d steps per epoch: %zu of %zu parameters differ in "
		       "any bit (normalised error %.3g), last loss %.8g vs %.8g, accuracy %.4f vs %.4f",
		       sc->name, backend_name(&t->dev), graph.steps_per_epoch,
		       gpu_count_diff(graph.params, plain.params, n), n, e, (double)graph.final_loss,
		       (double)plain.final_loss, graph.test_accuracy, plain.test_accuracy);
	e = gpu_norm_err(graph.params, host.params, n, NULL);
	gpu_test_check(t, e <= sc->param_limit && fabs(graph.test_accuracy - host.test_accuracy) <= 0.05,
		       "%s: %s vs host: final parameters' normalised error %.3g (limit %.0e), last "
		       "loss %.7g vs %.7g, accuracy %.4f vs %.4f",
		       sc->name, backend_name(&t->dev), e, sc->param_limit, (double)graph.final_loss,
		       (double)host.final_loss, graph.test_accuracy, host.test_accuracy);
	free(graph.params);
	free(plain.params);
	free(host.params);
}

/*
 * The plans of every rank against rank 0's (rank 0's record broadcast), for
 * each op rank 0 measured: the same way on every rank, and on rank 0 the
 * fastest of its timed candidates (ties to the first, as plan_choose keeps
 * them). Then at least one of those ops chosen past its first candidate
 * where the device is the simulator's (tests/cudasim, its name says so).
 */
static void plan_agreed(struct gpu_test *t, const char *name)
{
	char why[256];
	struct plan_info mine, zero;
	if (!backend_has_plan(&t->dev))
		return;
	char *text = backend_plan_text(&t->dev, PLAN_RECORD);
	unsigned long long len = t->d.rank == 0 ? strlen(text) + 1 : 0;
	dist_bcast(&t->d, &len, sizeof(len), 0, "the plan's length");
	char *text0 = xmalloc(len);
	if (t->d.rank == 0)
		memcpy(text0, text, len);
	dist_bcast(&t->d, text0, len, 0, "rank 0's plan");
	if (plan_json_parse(text, &mine, why, sizeof(why)) ||
	    plan_json_parse(text0, &zero, why, sizeof(why)))
		die(1, "gpu_train_step: a plan does not read back: %s", why);
	int measured = 0, departed = 0;
	for (int i = 0; i < zero.n_ops; i++) {
		const struct plan_op *z = &zero.ops[i], *m = NULL;
		if (strcmp(z->source, "measured"))
			continue;
		measured++;
		for (int j = 0; j < mine.n_ops && !m; j++)
			if (!strcmp(mine.ops[j].key, z->key))
				m = &mine.ops[j];
		gpu_test_check(t, m && !strcmp(m->chosen, z->chosen),
			       "%s: rank %d runs %s %s as %s, rank 0 chose %s", name, t->d.rank, z->op,
			       z->shape, m ? m->chosen : "(not met)", z->chosen);
		if (t->d.rank != 0 || z->n_candidates < 2)
			continue;
		const struct plan_candidate *best = NULL, *chosen = NULL;
		for (int j = 0; j < z->n_candidates; j++) {
			const struct plan_candidate *cd = &z->cand[j];
			if (cd->us >= 0.0 && (!best || cd->us < best->us))
				best = cd;
			if (!strcmp(cd->name, z->chosen))
				chosen = cd;
		}
		gpu_test_check(t, best && chosen == best,
			       "%s: rank 0 chose %s %s as %s (%.2f us), the fastest of its %d timed "
			       "candidates is %s (%.2f us)",
			       name, z->op, z->shape, z->chosen, chosen ? chosen->us : -1.0,
			       z->n_candidates, best ? best->name : "none", best ? best->us : -1.0);
		departed += strcmp(z->chosen, z->cand[0].name) != 0;
	}
	dist_bcast(&t->d, &departed, sizeof(departed), 0, "the ops chosen past the first");
	if (t->d.rank == 0)
		printf("# %s: %d ops measured by rank 0, %d of them chosen past the first candidate, "
		       "on %s\n",
		       name, measured, departed, zero.device);
	if (strstr(zero.device, "cudasim"))
		gpu_test_check(t, departed > 0,
			       "%s: no op chosen past its first candidate on the simulator, so a rank "
			       "left on the heuristic's ways would not show",
			       name);
	plan_json_free(&mine);
	plan_json_free(&zero);
	free(text0);
	free(text);
}

/* Images [first, first + count) of gpu_data as a data set (gpu_data keeps the buffers). */
static struct mnist_set as_set(const struct gpu_data *g, int first, int count)
{
	struct mnist_set s;
	memset(&s, 0, sizeof(s));
	s.count = count;
	s.images = g->images + (size_t)first * IDX_PIXELS;
	s.labels = g->labels + first;
	return s;
}

int main(int argc, char **argv)
{
	struct gpu_test t;
	struct gpu_data g;
	const struct step_case cases[] = {
		{"linear, mean", MODEL_LINEAR, GRAD_REDUCE_MEAN, 1e-4},
		{"mlp 784-64-10, mean", MODEL_MLP, GRAD_REDUCE_MEAN, 2e-1},
		{"mlp 784-64-10, sum", MODEL_MLP, GRAD_REDUCE_SUM, 2e-1},
	};

	gpu_test_init(&t, "gpu_train_step", 2024, NULL, &argc, &argv);
	gpu_test_start(&t);
	if (t.d.size < 2 && t.d.rank == 0)
		printf("# note: one rank only; start with mpirun -n 2 or more for the collectives\n");
	/* One draw, so that the test images come from the training images' classes. */
	gpu_data_make(&g, t.seed, 1200, 1, 1);
	struct mnist_set train = as_set(&g, 0, 1000), test = as_set(&g, 1000, 200);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		step_case(&t, &cases[i], &train, &test);
	/* Every case's problems, each planned once, in the first run that met it. */
	plan_agreed(&t, "the plan");
	gpu_data_free(&g);
	return gpu_test_finish(&t);
}
