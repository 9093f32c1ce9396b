/*
 * config.c - the command line: getopt_long over struct train_config.
 *
 * Every value is parsed strictly (the whole string, within range); a bad
 * value is one message naming the flag, what was given and what is expected.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_DATA = 256,
	OPT_TEST_DATA,
	OPT_MODEL,
	OPT_HIDDEN,
	OPT_EPOCHS,
	OPT_BATCH,
	OPT_LR,
	OPT_MOMENTUM,
	OPT_LR_SCHEDULE,
	OPT_WARMUP_STEPS,
	OPT_SEED,
	OPT_LOG_EVERY,
	OPT_LIMIT,
	OPT_BACKEND,
	OPT_GRAD_REDUCE,
	OPT_DROP_LAST,
	OPT_THREADS,
	OPT_NO_GRAPH,
	OPT_METRICS,
	OPT_CHECKPOINT_DIR,
	OPT_SAVE_EVERY,
	OPT_KEEP,
	OPT_RESUME,
	OPT_TIMEOUT,
	OPT_ALLOW_NONFINITE,
	OPT_HELP,
};

static const struct option config_options[] = {
	{"data", required_argument, NULL, OPT_DATA},
	{"test-data", required_argument, NULL, OPT_TEST_DATA},
	{"model", required_argument, NULL, OPT_MODEL},
	{"hidden", required_argument, NULL, OPT_HIDDEN},
	{"epochs", required_argument, NULL, OPT_EPOCHS},
	{"batch-size", required_argument, NULL, OPT_BATCH},
	{"lr", required_argument, NULL, OPT_LR},
	{"momentum", required_argument, NULL, OPT_MOMENTUM},
	{"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
	{"warmup-steps", required_argument, NULL, OPT_WARMUP_STEPS},
	{"seed", required_argument, NULL, OPT_SEED},
	{"log-every", required_argument, NULL, OPT_LOG_EVERY},
	{"limit", required_argument, NULL, OPT_LIMIT},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"grad-reduce", required_argument, NULL, OPT_GRAD_REDUCE},
	{"drop-last", no_argument, NULL, OPT_DROP_LAST},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"no-graph", no_argument, NULL, OPT_NO_GRAPH},
	{"metrics", required_argument, NULL, OPT_METRICS},
	{"checkpoint-dir", required_argument, NULL, OPT_CHECKPOINT_DIR},
	{"save-every", required_argument, NULL, OPT_SAVE_EVERY},
	{"keep", required_argument, NULL, OPT_KEEP},
	{"resume", required_argument, NULL, OPT_RESUME},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"allow-nonfinite", no_argument, NULL, OPT_ALLOW_NONFINITE},
	{"help", no_argument, NULL, OPT_HELP},
	{NULL, 0, NULL, 0},
};

void config_defaults(struct train_config *c)
{
	memset(c, 0, sizeof(*c));
	const char *env = getenv("DATA_PATH");
	snprintf(c->data_dir, sizeof(c->data_dir), "%s",
		 env && *env ? env : "./MNIST_Data/train/");
	c->model = MODEL_SEED;
	c->hidden[0] = 512;
	c->hidden[1] = 256;
	c->n_hidden = 2;
	c->epochs = 10;
	c->batch_size = 32;
	c->lr = 0.01f;
	c->momentum = 0.0f;
	c->lr_schedule = LR_CONSTANT;
	c->seed = 1;
	c->log_every = 10;
	c->backend = BACKEND_AUTO;
	c->grad_reduce = REDUCE_MEAN;
	c->use_graph = 1;
	c->keep = 3;
	c->timeout = CONFIG_TIMEOUT_DEFAULT;
}

void config_print_help(const char *prog)
{
	printf("Usage: mpirun -n N %s [options]\n"
	       "Data-parallel MNIST training: one rank per GPU (or CPU slot), gradients\n"
	       "averaged across ranks every step.\n\n"
	       "Data:\n"
	       "  --data DIR            training set directory (train-images-idx3-ubyte and\n"
	       "                        train-labels-idx1-ubyte, raw or .gz); default $DATA_PATH,\n"
	       "                        else ./MNIST_Data/train/\n"
	       "  --test-data DIR       test set directory (t10k-* files); default the sibling\n"
	       "                        test/ directory of --data when it exists\n"
	       "  --limit N             train on the first N training images only\n"
	       "Model and optimiser:\n"
	       "  --model NAME          seed (Dense 784->10 + ReLU, default), linear, mlp, or\n"
	       "                        lenet (LeNet-5: conv 5x5 6, pool, conv 5x5 16, pool,\n"
	       "                        dense 120, 84, 10)\n"
	       "  --hidden A,B,...      hidden layer sizes of the mlp (default 512,256)\n"
	       "  --epochs N            passes over the training set (default 10)\n"
	       "  --batch-size N        batch size per rank (default 32)\n"
	       "  --lr F                SGD learning rate (default 0.01)\n"
	       "  --momentum F          SGD momentum in [0, 1) (default 0)\n"
	       "  --lr-schedule NAME    constant (default) or cosine: from --lr to 0 over all\n"
	       "                        steps of the run (PyTorch's CosineAnnealingLR per step)\n"
	       "  --warmup-steps N      raise the rate linearly from lr/N to lr over the first\n"
	       "                        N steps, then follow the schedule (default 0)\n"
	       "  --seed N              seed for initial weights and shuffling (default 1)\n"
	       "Distribution and execution:\n"
	       "  --backend NAME        auto (default: cuda when every rank has a GPU, else\n"
	       "                        host), host (OpenBLAS + MPI), or cuda (cuBLAS + NCCL)\n"
	       "  --grad-reduce OP      mean (default) or sum of the ranks' gradients\n"
	       "  --drop-last           drop the uneven tail of each epoch instead of padding\n"
	       "                        short shards by wrapping around\n"
	       "  --threads N           OpenBLAS threads per rank (default: cores / ranks on\n"
	       "                        the node)\n"
	       "  --no-graph            CUDA backend: launch each step's kernels one by one\n"
	       "                        instead of replaying a captured CUDA graph\n"
	       "Output:\n"
	       "  --log-every N         print a loss line every N steps (default 10)\n"
	       "  --metrics FILE        rank 0 writes JSON lines (epoch, step, loss, images/s,\n"
	       "                        elapsed) to FILE\n"
	       "Checkpoints and failures (docs/reliability.md):\n"
	       "  --checkpoint-dir DIR  rank 0 saves DIR/ckpt-<epoch>-<global step>.safetensors\n"
	       "                        (parameters, optimizer state, position, configuration)\n"
	       "                        at the end of every epoch, written atomically\n"
	       "  --save-every N        also save every N steps (default 0: epoch ends only)\n"
	       "  --keep K              keep the K newest checkpoints, 0 = all (default 3)\n"
	       "  --resume PATH         continue from a checkpoint file, or from the newest\n"
	       "                        valid one in a directory; --epochs stays the total\n"
	       "  --timeout SECONDS     end the job when a collective is not complete after\n"
	       "                        this long, 0 = wait forever (default 300)\n"
	       "  --allow-nonfinite     keep training on a NaN or Inf loss (default: stop)\n"
	       "  --help                this text\n\n"
	       "Each rank prints `epoch: E, step: S, loss is L` on its stdout; rank 0 ends with\n"
	       "one `summary:` line. Exit status: 0 done, 2 bad usage or input, 1 failure.\n",
	       prog);
}

static int config_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return CONFIG_ERROR;
}

/* A whole-string integer within [lo, hi]. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_float(const char *s, float *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || fabs(v) > 1e30)
		return -1;
	*out = (float)v;
	return 0;
}

static int parse_hidden(const char *s, struct train_config *c)
{
	char buf[256];
	if (strlen(s) >= sizeof(buf) || !*s)
		return -1;
	strcpy(buf, s);
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v;
		if (n == CONFIG_MAX_HIDDEN || parse_long(tok, 1, 16384, &v))
			return -1;
		c->hidden[n++] = (int)v;
	}
	if (n == 0 || s[strlen(s) - 1] == ',' || s[0] == ',' || strstr(s, ",,"))
		return -1;
	c->n_hidden = n;
	return 0;
}

int config_parse(int argc, char **argv, struct train_config *c, char *err, size_t errlen)
{
	long v;
	int hidden_given = 0;
	const char *ckpt_flag = NULL; /* the first flag that needs --checkpoint-dir */
	config_defaults(c);
	/* 0, not 1: glibc and musl then also forget the previous scan's position. */
	optind = 0;
	opterr = 0;
	for (;;) {
		int prev = optind > 0 ? optind : 1;
		int opt = getopt_long(argc, argv, ":", config_options, NULL);
		if (opt == -1)
			break;
		const char *arg = optarg;
		const char *flag = argv[prev];
		switch (opt) {
		case OPT_DATA:
		case OPT_TEST_DATA:
		case OPT_METRICS: {
			char *dst = opt == OPT_DATA ? c->data_dir :
				    opt == OPT_TEST_DATA ? c->test_dir : c->metrics_path;
			if (!*arg || strlen(arg) >= CONFIG_PATH_MAX)
				return config_error(err, errlen, "%s: expected a path of 1 to %d characters",
						    flag, CONFIG_PATH_MAX - 1);
			strcpy(dst, arg);
			if (opt == OPT_TEST_DATA)
				c->test_dir_given = 1;
			break;
		}
		case OPT_MODEL:
			if (!strcmp(arg, "seed"))
				c->model = MODEL_SEED;
			else if (!strcmp(arg, "linear"))
				c->model = MODEL_LINEAR;
			else if (!strcmp(arg, "mlp"))
				c->model = MODEL_MLP;
			else if (!strcmp(arg, "lenet"))
				c->model = MODEL_LENET;
			else
				return config_error(err, errlen, "--model: unknown model '%s'; expected seed, linear, mlp or lenet", arg);
			break;
		case OPT_HIDDEN:
			hidden_given = 1;
			if (parse_hidden(arg, c))
				return config_error(err, errlen,
						    "--hidden: '%s' is not a list of 1 to %d layer sizes in 1..16384 separated by commas (e.g. 512,256)",
						    arg, CONFIG_MAX_HIDDEN);
			break;
		case OPT_EPOCHS:
			if (parse_long(arg, 1, 1000000, &v))
				return config_error(err, errlen, "--epochs: '%s' is not an integer in 1..1000000", arg);
			c->epochs = (int)v;
			break;
		case OPT_BATCH:
			if (parse_long(arg, 1, 65536, &v))
				return config_error(err, errlen, "--batch-size: '%s' is not an integer in 1..65536", arg);
			c->batch_size = (int)v;
			break;
		case OPT_LR:
			if (parse_float(arg, &c->lr) || !(c->lr > 0.0f))
				return config_error(err, errlen, "--lr: '%s' is not a positive finite number", arg);
			break;
		case OPT_MOMENTUM:
			if (parse_float(arg, &c->momentum) || c->momentum < 0.0f || c->momentum >= 1.0f)
				return config_error(err, errlen, "--momentum: '%s' is not a number in [0, 1)", arg);
			break;
		case OPT_LR_SCHEDULE:
			if (lr_schedule_parse(arg, &c->lr_schedule))
				return config_error(err, errlen, "--lr-schedule: unknown schedule '%s'; expected constant or cosine", arg);
			break;
		case OPT_WARMUP_STEPS:
			if (parse_long(arg, 0, 1000000000, &v))
				return config_error(err, errlen, "--warmup-steps: '%s' is not an integer in 0..1000000000 (steps)", arg);
			c->warmup_steps = v;
			break;
		case OPT_SEED: {
			char *end;
			errno = 0;
			unsigned long long s = strtoull(arg, &end, 10);
			if (errno || end == arg || *end || strchr(arg, '-'))
				return config_error(err, errlen, "--seed: '%s' is not an integer in 0..18446744073709551615", arg);
			c->seed = (uint64_t)s;
			break;
		}
		case OPT_LOG_EVERY:
			if (parse_long(arg, 1, 1000000000, &v))
				return config_error(err, errlen, "--log-every: '%s' is not an integer in 1..1000000000", arg);
			c->log_every = (int)v;
			break;
		case OPT_LIMIT:
			if (parse_long(arg, 1, 1000000000, &v))
				return config_error(err, errlen, "--limit: '%s' is not an integer in 1..1000000000", arg);
			c->limit = v;
			break;
		case OPT_BACKEND:
			if (!strcmp(arg, "auto"))
				c->backend = BACKEND_AUTO;
			else if (!strcmp(arg, "host"))
				c->backend = BACKEND_HOST;
			else if (!strcmp(arg, "cuda"))
				c->backend = BACKEND_CUDA;
			else
				return config_error(err, errlen, "--backend: unknown backend '%s'; expected auto, host or cuda", arg);
			break;
		case OPT_GRAD_REDUCE:
			if (!strcmp(arg, "mean"))
				c->grad_reduce = REDUCE_MEAN;
			else if (!strcmp(arg, "sum"))
				c->grad_reduce = REDUCE_SUM;
			else
				return config_error(err, errlen, "--grad-reduce: unknown reduction '%s'; expected mean or sum", arg);
			break;
		case OPT_DROP_LAST:
			c->drop_last = 1;
			break;
		case OPT_THREADS:
			if (parse_long(arg, 0, 1024, &v))
				return config_error(err, errlen, "--threads: '%s' is not an integer in 0..1024 (0: automatic)", arg);
			c->threads = (int)v;
			break;
		case OPT_NO_GRAPH:
			c->use_graph = 0;
			break;
		case OPT_CHECKPOINT_DIR:
		case OPT_RESUME:
			if (!*arg || strlen(arg) >= CONFIG_PATH_MAX - 96)
				return config_error(err, errlen, "%s: expected a path of 1 to %d characters",
						    flag, CONFIG_PATH_MAX - 97);
			strcpy(opt == OPT_RESUME ? c->resume : c->checkpoint_dir, arg);
			break;
		case OPT_SAVE_EVERY:
			ckpt_flag = ckpt_flag ? ckpt_flag : "--save-every";
			if (parse_long(arg, 0, 1000000000, &v))
				return config_error(err, errlen, "--save-every: '%s' is not an integer in 0..1000000000 (steps; 0: epoch ends only)", arg);
			c->save_every = (int)v;
			break;
		case OPT_KEEP:
			ckpt_flag = ckpt_flag ? ckpt_flag : "--keep";
			if (parse_long(arg, 0, 1000000, &v))
				return config_error(err, errlen, "--keep: '%s' is not an integer in 0..1000000 (0: keep all)", arg);
			c->keep = (int)v;
			break;
		case OPT_TIMEOUT: {
			char *end;
			errno = 0;
			double t = strtod(arg, &end);
			if (errno || end == arg || *end || !isfinite(t) || t < 0.0 || t > 1e6)
				return config_error(err, errlen, "--timeout: '%s' is not a number of seconds in 0..1000000 (0: no deadline)", arg);
			c->timeout = t;
			break;
		}
		case OPT_ALLOW_NONFINITE:
			c->allow_nonfinite = 1;
			break;
		case OPT_HELP:
			return CONFIG_HELP;
		case ':':
			return config_error(err, errlen, "%s: missing value", flag);
		default:
			return config_error(err, errlen, "unknown option '%s' (see --help)", flag);
		}
	}
	if (optind < argc)
		return config_error(err, errlen, "unexpected argument '%s' (options start with --; see --help)",
				    argv[optind]);
	/* --hidden only shapes the mlp; accepted and ignored otherwise would be a silent default. */
	if (hidden_given && c->model != MODEL_MLP)
		return config_error(err, errlen, "--hidden: only the mlp model has hidden layers (add --model mlp)");
	if (ckpt_flag && !c->checkpoint_dir[0])
		return config_error(err, errlen, "%s: only applies with --checkpoint-dir DIR", ckpt_flag);
	return CONFIG_OK;
}

const char *model_kind_name(enum model_kind m)
{
	switch (m) {
	case MODEL_SEED:
		return "seed";
	case MODEL_LINEAR:
		return "linear";
	case MODEL_MLP:
		return "mlp";
	case MODEL_LENET:
		return "lenet";
	}
	return "?";
}

const char *backend_choice_name(enum backend_choice b)
{
	switch (b) {
	case BACKEND_AUTO:
		return "auto";
	case BACKEND_HOST:
		return "host";
	case BACKEND_CUDA:
		return "cuda";
	}
	return "?";
}
