/*
 * checkpoint.h - training checkpoints in the safetensors format: atomic
 * writes, strict validation, newest-valid discovery and keep-K pruning.
 *
 * File DIR/ckpt-<epoch>-<global step>.safetensors, as safetensors lays it out:
 *   8 bytes   header length H, unsigned little-endian
 *   H bytes   JSON header, padded with spaces so the data starts 8-aligned:
 *             {"__metadata__": {"key": "value", ...},
 *              "fc0.weight": {"dtype": "F32", "shape": [10, 784], "data_offsets": [b, e]}, ...}
 *   the data  raw little-endian tensors, back to back, offsets relative to here
 * Tensors: the parameters under the model's names and in PyTorch's layout
 * (fc<l>.weight (out, in), fc<l>.bias (out), conv<l>.weight (oc, c, k, k),
 * conv<l>.bias (oc): train/model.h) and the SGD velocity under
 * "optimizer.<name>", all F32. Python's safetensors and PyTorch read the weights
 * as they are. __metadata__ (strings only, as the format requires) holds the
 * position (epoch, step, global_step, next_epoch, next_step, sampler_offset,
 * steps_per_epoch), the configuration (model, hidden, seed, lr, momentum,
 * lr_schedule, warmup_steps, grad_reduce, drop_last, ranks, batch_size, global_batch, examples,
 * train_crc32, epochs), the program version, and "checksum": "crc32:XXXXXXXX",
 * the CRC-32 of the whole file with those 8 hex digits read as '0', so a
 * flipped or missing byte anywhere is found.
 *
 * Writes go to a temporary file in DIR that is flushed, fsync'ed and renamed
 * over the final name, then DIR itself is fsync'ed: a crash leaves either the
 * old set of checkpoints or the new one, never a torn file under a ckpt- name.
 *
 * Nothing read from a file is trusted before it is checked: the header length
 * against the file size, the JSON strictly (known keys, integers only, bounded
 * counts and lengths), every tensor's dtype, shape and byte range (the ranges
 * must tile the data exactly), the checksum, and the metadata's consistency.
 */
#ifndef MNIST_DDP_CHECKPOINT_H
#define MNIST_DDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "config.h"
#include "train/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CHECKPOINT_FORMAT "mnist-ddp-checkpoint-1"
/* Largest JSON header accepted (ours are under 4 KB). */
#define CHECKPOINT_MAX_HEADER ((uint64_t)1 << 20)
/* Most tensors and metadata entries a header may hold. */
#define CHECKPOINT_MAX_TENSORS 64
#define CHECKPOINT_MAX_META 64
#define CHECKPOINT_NAME_MAX 128
#define CHECKPOINT_VALUE_MAX 512

enum checkpoint_status {
	CHECKPOINT_OK = 0,
	CHECKPOINT_ERR_IO = 1,       /* cannot open, read or write the file */
	CHECKPOINT_ERR_CORRUPT = 2,  /* not a whole, well-formed checkpoint */
	CHECKPOINT_ERR_MISMATCH = 3, /* well-formed, but not for this run */
};

/* Where a checkpoint was taken and what configuration took it. */
struct checkpoint_info {
	/* Position. */
	int epoch;                /* epoch of the last completed step, from 0 */
	int step;                 /* that step's index in its epoch, from 0 (as in the loss lines) */
	long long global_step;    /* steps completed since training began */
	int next_epoch;           /* where training continues */
	int next_step;
	long long sampler_offset; /* examples of next_epoch's global permutation already
				     consumed by all ranks: next_step * global_batch */
	int steps_per_epoch;
	/* Configuration. */
	enum model_kind model;
	int hidden[CONFIG_MAX_HIDDEN]; /* mlp only */
	int n_hidden;
	uint64_t seed;
	float lr, momentum;
	enum lr_schedule lr_schedule;
	long warmup_steps;
	enum reduce_op grad_reduce;
	int drop_last;
	int ranks;      /* that wrote it */
	int batch_size; /* per rank; ranks * batch_size is the global batch */
	int examples;   /* training examples used (after --limit) */
	uint32_t train_crc32; /* of the whole training set (struct mnist_set.checksum) */
	int epochs;     /* --epochs of the run that wrote it */
};

/* The configuration part of info from a run's settings; the position is zeroed. */
void checkpoint_info_from_config(struct checkpoint_info *info, const struct train_config *c,
				 int ranks, int examples, uint32_t train_crc32);

/* Set the position fields after global step `global_step` (steps completed, >= 1). */
void checkpoint_info_set_position(struct checkpoint_info *info, long long global_step,
				  int steps_per_epoch);

/* "ckpt-<epoch>-<global step>.safetensors" */
void checkpoint_file_name(int epoch, long long global_step, char *buf, size_t len);

/*
 * The whole file image in memory: *buf is malloc'ed (the caller frees it).
 * params and velocity (m->n_params each) in host memory. 0, or -1 when out of memory.
 */
int checkpoint_encode(const struct model *m, const struct checkpoint_info *info,
		      const float *params, const float *velocity, uint8_t **buf, size_t *len);

/*
 * Write DIR/ckpt-<epoch>-<global step>.safetensors atomically (temporary file,
 * fflush, fsync, rename, fsync of DIR). path gets the final name. Returns
 * CHECKPOINT_OK or CHECKPOINT_ERR_IO with err naming the file and the cause.
 */
int checkpoint_save(const char *dir, const struct model *m, const struct checkpoint_info *info,
		    const float *params, const float *velocity, char *path, size_t pathlen,
		    char *err, size_t errlen);

/* A parsed header: tensor table and metadata, pointing into the caller's buffer. */
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
 * table, checksum and metadata. `name` is used in messages. On CHECKPOINT_OK
 * info and view are filled (view points into buf); otherwise
 * CHECKPOINT_ERR_CORRUPT with err saying what is wrong.
 */
int checkpoint_parse(const uint8_t *buf, size_t len, const char *name,
		     struct checkpoint_info *info, struct checkpoint_view *view, char *err,
		     size_t errlen);

/*
 * Copy the tensors of a parsed file into params and velocity (m->n_params
 * each) after checking that the file holds exactly the model's tensors with
 * its shapes. CHECKPOINT_OK or CHECKPOINT_ERR_MISMATCH with err.
 */
int checkpoint_extract(const struct checkpoint_view *view, const struct model *m,
		       const char *name, float *params, float *velocity, char *err,
		       size_t errlen);

/*
 * Can a run configured as `run` (ranks, batch_size, epochs... as this run
 * has them) continue from checkpoint `ck`? The model, data, seed, optimiser,
 * schedule, reduction, drop-last and global batch must agree, and --epochs
 * must not be below the checkpoint's position (with a cosine schedule, whose
 * rates depend on it, it must be the same). CHECKPOINT_OK or
 * CHECKPOINT_ERR_MISMATCH with err listing every difference.
 */
int checkpoint_compat(const struct checkpoint_info *ck, const struct checkpoint_info *run,
		      const char *name, char *err, size_t errlen);

/*
 * Read one file (at most the size the model implies plus the largest header),
 * parse, check compatibility with `run` and extract. Returns CHECKPOINT_OK,
 * _IO, _CORRUPT or _MISMATCH with err naming the file.
 */
int checkpoint_load(const char *path, const struct model *m, const struct checkpoint_info *run,
		    struct checkpoint_info *info, float *params, float *velocity, char *err,
		    size_t errlen);

/*
 * --resume PATH: a file is loaded as it is; a directory's checkpoints are
 * tried newest first (by global step), and one that cannot be read or is
 * corrupt is skipped with a warning on `warn` (may be NULL) naming it and why.
 * A mismatch (a checkpoint of another configuration) is never skipped: it is
 * returned. used gets the path loaded. Returns as checkpoint_load, or
 * CHECKPOINT_ERR_IO when PATH is neither, or a directory without a valid checkpoint.
 */
int checkpoint_resume(const char *path, const struct model *m, const struct checkpoint_info *run,
		      struct checkpoint_info *info, float *params, float *velocity, char *used,
		      size_t usedlen, FILE *warn, char *err, size_t errlen);

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
 */
int checkpoint_prepare_dir(const char *dir, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_CHECKPOINT_H */
