/*
 * checkpoint_format.h - the checkpoint file format's layout and constants, in
 * one place for the writer (io/checkpoint_write.c), the reader
 * (io/checkpoint_read.c) and the files (io/checkpoint_dir.c).
 *
 * File DIR/ckpt-<epoch>-<global step>.safetensors, as safetensors lays it out:
 *   8 bytes   header length H, unsigned little-endian
 *   H bytes   JSON header, padded with spaces so the data starts 8-aligned:
 *             {"__metadata__":{"key":"value",...},
 *              "fc0.weight":{"dtype":"F32","shape":[10,784],"data_offsets":[b,e]},...}
 *   the data  raw little-endian tensors, back to back, offsets relative to here
 * Tensors: the parameters under the model's names and in PyTorch's layout
 * (fc<l>.weight (out, in), fc<l>.bias (out), conv<l>.weight (oc, c, k, k),
 * conv<l>.bias (oc): train/model.h) and the optimizer's state under PyTorch-like
 * names (train/optim.h): SGD's velocity as "optimizer.<name>", AdamW's moments as
 * "optimizer.<name>.exp_avg" and ".exp_avg_sq" and its update count as the
 * scalar "optimizer.step" (shape [], equal to the global step), all F32
 * (io/checkpoint_tensors.h lists them). Python's safetensors and PyTorch read the weights
 * as they are. __metadata__ (strings only, as the format requires) holds the
 * format and program version; the position as the global step and the steps
 * per epoch (the rest is derived: checkpoint_position); every setting the
 * settings table marks SETTING_CHECKPOINT, in its command-line text form
 * (config.h); the rank count, the training examples used and the training
 * data's CRC-32; and "checksum": "crc32:XXXXXXXX", the CRC-32 of the whole
 * file with those 8 hex digits read as '0', so a flipped or missing byte
 * anywhere is found.
 */
#ifndef MNIST_DDP_CHECKPOINT_FORMAT_H
#define MNIST_DDP_CHECKPOINT_FORMAT_H

#include <stdint.h>

/* Version 2 stores the position as the global step; version 1 files are refused. */
#define CHECKPOINT_FORMAT "mnist-ddp-checkpoint-2"
/* Largest JSON header accepted (ours are under 4 KB). */
#define CHECKPOINT_MAX_HEADER ((uint64_t)1 << 20)
/* Most tensors and metadata entries a header may hold, and their lengths. */
#define CHECKPOINT_MAX_TENSORS 64
#define CHECKPOINT_MAX_META 64
#define CHECKPOINT_NAME_MAX 128
#define CHECKPOINT_VALUE_MAX 512
/*
 * The CUDA backend's plan (io/plan_json.h: which way each GEMM runs, without
 * the candidates weighed), metadata "gpu_plan" when the run had one: the one
 * value allowed past CHECKPOINT_VALUE_MAX, up to this.
 */
#define CHECKPOINT_PLAN_KEY "gpu_plan"
#define CHECKPOINT_PLAN_MAX 16384

/* The checksum field as the writer writes it, its digits right after. */
#define CKPT_CHECKSUM_FIELD "\"checksum\":\"crc32:"
#define CKPT_DIGITS 8
#define CKPT_INT_LIMIT ((uint64_t)1 << 53) /* integers a JSON reader keeps exact */

/* A checkpoint's file name: CKPT_PREFIX "<epoch>-<global step>" CKPT_SUFFIX. */
#define CKPT_PREFIX "ckpt-"
#define CKPT_SUFFIX ".safetensors"

#endif /* MNIST_DDP_CHECKPOINT_FORMAT_H */
