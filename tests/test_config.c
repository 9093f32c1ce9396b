/*
 * test_config.c - the command line (host/config.c): defaults, every flag,
 * and every kind of bad value.
 *
 *   ctest --test-dir build -R test_config --output-on-failure
 *
 * Each bad value must give CONFIG_ERROR with a message that names the flag
 * (or the offending argument); --help gives CONFIG_HELP. Arguments are copied
 * into writable storage because getopt_long permutes argv.
 */
#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define MAX_ARGS 16

struct parsed {
	int rc;
	struct train_config c;
	char err[512];
	char args[512]; /* the arguments, quoted, for messages */
};

/* config_parse over "mnist-train" and the NULL-terminated arguments. */
static struct parsed parse(const char *first, ...)
{
	static char storage[MAX_ARGS][256];
	char *argv[MAX_ARGS + 1];
	int argc = 0;
	snprintf(storage[argc], sizeof(storage[argc]), "mnist-train");
	argv[argc] = storage[argc];
	argc++;
	va_list ap;
	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *)) {
		cr_assert(argc < MAX_ARGS);
		snprintf(storage[argc], sizeof(storage[argc]), "%s", a);
		argv[argc] = storage[argc];
		argc++;
	}
	va_end(ap);
	argv[argc] = NULL;
	struct parsed p;
	memset(&p, 0, sizeof(p));
	for (int i = 1; i < argc; i++) {
		size_t used = strlen(p.args);
		snprintf(p.args + used, sizeof(p.args) - used, "%s'%s'", i > 1 ? " " : "", argv[i]);
	}
	p.rc = config_parse(argc, argv, &p.c, p.err, sizeof(p.err));
	return p;
}

Test(config, defaults_are_the_seeds)
{
	unsetenv("DATA_PATH");
	struct parsed p = parse(NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "no arguments: rc %d (%s)", p.rc, p.err);
	const struct train_config *c = &p.c;
	cr_assert_eq(c->model, MODEL_SEED);
	cr_assert(c->lr == 0.01f, "lr %g", c->lr);
	cr_assert(c->momentum == 0.0f, "momentum %g", c->momentum);
	cr_assert_eq(c->batch_size, 32);
	cr_assert_eq(c->epochs, 10);
	cr_assert_eq(c->seed, 1);
	cr_assert_eq(c->log_every, 10);
	cr_assert_eq(c->limit, 0);
	cr_assert_eq(c->backend, BACKEND_AUTO);
	cr_assert_eq(c->grad_reduce, REDUCE_MEAN);
	cr_assert_eq(c->lr_schedule, LR_CONSTANT);
	cr_assert_eq(c->warmup_steps, 0);
	cr_assert_eq(c->drop_last, 0);
	cr_assert_eq(c->threads, 0);
	cr_assert_eq(c->test_dir_given, 0);
	cr_assert_str_eq(c->test_dir, "");
	cr_assert_str_eq(c->metrics_path, "");
	cr_assert_str_eq(c->data_dir, "./MNIST_Data/train/");
	cr_assert(c->n_hidden == 2 && c->hidden[0] == 512 && c->hidden[1] == 256,
		  "mlp default hidden %d layers %d,%d", c->n_hidden, c->hidden[0], c->hidden[1]);

	struct train_config d;
	config_defaults(&d);
	cr_assert_eq(d.epochs, 10);
	cr_assert_str_eq(model_kind_name(d.model), "seed");
	cr_assert_str_eq(backend_choice_name(d.backend), "auto");
}

Test(config, data_dir_from_environment)
{
	setenv("DATA_PATH", "/data/mnist/train/", 1);
	struct parsed p = parse(NULL);
	cr_assert_eq(p.rc, CONFIG_OK);
	cr_assert_str_eq(p.c.data_dir, "/data/mnist/train/");
	/* --data wins over the environment. */
	p = parse("--data", "/elsewhere", NULL);
	cr_assert_eq(p.rc, CONFIG_OK);
	cr_assert_str_eq(p.c.data_dir, "/elsewhere");
	/* An empty DATA_PATH is as good as none. */
	setenv("DATA_PATH", "", 1);
	p = parse(NULL);
	cr_assert_str_eq(p.c.data_dir, "./MNIST_Data/train/");
}

Test(config, every_flag_parsed)
{
	struct parsed p;
	p = parse("--data", "d1", "--test-data", "t1", "--metrics", "m.jsonl", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert_str_eq(p.c.data_dir, "d1");
	cr_assert_str_eq(p.c.test_dir, "t1");
	cr_assert_eq(p.c.test_dir_given, 1);
	cr_assert_str_eq(p.c.metrics_path, "m.jsonl");

	const char *models[] = {"seed", "linear", "mlp", "lenet"};
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_LINEAR, MODEL_MLP, MODEL_LENET};
	for (int i = 0; i < 4; i++) {
		p = parse("--model", models[i], NULL);
		cr_assert_eq(p.rc, CONFIG_OK, "--model %s: %s", models[i], p.err);
		cr_assert_eq(p.c.model, kinds[i], "--model %s", models[i]);
		cr_assert_str_eq(model_kind_name(p.c.model), models[i]);
	}

	p = parse("--model", "mlp", "--hidden", "7,5", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert(p.c.n_hidden == 2 && p.c.hidden[0] == 7 && p.c.hidden[1] == 5);
	p = parse("--hidden", "1,2,3,4,5,16384", "--model", "mlp", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert(p.c.n_hidden == 6 && p.c.hidden[0] == 1 && p.c.hidden[5] == 16384);
	p = parse("--model", "mlp", "--hidden", "300", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert(p.c.n_hidden == 1 && p.c.hidden[0] == 300);

	p = parse("--epochs", "3", "--batch-size", "17", "--lr", "0.5", "--momentum", "0.9", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert_eq(p.c.epochs, 3);
	cr_assert_eq(p.c.batch_size, 17);
	cr_assert(p.c.lr == 0.5f && p.c.momentum == 0.9f, "lr %g momentum %g", p.c.lr, p.c.momentum);

	p = parse("--lr-schedule", "cosine", "--warmup-steps", "250", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert_eq(p.c.lr_schedule, LR_COSINE);
	cr_assert_eq(p.c.warmup_steps, 250);
	cr_assert_str_eq(lr_schedule_name(p.c.lr_schedule), "cosine");
	p = parse("--lr-schedule", "cosine", "--lr-schedule", "constant", "--warmup-steps", "0", NULL);
	cr_assert(p.rc == CONFIG_OK && p.c.lr_schedule == LR_CONSTANT && p.c.warmup_steps == 0,
		  "rc %d schedule %d warmup %ld (%s)", p.rc, p.c.lr_schedule, p.c.warmup_steps, p.err);

	p = parse("--seed", "18446744073709551615", "--log-every", "5", "--limit", "100", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert(p.c.seed == UINT64_MAX, "seed %llu", (unsigned long long)p.c.seed);
	cr_assert_eq(p.c.log_every, 5);
	cr_assert_eq(p.c.limit, 100);
	p = parse("--seed", "0", NULL);
	cr_assert(p.rc == CONFIG_OK && p.c.seed == 0);

	const char *backends[] = {"auto", "host", "cuda"};
	const enum backend_choice choices[] = {BACKEND_AUTO, BACKEND_HOST, BACKEND_CUDA};
	for (int i = 0; i < 3; i++) {
		p = parse("--backend", backends[i], NULL);
		cr_assert_eq(p.rc, CONFIG_OK, "--backend %s: %s", backends[i], p.err);
		cr_assert_eq(p.c.backend, choices[i]);
		cr_assert_str_eq(backend_choice_name(p.c.backend), backends[i]);
	}

	p = parse("--grad-reduce", "sum", "--drop-last", "--threads", "4", "--no-graph", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert_eq(p.c.grad_reduce, REDUCE_SUM);
	cr_assert_eq(p.c.drop_last, 1);
	cr_assert_eq(p.c.threads, 4);
	cr_assert_eq(p.c.use_graph, 0);
	p = parse("--grad-reduce", "mean", "--threads", "0", NULL);
	cr_assert(p.rc == CONFIG_OK && p.c.grad_reduce == REDUCE_MEAN && p.c.threads == 0);

	/* --flag=value works as well as --flag value; the last one wins. */
	p = parse("--epochs=7", "--lr=1e-3", "--epochs", "8", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert_eq(p.c.epochs, 8);
	cr_assert(p.c.lr == 1e-3f, "lr %g", p.c.lr);
}

Test(config, help)
{
	struct parsed p = parse("--help", NULL);
	cr_assert_eq(p.rc, CONFIG_HELP);
	p = parse("--epochs", "3", "--help", NULL);
	cr_assert_eq(p.rc, CONFIG_HELP);
}

/* A bad command line: CONFIG_ERROR, and the message contains `names`. */
#define EXPECT_ERROR(names, ...)                                                              \
	do {                                                                                  \
		struct parsed p_ = parse(__VA_ARGS__, NULL);                                  \
		cr_expect_eq(p_.rc, CONFIG_ERROR, "[%s]: rc %d, want CONFIG_ERROR (err '%s')", \
			     p_.args, p_.rc, p_.err);                                         \
		cr_expect(strstr(p_.err, names) != NULL,                                      \
			  "[%s]: message '%s' does not name '%s'", p_.args, p_.err, names);   \
	} while (0)

Test(config, bad_integers)
{
	const char *flags[] = {"--epochs", "--batch-size", "--log-every", "--limit"};
	const char *bad[] = {"abc", "3x", "", " ", "0", "-1", "1.5", "0x10", "99999999999999999999"};
	for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++)
		for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
			EXPECT_ERROR(flags[f], flags[f], bad[b]);
	EXPECT_ERROR("--epochs", "--epochs", "1000001");
	EXPECT_ERROR("--batch-size", "--batch-size", "65537");
	EXPECT_ERROR("--threads", "--threads", "-1");
	EXPECT_ERROR("--threads", "--threads", "1025");
	EXPECT_ERROR("--threads", "--threads", "two");
	EXPECT_ERROR("--threads", "--threads", "");
}

Test(config, bad_floats)
{
	const char *bad_lr[] = {"abc", "0", "-0.1", "0.1x", "", "nan", "inf", "1e40", "-inf"};
	for (size_t i = 0; i < sizeof(bad_lr) / sizeof(bad_lr[0]); i++)
		EXPECT_ERROR("--lr", "--lr", bad_lr[i]);
	const char *bad_mom[] = {"1", "1.0", "-0.1", "x", "", "0.5.", "nan", "2"};
	for (size_t i = 0; i < sizeof(bad_mom) / sizeof(bad_mom[0]); i++)
		EXPECT_ERROR("--momentum", "--momentum", bad_mom[i]);
}

Test(config, bad_seed)
{
	const char *bad[] = {"-1", " -1", "abc", "1x", "", "18446744073709551616", "1.0", "+-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_ERROR("--seed", "--seed", bad[i]);
}

Test(config, bad_names_and_paths)
{
	EXPECT_ERROR("--model", "--model", "resnet");
	EXPECT_ERROR("--model", "--model", "");
	EXPECT_ERROR("--model", "--model", "SEED");
	EXPECT_ERROR("--backend", "--backend", "gpu");
	EXPECT_ERROR("--backend", "--backend", "");
	EXPECT_ERROR("--grad-reduce", "--grad-reduce", "avg");
	EXPECT_ERROR("--model", "--model", "LeNet");
	EXPECT_ERROR("--lr-schedule", "--lr-schedule", "linear");
	EXPECT_ERROR("--lr-schedule", "--lr-schedule", "");
	EXPECT_ERROR("--lr-schedule", "--lr-schedule", "Cosine");
	const char *bad_warmup[] = {"-1", "x", "", "1.5", "1000000001", "10steps"};
	for (size_t i = 0; i < sizeof(bad_warmup) / sizeof(bad_warmup[0]); i++)
		EXPECT_ERROR("--warmup-steps", "--warmup-steps", bad_warmup[i]);
	EXPECT_ERROR("--data", "--data", "");
	EXPECT_ERROR("--test-data", "--test-data", "");
	EXPECT_ERROR("--metrics", "--metrics", "");
}

Test(config, bad_hidden_lists)
{
	const char *bad[] = {"", ",", "7,", ",7", "7,,5", "0", "7,x", "1,2,3,4,5,6,7", "16385", "-5",
			     "7 5", "7;5", "5,0"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_ERROR("--hidden", "--model", "mlp", "--hidden", bad[i]);
	/* Hidden layers belong to the mlp only. */
	EXPECT_ERROR("--hidden", "--hidden", "7,5");
	EXPECT_ERROR("--hidden", "--model", "linear", "--hidden", "7");
	EXPECT_ERROR("--hidden", "--hidden", "7", "--model", "seed");
	EXPECT_ERROR("--hidden", "--model", "mlp", "--hidden", "7", "--model", "linear");
	EXPECT_ERROR("--hid", "--hid", "7"); /* an abbreviation is still --hidden */
	/* A path that merely looks like the flag is not the flag. */
	struct parsed p = parse("--data", "--hidden", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "--data --hidden: %s", p.err);
	cr_assert_str_eq(p.c.data_dir, "--hidden");
}

Test(config, unknown_missing_and_positional)
{
	EXPECT_ERROR("--frobnicate", "--frobnicate");
	EXPECT_ERROR("--frobnicate", "--frobnicate=3");
	EXPECT_ERROR("-x", "-x");
	EXPECT_ERROR("--drop-last", "--drop-last=yes");
	EXPECT_ERROR("--epochs", "--epochs");
	EXPECT_ERROR("--lr", "--epochs", "2", "--lr");
	EXPECT_ERROR("--data", "--data");
	EXPECT_ERROR("train", "train");
	EXPECT_ERROR("extra", "--epochs", "2", "extra");
	EXPECT_ERROR("2", "--epochs", "1", "2");
}

Test(config, repeated_parses_are_independent)
{
	/* getopt keeps state between calls; one bad parse must not disturb the next. */
	struct parsed p = parse("--epochs", "oops", NULL);
	cr_assert_eq(p.rc, CONFIG_ERROR);
	p = parse("--epochs", "4", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "%s", p.err);
	cr_assert_eq(p.c.epochs, 4);
	p = parse("stray", NULL);
	cr_assert_eq(p.rc, CONFIG_ERROR);
	p = parse(NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "after a stray argument, no arguments fail: %s", p.err);
	cr_assert_eq(p.c.epochs, 10);
	/* An unknown short option leaves getopt inside its argument; the next parse must not resume there. */
	p = parse("-x", NULL);
	cr_assert_eq(p.rc, CONFIG_ERROR);
	p = parse("--epochs", "5", NULL);
	cr_assert_eq(p.rc, CONFIG_OK, "after '-x', '--epochs 5' fails: %s", p.err);
	cr_assert_eq(p.c.epochs, 5);
	p = parse("--epochs", NULL);
	cr_assert_str_eq(p.err, "--epochs: missing value");
}
