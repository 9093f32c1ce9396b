/*
 * kernels_loss.cuh - the loss's rows on a group of lanes (xent_row) and the
 * step's counters moved on (xent_count): what the loss kernel, the fused head
 * (cuda/kernels_head.cu) and the dense layers' kernel (cuda/kernels_dense.cu)
 * share. Included by those files only, after kernel_launch.cuh.
 */
#ifndef MNIST_DDP_KERNELS_LOSS_CUH
#define MNIST_DDP_KERNELS_LOSS_CUH

#include "elem.h"
#include "kernel_launch.cuh"

/*
 * Rows of logits (rows, cols) and of dlogits, a group of `lanes` threads per
 * row, blockDim.x / lanes rows per block at a time. Lane j takes column j:
 * its logit to shared memory; lane 0 folds the max in column order; lane j
 * its exponential; lane 0 the sum in column order and the row's loss; lane j
 * its gradient (through the ReLU gate when relu). The arithmetic is
 * softmax_xent_row_elem's to the bit. A row wider than the lanes is lane 0's
 * alone, by softmax_xent_row_elem itself. Lane 0 of row 0 moves the counters
 * on after its row: no thread of the kernel reads them.
 */
/* What the loss's lanes share in a block: a row of values per group, its max and its sum. */
struct xent_shared {
	float column[COOP_MAX_THREADS];
	float row_max[COOP_MAX_THREADS / COOP_LANES], row_sum[COOP_MAX_THREADS / COOP_LANES];
};

/*
 * Row r's loss and gradient (above) on group `group`'s lanes; live: the group
 * has a row. Every thread of the block calls it, with the same lanes: it
 * waits at the block's barriers (none when the rows are wider than the lanes).
 */
static __device__ void xent_row(const struct xent_req *x, struct xent_shared *sh, size_t r,
				int live, unsigned int group, unsigned int lane, unsigned int lanes)
{
	size_t off = live ? r * (size_t)x->cols : 0;
	float *d = x->dlogits && live ? x->dlogits + off : NULL;
	if (x->cols > (int)lanes) { /* the same for every thread */
		if (live && lane == 0) {
			x->row_loss[r] = softmax_xent_row_elem(x->logits + off, x->labels[r], x->cols,
							       x->scale, d);
			if (d && x->relu)
				for (int j = 0; j < x->cols; j++)
					d[j] = relu_backward_elem(d[j], x->logits[off + (size_t)j]);
		}
		return;
	}
	int col = live && lane < (unsigned int)x->cols;
	float *row = &sh->column[group * lanes];
	float v = col ? x->logits[off + lane] : 0.0f;
	if (col)
		row[lane] = v;
	__syncthreads();
	if (live && lane == 0) {
		float m = row[0];
		for (int j = 1; j < x->cols; j++)
			m = xent_max_elem(m, row[j]);
		sh->row_max[group] = m;
	}
	__syncthreads();
	float e = col ? xent_exp_elem(v, sh->row_max[group]) : 0.0f;
	if (col)
		row[lane] = e;
	__syncthreads();
	if (live && lane == 0) {
		float sum = 0.0f;
		for (int j = 0; j < x->cols; j++)
			sum += row[j];
		sh->row_sum[group] = sum;
		x->row_loss[r] = xent_loss_elem(sum, x->logits[off + (size_t)x->labels[r]],
						sh->row_max[group]);
	}
	__syncthreads();
	if (col && d) {
		float g = xent_grad_elem(e, 1.0f / sh->row_sum[group], (int)lane == x->labels[r],
					 x->scale);
		d[lane] = x->relu ? relu_backward_elem(g, v) : g;
	}
}

/* The step's counters moved on, once: by lane 0 of row 0, after its row. */
static __device__ void xent_count(const struct xent_req *x, size_t r, int live, unsigned int lane)
{
	if (live && r == 0 && lane == 0 && x->counters) {
		x->counters->cursor += x->rows;
		x->counters->step += 1;
		x->counters->updates += 1;
	}
}

#endif
