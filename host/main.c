/*
 * main.c - mnist-train: data-parallel MNIST training, one rank per GPU or CPU slot.
 *
 *   cmake -S . -B build && cmake --build build -j
 *   export DATA_PATH=./MNIST_Data/train/
 *   mpirun -n 2 build/mnist-train
 *
 * Start-up is a sequence of collective agreements: every rank parses its
 * arguments, loads and validates the data and picks a backend, then all ranks
 * agree on the outcome before going on. A bad flag or file stops every rank
 * with status 2 and a message; nothing is left waiting in a collective.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agree.h"
#include "backend.h"
#include "backend_module.h"
#include "check.h"
#include "config.h"
#include "dist.h"
#include "io/checkpoint.h"
#include "io/idx.h"
#include "io/report.h"
#include "train/train.h"

/*
 * Stop every rank with the worst status any rank reports: a rank with its own
 * message prints it, the others say which rank stopped them.
 */
static void agree_or_exit(struct dist *d, enum status status, const char *msg)
{
	int bad_rank = -1;
	int worst = dist_agree(d, status, &bad_rank);
	if (!worst)
		return;
	if (status)
		fprintf(stderr, "mnist-train: %s\n", msg);
	else
		fprintf(stderr, "mnist-train: rank %d on %s: stopping because rank %d failed at start-up\n",
			d->rank, d->host, bad_rank);
	fflush(stderr);
	dist_finalize(d);
	exit(worst); /* a status is its exit status (include/check.h) */
}

/* The sibling test/ directory of the training directory ("a/train/" -> "a/test"). */
static void sibling_test_dir(const char *data_dir, char *out, size_t len)
{
	char buf[CONFIG_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", data_dir);
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		snprintf(out, len, "test");
	else if (slash == buf)
		snprintf(out, len, "/test");
	else {
		*slash = '\0';
		snprintf(out, len, "%s/test", buf);
	}
}

/*
 * Load the training set and, when there is one, the test set. --eval-only
 * reads no training set and needs the test set.
 */
static enum status load_data(const struct train_config *c, struct mnist_set *train,
			     struct mnist_set *test, int *have_test, char *msg, size_t len)
{
	char err[1024];
	enum status rc = STATUS_OK;
	*have_test = 0;
	if (!c->eval_only[0])
		rc = idx_load_set(c->data_dir, "train", train, err, sizeof(err));
	if (rc && !idx_set_present(c->data_dir, "train"))
		return status_fail(msg, len, rc,
				   "%s (training data: set --data or DATA_PATH to a directory holding "
				   "train-images-idx3-ubyte and train-labels-idx1-ubyte; "
				   "scripts/get-mnist.sh fetches MNIST)",
				   err);
	if (rc)
		return status_fail(msg, len, rc, "%s", err);
	char dir[CONFIG_PATH_MAX];
	int given = c->test_dir[0] != '\0';
	if (given)
		snprintf(dir, sizeof(dir), "%s", c->test_dir);
	else
		sibling_test_dir(c->data_dir, dir, sizeof(dir));
	if (!given && !idx_set_present(dir, "t10k") && c->eval_only[0])
		return status_fail(msg, len, STATUS_BAD_INPUT,
				   "--eval-only %s: there is no test set to score (no t10k-* files in %s, "
				   "the sibling test/ directory of --data %s); give --test-data DIR",
				   c->eval_only, dir, c->data_dir);
	if (!given && !idx_set_present(dir, "t10k"))
		return STATUS_OK; /* no test set: test_accuracy=nan */
	rc = idx_load_set(dir, "t10k", test, err, sizeof(err));
	if (rc) {
		mnist_set_destroy(train);
		return status_fail(msg, len, rc, "%s%s", given ? "--test-data: " : "", err);
	}
	*have_test = 1;
	return STATUS_OK;
}

/* OpenBLAS threads per rank: the cores this rank may use, shared by the ranks on its node. */
static int auto_threads(const struct dist *d)
{
	if (getenv("OPENBLAS_NUM_THREADS"))
		return 0; /* the user's setting stands */
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	long mine = online;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		mine = CPU_COUNT(&set);
	long share = online / (d->local_size > 0 ? d->local_size : 1);
	long t = mine < share ? mine : share;
	return t > 0 ? (int)t : 1;
}

int main(int argc, char **argv)
{
	struct dist d;
	struct train_config cfg;
	char msg[2048] = "";
	dist_init(&argc, &argv, &d);

	enum status rc = config_parse(argc, argv, &cfg, msg, sizeof(msg));
	if (rc == STATUS_OK && (cfg.help || cfg.version)) {
		if (d.rank == 0 && cfg.help)
			config_print_help(argv[0]);
		else if (d.rank == 0)
			printf("mnist-train %s\n", MNIST_DDP_VERSION);
		dist_finalize(&d);
		return STATUS_OK;
	}
	agree_or_exit(&d, rc, msg);
	/* From here on every collective of the job runs under --timeout. */
	dist_set_timeout(&d, cfg.timeout);

	struct mnist_set train = {0}, test = {0};
	int have_test = 0;
	rc = load_data(&cfg, &train, &test, &have_test, msg, sizeof(msg));
	if (rc == STATUS_OK && cfg.eval_every > 0 && !have_test)
		rc = status_fail(msg, sizeof(msg), STATUS_BAD_INPUT,
				 "--eval-every %d: there is no test set to score (no t10k-* files in the "
				 "sibling test/ directory of --data %s); give --test-data DIR, or leave "
				 "--eval-every out",
				 cfg.eval_every, cfg.data_dir);
	agree_or_exit(&d, rc, msg);

	/* Every rank agrees at each step, whatever its flags: the start-up check compares them. */
	rc = cfg.eval_only[0] ? STATUS_OK : train_validate(&cfg, &d, &train, msg, sizeof(msg));
	agree_or_exit(&d, rc, msg);

	/*
	 * Rank 0 writes the metrics and the checkpoints: it makes sure it can
	 * before any rank trains.
	 */
	FILE *metrics = NULL;
	rc = STATUS_OK;
	if (d.rank == 0 && cfg.metrics_path[0] && !(metrics = fopen(cfg.metrics_path, "w"))) {
		snprintf(msg, sizeof(msg), "--metrics: cannot open %s for writing", cfg.metrics_path);
		rc = STATUS_BAD_INPUT;
	} else if (d.rank == 0 && cfg.checkpoint_dir[0]) {
		rc = checkpoint_prepare_dir(cfg.checkpoint_dir, msg, sizeof(msg));
	}
	agree_or_exit(&d, rc, msg);

	struct backend be;
	/*
	 * --exact: one OpenBLAS thread per rank unless --threads says otherwise,
	 * so that a micro-batch's math is the same at every rank count.
	 */
	int threads = cfg.threads > 0 ? cfg.threads : cfg.exact ? 1 : auto_threads(&d);
	if (backend_select(cfg.backend, &d, threads, &be, msg, sizeof(msg))) {
		fprintf(stderr, "mnist-train: rank %d on %s: %s\n", d.rank, d.host, msg);
		fflush(stderr);
		dist_finalize(&d);
		return STATUS_RUNTIME;
	}
	/*
	 * --tf32 asks for what only a backend with tensor cores has. Every rank
	 * takes this agreement, given --tf32 or not: a launch that gives it to
	 * some ranks only is stopped here, not left waiting.
	 */
	char tf32_msg[256] = "";
	rc = STATUS_OK;
	if (backend_set(&be, BACKEND_TF32, cfg.tf32) != 0 && cfg.tf32)
		rc = status_fail(tf32_msg, sizeof(tf32_msg), STATUS_BAD_INPUT,
				 "--tf32: the %s backend has no TF32 mode (it is the CUDA backend's; "
				 "run with --backend cuda, or without --tf32)",
				 backend_name(&be));
	agree_or_exit(&d, rc, tf32_msg);
	backend_set(&be, BACKEND_PDL, cfg.use_pdl);
	backend_set(&be, BACKEND_SIDE_STREAM, cfg.use_side_stream);
	if (d.rank == 0) {
		if (msg[0])
			fprintf(stderr, "mnist-train: %s\n", msg);
		fprintf(stderr, "mnist-train %s: %d rank%s on %d node%s, backend %s (%s), ",
			MNIST_DDP_VERSION, d.size, d.size == 1 ? "" : "s", d.node_count,
			d.node_count == 1 ? "" : "s", backend_name(&be), be.device);
		if (cfg.eval_only[0])
			fprintf(stderr, "--eval-only: no training, %d test images\n", test.count);
		else
			fprintf(stderr, "model %s, %d training images, %s\n", model_kind_name(cfg.model),
				cfg.limit > 0 && cfg.limit < train.count ? (int)cfg.limit : train.count,
				have_test ? "test set found" : "no test set (test_accuracy=nan)");
		fflush(stderr);
	}

	/* Every rank runs the same configuration on the same data and build, or none runs. */
	rc = agree_check(&d, &cfg, cfg.eval_only[0] ? NULL : &train, have_test ? &test : NULL, &be,
			 msg, sizeof(msg));
	agree_or_exit(&d, rc, msg);

	/* --eval-only: the checkpoint's model (its --model and --hidden into cfg), nothing trained. */
	struct train_result res;
	if (cfg.eval_only[0])
		rc = train_eval_only(&cfg, &d, &be, &test, &res, msg, sizeof(msg));
	else
		rc = train_run(&cfg, &d, &be, &train, have_test ? &test : NULL, metrics, &res, msg,
			       sizeof(msg));
	agree_or_exit(&d, rc, msg);

	if (d.rank == 0) {
		/* The backend's own keys: the CUDA simulator's modelled step (cudasim.h, rule 10). */
		char backend_keys[128];
		backend_summary(&be, backend_keys, sizeof(backend_keys));
		struct summary s = {
			.model = model_kind_name(cfg.model),
			.backend = backend_name(&be),
			.ranks = d.size,
			.epochs = cfg.eval_only[0] ? 0 : cfg.epochs, /* --eval-only: no epoch trained */
			.steps_per_epoch = res.steps_per_epoch,
			.images = res.images,
			.train_seconds = res.train_seconds,
			.test_accuracy = res.test_accuracy,
			.final_loss = res.final_loss,
			.epoch_loss = res.epoch_loss,
			.param_crc = res.param_crc,
			.test_images = res.test_images,
			.backend_fallback = be.fallback[0] ? be.fallback : NULL,
			/* A backend that captures steps says how many nodes one holds. */
			.graph_nodes = backend_can_capture(&be) ? res.graph_nodes : -1,
			.backend_keys = backend_keys,
		};
		report_summary(stdout, &s);
	}
	if (metrics)
		fclose(metrics);
	free(res.params);
	backend_destroy(&be);
	mnist_set_destroy(&train);
	if (have_test)
		mnist_set_destroy(&test);
	dist_finalize(&d);
	return STATUS_OK;
}
