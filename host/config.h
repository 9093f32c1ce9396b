/*
 * config.h - the run's settings: struct train_config and the one table that
 * describes every setting (host/config.c).
 *
 * Each row of the table is one command-line flag: its name, the type of its
 * value, its default, the range or names it accepts (and so the message for a
 * bad value), its --help line, and where the value goes beyond the run that
 * parsed it: the start-up fingerprint every rank must share (host/agree.c)
 * and the checkpoint metadata (host/io/checkpoint_write.c and _read.c). getopt_long's option
 * table, the parser, --help, the fingerprint and the metadata are all made
 * from the rows, so a new flag is one row plus the code that uses its value.
 *
 * Defaults are the seed tutorial's: model `seed`, SGD lr 0.01, batch 32 per
 * rank, 10 epochs, seed 1, a loss line every 10 steps, data from $DATA_PATH.
 */
#ifndef MNIST_DDP_CONFIG_H
#define MNIST_DDP_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "check.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CONFIG_MAX_HIDDEN 6
/* --graph-steps: the most steps one graph launch replays. */
#define CONFIG_GRAPH_STEPS_MAX 64
#define CONFIG_PATH_MAX 4096
/* Rows the settings table may hold (struct train_config records which were given). */
#define CONFIG_MAX_SETTINGS 96

enum model_kind {
	MODEL_SEED = 0, /* Dense 784->10, ReLU on the logits (the tutorial's net) */
	MODEL_LINEAR,   /* Dense 784->10 */
	MODEL_MLP,      /* 784 -> hidden... -> 10, ReLU between */
	MODEL_LENET,    /* LeNet-5: two 5x5 convolutions with max-pooling, three dense layers */
};

enum backend_choice {
	BACKEND_AUTO = 0,
	BACKEND_HOST,
	BACKEND_CUDA,
};

/* --lr-schedule (train/schedule.h computes the rates). */
enum lr_schedule {
	LR_CONSTANT = 0,
	LR_COSINE = 1,
};

/* --optimizer (train/optim.h: each one's update op and checkpoint state). */
enum optimizer_kind {
	OPTIMIZER_SGD = 0,   /* torch.optim.SGD: momentum, L2 weight decay */
	OPTIMIZER_ADAMW = 1, /* torch.optim.AdamW: decoupled weight decay */
};

/* --grad-reduce; the training loop maps it to the backend's reduction. */
enum grad_reduce {
	GRAD_REDUCE_MEAN = 0,
	GRAD_REDUCE_SUM,
};

/* --progress: where rank 0 draws its progress line (io/report.h, progress_wanted). */
enum progress_mode {
	PROGRESS_AUTO = 0, /* where a person watches: a terminal */
	PROGRESS_ON,
	PROGRESS_OFF,
};

struct train_config {
	char data_dir[CONFIG_PATH_MAX];
	char test_dir[CONFIG_PATH_MAX]; /* "" = sibling test/ of data_dir when present */
	long limit; /* 0 = all training images */
	enum model_kind model;
	int hidden[CONFIG_MAX_HIDDEN];
	int n_hidden;
	int epochs;
	int batch_size; /* per rank */
	enum optimizer_kind optimizer;
	float lr;
	float momentum;     /* sgd */
	float weight_decay; /* sgd: L2 on the gradient; adamw: decoupled */
	float beta1, beta2, eps; /* adamw */
	float clip_grad_norm; /* the gradients' global norm at most this; 0 = no clipping */
	enum lr_schedule lr_schedule;
	long warmup_steps; /* steps of linear warm-up at the start of the run */
	uint64_t seed;
	enum backend_choice backend;
	enum grad_reduce grad_reduce;
	int drop_last;
	/*
	 * Micro-batch mode (train/sampler.h, docs/exact.md): on when any of these
	 * three is given. 0 = not given: the micro-batch is --batch-size, the
	 * global batch ranks x the micro-batch.
	 */
	int micro_batch;  /* rows of one forward/backward pass */
	int global_batch; /* rows of one optimizer step, over all ranks */
	int exact;        /* sum the micro-batches' gradients in 64-bit fixed point */
	int threads; /* 0 = automatic */
	int use_graph; /* capture the step when the backend can (--no-graph: 0) */
	int graph_steps; /* steps replayed by one graph launch, at most */
	int use_pdl;   /* programmatic dependent launch where the GPU has it (--no-pdl: 0) */
	int use_side_stream; /* weight gradients on a second stream (--no-side-stream: 0) */
	int tf32;      /* TF32 tensor-core GEMMs (CUDA backend) */
	int gpu_plan;  /* enum plan_policy (backend.h): measure or heuristic */
	char gpu_plan_from[CONFIG_PATH_MAX]; /* a --metrics file or checkpoint whose plan the run
					      * follows; "" = none */
	int log_every;
	int eval_every; /* score the test set every N epochs; 0 = only at the end */
	char metrics_path[CONFIG_PATH_MAX]; /* "" = none */
	int verbose;   /* rank 0 prints the backend's plan */
	int profile;   /* a step op by op, timed (five runs, medians): where its time goes */
	/* Reliability (docs/reliability.md). */
	char checkpoint_dir[CONFIG_PATH_MAX]; /* "" = no checkpoints */
	int save_every;      /* steps between checkpoints (also at each epoch's end); 0 = epoch ends only */
	int keep;            /* newest checkpoints kept; 0 = all */
	char resume[CONFIG_PATH_MAX]; /* checkpoint file or directory; "" = start fresh */
	char init_from[CONFIG_PATH_MAX]; /* a checkpoint whose parameters a new run starts from */
	char eval_only[CONFIG_PATH_MAX]; /* a checkpoint to score, nothing trained; "" = train */
	float timeout;       /* seconds a collective may take; 0 = no deadline */
	int allow_nonfinite; /* keep going on a NaN or Inf loss */
	int progress;        /* enum progress_mode */
	int help;            /* --help (or -h) was asked for: print it and do nothing else */
	int version;         /* --version: print it and do nothing else */
	/* given[i]: the flag of row i of the table was on the command line (config_given). */
	unsigned char given[CONFIG_MAX_SETTINGS];
};

/* ---- the table ------------------------------------------------------------ */

enum setting_type {
	SETTING_PATH,   /* char[CONFIG_PATH_MAX]: 1 to `hi` characters; "" = not given */
	SETTING_INT,    /* int in [lo, hi] */
	SETTING_LONG,   /* long in [lo, hi] */
	SETTING_U64,    /* uint64_t, any */
	SETTING_FLOAT,  /* float, finite, in [lo, hi] (ends open with SETTING_LO_OPEN/HI_OPEN) */
	SETTING_CHOICE, /* an enum: the index of its name in `choices` */
	SETTING_FLAG,   /* int, no value: the flag sets it to `lo`, else it is !lo */
	SETTING_LIST,   /* int[] at offset and its count at count_offset: 1 to `max` of [lo, hi] */
};

/* Where a setting goes beyond the run that parsed it. */
#define SETTING_AGREE 0x1u      /* in the start-up fingerprint: every rank must have the same */
#define SETTING_CHECKPOINT 0x2u /* stored in the checkpoint metadata */
#define SETTING_RESUME 0x4u     /* ... and a resumed run must have the checkpoint's value */
#define SETTING_LO_OPEN 0x8u    /* SETTING_FLOAT: lo itself is out of range */
#define SETTING_HI_OPEN 0x10u   /* SETTING_FLOAT: hi itself is out of range */
#define SETTING_NEWER 0x20u     /* SETTING_CHECKPOINT: older checkpoints lack it; absent, it is the default */
#define SETTING_TRAINING 0x40u  /* only means something to training: refused with --eval-only */

struct setting {
	const char *flag;   /* "batch-size" is --batch-size; the key is the same with '_' */
	char letter;        /* a one-letter alias ('h' is -h), or 0 */
	const char *arg;    /* its value in --help ("N"); NULL for SETTING_FLAG */
	enum setting_type type;
	size_t offset;       /* of the value in struct train_config */
	size_t count_offset; /* SETTING_LIST: of the count */
	const char *def;     /* the default, as a command-line value; NULL: not given (0, "", off) */
	const char *env;     /* an environment variable that, set and not empty, replaces def */
	double lo, hi;       /* the range (SETTING_LIST: of each entry; SETTING_PATH: hi is the length) */
	int max;             /* SETTING_LIST: most entries */
	const char *const *choices; /* SETTING_CHOICE: the names, in enum order, NULL-terminated */
	/* For messages: what a bad value is not (SETTING_FLOAT), the noun of a name
	 * (SETTING_CHOICE: "unknown model 'x'"), or what a list holds (SETTING_LIST). */
	const char *expect;
	const char *note; /* after an integer range in a message: "0: automatic" */
	unsigned where;   /* SETTING_AGREE, SETTING_CHECKPOINT, ... */
	const char *group; /* the --help section this row starts; NULL: the one above */
	const char *help;
	/*
	 * NULL, or whether the setting means anything given the others (it may
	 * read only rows above it). Given where it does not apply, the flag is
	 * refused with `needs`; where it does not apply its text is "".
	 */
	int (*applies)(const struct train_config *c);
	const char *needs;
	/* NULL, or a check of the parsed value against this machine: STATUS_OK or a message. */
	enum status (*check)(const struct train_config *c, char *err, size_t errlen);
};

extern const struct setting config_settings[];
extern const int config_n_settings;

/* The row of a flag name ("lr"), or NULL. */
const struct setting *config_setting(const char *flag);

/* Whether the flag of s was on the command line config_parse read into c (not a default). */
int config_given(const struct train_config *c, const struct setting *s);

/* Its key in the fingerprint and the metadata: the flag with '_' for '-' ("batch_size"). */
void config_key(const struct setting *s, char *buf, size_t len);

/*
 * The value of s in c as text: what the command line takes (floats in the
 * fewest digits that read back as the same float, flags "on" or "off"), or ""
 * for a value not given (a path, a number without a default) and a setting
 * that does not apply. Two configurations
 * have the same value exactly when the texts are equal.
 */
void config_format(const struct setting *s, const struct train_config *c, char *buf, size_t len);

/*
 * Set s in c from text, as the command line does (and a flag from "on" or
 * "off"). On STATUS_BAD_INPUT err says what is wrong with the value, without
 * the flag ("'x' is not an integer in 1..1000000"): the caller names where it
 * came from.
 */
enum status config_set(const struct setting *s, struct train_config *c, const char *text,
		       char *err, size_t errlen);

/* ---- the command line ---------------------------------------------------------- */

/* Every setting's default (an unusable $DATA_PATH leaves the built-in one). */
void config_defaults(struct train_config *c);

/*
 * Parse argv over the defaults. Long flags may be abbreviated to any prefix
 * that names one flag (getopt_long's rule); -h is --help. STATUS_OK (c->help
 * or c->version set when --help, -h or --version came, which ends the parse),
 * or STATUS_BAD_INPUT with err naming the flag (or the argument), what was
 * given and what was expected; a prefix of several flags names them all.
 */
enum status config_parse(int argc, char **argv, struct train_config *c, char *err, size_t errlen);

/* The --help text on stdout, made from the table. */
void config_print_help(const char *prog);

/*
 * Micro-batch mode (--micro-batch, --global-batch, --exact; docs/exact.md):
 * whether it is on, and its sizes: M, --micro-batch or else --batch-size;
 * G, --global-batch or else ranks x M.
 */
static inline int config_micro_mode(const struct train_config *c)
{
	return c->micro_batch > 0 || c->global_batch > 0 || c->exact;
}
static inline int config_micro_batch(const struct train_config *c)
{
	return c->micro_batch > 0 ? c->micro_batch : c->batch_size;
}
static inline long long config_global_batch(const struct train_config *c, int ranks)
{
	return c->global_batch > 0 ? c->global_batch : (long long)ranks * config_micro_batch(c);
}

const char *model_kind_name(enum model_kind m);
const char *backend_choice_name(enum backend_choice b);
const char *lr_schedule_name(enum lr_schedule kind); /* "constant" or "cosine" */
const char *optimizer_name(enum optimizer_kind kind); /* "sgd" or "adamw" */

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_CONFIG_H */
