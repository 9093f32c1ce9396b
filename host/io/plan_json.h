/*
 * plan_json.h - a backend's plan (include/backend.h, struct plan_info) as
 * JSON: the --metrics record {"event": "gpu_plan", ...}, read back by
 * --gpu-plan-from, the checkpoint's "gpu_plan" metadata, read back on resume,
 * and --verbose's table.
 *
 *   {"device": "NVIDIA H100 80GB HBM3", "library": "cublasLt 130100",
 *    "ops": [{"op": "gemm", "key": "...", "shape": "nt 6x25x200704 bias_grad",
 *             "chosen": "lt.bgradb...", "source": "measured",
 *             "candidates": [{"name": "...", "us": 12.5, "first_us": 18.0}, ...]}, ...]}
 *
 * A checkpoint keeps no candidates (what to run, not what was weighed).
 */
#ifndef MNIST_DDP_PLAN_JSON_H
#define MNIST_DDP_PLAN_JSON_H

#include <stdio.h>

#include "backend.h"
#include "check.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The plan as one line of JSON (malloc'd, the caller frees), with each op's
 * candidates when with_candidates; `event`, unless NULL, comes first as
 * "event": EVENT.
 */
char *plan_json_dump(const struct plan_info *p, int with_candidates, const char *event);

/*
 * Read a plan (as plan_json_dump wrote it; candidates, if any, are skipped).
 * STATUS_BAD_INPUT with err saying what is wrong when it is not one: not
 * JSON, a field missing or of another type, a string too long, no ops array.
 * On success out->ops is malloc'd: plan_json_free.
 */
enum status plan_json_parse(const char *text, struct plan_info *out, char *err, size_t errlen);

/*
 * --gpu-plan-from PATH: the last {"event": "gpu_plan", ...} record of a
 * --metrics file, read as plan_json_parse reads one. STATUS_BAD_INPUT with
 * err naming PATH (and the record's line) when PATH cannot be read, holds no
 * such record, or its last one is damaged; STATUS_OK with out->ops malloc'd.
 */
enum status plan_json_load(const char *path, struct plan_info *out, char *err, size_t errlen);

void plan_json_free(struct plan_info *p);

/* For people: one row per op (shape, chosen, how, its time) and its candidates' times. */
void plan_print_table(FILE *f, const struct plan_info *p);

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_PLAN_JSON_H */
