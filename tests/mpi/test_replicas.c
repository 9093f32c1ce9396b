/*
 * test_replicas.c - after training, every rank holds the same parameters.
 *
 *   mpirun -n 3 build/test_replicas MNIST_Data/train     (ctest runs it with 3 ranks)
 *
 * Runs the cases data-parallel equivalence cannot cover (it needs limits that
 * divide evenly): an odd rank count, a limit that leaves short shards padded
 * by wrap-around and a partial last batch, --drop-last, an mlp with momentum,
 * and a start where each rank is handed a different seed, so the replicas only
 * start equal if rank 0's initial parameters are broadcast. After each run,
 * every rank's CRC-32 of its parameter bytes and its full parameter buffer
 * are gathered to rank 0 and compared with rank 0's, and the run's step and
 * image counts must be the ones the sampler's contract implies, on every rank.
 *
 * Exit 0 when every check passes, 1 otherwise (reasons on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_module.h"
#include "check.h"
#include "config.h"
#include "dist.h"
#include "io/idx.h"
#include "mpi_util.h"
#include "train/train.h"

struct replica_case {
	const char *name;
	enum model_kind model;
	int batch;
	long limit;
	float lr, momentum;
	int drop_last;
	int seed_per_rank; /* each rank passes seed + rank */
};

static const struct replica_case cases[] = {
	{"seed, padded shards, partial last batch", MODEL_SEED, 32, 1001, 0.01f, 0.0f, 0, 0},
	{"mlp momentum, padded shards", MODEL_MLP, 20, 1001, 0.05f, 0.9f, 0, 0},
	{"seed, --drop-last", MODEL_SEED, 32, 1001, 0.01f, 0.0f, 1, 0},
	{"mlp, a different seed on each rank", MODEL_MLP, 32, 960, 0.05f, 0.0f, 0, 1},
};

/* Steps per epoch and images per run the sampler's contract implies. */
static void expected_counts(const struct replica_case *k, int ranks, int epochs, int *steps,
			    long long *images)
{
	long shard;
	if (k->drop_last) {
		*steps = (int)(k->limit / ranks / k->batch);
		shard = (long)*steps * k->batch;
	} else {
		shard = (k->limit + ranks - 1) / ranks;
		*steps = (int)((shard + k->batch - 1) / k->batch);
	}
	*images = (long long)epochs * ranks * shard;
}

static int run_case(const struct replica_case *k, const struct dist *d, const struct backend *be,
		    const struct mnist_set *train, const char *dir)
{
	struct train_config c;
	struct train_result res;
	char err[1024] = "", label[160];
	int failed = 0;
	snprintf(label, sizeof(label), "%s, %d ranks", k->name, d->size);

	config_defaults(&c);
	snprintf(c.data_dir, sizeof(c.data_dir), "%s", dir);
	c.model = k->model;
	c.hidden[0] = 48;
	c.hidden[1] = 24;
	c.n_hidden = 2;
	c.epochs = 2;
	c.batch_size = k->batch;
	c.limit = k->limit;
	c.lr = k->lr;
	c.momentum = k->momentum;
	c.drop_last = k->drop_last;
	c.log_every = 1000000000;
	c.backend = BACKEND_HOST;
	c.seed = 11 + (k->seed_per_rank ? (uint64_t)d->rank : 0);

	int rc = train_run(&c, d, be, train, NULL, NULL, &res, err, sizeof(err));
	if (mpi_util_any(d, rc)) {
		if (rc)
			fprintf(stderr, "FAIL: %s: rank %d: train_run refused the configuration: %s\n",
				label, d->rank, err);
		return 1;
	}
	failed |= mpi_util_replicas_identical(d, res.params, res.n_params, label);

	int steps;
	long long images;
	expected_counts(k, d->size, c.epochs, &steps, &images);
	if (res.steps_per_epoch != steps || res.images != images) {
		fprintf(stderr,
			"FAIL: %s: rank %d ran %d steps per epoch over %lld images; expected %d and %lld "
			"(limit %ld, batch %d%s)\n",
			label, d->rank, res.steps_per_epoch, res.images, steps, images, k->limit,
			k->batch, k->drop_last ? ", drop-last" : ", padded");
		failed = 1;
	} else if (d->rank == 0) {
		printf("ok: %s: %d steps per epoch, %lld images, as the sampler implies\n", label,
		       steps, images);
	}
	free(res.params);
	return mpi_util_any(d, failed);
}

int main(int argc, char **argv)
{
	struct dist d;
	dist_init(&argc, &argv, &d);
	if (argc != 2 || d.size < 2) {
		if (d.rank == 0)
			fprintf(stderr, "FAIL: usage: mpirun -n N %s MNIST_TRAIN_DIR with N >= 2 (got %d ranks)\n",
				argv[0], d.size);
		dist_finalize(&d);
		return 1;
	}
	struct mnist_set train;
	if (mpi_util_load_train(&d, argv[1], &train)) {
		dist_finalize(&d);
		return 1;
	}
	struct backend be;
	backend_host_create(&d, 1, &be);

	int failed = 0, n_cases = (int)(sizeof(cases) / sizeof(cases[0]));
	for (int i = 0; i < n_cases; i++)
		failed |= run_case(&cases[i], &d, &be, &train, argv[1]);

	if (d.rank == 0) {
		printf("%s: replicas identical, %d ranks, %d cases\n", failed ? "FAIL" : "PASS", d.size,
		       n_cases);
		fflush(stdout);
	}
	backend_destroy(&be);
	mnist_set_destroy(&train);
	dist_finalize(&d);
	return failed ? 1 : 0;
}
