/*
 * kernels_head.cu - the loss and the step's head (struct head_req) and their
 * launchers: the loss a row on a warp's lanes (its rows' code in
 * kernels_loss.cuh); the top dense layer, the loss and its input gradient as
 * one kernel (kernels_head). Every dense stage of a head as one kernel is in
 * kernels_dense.cu. cuda/head_plan.cu lists and times the ways. Written as
 * cuda/kernels.cu is (whose file comment says how each build runs them): a
 * block's threads cooperate through shared memory and __syncthreads, their
 * loops the same for every thread of a block.
 */
#include "kernels.h"

#include "elem.h"
#include "kernel_launch.cuh"
#include "kernels_loss.cuh"

/* ---- loss ------------------------------------------------------------------------------ */

static __global__ void softmax_xent_kernel(struct xent_req x)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ struct xent_shared sh;
	unsigned int lanes = blockDim.x < COOP_LANES ? blockDim.x : COOP_LANES;
	unsigned int groups = blockDim.x / lanes, group = threadIdx.x / lanes;
	unsigned int lane = threadIdx.x % lanes;
	for (size_t first = (size_t)blockIdx.x * groups; first < (size_t)x.rows;
	     first += (size_t)gridDim.x * groups) {
		size_t r = first + group;
		int live = group < groups && r < (size_t)x.rows;
		xent_row(&x, &sh, r, live, group, lane, lanes);
		xent_count(&x, r, live, lane);
	}
}
KERNEL_COOP_THUNK(softmax_xent_kernel, struct xent_req)

/* head_kernel's arguments (kernels_head_fits): the request's pointers and sizes. */
struct head_args {
	const float *x, *w, *b; /* x (rows, in), W (cols, in), b (cols) */
	float *y;               /* the logits (rows, cols): loss.logits */
	float *dx;              /* (rows, in), NULL: no input gradient */
	const float *act;       /* (rows, in): dx through the ReLU below (its output); NULL: none */
	int in, relu;           /* relu: the logits are a ReLU's (a BIAS_RELU forward) */
	struct xent_req loss;   /* its logits (rows, cols) written here first */
};

/*
 * A lane's ks of a head's row at a time (k, k + lanes, ...): HEAD_K_BATCH of
 * them, every load of the batch issued before its first multiply-add, so that
 * a lane waits for one round trip to memory a batch, not one a k (the seed's
 * 784 inputs are 25 ks a lane). The sums are added in the same order as one k
 * at a time.
 */
#define HEAD_K_BATCH 4

/* W[j, k + u lanes] for j < cols (0 past them) and a batch's u: its loads, nothing waits on them. */
static __device__ void head_weights(const struct head_args *h, int k, int lanes, int cols,
				    float wv[HEAD_K_BATCH][HEAD_MAX_COLS])
{
	KERNEL_UNROLL
	for (int j = 0; j < HEAD_MAX_COLS; j++)
		KERNEL_UNROLL
		for (int u = 0; u < HEAD_K_BATCH; u++)
			wv[u][j] = j < cols ? h->w[(size_t)j * h->in + (size_t)(k + u * lanes)] : 0.0f;
}

/* acc[j] (j < cols) += x[r, k] W[j, k] over the lane's ks, batch by batch. */
static __device__ void head_forward_sums(const struct head_args *h, size_t r, int lane, int lanes,
					 int cols, float acc[HEAD_MAX_COLS])
{
	const float *xr = h->x + r * (size_t)h->in;
	int k = lane;
	for (; k + (HEAD_K_BATCH - 1) * lanes < h->in; k += HEAD_K_BATCH * lanes) {
		float xv[HEAD_K_BATCH], wv[HEAD_K_BATCH][HEAD_MAX_COLS];
		KERNEL_UNROLL
		for (int u = 0; u < HEAD_K_BATCH; u++)
			xv[u] = xr[k + u * lanes];
		head_weights(h, k, lanes, cols, wv);
		KERNEL_UNROLL
		for (int u = 0; u < HEAD_K_BATCH; u++)
			KERNEL_UNROLL
			for (int j = 0; j < HEAD_MAX_COLS; j++)
				if (j < cols)
					acc[j] += xv[u] * wv[u][j];
	}
	for (; k < h->in; k += lanes) {
		float xv = xr[k];
		KERNEL_UNROLL
		for (int j = 0; j < HEAD_MAX_COLS; j++)
			if (j < cols)
				acc[j] += xv * h->w[(size_t)j * h->in + (size_t)k];
	}
}

/* dx[r, k] = sum over j of dlogits[r, j] W[j, k] (through the ReLU below) for the lane's ks. */
static __device__ void head_input_grad(const struct head_args *h, size_t r, int lane, int lanes,
				       int cols)
{
	const float *d = h->loss.dlogits + r * (size_t)cols;
	float dv[HEAD_MAX_COLS];
	KERNEL_UNROLL
	for (int j = 0; j < HEAD_MAX_COLS; j++)
		dv[j] = j < cols ? d[j] : 0.0f;
	size_t row = r * (size_t)h->in;
	int k = lane;
	for (; k + (HEAD_K_BATCH - 1) * lanes < h->in; k += HEAD_K_BATCH * lanes) {
		float wv[HEAD_K_BATCH][HEAD_MAX_COLS], av[HEAD_K_BATCH];
		head_weights(h, k, lanes, cols, wv);
		KERNEL_UNROLL
		for (int u = 0; u < HEAD_K_BATCH; u++)
			av[u] = h->act ? h->act[row + (size_t)(k + u * lanes)] : 0.0f;
		KERNEL_UNROLL
		for (int u = 0; u < HEAD_K_BATCH; u++) {
			float v = 0.0f;
			KERNEL_UNROLL
			for (int j = 0; j < HEAD_MAX_COLS; j++)
				if (j < cols)
					v += dv[j] * wv[u][j];
			size_t at = row + (size_t)(k + u * lanes);
			h->dx[at] = h->act ? relu_backward_elem(v, av[u]) : v;
		}
	}
	for (; k < h->in; k += lanes) {
		float v = 0.0f;
		KERNEL_UNROLL
		for (int j = 0; j < HEAD_MAX_COLS; j++)
			if (j < cols)
				v += dv[j] * h->w[(size_t)j * h->in + (size_t)k];
		size_t at = row + (size_t)k;
		h->dx[at] = h->act ? relu_backward_elem(v, h->act[at]) : v;
	}
}

/*
 * A step's head (struct head_req) in one launch, a group of lanes per row
 * as the loss's: lane t sums x[r, k] W[j, k] over its ks (k = t, t + lanes,
 * ...) for every column j, the partial sums meet in shared memory, and lane j
 * adds its column's in lane order, with the bias and the ReLU
 * (bias_act_elem), into the logits; then the row's loss and dlogits
 * (xent_row); then dx[r, k] = sum over j of dlogits[r, j] W[j, k], through
 * the ReLU below (relu_backward_elem), each k by one lane. The counters move
 * on as the loss kernel moves them. At most HEAD_MAX_THREADS threads a block.
 */
static __global__ void head_kernel(struct head_args h)
{
	KERNEL_WAIT_PREVIOUS();
	__shared__ struct xent_shared sh;
	__shared__ float part[HEAD_MAX_THREADS / COOP_LANES * HEAD_MAX_COLS][COOP_LANES + 1];
	const struct xent_req *x = &h.loss;
	unsigned int lanes = blockDim.x < COOP_LANES ? blockDim.x : COOP_LANES;
	unsigned int groups = blockDim.x / lanes, group = threadIdx.x / lanes;
	unsigned int lane = threadIdx.x % lanes;
	int cols = x->cols;
	for (size_t first = (size_t)blockIdx.x * groups; first < (size_t)x->rows;
	     first += (size_t)gridDim.x * groups) {
		size_t r = first + group;
		int live = group < groups && r < (size_t)x->rows;
		/* Bounds known at compile time, so that the sums stay in registers. */
		float acc[HEAD_MAX_COLS];
		for (int j = 0; j < HEAD_MAX_COLS; j++)
			acc[j] = 0.0f;
		if (live)
			head_forward_sums(&h, r, (int)lane, (int)lanes, cols, acc);
		if (group < groups)
			for (int j = 0; j < HEAD_MAX_COLS; j++)
				if (j < cols)
					part[group * HEAD_MAX_COLS + (unsigned int)j][lane] = acc[j];
		__syncthreads();
		if (live)
			for (int j = (int)lane; j < cols; j += (int)lanes) {
				const float *p = part[group * HEAD_MAX_COLS + (unsigned int)j];
				float sum = 0.0f;
				for (unsigned int t = 0; t < lanes; t++)
					sum += p[t];
				h.y[r * (size_t)cols + (size_t)j] = bias_act_elem(sum, h.b[j], h.relu);
			}
		__syncthreads(); /* the row's logits written before its lanes read them */
		xent_row(x, &sh, r, live, group, lane, lanes);
		__syncthreads(); /* and its dlogits before the input gradient reads them */
		if (live && h.dx)
			head_input_grad(&h, r, (int)lane, (int)lanes, cols);
		xent_count(x, r, live, lane);
	}
}
KERNEL_COOP_THUNK(head_kernel, struct head_args)

/* ---- launchers ------------------------------------------------------------------------- */

void kernels_softmax_xent(cudaStream_t stream, const struct kernel_geom *geom,
			  const struct xent_req *r)
{
	if (work_2d(r->rows, r->cols) == 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)r->rows * COOP_LANES);
	KERNEL_LAUNCH_COOP(softmax_xent_kernel, g, stream, *r);
}

int kernels_head_fits(const struct head_req *h)
{
	const struct gemm_req *f = &h->forward, *g = &h->input_grad;
	const struct xent_req *x = &h->loss;
	int fwd = f->m > 0 && f->n > 0 && f->n <= HEAD_MAX_COLS && f->k > 0 && !f->trans_a &&
		  f->trans_b && f->lda == f->k && f->ldb == f->k && f->ldc == f->n &&
		  f->alpha == 1.0f && f->beta == 0.0f && f->bias && !f->bias_grad &&
		  (f->epilogue == GEMM_EPILOGUE_BIAS || f->epilogue == GEMM_EPILOGUE_BIAS_RELU) &&
		  x->logits == f->c && x->rows == f->m && x->cols == f->n && x->dlogits;
	if (!fwd || g->m == 0)
		return fwd;
	return g->m == f->m && g->n == f->k && g->k == f->n && !g->trans_a && !g->trans_b &&
	       g->a == x->dlogits && g->lda == f->n && g->b == f->b && g->ldb == f->k &&
	       g->ldc == f->k && g->alpha == 1.0f && g->beta == 0.0f && !g->bias_grad &&
	       (g->epilogue == GEMM_EPILOGUE_NONE ||
		(g->epilogue == GEMM_EPILOGUE_DRELU && g->act == f->a));
}

void kernels_head(cudaStream_t stream, const struct kernel_geom *geom, const struct head_req *h)
{
	if (work_2d(h->loss.rows, h->loss.cols) == 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)h->loss.rows * COOP_LANES);
	if (g.block > HEAD_MAX_THREADS) /* its partial sums' shared array */
		g.block = HEAD_MAX_THREADS;
	const struct gemm_req *f = &h->forward, *ig = &h->input_grad;
	struct head_args a = {f->a, f->b, f->bias, f->c, ig->m > 0 ? ig->c : NULL,
			      ig->m > 0 && ig->epilogue == GEMM_EPILOGUE_DRELU ? ig->act : NULL,
			      f->k, f->epilogue == GEMM_EPILOGUE_BIAS_RELU, h->loss};
	KERNEL_LAUNCH_COOP(head_kernel, g, stream, a);
}
