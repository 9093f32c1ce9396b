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
 * - every rank ends with the same parameters (train_run checks it, fatally).
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
	gpu_data_free(&g);
	return gpu_test_finish(&t);
}
