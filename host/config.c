/*
 * config.c - the settings table and what is made from it: getopt_long's
 * option table, the parser, --help, and the text form of each value that the
 * fingerprint and the checkpoint metadata use (see config.h).
 *
 * Every value is parsed strictly (the whole string, within range); a bad
 * value is one message naming the flag, what was given and what is expected.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text.h"

/* SETTING_CHOICE values are stored as an int-sized enum. */
_Static_assert(sizeof(enum model_kind) == sizeof(int), "enum model_kind is int-sized");
_Static_assert(sizeof(enum backend_choice) == sizeof(int), "enum backend_choice is int-sized");
_Static_assert(sizeof(enum grad_reduce) == sizeof(int), "enum grad_reduce is int-sized");
_Static_assert(sizeof(enum lr_schedule) == sizeof(int), "enum lr_schedule is int-sized");
_Static_assert(sizeof(enum optimizer_kind) == sizeof(int), "enum optimizer_kind is int-sized");
_Static_assert(sizeof(enum progress_mode) == sizeof(int), "enum progress_mode is int-sized");

#define FIELD(name) offsetof(struct train_config, name)
#define HELP_COLUMN 24
#define HELP_WIDTH 80

static const char *const model_names[] = {"seed", "linear", "mlp", "lenet", NULL};
static const char *const schedule_names[] = {"constant", "cosine", NULL};
static const char *const optimizer_names[] = {"sgd", "adamw", NULL};
static const char *const backend_names[] = {"auto", "host", "cuda", NULL};

/* Name v of a NULL-terminated list of names, "?" when out of range. */
static const char *choice_name(const char *const *names, int v)
{
	for (int i = 0; names[i]; i++)
		if (i == v)
			return names[i];
	return "?";
}
static const char *const reduce_names[] = {"mean", "sum", NULL};
static const char *const gpu_plan_names[] = {"measure", "heuristic", NULL};
static const char *const progress_names[] = {"auto", "on", "off", NULL};

static int mlp_only(const struct train_config *c)
{
	return c->model == MODEL_MLP;
}

static int sgd_only(const struct train_config *c)
{
	return c->optimizer == OPTIMIZER_SGD;
}

static int adamw_only(const struct train_config *c)
{
	return c->optimizer == OPTIMIZER_ADAMW;
}

static int with_checkpoint_dir(const struct train_config *c)
{
	return c->checkpoint_dir[0] != '\0';
}

static int without_resume(const struct train_config *c)
{
	return c->resume[0] == '\0';
}

static int with_graph(const struct train_config *c)
{
	return c->use_graph;
}

/* More OpenBLAS threads than the node has cores only slows every rank down. */
static enum status threads_fit(const struct train_config *c, char *err, size_t errlen)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (cores > 0 && c->threads > cores)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "%d is more than the %ld cores of this node; give at most %ld, or 0 to "
				   "share the cores among the node's ranks",
				   c->threads, cores, cores);
	return STATUS_OK;
}

const struct setting config_settings[] = {
	{.flag = "data", .arg = "DIR", .type = SETTING_PATH, .offset = FIELD(data_dir),
	 .def = "./MNIST_Data/train/", .env = "DATA_PATH", .hi = CONFIG_PATH_MAX - 1, .group = "Data",
	 .help = "training set directory (train-images-idx3-ubyte and train-labels-idx1-ubyte, "
		 "raw or .gz)"},
	{.flag = "test-data", .arg = "DIR", .type = SETTING_PATH, .offset = FIELD(test_dir),
	 .hi = CONFIG_PATH_MAX - 1,
	 .help = "test set directory (t10k-* files); by default the sibling test/ directory of "
		 "--data when it exists"},
	{.flag = "limit", .arg = "N", .type = SETTING_LONG, .offset = FIELD(limit), .lo = 1,
	 .hi = 1000000000, .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "train on the first N training images only"},

	{.flag = "model", .arg = "NAME", .type = SETTING_CHOICE, .offset = FIELD(model), .def = "seed",
	 .choices = model_names, .expect = "model",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME, .group = "Model and optimiser",
	 .help = "seed (Dense 784->10 + ReLU, the tutorial's net), linear, mlp, or lenet (LeNet-5: "
		 "conv 5x5 6, pool, conv 5x5 16, pool, dense 120, 84, 10)"},
	{.flag = "hidden", .arg = "A,B,...", .type = SETTING_LIST, .offset = FIELD(hidden),
	 .count_offset = FIELD(n_hidden), .def = "512,256", .lo = 1, .hi = 16384,
	 .max = CONFIG_MAX_HIDDEN, .expect = "layer sizes",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME,
	 .help = "hidden layer sizes of the mlp", .applies = mlp_only,
	 .needs = "only the mlp model has hidden layers (add --model mlp)"},
	{.flag = "epochs", .arg = "N", .type = SETTING_INT, .offset = FIELD(epochs), .def = "10", .lo = 1,
	 .hi = 1000000, .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_TRAINING,
	 .help = "passes over the training set"},
	{.flag = "batch-size", .arg = "N", .type = SETTING_INT, .offset = FIELD(batch_size), .def = "32",
	 .lo = 1, .hi = 65536, .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_TRAINING,
	 .help = "batch size per rank"},
	{.flag = "optimizer", .arg = "NAME", .type = SETTING_CHOICE, .offset = FIELD(optimizer),
	 .def = "sgd", .choices = optimizer_names, .expect = "optimizer",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_NEWER |
		  SETTING_TRAINING,
	 .help = "sgd (torch.optim.SGD: --momentum, L2 --weight-decay) or adamw (torch.optim.AdamW: "
		 "--beta1, --beta2, --eps, decoupled --weight-decay)"},
	{.flag = "lr", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(lr), .def = "0.01", .lo = 0,
	 .hi = 1e30, .expect = "a positive finite number",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_LO_OPEN |
		  SETTING_TRAINING,
	 .help = "learning rate"},
	{.flag = "momentum", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(momentum), .def = "0",
	 .lo = 0, .hi = 1, .expect = "a number in [0, 1)",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_HI_OPEN |
		  SETTING_TRAINING,
	 .help = "SGD momentum in [0, 1)", .applies = sgd_only,
	 .needs = "only the sgd optimizer has momentum (AdamW's are --beta1 and --beta2)"},
	{.flag = "weight-decay", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(weight_decay),
	 .def = "0", .lo = 0, .hi = 1e30, .expect = "a finite number >= 0",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_NEWER |
		  SETTING_TRAINING,
	 .help = "weight decay: for sgd added to the gradient (g + F p), for adamw decoupled "
		 "(p -= lr F p)"},
	{.flag = "beta1", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(beta1), .def = "0.9",
	 .lo = 0, .hi = 1, .expect = "a number in [0, 1)",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_HI_OPEN |
		  SETTING_NEWER | SETTING_TRAINING,
	 .help = "AdamW: decay of the gradient's running mean, in [0, 1)", .applies = adamw_only,
	 .needs = "only applies with --optimizer adamw"},
	{.flag = "beta2", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(beta2), .def = "0.999",
	 .lo = 0, .hi = 1, .expect = "a number in [0, 1)",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_HI_OPEN |
		  SETTING_NEWER | SETTING_TRAINING,
	 .help = "AdamW: decay of the squared gradient's running mean, in [0, 1)",
	 .applies = adamw_only, .needs = "only applies with --optimizer adamw"},
	{.flag = "eps", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(eps), .def = "1e-8", .lo = 0,
	 .hi = 1e30, .expect = "a positive finite number",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_LO_OPEN |
		  SETTING_NEWER | SETTING_TRAINING,
	 .help = "AdamW: added to the denominator's square root", .applies = adamw_only,
	 .needs = "only applies with --optimizer adamw"},
	{.flag = "clip-grad-norm", .arg = "F", .type = SETTING_FLOAT, .offset = FIELD(clip_grad_norm),
	 .lo = 0, .hi = 1e30, .expect = "a positive finite number",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_LO_OPEN |
		  SETTING_NEWER | SETTING_TRAINING,
	 .help = "clip the gradients, once reduced over the ranks, by their global L2 norm before "
		 "the update (torch.nn.utils.clip_grad_norm_): all scaled by F / (norm + 1e-6) when that "
		 "is below 1; weight decay is added after. By default no clipping"},
	{.flag = "lr-schedule", .arg = "NAME", .type = SETTING_CHOICE, .offset = FIELD(lr_schedule),
	 .def = "constant", .choices = schedule_names, .expect = "schedule",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_TRAINING,
	 .help = "constant, or cosine: from --lr to 0 over all steps of the run (PyTorch's "
		 "CosineAnnealingLR, stepped per step)"},
	{.flag = "warmup-steps", .arg = "N", .type = SETTING_LONG, .offset = FIELD(warmup_steps),
	 .def = "0", .lo = 0, .hi = 1000000000, .note = "steps",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_TRAINING,
	 .help = "raise the rate linearly from lr/N to lr over the first N steps, then follow the "
		 "schedule"},
	{.flag = "seed", .arg = "N", .type = SETTING_U64, .offset = FIELD(seed), .def = "1",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_TRAINING,
	 .help = "seed for initial weights and shuffling"},

	{.flag = "backend", .arg = "NAME", .type = SETTING_CHOICE, .offset = FIELD(backend),
	 .def = "auto", .choices = backend_names, .expect = "backend",
	 .group = "Distribution and execution",
	 .help = "auto (cuda when every rank has a GPU, else host), host (OpenBLAS + MPI), or cuda "
		 "(cuBLAS + NCCL)"},
	{.flag = "grad-reduce", .arg = "OP", .type = SETTING_CHOICE, .offset = FIELD(grad_reduce),
	 .def = "mean", .choices = reduce_names, .expect = "reduction",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_TRAINING,
	 .help = "mean or sum of the ranks' gradients"},
	{.flag = "drop-last", .type = SETTING_FLAG, .offset = FIELD(drop_last), .lo = 1,
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_TRAINING,
	 .help = "drop the uneven tail of each epoch instead of padding short shards by wrapping "
		 "around"},
	{.flag = "micro-batch", .arg = "M", .type = SETTING_INT, .offset = FIELD(micro_batch),
	 .lo = 1, .hi = 65536, .note = "rows",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_NEWER | SETTING_TRAINING,
	 .help = "rows of one forward and backward pass; a step accumulates the gradients of "
		 "--global-batch / M micro-batches, rank r taking micro-batches r, r+R, ... of each "
		 "step (docs/exact.md). Default --batch-size when --global-batch or --exact is given; "
		 "without any of the three, each rank trains one batch of --batch-size a step"},
	{.flag = "global-batch", .arg = "G", .type = SETTING_INT, .offset = FIELD(global_batch),
	 .lo = 1, .hi = 1 << 24, .note = "rows",
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_NEWER | SETTING_TRAINING,
	 .help = "rows of one optimizer step over all ranks, a multiple of --micro-batch, with at "
		 "least one micro-batch per rank; the images and their order in a step depend on the "
		 "seed and the step, never on the rank count. Default ranks x --micro-batch"},
	{.flag = "exact", .type = SETTING_FLAG, .offset = FIELD(exact), .lo = 1,
	 .where = SETTING_AGREE | SETTING_CHECKPOINT | SETTING_RESUME | SETTING_NEWER |
		  SETTING_TRAINING,
	 .help = "micro-batch mode with the micro-batches' gradients summed in 64-bit fixed point "
		 "(exact in any order) and one OpenBLAS thread per rank unless --threads: the same "
		 "model, bit for bit, at every rank count for the same --global-batch and "
		 "--micro-batch (docs/exact.md)"},
	{.flag = "threads", .arg = "N", .type = SETTING_INT, .offset = FIELD(threads), .def = "0",
	 .lo = 0, .hi = 1024, .note = "0: automatic", .check = threads_fit,
	 .help = "OpenBLAS threads per rank, at most the node's cores; 0: the node's cores shared "
		 "by its ranks"},
	{.flag = "no-graph", .type = SETTING_FLAG, .offset = FIELD(use_graph), .lo = 0,
	 /* capturing a step is a collective: all ranks or none */
	 .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "CUDA backend: launch each step's kernels one by one instead of replaying a "
		 "captured CUDA graph"},
	{.flag = "graph-steps", .arg = "N", .type = SETTING_INT, .offset = FIELD(graph_steps),
	 .def = "8", .lo = 1, .hi = CONFIG_GRAPH_STEPS_MAX,
	 .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "CUDA backend: steps replayed by one graph launch, at most (a launch ends where "
		 "the host reads the loss, saves a checkpoint or ends an epoch); 1: a launch a step",
	 .applies = with_graph, .needs = "only applies to a captured step (drop --no-graph)"},
	{.flag = "no-pdl", .type = SETTING_FLAG, .offset = FIELD(use_pdl), .lo = 0,
	 .help = "CUDA backend: start each kernel only once the one before it has ended; by "
		 "default, on GPUs of compute capability 9.0 and later, a kernel of ours starts while "
		 "the one before it ends and waits for it on the device (programmatic dependent "
		 "launch; the same results)"},
	{.flag = "no-side-stream", .type = SETTING_FLAG, .offset = FIELD(use_side_stream), .lo = 0,
	 .where = SETTING_TRAINING,
	 .help = "CUDA backend: run every op of a step on one stream; by default the weight "
		 "gradients run on a second stream, beside the input gradients below them (the "
		 "same results)"},
	{.flag = "tf32", .type = SETTING_FLAG, .offset = FIELD(tf32), .lo = 1, .where = SETTING_AGREE,
	 .help = "CUDA backend: GEMMs on TF32 tensor cores (inputs rounded to a 10-bit mantissa, "
		 "float32 sums); by default float32 throughout"},
	{.flag = "gpu-plan", .arg = "HOW", .type = SETTING_CHOICE, .offset = FIELD(gpu_plan),
	 .def = "measure", .choices = gpu_plan_names, .expect = "plan", .where = SETTING_AGREE,
	 .help = "CUDA backend: measure (time every way to run each GEMM and convolution on the "
		 "device at the first step, rank 0 for all, and keep the fastest) or heuristic "
		 "(cuBLASLt's first choice, direct convolutions, untimed)"},
	{.flag = "gpu-plan-from", .arg = "FILE", .type = SETTING_PATH, .offset = FIELD(gpu_plan_from),
	 .hi = CONFIG_PATH_MAX - 1, .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "CUDA backend: run each op the way an earlier run's plan chose it, read by rank 0 "
		 "from FILE: that run's --metrics file (its last gpu_plan record) or a checkpoint it "
		 "saved; ops it does not name are planned per --gpu-plan. Runs compared on one plan "
		 "differ only in what they change",
	 .applies = without_resume,
	 .needs = "a resumed run follows its checkpoint's own plan (drop --resume or this flag)"},

	{.flag = "log-every", .arg = "N", .type = SETTING_INT, .offset = FIELD(log_every), .def = "10",
	 .lo = 1, .hi = 1000000000, .group = "Output", .where = SETTING_TRAINING,
	 .help = "print a loss line every N steps"},
	{.flag = "eval-every", .arg = "N", .type = SETTING_INT, .offset = FIELD(eval_every),
	 .def = "0", .lo = 0, .hi = 1000000, .note = "epochs; 0: only at the end",
	 .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "score the test set after every N epochs (rank 0 prints `epoch: E, test accuracy "
		 "is A`), off the training clock; 0: only at the end"},
	{.flag = "metrics", .arg = "FILE", .type = SETTING_PATH, .offset = FIELD(metrics_path),
	 .hi = CONFIG_PATH_MAX - 1,
	 .where = SETTING_TRAINING,
	 .help = "rank 0 writes JSON lines (epoch, step, loss, images/s, elapsed) to FILE"},
	{.flag = "profile", .type = SETTING_FLAG, .offset = FIELD(profile), .lo = 1,
	 .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "after training, run a step op by op five times, time each op (CUDA events on a "
		 "GPU, the clock on the host; the median of the five) and count its kernels; rank 0 "
		 "prints the table and --metrics gets an op_times event (the model trained is left as "
		 "it was)"},
	{.flag = "progress", .arg = "WHEN", .type = SETTING_CHOICE, .offset = FIELD(progress),
	 .def = "auto", .choices = progress_names, .expect = "progress mode",
	 .where = SETTING_TRAINING,
	 .help = "a progress line redrawn on rank 0's stderr (epoch and step counted from 0, "
		 "images/s): auto (when rank 0's stderr, or that of the mpirun that started it, is a "
		 "terminal, and mpirun is not writing the output to files), on, or off"},
	{.flag = "verbose", .type = SETTING_FLAG, .offset = FIELD(verbose), .lo = 1,
	 .where = SETTING_TRAINING,
	 .help = "CUDA backend: rank 0 also prints, on stderr, the plan chosen for each op "
		 "(every candidate and its measured time)"},

	/* Checkpoint paths leave room for "/ckpt-<epoch>-<global step>.safetensors". */
	{.flag = "checkpoint-dir", .arg = "DIR", .type = SETTING_PATH, .offset = FIELD(checkpoint_dir),
	 .hi = CONFIG_PATH_MAX - 97, .where = SETTING_AGREE | SETTING_TRAINING,
	 .group = "Checkpoints and failures (docs/reliability.md)",
	 .help = "rank 0 saves DIR/ckpt-<epoch>-<global step>.safetensors (parameters, optimizer "
		 "state, position, configuration) at the end of every epoch, written atomically"},
	{.flag = "save-every", .arg = "N", .type = SETTING_INT, .offset = FIELD(save_every), .def = "0",
	 .lo = 0, .hi = 1000000000, .note = "steps; 0: epoch ends only",
	 .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "also save every N steps; 0: at epoch ends only", .applies = with_checkpoint_dir,
	 .needs = "only applies with --checkpoint-dir DIR"},
	{.flag = "keep", .arg = "K", .type = SETTING_INT, .offset = FIELD(keep), .def = "3", .lo = 0,
	 .hi = 1000000, .note = "0: keep all", .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "keep the K newest checkpoints; 0: all", .applies = with_checkpoint_dir,
	 .needs = "only applies with --checkpoint-dir DIR"},
	{.flag = "resume", .arg = "PATH", .type = SETTING_PATH, .offset = FIELD(resume),
	 .hi = CONFIG_PATH_MAX - 97, .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "continue from a checkpoint file, or from the newest valid one in a directory; "
		 "--epochs stays the total"},
	{.flag = "init-from", .arg = "PATH", .type = SETTING_PATH, .offset = FIELD(init_from),
	 .hi = CONFIG_PATH_MAX - 97, .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "start a new run from the parameters of a checkpoint file, or of the newest valid "
		 "one in a directory, and nothing else (no optimizer state, no position): "
		 "fine-tuning with this run's settings, from epoch 0 step 0; the checkpoint must hold "
		 "this run's --model and --hidden",
	 .applies = without_resume,
	 .needs = "starts a new run from a checkpoint's parameters, --resume continues the run "
		  "that saved one: give one of them"},
	{.flag = "eval-only", .arg = "PATH", .type = SETTING_PATH, .offset = FIELD(eval_only),
	 .hi = CONFIG_PATH_MAX - 97, .where = SETTING_AGREE,
	 .help = "train nothing: score the model saved in a checkpoint file, or in the newest valid "
		 "one in a directory, on the test set. The model is the checkpoint's (--model and "
		 "--hidden, when given, must be its). Flags of training are refused: all but --data, "
		 "--test-data, --model, --hidden, --backend, --threads, --no-pdl, --tf32, --gpu-plan "
		 "and --timeout"},
	{.flag = "timeout", .arg = "SECONDS", .type = SETTING_FLOAT, .offset = FIELD(timeout),
	 .def = "300", .lo = 0, .hi = 1e6,
	 .expect = "a number of seconds in 0..1000000 (0: no deadline)", .where = SETTING_AGREE,
	 .help = "end the job when a collective is not complete after this long; 0: wait forever"},
	{.flag = "allow-nonfinite", .type = SETTING_FLAG, .offset = FIELD(allow_nonfinite), .lo = 1,
	 .where = SETTING_AGREE | SETTING_TRAINING,
	 .help = "keep training on a NaN or Inf loss (by default it stops)"},
	{.flag = "help", .letter = 'h', .type = SETTING_FLAG, .offset = FIELD(help), .lo = 1,
	 .group = "About", .help = "this text"},
	{.flag = "version", .type = SETTING_FLAG, .offset = FIELD(version), .lo = 1,
	 .help = "print mnist-train's version and exit"},
};

#define N_SETTINGS ((int)(sizeof(config_settings) / sizeof(config_settings[0])))
const int config_n_settings = N_SETTINGS;
_Static_assert(N_SETTINGS <= CONFIG_MAX_SETTINGS, "struct train_config.given has a place per row");

int config_given(const struct train_config *c, const struct setting *s)
{
	ptrdiff_t i = s - config_settings;
	return i >= 0 && i < N_SETTINGS && c->given[i];
}

const struct setting *config_setting(const char *flag)
{
	for (int i = 0; i < N_SETTINGS; i++)
		if (!strcmp(config_settings[i].flag, flag))
			return &config_settings[i];
	return NULL;
}

void config_key(const struct setting *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s", s->flag);
	for (char *p = buf; *p; p++)
		if (*p == '-')
			*p = '_';
}

/* ---- values ------------------------------------------------------------------ */

static int get_int(const struct train_config *c, size_t offset)
{
	int v;
	memcpy(&v, (const char *)c + offset, sizeof(v));
	return v;
}

static void put_int(struct train_config *c, size_t offset, int v)
{
	memcpy((char *)c + offset, &v, sizeof(v));
}

/* A whole-string decimal integer within [lo, hi]. */
static int parse_integer(const char *s, double lo, double hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || (double)v < lo || (double)v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || strchr(s, '-'))
		return -1;
	*out = (uint64_t)v;
	return 0;
}

/* A whole-string finite number whose float lies in the row's range. */
static int parse_float(const struct setting *s, const char *text, float *out)
{
	char *end;
	errno = 0;
	double d = strtod(text, &end);
	if (errno || end == text || *end || !isfinite(d) || fabs(d) > 1e30)
		return -1;
	float v = (float)d;
	if ((s->where & SETTING_LO_OPEN ? v <= s->lo : v < s->lo) ||
	    (s->where & SETTING_HI_OPEN ? v >= s->hi : v > s->hi))
		return -1;
	*out = v;
	return 0;
}

/* "7,5": 1 to s->max entries in [lo, hi], separated by single commas. */
static int parse_list(const struct setting *s, const char *text, int *values, int *count)
{
	char buf[256];
	size_t n = strlen(text);
	if (!n || n >= sizeof(buf) || text[0] == ',' || text[n - 1] == ',' || strstr(text, ",,"))
		return -1;
	memcpy(buf, text, n + 1);
	int k = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long long v;
		if (k == s->max || parse_integer(tok, s->lo, s->hi, &v))
			return -1;
		values[k++] = (int)v;
	}
	*count = k;
	return 0;
}

enum status config_set(const struct setting *s, struct train_config *c, const char *text,
		       char *err, size_t errlen)
{
	char *field = (char *)c + s->offset;
	long long v;
	switch (s->type) {
	case SETTING_PATH:
		if (!*text || strlen(text) > (size_t)s->hi)
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "expected a path of 1 to %.0f characters", s->hi);
		strcpy(field, text);
		return STATUS_OK;
	case SETTING_INT:
	case SETTING_LONG:
		if (parse_integer(text, s->lo, s->hi, &v))
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "'%s' is not an integer in %.0f..%.0f%s%s%s", text, s->lo, s->hi,
					   s->note ? " (" : "", s->note ? s->note : "", s->note ? ")" : "");
		if (s->type == SETTING_INT)
			put_int(c, s->offset, (int)v);
		else
			*(long *)(void *)field = (long)v;
		return STATUS_OK;
	case SETTING_U64:
		if (parse_u64(text, (uint64_t *)(void *)field))
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "'%s' is not an integer in 0..18446744073709551615", text);
		return STATUS_OK;
	case SETTING_FLOAT:
		if (parse_float(s, text, (float *)(void *)field))
			return status_fail(err, errlen, STATUS_BAD_INPUT, "'%s' is not %s", text,
					   s->expect);
		return STATUS_OK;
	case SETTING_CHOICE: {
		char names[128];
		struct text t;
		text_init(&t, names, sizeof(names));
		for (int i = 0; s->choices[i]; i++) {
			if (!strcmp(text, s->choices[i])) {
				put_int(c, s->offset, i);
				return STATUS_OK;
			}
			text_add(&t, "%s%s", i == 0 ? "" : s->choices[i + 1] ? ", " : " or ", s->choices[i]);
		}
		return status_fail(err, errlen, STATUS_BAD_INPUT, "unknown %s '%s'; expected %s",
				   s->expect, text, names);
	}
	case SETTING_FLAG:
		if (strcmp(text, "on") && strcmp(text, "off"))
			return status_fail(err, errlen, STATUS_BAD_INPUT, "'%s' is not on or off", text);
		put_int(c, s->offset, !strcmp(text, "on") ? (int)s->lo : !(int)s->lo);
		return STATUS_OK;
	case SETTING_LIST:
		if (parse_list(s, text, (int *)(void *)field, (int *)(void *)((char *)c + s->count_offset)))
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "'%s' is not a list of 1 to %d %s in %.0f..%.0f separated by "
					   "commas (e.g. %s)",
					   text, s->max, s->expect, s->lo, s->hi, s->def);
		return STATUS_OK;
	}
	return status_fail(err, errlen, STATUS_BAD_INPUT, "setting --%s has no type", s->flag);
}

void config_format(const struct setting *s, const struct train_config *c, char *buf, size_t len)
{
	const char *field = (const char *)c + s->offset;
	buf[0] = '\0';
	if (s->applies && !s->applies(c))
		return;
	switch (s->type) {
	case SETTING_PATH:
		snprintf(buf, len, "%s", field);
		break;
	case SETTING_INT:
	case SETTING_LONG: {
		long v = s->type == SETTING_INT ? get_int(c, s->offset) : *(const long *)(const void *)field;
		if (v || s->def) /* without a default, 0 is "not given" */
			snprintf(buf, len, "%ld", v);
		break;
	}
	case SETTING_U64:
		snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)(const void *)field);
		break;
	case SETTING_FLOAT: {
		float v = *(const float *)(const void *)field;
		if (v != 0.0f || s->def) /* without a default, 0 is "not given" */
			text_float_exact(v, buf, len);
		break;
	}
	case SETTING_CHOICE:
		snprintf(buf, len, "%s", choice_name(s->choices, get_int(c, s->offset)));
		break;
	case SETTING_FLAG:
		snprintf(buf, len, "%s", get_int(c, s->offset) == (int)s->lo ? "on" : "off");
		break;
	case SETTING_LIST: {
		const int *v = (const int *)(const void *)field;
		int n = get_int(c, s->count_offset);
		size_t used = 0;
		for (int i = 0; i < n && i < s->max && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "", v[i]);
		break;
	}
	}
}

/* ---- the command line ------------------------------------------------------------ */

/* The row's default; an environment variable that does not parse is an error (err). */
static enum status set_default(const struct setting *s, struct train_config *c, char *err,
			       size_t errlen)
{
	char why[512];
	if (s->type == SETTING_FLAG) {
		put_int(c, s->offset, !(int)s->lo);
		return STATUS_OK;
	}
	const char *env = s->env ? getenv(s->env) : NULL;
	if (env && *env) {
		if (config_set(s, c, env, why, sizeof(why)) == STATUS_OK)
			return STATUS_OK;
		if (err)
			return status_fail(err, errlen, STATUS_BAD_INPUT, "%s (the default of --%s): %s",
					   s->env, s->flag, why);
	}
	return s->def ? config_set(s, c, s->def, why, sizeof(why)) : STATUS_OK;
}

void config_defaults(struct train_config *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < N_SETTINGS; i++)
		set_default(&config_settings[i], c, NULL, 0);
}

/*
 * The message for an option getopt_long refused: a prefix of several long
 * flags (it takes a prefix of one) names them, anything else is unknown.
 */
static enum status unknown_option(const char *arg, char *err, size_t errlen)
{
	size_t len = strcspn(arg, "=");
	char names[1024] = "";
	int matches = 0;
	for (int i = 0; arg[0] == '-' && arg[1] == '-' && len > 2 && i < N_SETTINGS; i++) {
		const char *flag = config_settings[i].flag;
		if (strncmp(flag, arg + 2, len - 2) != 0)
			continue;
		size_t used = strlen(names);
		snprintf(names + used, sizeof(names) - used, "%s--%s", matches ? ", " : "", flag);
		matches++;
	}
	if (matches > 1)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "ambiguous option '%.*s': it could be any of %s (give more of the name)",
				   (int)len, arg, names);
	return status_fail(err, errlen, STATUS_BAD_INPUT, "unknown option '%s' (see --help)", arg);
}

enum status config_parse(int argc, char **argv, struct train_config *c, char *err, size_t errlen)
{
	struct option options[N_SETTINGS + 1];
	char why[512];
	memset(options, 0, sizeof(options));
	for (int i = 0; i < N_SETTINGS; i++) {
		options[i].name = config_settings[i].flag;
		options[i].has_arg = config_settings[i].type == SETTING_FLAG ? no_argument : required_argument;
		options[i].val = 256 + i;
	}
	/* The one-letter aliases: ":" (a missing value is reported as ':'), then each letter. */
	char letters[N_SETTINGS + 2] = ":";
	for (int i = 0, n = 1; i < N_SETTINGS; i++)
		if (config_settings[i].letter) {
			letters[n++] = config_settings[i].letter;
			letters[n] = '\0';
		}
	config_defaults(c);
	/* 0, not 1: glibc and musl then also forget the previous scan's position. */
	optind = 0;
	opterr = 0;
	for (;;) {
		int prev = optind > 0 ? optind : 1;
		int opt = getopt_long(argc, argv, letters, options, NULL);
		if (opt == -1)
			break;
		for (int i = 0; opt > 0 && opt < 256 && opt != ':' && i < N_SETTINGS; i++)
			if (config_settings[i].letter == opt)
				opt = 256 + i; /* flags only: getopt_long's letters take no value here */
		if (opt == ':')
			return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: missing value", argv[prev]);
		if (opt < 256 || opt >= 256 + N_SETTINGS)
			return unknown_option(argv[prev], err, errlen);
		const struct setting *s = &config_settings[opt - 256];
		c->given[opt - 256] = 1;
		if (s->type == SETTING_FLAG)
			put_int(c, s->offset, (int)s->lo);
		else if (config_set(s, c, optarg, why, sizeof(why)))
			return status_fail(err, errlen, STATUS_BAD_INPUT, "--%s: %s", s->flag, why);
		if (c->help || c->version)
			return STATUS_OK;
	}
	if (optind < argc)
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "unexpected argument '%s' (options start with --; see --help)",
				   argv[optind]);
	/* Rules across flags, in table order: a flag that means nothing here is refused, not ignored. */
	for (int i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &config_settings[i];
		int given = c->given[i];
		if (given && (s->where & SETTING_TRAINING) && c->eval_only[0])
			return status_fail(err, errlen, STATUS_BAD_INPUT,
					   "--%s: a flag of training, and --eval-only trains nothing (drop "
					   "--%s)",
					   s->flag, s->flag);
		if (given && s->applies && !s->applies(c))
			return status_fail(err, errlen, STATUS_BAD_INPUT, "--%s: %s", s->flag, s->needs);
		if (!given && s->env && set_default(s, c, err, errlen))
			return STATUS_BAD_INPUT;
		if (given && s->check && s->check(c, why, sizeof(why)))
			return status_fail(err, errlen, STATUS_BAD_INPUT, "--%s: %s", s->flag, why);
	}
	/*
	 * MNIST_DDP_HOST_ISA caps the vector ISA of the host backend's own kernels
	 * (cpu/conv_direct.h), for measuring and testing the lower paths: a value
	 * that names no path is refused, not ignored.
	 */
	const char *isa = getenv("MNIST_DDP_HOST_ISA");
	if (isa && *isa && strcmp(isa, "avx512") && strcmp(isa, "avx2") && strcmp(isa, "generic"))
		return status_fail(err, errlen, STATUS_BAD_INPUT,
				   "MNIST_DDP_HOST_ISA=%s: names no kernel path; expected avx512, avx2 "
				   "or generic (or unset: the CPU's best)",
				   isa);
	return STATUS_OK;
}

/*
 * Words of text from column `col` on, wrapped at HELP_WIDTH with HELP_COLUMN
 * indents; HELP_NBSP joins words that stay on one line ("(default 0)").
 */
#define HELP_NBSP '\x01'
static void print_wrapped(const char *text, int col)
{
	while (*text) {
		while (*text == ' ')
			text++;
		int n = (int)strcspn(text, " ");
		if (col > HELP_COLUMN && col + 1 + n > HELP_WIDTH) {
			printf("\n%*s", HELP_COLUMN, "");
			col = HELP_COLUMN;
		} else if (col > HELP_COLUMN) {
			putchar(' ');
			col++;
		}
		for (int i = 0; i < n; i++)
			putchar(text[i] == HELP_NBSP ? ' ' : text[i]);
		col += n;
		text += n;
	}
	putchar('\n');
}

void config_print_help(const char *prog)
{
	printf("Usage: mpirun -n N %s [options]\n"
	       "Data-parallel MNIST training: one rank per GPU (or CPU slot), gradients\n"
	       "averaged across ranks every step.\n",
	       prog);
	for (int i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &config_settings[i];
		char text[1024];
		if (s->group)
			printf("\n%s:\n", s->group);
		char letter[8] = "";
		if (s->letter)
			snprintf(letter, sizeof(letter), "-%c, ", s->letter);
		int col = printf("  %s--%s%s%s", letter, s->flag, s->arg ? " " : "", s->arg ? s->arg : "");
		if (col > HELP_COLUMN - 2) {
			printf("\n");
			col = 0;
		}
		printf("%*s", HELP_COLUMN - col, "");
		if (s->env)
			snprintf(text, sizeof(text), "%s (default $%s, else %s)", s->help, s->env, s->def);
		else if (s->def)
			snprintf(text, sizeof(text), "%s (default%c%s)", s->help, HELP_NBSP, s->def);
		else
			snprintf(text, sizeof(text), "%s", s->help);
		print_wrapped(text, HELP_COLUMN);
	}
	printf("\nA flag may be shortened to any beginning that names only it (--epoch 3 is\n"
	       "--epochs 3). Each rank prints `epoch: E, step: S, loss is L` on its stdout;\n"
	       "after each epoch rank 0 prints `epoch: E, mean loss: L, epoch time: T s,\n"
	       "images per second: I` (L: the mean of every rank's loss lines of the epoch),\n"
	       "and it ends with one `summary:` line. Exit status: 0 done, 2 bad usage or\n"
	       "input, 1 failure.\n");
}

const char *model_kind_name(enum model_kind m)
{
	return choice_name(model_names, (int)m);
}

const char *lr_schedule_name(enum lr_schedule kind)
{
	return choice_name(schedule_names, (int)kind);
}

const char *optimizer_name(enum optimizer_kind kind)
{
	return choice_name(optimizer_names, (int)kind);
}

const char *backend_choice_name(enum backend_choice b)
{
	return choice_name(backend_names, (int)b);
}
