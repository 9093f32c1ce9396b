/*
 * test_config.c - the settings table and the command line made from it
 * (host/config.c): defaults, every flag, every kind of bad value, the rules
 * across flags, --help, and the text form of every value.
 *
 *   ctest --test-dir build -R test_config --output-on-failure
 *
 * Each bad value must give STATUS_BAD_INPUT with a message that names the
 * flag (or the offending argument); --help sets c.help. Arguments are copied
 * into writable storage because getopt_long permutes argv.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#define MAX_ARGS 32

struct parsed {
	enum status rc;
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
	cr_assert_eq(p.rc, STATUS_OK, "no arguments: rc %d (%s)", p.rc, p.err);
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
	cr_assert_eq(c->grad_reduce, GRAD_REDUCE_MEAN);
	cr_assert_eq(c->lr_schedule, LR_CONSTANT);
	cr_assert_eq(c->warmup_steps, 0);
	cr_assert_eq(c->drop_last, 0);
	cr_assert_eq(c->threads, 0);
	cr_assert_eq(c->use_graph, 1);
	cr_assert_eq(c->help, 0);
	cr_assert(c->timeout == 300.0f && c->keep == 3 && c->save_every == 0);
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
	cr_assert_eq(p.rc, STATUS_OK);
	cr_assert_str_eq(p.c.data_dir, "/data/mnist/train/");
	/* --data wins over the environment. */
	p = parse("--data", "/elsewhere", NULL);
	cr_assert_eq(p.rc, STATUS_OK);
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
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert_str_eq(p.c.data_dir, "d1");
	cr_assert_str_eq(p.c.test_dir, "t1");
	cr_assert_str_eq(p.c.metrics_path, "m.jsonl");

	const char *models[] = {"seed", "linear", "mlp", "lenet"};
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_LINEAR, MODEL_MLP, MODEL_LENET};
	for (int i = 0; i < 4; i++) {
		p = parse("--model", models[i], NULL);
		cr_assert_eq(p.rc, STATUS_OK, "--model %s: %s", models[i], p.err);
		cr_assert_eq(p.c.model, kinds[i], "--model %s", models[i]);
		cr_assert_str_eq(model_kind_name(p.c.model), models[i]);
	}

	p = parse("--model", "mlp", "--hidden", "7,5", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert(p.c.n_hidden == 2 && p.c.hidden[0] == 7 && p.c.hidden[1] == 5);
	p = parse("--hidden", "1,2,3,4,5,16384", "--model", "mlp", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert(p.c.n_hidden == 6 && p.c.hidden[0] == 1 && p.c.hidden[5] == 16384);
	p = parse("--model", "mlp", "--hidden", "300", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert(p.c.n_hidden == 1 && p.c.hidden[0] == 300);

	p = parse("--epochs", "3", "--batch-size", "17", "--lr", "0.5", "--momentum", "0.9", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert_eq(p.c.epochs, 3);
	cr_assert_eq(p.c.batch_size, 17);
	cr_assert(p.c.lr == 0.5f && p.c.momentum == 0.9f, "lr %g momentum %g", p.c.lr, p.c.momentum);

	p = parse("--lr-schedule", "cosine", "--warmup-steps", "250", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert_eq(p.c.lr_schedule, LR_COSINE);
	cr_assert_eq(p.c.warmup_steps, 250);
	cr_assert_str_eq(lr_schedule_name(p.c.lr_schedule), "cosine");
	p = parse("--lr-schedule", "cosine", "--lr-schedule", "constant", "--warmup-steps", "0", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.lr_schedule == LR_CONSTANT && p.c.warmup_steps == 0,
		  "rc %d schedule %d warmup %ld (%s)", p.rc, p.c.lr_schedule, p.c.warmup_steps, p.err);

	p = parse("--seed", "18446744073709551615", "--log-every", "5", "--limit", "100", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert(p.c.seed == UINT64_MAX, "seed %llu", (unsigned long long)p.c.seed);
	cr_assert_eq(p.c.log_every, 5);
	cr_assert_eq(p.c.limit, 100);
	p = parse("--seed", "0", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.seed == 0);

	const char *backends[] = {"auto", "host", "cuda"};
	const enum backend_choice choices[] = {BACKEND_AUTO, BACKEND_HOST, BACKEND_CUDA};
	for (int i = 0; i < 3; i++) {
		p = parse("--backend", backends[i], NULL);
		cr_assert_eq(p.rc, STATUS_OK, "--backend %s: %s", backends[i], p.err);
		cr_assert_eq(p.c.backend, choices[i]);
		cr_assert_str_eq(backend_choice_name(p.c.backend), backends[i]);
	}

	p = parse("--grad-reduce", "sum", "--drop-last", "--threads", "1", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.use_graph == 1 && p.c.use_pdl == 1 &&
			  p.c.use_side_stream == 1,
		  "a captured step, programmatic dependent launch and a second stream by default");
	p = parse("--grad-reduce", "sum", "--drop-last", "--threads", "1", "--no-graph", "--no-pdl",
		  "--no-side-stream", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert_eq(p.c.grad_reduce, GRAD_REDUCE_SUM);
	cr_assert_eq(p.c.drop_last, 1);
	cr_assert_eq(p.c.threads, 1);
	cr_assert_eq(p.c.use_graph, 0);
	cr_assert_eq(p.c.use_pdl, 0);
	cr_assert_eq(p.c.use_side_stream, 0);
	p = parse("--grad-reduce", "mean", "--threads", "0", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.grad_reduce == GRAD_REDUCE_MEAN && p.c.threads == 0);

	/* --flag=value works as well as --flag value; the last one wins. */
	p = parse("--epochs=7", "--lr=1e-3", "--epochs", "8", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert_eq(p.c.epochs, 8);
	cr_assert(p.c.lr == 1e-3f, "lr %g", p.c.lr);
}

Test(config, help)
{
	struct parsed p = parse("--help", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.help, "--help: rc %d help %d (%s)", p.rc, p.c.help, p.err);
	p = parse("--epochs", "3", "--help", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.help);
	/* --help ends the parse: what follows it is not looked at. */
	p = parse("--help", "--bogus", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.help, "%s", p.err);
	p = parse("--epochs", "3", NULL);
	cr_assert(p.rc == STATUS_OK && !p.c.help);
}

/* A bad command line: STATUS_BAD_INPUT, and the message contains `names`. */
#define EXPECT_ERROR(names, ...)                                                              \
	do {                                                                                  \
		struct parsed p_ = parse(__VA_ARGS__, NULL);                                  \
		cr_expect_eq(p_.rc, STATUS_BAD_INPUT, "[%s]: rc %d, want STATUS_BAD_INPUT (err '%s')", \
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
	EXPECT_ERROR("'1025' is not an integer in 0..1024 (0: automatic)", "--threads", "1025");
	EXPECT_ERROR("'x' is not an integer in 1..1000000", "--epochs", "x");
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

/*
 * --clip-grad-norm F: off unless given (no text: nothing in the fingerprint's
 * value, "" in a checkpoint), with either optimizer; F a positive finite
 * number, read back exactly from its text.
 */
Test(config, clip_grad_norm)
{
	const struct setting *s = config_setting("clip-grad-norm");
	cr_assert_not_null(s);
	cr_expect(s->where & SETTING_AGREE && s->where & SETTING_CHECKPOINT && s->where & SETTING_RESUME &&
			  s->where & SETTING_NEWER,
		  "in the fingerprint, the checkpoint (newer) and compared on resume");
	char text[64] = "x";
	struct parsed p = parse(NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_expect(p.c.clip_grad_norm == 0.0f, "off by default, not %g", p.c.clip_grad_norm);
	config_format(s, &p.c, text, sizeof(text));
	cr_expect_str_empty(text, "not given: no text, not '%s'", text);
	p = parse("--clip-grad-norm", "0.5", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_expect(p.c.clip_grad_norm == 0.5f);
	config_format(s, &p.c, text, sizeof(text));
	cr_expect_str_eq(text, "0.5");
	p = parse("--optimizer", "adamw", "--clip-grad-norm", "1e-3", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "with adamw too: %s", p.err);
	cr_expect(p.c.clip_grad_norm == 1e-3f);
	const char *bad[] = {"-1", "0", "-0", "abc", "nan", "inf", "", "1e40", "0.5x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_ERROR("--clip-grad-norm", "--clip-grad-norm", bad[i]);
	EXPECT_ERROR("--clip-grad-norm: '0' is not a positive finite number", "--clip-grad-norm", "0");
}

/* The optimizer's flags: PyTorch's defaults, each refused where its optimizer is not the one chosen. */
Test(config, optimizer_flags)
{
	struct parsed p = parse(NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_expect_eq(p.c.optimizer, OPTIMIZER_SGD);
	cr_expect(p.c.weight_decay == 0.0f && p.c.beta1 == 0.9f && p.c.beta2 == 0.999f &&
		  p.c.eps == 1e-8f && p.c.eval_every == 0,
		  "wd %g beta1 %g beta2 %g eps %g eval_every %d", p.c.weight_decay, p.c.beta1, p.c.beta2,
		  p.c.eps, p.c.eval_every);
	p = parse("--optimizer", "adamw", "--beta1", "0.8", "--beta2", "0.99", "--eps", "1e-6",
		  "--weight-decay", "0.01", "--eval-every", "2", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_expect(p.c.optimizer == OPTIMIZER_ADAMW && p.c.beta1 == 0.8f && p.c.beta2 == 0.99f &&
		  p.c.eps == 1e-6f && p.c.weight_decay == 0.01f && p.c.eval_every == 2);
	p = parse("--weight-decay", "0.1", "--momentum", "0.9", NULL);
	cr_expect_eq(p.rc, STATUS_OK, "sgd takes weight decay and momentum: %s", p.err);
	EXPECT_ERROR("--optimizer", "--optimizer", "adam");
	EXPECT_ERROR("only applies with --optimizer adamw", "--beta1", "0.8");
	EXPECT_ERROR("--eps", "--eps", "0.1"); /* adamw's, even when valid */
	EXPECT_ERROR("only the sgd optimizer has momentum", "--optimizer", "adamw", "--momentum", "0.9");
	EXPECT_ERROR("'1' is not a number in [0, 1)", "--optimizer", "adamw", "--beta2", "1");
	EXPECT_ERROR("'0' is not a positive finite number", "--optimizer", "adamw", "--eps", "0");
	EXPECT_ERROR("'-1' is not a finite number >= 0", "--weight-decay", "-1");
	EXPECT_ERROR("--eval-every", "--eval-every", "-1");
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
	cr_assert_eq(p.rc, STATUS_OK, "--data --hidden: %s", p.err);
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

/*
 * A long flag may be shortened to a beginning that names it alone; one that
 * begins several is refused naming every one it begins, never as unknown.
 */
Test(config, prefixes_unique_taken_ambiguous_named)
{
	struct parsed p = parse("--epoch", "3", "--batch", "8", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.epochs == 3 && p.c.batch_size == 8,
		  "--epoch 3 --batch 8: rc %d epochs %d batch %d (%s)", p.rc, p.c.epochs,
		  p.c.batch_size, p.err);
	p = parse("--e", "3", NULL);
	cr_assert_eq(p.rc, STATUS_BAD_INPUT);
	cr_assert(strstr(p.err, "ambiguous option '--e'") && strstr(p.err, "--epochs") &&
			  strstr(p.err, "--eps") && strstr(p.err, "--eval-every") &&
			  !strstr(p.err, "unknown"),
		  "--e: '%s'", p.err);
	p = parse("--no", NULL);
	cr_assert(p.rc == STATUS_BAD_INPUT && strstr(p.err, "ambiguous option '--no'") &&
			  strstr(p.err, "--no-graph") && strstr(p.err, "--no-pdl") &&
			  strstr(p.err, "--no-side-stream") && !strstr(p.err, "--model"),
		  "--no: '%s'", p.err);
	/* The value after '=' is not part of the name. */
	p = parse("--ep=3", NULL);
	cr_assert(p.rc == STATUS_BAD_INPUT && strstr(p.err, "ambiguous option '--ep':"),
		  "--ep=3: '%s'", p.err);
	EXPECT_ERROR("unknown option '--epochsx'", "--epochsx", "3");
}

Test(config, short_help_and_version)
{
	struct parsed p = parse("-h", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.help && !p.c.version, "-h: rc %d (%s)", p.rc, p.err);
	p = parse("--epochs", "2", "-h", "--bogus", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.help, "-h ends the parse: %s", p.err);
	p = parse("--version", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.version && !p.c.help, "--version: rc %d (%s)", p.rc, p.err);
	p = parse("--vers", "--bogus", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.version, "--vers ends the parse: %s", p.err);
	EXPECT_ERROR("--version", "--version=1");
}

Test(config, progress_modes)
{
	struct parsed p = parse(NULL);
	cr_assert_eq(p.c.progress, PROGRESS_AUTO);
	p = parse("--progress", "on", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.progress == PROGRESS_ON, "%s", p.err);
	p = parse("--progress", "off", NULL);
	cr_assert(p.rc == STATUS_OK && p.c.progress == PROGRESS_OFF, "%s", p.err);
	EXPECT_ERROR("--progress", "--progress", "yes");
}

Test(config, repeated_parses_are_independent)
{
	/* getopt keeps state between calls; one bad parse must not disturb the next. */
	struct parsed p = parse("--epochs", "oops", NULL);
	cr_assert_eq(p.rc, STATUS_BAD_INPUT);
	p = parse("--epochs", "4", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	cr_assert_eq(p.c.epochs, 4);
	p = parse("stray", NULL);
	cr_assert_eq(p.rc, STATUS_BAD_INPUT);
	p = parse(NULL);
	cr_assert_eq(p.rc, STATUS_OK, "after a stray argument, no arguments fail: %s", p.err);
	cr_assert_eq(p.c.epochs, 10);
	/* An unknown short option leaves getopt inside its argument; the next parse must not resume there. */
	p = parse("-x", NULL);
	cr_assert_eq(p.rc, STATUS_BAD_INPUT);
	p = parse("--epochs", "5", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "after '-x', '--epochs 5' fails: %s", p.err);
	cr_assert_eq(p.c.epochs, 5);
	p = parse("--epochs", NULL);
	cr_assert_str_eq(p.err, "--epochs: missing value");
}

Test(config, threads_above_the_cores_are_refused)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	char n[32];
	cr_assert_gt(cores, 0);
	snprintf(n, sizeof(n), "%ld", cores);
	struct parsed p = parse("--threads", n, NULL);
	cr_assert_eq(p.rc, STATUS_OK, "--threads %s (the node's cores): %s", n, p.err);
	cr_assert_eq(p.c.threads, (int)cores);
	snprintf(n, sizeof(n), "%ld", cores + 1);
	char want[96];
	snprintf(want, sizeof(want), "--threads: %ld is more than the %ld cores of this node", cores + 1,
		 cores);
	EXPECT_ERROR(want, "--threads", n);
	if (cores < 1000) /* the example: once silently capped at 64 */
		EXPECT_ERROR("--threads: 1000 is more than the", "--threads", "1000");
}

Test(config, bad_data_path_is_named_unless_data_is_given)
{
	char big[CONFIG_PATH_MAX + 8];
	memset(big, 'd', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	setenv("DATA_PATH", big, 1);
	EXPECT_ERROR("DATA_PATH (the default of --data): expected a path of 1 to 4095 characters", "--epochs",
		     "2");
	struct parsed p = parse("--data", "elsewhere", NULL);
	cr_expect_eq(p.rc, STATUS_OK, "--data given: DATA_PATH is not used (%s)", p.err);
	unsetenv("DATA_PATH");
}

/* ---- the table -------------------------------------------------------------------- */

Test(settings, every_row_is_complete_and_unique)
{
	char key[64], other[64];
	cr_assert_gt(config_n_settings, 20);
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		cr_expect(s->flag && *s->flag && s->help && *s->help, "row %d lacks a flag or a help line", i);
		cr_expect((s->type == SETTING_FLAG) == (s->arg == NULL), "--%s: a value name exactly when it takes a value",
			  s->flag);
		cr_expect(config_setting(s->flag) == s, "--%s is not found by name", s->flag);
		cr_expect(s->type != SETTING_CHOICE || (s->choices && s->choices[0] && s->expect),
			  "--%s: a choice needs its names and their noun", s->flag);
		cr_expect(s->type != SETTING_FLOAT || s->expect, "--%s: a float needs its expectation", s->flag);
		cr_expect(!(s->where & SETTING_RESUME) || (s->where & SETTING_CHECKPOINT),
			  "--%s: compared on resume but not stored", s->flag);
		cr_expect(!s->applies || s->needs, "--%s: a condition needs its message", s->flag);
		config_key(s, key, sizeof(key));
		cr_expect(!strchr(key, '-'), "key %s", key);
		for (int j = 0; j < i; j++) {
			config_key(&config_settings[j], other, sizeof(other));
			cr_expect(strcmp(key, other), "rows %d and %d share the key %s", j, i, key);
		}
	}
	cr_expect_null(config_setting("no-such-flag"));
	cr_expect_eq(config_setting("help")->offset, offsetof(struct train_config, help));
}

Test(settings, every_default_parses_and_reads_back)
{
	unsetenv("DATA_PATH");
	struct train_config d, again;
	char text[CONFIG_PATH_MAX], back[CONFIG_PATH_MAX], why[512];
	config_defaults(&d);
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		config_format(s, &d, text, sizeof(text));
		if (s->def && (!s->applies || s->applies(&d)))
			cr_expect_str_eq(text, s->def, "--%s: default text '%s', the row says '%s'", s->flag,
					 text, s->def);
		if (!*text)
			continue; /* not given, or not applying */
		config_defaults(&again);
		cr_expect_eq(config_set(s, &again, text, why, sizeof(why)), STATUS_OK, "--%s '%s': %s", s->flag,
			     text, why);
		config_format(s, &again, back, sizeof(back));
		cr_expect_str_eq(back, text, "--%s: '%s' reads back as '%s'", s->flag, text, back);
	}
}

Test(settings, values_read_back_exactly_from_their_text)
{
	struct parsed p = parse("--model", "mlp", "--hidden", "7,5,3", "--lr", "0.1", "--momentum", "0.95",
				"--seed", "18446744073709551615", "--drop-last", "--grad-reduce", "sum",
				"--timeout", "2.5", "--limit", "123", NULL);
	cr_assert_eq(p.rc, STATUS_OK, "%s", p.err);
	p.c.lr = nextafterf(nextafterf(nextafterf(0.1f, 1.0f), 1.0f), 1.0f); /* needs 9 digits */
	const char *flags[] = {"model", "hidden", "lr", "momentum", "seed", "drop-last", "grad-reduce",
			       "timeout", "limit", "no-graph", "epochs"};
	const char *want[] = {"mlp", "7,5,3", "0.100000024", "0.95", "18446744073709551615", "on",
			      "sum", "2.5", "123", "off", "10"};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		const struct setting *s = config_setting(flags[i]);
		char text[128], why[256];
		struct train_config c;
		config_format(s, &p.c, text, sizeof(text));
		cr_expect_str_eq(text, want[i], "--%s", flags[i]);
		config_defaults(&c);
		c.model = MODEL_MLP;
		cr_assert_eq(config_set(s, &c, text, why, sizeof(why)), STATUS_OK, "--%s '%s': %s", flags[i],
			     text, why);
		char back[128];
		config_format(s, &c, back, sizeof(back));
		cr_expect_str_eq(back, text, "--%s", flags[i]);
	}
	struct train_config c;
	config_defaults(&c);
	cr_expect_eq(config_set(config_setting("lr"), &c, "0.100000024", NULL, 0), STATUS_OK);
	cr_expect(c.lr == p.c.lr, "the 9-digit text is that float exactly");
	/* A setting that does not apply has no text; a path not given is empty. */
	char text[64] = "x";
	config_format(config_setting("hidden"), &c, text, sizeof(text));
	cr_expect_str_empty(text, "--hidden on the seed model: '%s'", text);
	config_format(config_setting("keep"), &c, text, sizeof(text));
	cr_expect_str_empty(text, "--keep without --checkpoint-dir: '%s'", text);
	config_format(config_setting("resume"), &c, text, sizeof(text));
	cr_expect_str_empty(text);
	/* Flags read "on" and "off" only; a bad value's message leaves the flag to the caller. */
	char why[256];
	cr_expect_eq(config_set(config_setting("drop-last"), &c, "yes", why, sizeof(why)), STATUS_BAD_INPUT);
	cr_expect_str_eq(why, "'yes' is not on or off");
	cr_expect_eq(config_set(config_setting("model"), &c, "resnet", why, sizeof(why)), STATUS_BAD_INPUT);
	cr_expect_str_eq(why, "unknown model 'resnet'; expected seed, linear, mlp or lenet");
}

Test(settings, help_lists_every_flag, .init = cr_redirect_stdout)
{
	config_print_help("mnist-train");
	fflush(stdout);
	FILE *f = cr_get_redirected_stdout();
	static char out[16384];
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	cr_assert_gt(n, 1000, "help is %zu bytes", n);
	for (int i = 0; i < config_n_settings; i++) {
		const struct setting *s = &config_settings[i];
		char line[96];
		char letter[8] = "";
		if (s->letter)
			snprintf(letter, sizeof(letter), "-%c, ", s->letter);
		snprintf(line, sizeof(line), "\n  %s--%s%s%s ", letter, s->flag, s->arg ? " " : "",
			 s->arg ? s->arg : "");
		cr_expect(strstr(out, line), "--help lacks the line of --%s:\n%s", s->flag, out);
		if (s->def && !s->env) {
			snprintf(line, sizeof(line), "(default %s)", s->def);
			cr_expect(strstr(out, line), "--help lacks --%s's %s", s->flag, line);
		}
	}
	for (char *l = out; *l;) {
		size_t len = strcspn(l, "\n");
		cr_expect_leq(len, 80, "a help line is %zu columns: %.*s", len, (int)len, l);
		l += len + (l[len] == '\n');
	}
	/* The wrapped text, read as one line. */
	static char flat[16384];
	size_t k = 0;
	for (size_t i = 0; out[i]; i++)
		if (out[i] != ' ' && out[i] != '\n')
			flat[k++] = out[i];
		else if (k && flat[k - 1] != ' ')
			flat[k++] = ' ';
	flat[k] = '\0';
	cr_expect(strstr(flat, "(default $DATA_PATH, else ./MNIST_Data/train/)"), "%s", flat);
	cr_expect(strstr(flat, "--hidden A,B,... hidden layer sizes of the mlp (default 512,256)"), "%s", flat);
}
