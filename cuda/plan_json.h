/*
 * plan_json.h - the CUDA backend's plan (cuda/plan_record.h) as the text the
 * program keeps without reading it (include/backend.h, ->plan_text): the
 * --metrics record {"event": "gpu_plan", ...} (the program adds the event),
 * read back by --gpu-plan-from, the checkpoint's "gpu_plan" metadata, read
 * back on resume, and --verbose's table. C, compiled into the CUDA module.
 *
 *   {"version": 1, "device": "NVIDIA H100 80GB HBM3", "library": "cublasLt 130100",
 *    "ops": [{"op": "gemm", "key": "...", "shape": "nt 6x25x200704 bias_grad",
 *             "chosen": "lt.bgradb...", "source": "measured",
 *             "candidates": [{"name": "...", "us": 12.5, "first_us": 18.0}, ...]}, ...]}
 *
 * A checkpoint keeps no candidates (what to run, not what was weighed). A
 * plan without "version" is of version 1 (checkpoints written before it had
 * one); another version is refused.
 */
#ifndef MNIST_DDP_PLAN_JSON_H
#define MNIST_DDP_PLAN_JSON_H

#include <stdio.h>

#include "check.h"
#include "plan_record.h"

/* The version of the plan's text this build writes and reads. */
#define PLAN_JSON_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The plan as one line of JSON (malloc'd, the caller frees), with each op's
 * candidates and the times when with_candidates.
 */
char *plan_json_dump(const struct plan_info *p, int with_candidates);

/*
 * Read a plan (as plan_json_dump wrote it, candidates and all).
 * STATUS_BAD_INPUT with err saying what is wrong when it is not one: not
 * JSON, a field missing or of another type, a string too long, no ops array.
 * On success out->ops is malloc'd: plan_json_free.
 */
enum status plan_json_parse(const char *text, struct plan_info *out, char *err, size_t errlen);

void plan_json_free(struct plan_info *p);

/* For people (malloc'd): one row per op (shape, chosen, how, its time) and its candidates' times. */
char *plan_json_table(const struct plan_info *p);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_PLAN_JSON_H */
