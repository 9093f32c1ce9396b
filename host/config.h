/*
 * config.h - the trainer's command line (getopt_long) and its settings.
 *
 * Defaults are the seed tutorial's: model `seed`, SGD lr 0.01, batch 32 per
 * rank, 10 epochs, seed 1, a loss line every 10 steps, data from $DATA_PATH.
 */
#ifndef MNIST_DDP_CONFIG_H
#define MNIST_DDP_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "train/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CONFIG_MAX_HIDDEN 6
#define CONFIG_PATH_MAX 4096

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

/* --timeout when not given: seconds a collective may take. */
#define CONFIG_TIMEOUT_DEFAULT 300.0

struct train_config {
	char data_dir[CONFIG_PATH_MAX];
	char test_dir[CONFIG_PATH_MAX]; /* "" = sibling test/ of data_dir when present */
	int test_dir_given;
	enum model_kind model;
	int hidden[CONFIG_MAX_HIDDEN];
	int n_hidden;
	int epochs;
	int batch_size; /* per rank */
	float lr;
	float momentum;
	enum lr_schedule lr_schedule;
	long warmup_steps; /* steps of linear warm-up at the start of the run */
	uint64_t seed;
	int log_every;
	long limit; /* 0 = all training images */
	enum backend_choice backend;
	enum reduce_op grad_reduce;
	int drop_last;
	int threads; /* 0 = automatic */
	int use_graph; /* capture the step when the backend can */
	char metrics_path[CONFIG_PATH_MAX]; /* "" = none */
	/* Reliability (docs/reliability.md). */
	char checkpoint_dir[CONFIG_PATH_MAX]; /* "" = no checkpoints */
	int save_every;      /* steps between checkpoints (also at each epoch's end); 0 = epoch ends only */
	int keep;            /* newest checkpoints kept; 0 = all */
	char resume[CONFIG_PATH_MAX]; /* checkpoint file or directory; "" = start fresh */
	double timeout;      /* seconds a collective may take; 0 = no deadline */
	int allow_nonfinite; /* keep going on a NaN or Inf loss */
};

enum config_status {
	CONFIG_OK = 0,
	CONFIG_HELP = 1,  /* --help was asked for */
	CONFIG_ERROR = 2, /* err holds the message */
};

void config_defaults(struct train_config *c);
/* Parse argv over c (defaults first). On CONFIG_ERROR err names the flag and what was expected. */
int config_parse(int argc, char **argv, struct train_config *c, char *err, size_t errlen);
void config_print_help(const char *prog);

const char *model_kind_name(enum model_kind m);
const char *backend_choice_name(enum backend_choice b);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_CONFIG_H */
