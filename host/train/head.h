/*
 * head.h - a training step's head (include/backend.h, struct head_req: the
 * dense stages at the top, the loss, their gradients) on a backend: as the
 * backend's one op where it has one (->head, which may plan and fuse it),
 * else as its ops in order.
 */
#ifndef MNIST_DDP_HEAD_H
#define MNIST_DDP_HEAD_H

#include "backend.h"

/*
 * The head's ops, in order: the forwards up, the loss, the top's input
 * gradient, then each stage's weight gradient and the input gradient under
 * it, down, then the pool's gradient; each labelled (layer: the top's name).
 */
void head_run_parts(const struct backend *b, const struct head_req *r, const char *layer);

/* The head: the backend's op, or head_run_parts. */
void head_run(const struct backend *b, const struct head_req *r, const char *layer);

#endif /* MNIST_DDP_HEAD_H */
