/*
 * backend_host.c - the host backend: OpenBLAS SGEMM, loops over the shared
 * element bodies of elem.h, and MPI_Allreduce. It is the default without a
 * GPU and the oracle the CUDA backend is tested against.
 */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "backend.h"
#include "backend_module.h"
#include "blas_info.h"
#include "check.h"
#include "clock.h"
#include "conv_host.h"
#include "deadline.h"
#include "dist.h"
#include "elem.h"
#include "fixed_host.h"
#include "host_internal.h"
#include "host_vector.h"

/* Buffers from this size up (the data sets) are asked to live on 2 MiB pages. */
#define HOST_HUGE_MIN ((size_t)4 << 20)
#define HOST_HUGE_PAGE ((size_t)2 << 20)

static void *host_alloc(void *ctx, size_t bytes)
{
	/*
	 * 64-byte alignment for the vector units; zero-filled as the interface
	 * promises. The batch gather reads rows scattered over the whole training
	 * set (47 MB), so on 4 KiB pages nearly every row costs a TLB miss; a
	 * large buffer is aligned to 2 MiB and offered to transparent huge pages
	 * (a hint: where the kernel has them off, nothing changes).
	 */
	size_t align = bytes >= HOST_HUGE_MIN ? HOST_HUGE_PAGE : 64;
	size_t rounded = (bytes + align - 1) & ~(align - 1);
	if (!rounded)
		rounded = align;
	void *p = aligned_alloc(align, rounded);
	if (!p)
		return NULL;
#ifdef MADV_HUGEPAGE
	if (align == HOST_HUGE_PAGE)
		madvise(p, rounded, MADV_HUGEPAGE);
#endif
	memset(p, 0, rounded);
	return p;
}

static void host_free(void *ctx, void *p)
{
	free(p);
}

static void host_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memcpy(dst, src, bytes);
}

/*
 * The element loops below run in blocks of HOST_BLOCK elements, built for the
 * vector units as host_vector.h describes. Per element the arithmetic is
 * elem.h's, unchanged: ISO C mode does not contract into FMAs, so results are
 * bitwise the same as a scalar loop's.
 */

/*
 * dst (n) = normalize_pixel_elem(src (n)). Blocks of 64 pixels first: 64
 * bytes is one whole vector of uint8, which gcc then widens to four vectors of
 * floats (with 16-pixel blocks it uses quarter-width registers).
 */
static inline void normalize_row(float *restrict dst, const uint8_t *restrict src, int n)
{
	int p = 0;
	for (; p + 4 * HOST_BLOCK <= n; p += 4 * HOST_BLOCK)
		for (int j = 0; j < 4 * HOST_BLOCK; j++)
			dst[p + j] = normalize_pixel_elem(src[p + j]);
	for (; p + HOST_BLOCK <= n; p += HOST_BLOCK)
		for (int j = 0; j < HOST_BLOCK; j++)
			dst[p + j] = normalize_pixel_elem(src[p + j]);
	for (; p < n; p++)
		dst[p] = normalize_pixel_elem(src[p]);
}

/* Rows of the batch at *cursor: count, or what is left of the index (none past its end). */
static int gather_rows(const struct gather_req *g)
{
	int left = g->len - *g->cursor;
	return left < 0 ? 0 : left < g->count ? left : g->count;
}

HOST_VECTOR_CLONES
static void gather_rows_to(const struct gather_req *g, int rows, float *x)
{
	const int32_t *idx = g->index + *g->cursor;
	/*
	 * The rows are scattered over the whole set, so each one starts with cache
	 * misses: fetch a few rows ahead while converting this one.
	 */
	enum { AHEAD = 4 };
	size_t row_bytes = (size_t)g->pixels;
	for (int i = 0; i < rows && i < AHEAD; i++)
		for (size_t b = 0; b < row_bytes; b += 64)
			__builtin_prefetch(g->images + (size_t)idx[i] * row_bytes + b);
	for (int i = 0; i < rows; i++) {
		if (i + AHEAD < rows)
			for (size_t b = 0; b < row_bytes; b += 64)
				__builtin_prefetch(g->images + (size_t)idx[i + AHEAD] * row_bytes + b);
		normalize_row(x + (size_t)i * row_bytes, g->images + (size_t)idx[i] * row_bytes,
			      g->pixels);
		g->y[i] = g->labels[idx[i]];
	}
}

/* Batch-last rows go through a scratch copy and a blocked transpose (cpu/conv_host.c). */
static void host_gather(void *ctx, const struct gather_req *g)
{
	int rows = gather_rows(g);
	if (rows == 0)
		return;
	if (!g->batch_last) {
		gather_rows_to(g, rows, g->x);
		return;
	}
	float *tmp = host_scratch(ctx, HOST_SCRATCH_POOLED,
				  (size_t)rows * (size_t)g->pixels * sizeof(float));
	gather_rows_to(g, rows, tmp);
	host_transpose(ctx, tmp, rows, g->pixels, g->x);
}

static void host_advance(void *ctx, int32_t *cursor, int delta)
{
	*cursor += delta;
}

static void host_softmax_xent(void *ctx, const struct xent_req *r)
{
	for (int i = 0; i < r->rows; i++) {
		const float *logits = r->logits + (size_t)i * r->cols;
		float *d = r->dlogits ? r->dlogits + (size_t)i * r->cols : NULL;
		r->row_loss[i] = softmax_xent_row_elem(logits, r->labels[i], r->cols, r->scale, d);
		if (d && r->relu)
			relu_backward_run(d, logits, (size_t)r->cols);
	}
	if (r->counters) {
		r->counters->cursor += r->rows;
		r->counters->step += 1;
		r->counters->updates += 1;
	}
}

static void host_argmax_hits(void *ctx, const float *logits, const int32_t *labels, int rows,
			     int cols, int32_t *hits)
{
	for (int i = 0; i < rows; i++)
		hits[i] += argmax_hit_row_elem(logits + (size_t)i * cols, labels[i], cols);
}

/* Plain SGD: v is neither read nor written (it may be NULL). */
static inline void sgd_plain(float *restrict p, const float *restrict g, size_t n, float lr,
			     float weight_decay)
{
	float unused = 0.0f;
	size_t i = 0;
	for (; i + HOST_BLOCK <= n; i += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			sgd_update_elem(&p[i + k], g[i + k], &unused, lr, 0.0f, weight_decay);
	for (; i < n; i++)
		sgd_update_elem(&p[i], g[i], &unused, lr, 0.0f, weight_decay);
}

static inline void sgd_momentum(float *restrict p, const float *restrict g, float *restrict v,
				size_t n, float lr, float momentum, float weight_decay)
{
	size_t i = 0;
	for (; i + HOST_BLOCK <= n; i += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			sgd_update_elem(&p[i + k], g[i + k], &v[i + k], lr, momentum, weight_decay);
	for (; i < n; i++)
		sgd_update_elem(&p[i], g[i], &v[i], lr, momentum, weight_decay);
}

HOST_VECTOR_CLONES
static void sgd_run(float *p, const float *g, float *v, size_t n, float lr, float momentum,
		    float weight_decay)
{
	if (momentum != 0.0f)
		sgd_momentum(p, g, v, n, lr, momentum, weight_decay);
	else
		sgd_plain(p, g, n, lr, weight_decay);
}

static void host_sgd_update(void *ctx, float *p, const float *g, float *v, size_t n,
			    const float *lr_table, const struct step_counters *counters,
			    float momentum, float weight_decay, const struct gather_req *then)
{
	sgd_run(p, g, v, n, lr_table[counters->step - 1], momentum, weight_decay);
	if (then)
		host_gather(ctx, then);
}

HOST_VECTOR_CLONES
static void adamw_run(float *restrict p, const float *restrict g, float *restrict m,
		      float *restrict v, size_t n, struct adamw_hyper h, struct adamw_step s)
{
	size_t i = 0;
	for (; i + HOST_BLOCK <= n; i += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			adamw_update_elem(&p[i + k], g[i + k], &m[i + k], &v[i + k], h, s);
	for (; i < n; i++)
		adamw_update_elem(&p[i], g[i], &m[i], &v[i], h, s);
}

static void host_adamw_update(void *ctx, float *p, const float *g, float *m, float *v, size_t n,
			      const float *lr_table, const struct step_counters *counters,
			      struct adamw_hyper h, const struct gather_req *then)
{
	adamw_run(p, g, m, v, n, h,
		  adamw_step_elem(lr_table[counters->step - 1], counters->updates, h));
	if (then)
		host_gather(ctx, then);
}

/*
 * Gradient clipping (backend.h, ->clip_grad_norm): the sum of squares in
 * elem.h's order, CLIP_PARTS partial sums taken a row of CLIP_PARTS at a
 * time (each part's terms still in order of the index), folded by halves.
 */
HOST_VECTOR_CLONES
static float clip_sumsq(const float *restrict g, size_t n)
{
	float part[CLIP_PARTS];
	for (int c = 0; c < CLIP_PARTS; c++)
		part[c] = 0.0f;
	size_t i = 0;
	for (; i + CLIP_PARTS <= n; i += CLIP_PARTS)
		for (int c = 0; c < CLIP_PARTS; c++)
			part[c] = clip_sumsq_elem(part[c], g[i + c]);
	for (size_t c = 0; i + c < n; c++)
		part[c] = clip_sumsq_elem(part[c], g[i + c]);
	for (int half = CLIP_PARTS / 2; half > 0; half /= 2)
		for (int c = 0; c < half; c++)
			part[c] += part[c + half];
	return part[0];
}

HOST_VECTOR_CLONES
static void clip_scale(float *restrict g, size_t n, float coef)
{
	size_t i = 0;
	for (; i + HOST_BLOCK <= n; i += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			g[i + k] = scale_elem(g[i + k], coef);
	for (; i < n; i++)
		g[i] = scale_elem(g[i], coef);
}

static void host_clip_grad_norm(void *ctx, float *g, size_t n, float max_norm, float *norm)
{
	(void)ctx;
	*norm = clip_norm_elem(clip_sumsq(g, n));
	float coef = clip_coef_elem(*norm, max_norm);
	if (clip_scales_elem(coef))
		clip_scale(g, n, coef);
}

/*
 * The collectives are Open MPI's blocking calls, its fastest (the nonblocking
 * ones go through a slower component: docs/benchmarks.md); the deadline is
 * the job's watchdog (include/deadline.h), armed around each call.
 */
static void host_set_timeout(void *ctx, double seconds)
{
	deadline_set_timeout(((struct host_ctx *)ctx)->watch, seconds);
}

static void host_set_position(void *ctx, int epoch, int step)
{
	deadline_set_position(((struct host_ctx *)ctx)->watch, epoch, step);
}

static void host_allreduce(void *ctx, float *buf, size_t n, enum reduce_op op)
{
	struct host_ctx *h = ctx;
	if (h->size == 1 || n == 0)
		return;
	deadline_arm(h->watch, "allreduce", 1);
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, h->comm));
	deadline_disarm(h->watch);
	if (op == REDUCE_MEAN) {
		float inv = 1.0f / (float)h->size;
		for (size_t i = 0; i < n; i++)
			buf[i] = scale_elem(buf[i], inv);
	}
}

/* ---- micro-batch mode (backend.h, ->grad_accumulate ...; docs/exact.md) ---- */

HOST_VECTOR_CLONES
static void host_grad_accumulate(void *ctx, float *restrict acc, const float *restrict g, size_t n)
{
	(void)ctx;
	size_t i = 0;
	for (; i + HOST_BLOCK <= n; i += HOST_BLOCK)
		for (int k = 0; k < HOST_BLOCK; k++)
			acc[i + k] = grad_add_elem(acc[i + k], g[i + k]);
	for (; i < n; i++)
		acc[i] = grad_add_elem(acc[i], g[i]);
}

static void host_fixed_accumulate(void *ctx, int64_t *restrict acc, const float *restrict g,
				  size_t n, double limit, int first)
{
	(void)ctx;
	fixed_host_accumulate(acc, g, n, limit, first);
}

static void host_fixed_decode(void *ctx, float *restrict g, int64_t *restrict acc, size_t n)
{
	(void)ctx;
	fixed_host_decode(g, acc, n);
	acc[n + 1] += acc[n];
	acc[n] = 0;
}

static void host_allreduce_i64(void *ctx, int64_t *buf, size_t n)
{
	struct host_ctx *h = ctx;
	if (h->size == 1 || n == 0)
		return;
	deadline_arm(h->watch, "allreduce", 1);
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_INT64_T, MPI_SUM, h->comm));
	deadline_disarm(h->watch);
}

static void host_broadcast(void *ctx, float *buf, size_t n, int root)
{
	struct host_ctx *h = ctx;
	if (h->size == 1 || n == 0)
		return;
	deadline_arm(h->watch, "broadcast", 1);
	MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_FLOAT, root, h->comm));
	deadline_disarm(h->watch);
}

static void host_destroy(void *ctx)
{
	struct host_ctx *h = ctx;
	for (int i = 0; i < HOST_SCRATCH_SLOTS; i++)
		free(h->scratch[i]);
	free(h); /* the watchdog belongs to the job */
}

/* ---- timing (--profile): the ops are done when they return, so the clock times them ---- */

static void *host_event_create(void *ctx)
{
	(void)ctx;
	double *t = xmalloc(sizeof(*t));
	*t = 0.0;
	return t;
}

static void host_event_record(void *ctx, void *ev)
{
	(void)ctx;
	*(double *)ev = clock_seconds();
}

static double host_event_us(void *ctx, void *start, void *end)
{
	(void)ctx;
	return 1e6 * (*(const double *)end - *(const double *)start);
}

static void host_event_destroy(void *ctx, void *ev)
{
	(void)ctx;
	free(ev);
}

/* Its weight gradients read x (cpu/gemm_host.c, cpu/conv_direct.c): no im2col matrix kept. */
static int host_conv_wgrad_reads_x(void *ctx)
{
	(void)ctx;
	return 1;
}

static const struct backend_ops host_ops = {
	.name = "host",
	.alloc = host_alloc,
	.free = host_free,
	.upload = host_copy,
	.download = host_copy,
	.gemm = host_gemm,
	.gather = host_gather,
	.advance = host_advance,
	.softmax_xent = host_softmax_xent,
	.argmax_hits = host_argmax_hits,
	.sgd_update = host_sgd_update,
	.adamw_update = host_adamw_update,
	.clip_grad_norm = host_clip_grad_norm,
	.conv_forward = host_conv_forward,
	.pool_backward = host_pool_backward,
	.conv_backward_data = host_conv_backward_data,
	.grad_accumulate = host_grad_accumulate,
	.fixed_accumulate = host_fixed_accumulate,
	.fixed_decode = host_fixed_decode,
	.allreduce_i64 = host_allreduce_i64,
	.conv_wgrad_reads_x = host_conv_wgrad_reads_x,
	.allreduce = host_allreduce,
	.broadcast = host_broadcast,
	.set_timeout = host_set_timeout,
	.set_position = host_set_position,
	.event_create = host_event_create,
	.event_record = host_event_record,
	.event_us = host_event_us,
	.event_destroy = host_event_destroy,
	.destroy = host_destroy,
};

int backend_host_create(const struct dist *d, int threads, struct backend *out)
{
	struct host_ctx *h = xmalloc(sizeof(*h));
	memset(h, 0, sizeof(*h));
	h->comm = d ? d->comm : MPI_COMM_SELF;
	h->size = 1;
	h->watch = d ? d->watch : NULL;
	if (d)
		MPI_CHECK(MPI_Comm_size(h->comm, &h->size));
	if (threads > 0)
		openblas_set_num_threads(threads);
	out->ops = &host_ops;
	out->ctx = h;
	blas_describe(out->device, sizeof(out->device));
	if (d)
		blas_advise(d->rank, d->host, d->local_rank);
	return 0;
}
