/*
 * checkpoint.h - training checkpoints in the safetensors format: atomic
 * writes, strict validation, newest-valid discovery and keep-K pruning.
 *
 * The file's layout and the format's constants: io/checkpoint_format.h. The
 * code, by direction: io/checkpoint_write.c makes a file image,
 * io/checkpoint_read.c parses and validates one, io/checkpoint_compat.c judges
 * whether it fits this run and model and extracts its tensors, and
 * io/checkpoint_dir.c handles the files and directories.
 *
 * Writes go to a temporary file in DIR that is flushed, fsync'ed and renamed
 * over the final name, then DIR itself is fsync'ed: a crash leaves either the
 * old set of checkpoints or the new one, never a torn file under a ckpt- name.
 *
 * Nothing read from a file is trusted before it is checked: the header length
 * against the file size and a bound, the JSON (through jansson, duplicate keys
 * refused) against the shape safetensors uses (integers only, bounded counts
 * and lengths), every tensor's dtype, shape and byte range (the ranges must
 * tile the data exactly), the checksum, and every metadata value.
 *
 * Errors are enum status (check.h): STATUS_BAD_INPUT for a file that is not a
 * usable checkpoint (checkpoint_load tells a corrupt one from another run's
 * apart), STATUS_RUNTIME when memory or a write fails.
 */
#ifndef MNIST_DDP_CHECKPOINT_H
#define MNIST_DDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "config.h"
#include "io/checkpoint_format.h"
#include "train/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a checkpoint was taken and by what run. */
struct checkpoint_info {
	long long global_step; /* steps completed since training began, >= 1 */
	int steps_per_epoch;
	int ranks;             /* that wrote it */
	int examples;          /* training examples used (after --limit) */
	uint32_t train_crc32;  /* of the whole training set (struct mnist_set.checksum) */
	struct train_config cfg; /* the settings; a read file sets those marked SETTING_CHECKPOINT */
	char gpu_plan[CHECKPOINT_PLAN_MAX]; /* the backend's plan, its own text (a JSON object); "": none */
};

/* The configuration part of info from a run's settings; the position is zeroed. */
void checkpoint_info_from_config(struct checkpoint_info *info, const struct train_config *c,
				 int ranks, int examples, uint32_t train_crc32);

/*
 * Where global step `global_step` (steps completed, >= 1) stands in epochs
 * of `steps_per_epoch`: the last completed step, and the step a resumed run
 * continues from (next_epoch == --epochs: nothing is left).
 */
struct checkpoint_position {
	int epoch, step;           /* of the last completed step, from 0 (as in the loss lines) */
	int next_epoch, next_step; /* where training continues */
};
struct checkpoint_position checkpoint_position(long long global_step, int steps_per_epoch);

/* "ckpt-<epoch>-<global step>.safetensors" */
void checkpoint_file_name(int epoch, long long global_step, char *buf, size_t len);

/*
 * The whole file image in memory: *buf is malloc'ed (the caller frees it).
 * params (m->n_params) and the optimizer state of info->cfg.optimizer
 * (n_state * n_params, train/optim.h) in host memory. STATUS_OK, or
 * STATUS_RUNTIME when out of memory.
 */
enum status checkpoint_encode(const struct model *m, const struct checkpoint_info *info,
			      const float *params, const float *state, uint8_t **buf,
			      size_t *len);

/*
 * Write DIR/ckpt-<epoch>-<global step>.safetensors atomically (temporary file,
 * fflush, fsync, rename, fsync of DIR). path gets the final name. STATUS_OK,
 * or STATUS_RUNTIME with err naming the file and the cause.
 */
enum status checkpoint_save(const char *dir, const struct model *m,
			    const struct checkpoint_info *info, const float *params,
			    const float *state, char *path, size_t pathlen, char *err,
			    size_t errlen);

/* A parsed header's tensor table, pointing into the caller's buffer. */
struct checkpoint_tensor {
	char name[CHECKPOINT_NAME_MAX];
	char dtype[16];
	int ndim;
	uint64_t shape[8];
	uint64_t begin, end; /* byte range in the data */
};
struct checkpoint_view {
	struct checkpoint_tensor tensors[CHECKPOINT_MAX_TENSORS];
	int n_tensors;
	const uint8_t *data; /* the data section */
	uint64_t data_len;
};

/*
 * Parse and check a whole file image (buf, len): header bounds, JSON, tensor
 * table, checksum and metadata. `name` is used in messages. On STATUS_OK
 * info and view are filled (view points into buf); STATUS_BAD_INPUT when it
 * is not a whole, well-formed checkpoint, STATUS_RUNTIME when out of memory,
 * with err saying what is wrong.
 */
enum status checkpoint_parse(const uint8_t *buf, size_t len, const char *name,
			     struct checkpoint_info *info, struct checkpoint_view *view, char *err,
			     size_t errlen);

/*
 * Copy the tensors of a parsed file (info: its parsed metadata) into params
 * (m->n_params) and state (the optimizer's, as checkpoint_encode takes it)
 * after checking that the file holds exactly the tensors of the model and of
 * info's optimizer, with their shapes (and an update count equal to the
 * global step). state NULL: the parameters only (the state's tensors are
 * checked all the same, not copied). STATUS_OK, or STATUS_BAD_INPUT with err.
 */
enum status checkpoint_extract(const struct checkpoint_view *view, const struct model *m,
			       const struct checkpoint_info *info, const char *name, float *params,
			       float *state, char *err, size_t errlen);

/*
 * Can a run configured as `run` (its settings, ranks, data and steps per
 * epoch) continue from checkpoint `ck`? The settings marked SETTING_RESUME,
 * the data and the global batch must agree, and --epochs must reach the
 * checkpoint's position. STATUS_OK, or STATUS_BAD_INPUT with err listing
 * every difference.
 */
enum status checkpoint_compat(const struct checkpoint_info *ck, const struct checkpoint_info *run,
			      const char *name, char *err, size_t errlen);

/*
 * Read one file (at most the size the model implies plus the largest header),
 * parse, check compatibility with `run` and extract. run NULL: any run's
 * checkpoint of model m, for its parameters alone (state may be NULL).
 * STATUS_OK; or STATUS_BAD_INPUT with *mismatch 0 when the file cannot be
 * read or is corrupt, 1 when it is a whole checkpoint of another run or model
 * (mismatch may be NULL); or STATUS_RUNTIME. err names the file.
 */
enum status checkpoint_load(const char *path, const struct model *m,
			    const struct checkpoint_info *run, struct checkpoint_info *info,
			    float *params, float *state, int *mismatch, char *err, size_t errlen);

/* Whether the file at path begins as a checkpoint does (its header's length, then '{'). */
int checkpoint_is_file(const char *path);

/*
 * The metadata of a file image from its header alone: buf holds the file's
 * first len bytes, the whole header at least (or the whole file when it is
 * shorter). checkpoint_parse's checks of the header length, the JSON, the
 * tensor table's shape and every metadata value, not those of the data and
 * the checksum, which reading the whole file makes. A file that does not
 * begin as a checkpoint does is refused as not a checkpoint. STATUS_OK,
 * STATUS_BAD_INPUT or STATUS_RUNTIME, with err naming `name`.
 */
enum status checkpoint_parse_meta(const uint8_t *buf, size_t len, const char *name,
				  struct checkpoint_info *info, char *err, size_t errlen);

/* The same for the file at path, of which it reads the header only. */
enum status checkpoint_read_meta(const char *path, struct checkpoint_info *info, char *err,
				 size_t errlen);

/* A model as the flags name it: --model and, for an mlp, --hidden. */
struct checkpoint_model {
	int kind;     /* enum model_kind; -1 in an expectation: any model */
	int n_hidden; /* an mlp's hidden layers (0 otherwise); 0 in an expectation: any sizes */
	int hidden[CONFIG_MAX_HIDDEN];
};

/* The model c runs (hidden sizes only for an mlp). */
struct checkpoint_model checkpoint_model_of(const struct train_config *c);

/* "--model mlp --hidden 64,32", "--model lenet", "--model mlp" (sizes open), "any model". */
void checkpoint_model_text(const struct checkpoint_model *m, char *buf, size_t len);

/*
 * --init-from and --eval-only PATH: the parameters alone of a checkpoint of
 * any run (not its optimizer state or position), from a file, or from a
 * directory's newest valid checkpoint, searched as checkpoint_resume searches
 * one (a corrupt file skipped with a warning on `warn`). want: the model
 * expected; what it leaves open is the checkpoint's. On STATUS_OK got is the
 * checkpoint's model, *params its parameters (malloc'ed, the caller frees
 * them), info its metadata, and used the file read. A whole checkpoint of
 * another model: STATUS_BAD_INPUT with *other_model 1 and err naming the file,
 * the model it holds and the one expected; a path that is not, or does not
 * hold, a whole checkpoint: STATUS_BAD_INPUT with *other_model 0; or
 * STATUS_RUNTIME.
 */
enum status checkpoint_load_params(const char *path, const struct checkpoint_model *want,
				   struct checkpoint_model *got, float **params,
				   struct checkpoint_info *info, int *other_model, char *used,
				   size_t usedlen, FILE *warn, char *err, size_t errlen);

/*
 * --gpu-plan-from PATH, a checkpoint: read it whole (at most the size the
 * model m implies, as checkpoint_load) and check it (checkpoint_parse: the
 * checksum, the metadata; any run's or model's) and copy its GPU plan (the
 * metadata "gpu_plan", the backend's text) into plan (cap bytes). STATUS_OK;
 * STATUS_BAD_INPUT when it cannot be read, is damaged or holds no plan; or
 * STATUS_RUNTIME. err names the file.
 */
enum status checkpoint_read_plan(const char *path, const struct model *m, char *plan, size_t cap,
				 char *err, size_t errlen);

/*
 * --resume PATH: a file is loaded as it is; a directory's checkpoints are
 * tried newest first (by global step), and one that cannot be read or is
 * corrupt is skipped with a warning on `warn` (may be NULL) naming it and why.
 * A checkpoint of another run is never skipped: it ends the search. used gets
 * the path loaded. STATUS_OK, STATUS_BAD_INPUT (PATH is neither, holds no
 * valid checkpoint, or the newest whole one is another run's) or
 * STATUS_RUNTIME, with err.
 */
enum status checkpoint_resume(const char *path, const struct model *m,
			      const struct checkpoint_info *run, struct checkpoint_info *info,
			      float *params, float *state, char *used, size_t usedlen, FILE *warn,
			      char *err, size_t errlen);

/* One ckpt-<epoch>-<global step>.safetensors in a directory. */
struct checkpoint_entry {
	int epoch;
	long long global_step;
	char file[64]; /* the name within the directory */
};

/*
 * The checkpoint names in dir, newest (highest global step) first, into a
 * malloc'ed array (*out; the caller frees it). Other files, temporary files
 * included, are ignored. Returns the count, or -1 with err when dir cannot be read.
 */
int checkpoint_list(const char *dir, struct checkpoint_entry **out, char *err, size_t errlen);

/* Parse "ckpt-<epoch>-<global step>.safetensors" (exactly). 0 or -1. */
int checkpoint_parse_file_name(const char *file, int *epoch, long long *global_step);

/*
 * Keep the checkpoint of `global_step` and the keep - 1 newest older ones;
 * delete the older rest (keep 0: delete nothing). Checkpoints newer than
 * global_step (left by a run that went further before it was resumed from an
 * earlier point) are left alone. Returns how many were deleted, or -1 with err.
 */
int checkpoint_prune(const char *dir, long long global_step, int keep, char *err, size_t errlen);

/*
 * Create dir (and its parents) when missing, check that files can be created
 * in it, and remove the temporary files a writer killed mid-save left there.
 * STATUS_OK or STATUS_BAD_INPUT with err naming --checkpoint-dir.
 */
enum status checkpoint_prepare_dir(const char *dir, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_CHECKPOINT_H */
