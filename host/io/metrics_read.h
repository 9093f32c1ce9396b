/*
 * metrics_read.h - reading a --metrics file back (JSON lines, one event a
 * line): the last record of one event, as text, for --gpu-plan-from (the last
 * "gpu_plan" record: the backend's plan, which the program hands back to the
 * backend without reading it).
 */
#ifndef MNIST_DDP_METRICS_READ_H
#define MNIST_DDP_METRICS_READ_H

#include <stddef.h>

#include "check.h"

/* The longest --metrics line read whole: a plan record with its candidates is ~20 KB. */
#define METRICS_LINE_MAX ((size_t)16 << 20)

/*
 * The last line of the --metrics file `path` that is a JSON object with
 * "event": EVENT, as *text (malloc'd, the caller frees; no newline), and its
 * line number as *line. STATUS_BAD_INPUT with err naming path (and the line)
 * when path cannot be read, holds no such record, or its last one is not
 * JSON or longer than METRICS_LINE_MAX (`expected`: what path should have
 * been, for the message).
 */
enum status metrics_last_event(const char *path, const char *event, const char *expected,
			       char **text, long *line, char *err, size_t errlen);

#endif /* MNIST_DDP_METRICS_READ_H */
