/*
 * kernels.h - launchers for the CUDA backend's element kernels (cuda/kernels.cu,
 * kernels_gemm.cu, kernels_conv.cu, kernels_head.cu, kernels_dense.cu).
 *
 * Each launcher runs one kernel on `stream`. `geom` NULL means the geometry
 * the backend uses, kernel_geom_for() of the kernel's work size (given per
 * launcher below); tests pass smaller grids to make the grid-stride loops wrap.
 * Shapes and meanings are those of the matching ops in include/backend.h; all
 * pointers are device memory. A launch with nothing to do is skipped.
 *
 * nvcc compiles kernels.cu against <cuda_runtime.h>. The unit tests compile the
 * same file with the host C compiler and a stand-in <cuda_runtime.h> first on
 * the include path (tests/cuda_host/), so this header is C as well as C++.
 */
#ifndef MNIST_DDP_KERNELS_H
#define MNIST_DDP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "conv_shape.h"
#include "elem.h"
#include "gemm_map.h"

/* nvcc: the CUDA runtime; a host-compiled test puts its own stand-in first on the path. */
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A 1-D launch: grid blocks of block threads. */
struct kernel_geom {
	unsigned int grid, block;
};

#define KERNEL_BLOCK 256u     /* threads per block */
#define KERNEL_MAX_GRID 4096u /* blocks at most; the grid-stride loops cover the rest */

/* The launch the backend uses for n work items: ceil(n / KERNEL_BLOCK) blocks, capped. */
struct kernel_geom kernel_geom_for(size_t n);
/* n work items in blocks of `block` threads: ceil(n / block) blocks, capped. */
struct kernel_geom kernel_geom_sized(size_t n, unsigned int block);

/*
 * 1: launch every kernel with programmatic dependent launch (kernel_launch.cuh;
 * only where the device has it, compute capability 9.0 and later); 0, the
 * default: plain launches. For the whole process, as its one device.
 */
extern int kernels_pdl;
void kernels_set_pdl(int on);
#if defined(__CUDACC__) || defined(CUDASIM)
/*
 * *cursor += delta, by programmatic dependent launch when pdl whatever
 * kernels_pdl says, without the launch check that ends the job: the launch's
 * error (cleared), or cudaSuccess. The backend's start-up probes.
 */
cudaError_t kernels_advance_try(cudaStream_t stream, int32_t *cursor, int delta, int pdl);
#endif

/*
 * Work: g->count * g->pixels (struct gather_req; the rows taken are
 * min(count, len - *cursor), read on the device).
 */
void kernels_gather(cudaStream_t stream, const struct kernel_geom *geom,
		    const struct gather_req *g);
/* Work: 1. */
void kernels_advance(cudaStream_t stream, const struct kernel_geom *geom, int32_t *cursor,
		     int delta);
/*
 * Work: rows * 32 (a warp's lanes per row, sharing it through shared memory;
 * the counters moved on by the first lane of row 0).
 */
void kernels_softmax_xent(cudaStream_t stream, const struct kernel_geom *geom,
			  const struct xent_req *r);
/*
 * A training step's head (struct head_req) in one launch: the logits (the
 * forward's bias and ReLU), the loss as kernels_softmax_xent, and the input
 * gradient from dlogits through the ReLU below, a group of 32 lanes per row.
 * For a request kernels_head_fits: the forward x W^T packed, at most
 * HEAD_MAX_COLS columns, the loss on its output, the input gradient (if any)
 * dlogits W into a packed output, through x's ReLU or not. Work: rows * 32;
 * at most HEAD_MAX_THREADS threads a block (a larger geometry's are cut).
 */
#define HEAD_MAX_COLS 16
#define HEAD_MAX_THREADS 256u
int kernels_head_fits(const struct head_req *h);
void kernels_head(cudaStream_t stream, const struct kernel_geom *geom, const struct head_req *h);
/*
 * A head's dense stages (struct head_req: the forwards of below[] and the
 * top's, the loss, the input gradients down, and the pool's gradient under
 * them where the request has one) in one launch, a block per
 * rows_per_block rows (1, 2 or 4) walking its rows' activations up and their
 * gradients down in shared memory, the weights from L2; the weight gradients
 * are not its. For a request kernels_dense_head_fits: every forward x W^T
 * packed, each reading the one below's output, at most DENSE_HEAD_MAX_IN
 * inputs a stage; every input gradient above the lowest stage's, each
 * dz W packed from the gradient above (the loss's dlogits for the top),
 * through its input's ReLU or not; a pool, if any, batch first under the
 * lowest stage, whose output is that stage's input, tiling its convolution's
 * output, from a plain input gradient (which it then does not write); and
 * the rows' activations and gradients within DENSE_HEAD_SHARED floats. Its blocks are DENSE_HEAD_THREADS threads
 * (a geometry's block rounded down to whole warps, at least one, at most
 * that), its grid the geometry's or one block a group of rows.
 */
#define DENSE_HEAD_MAX_ROWS 4
#define DENSE_HEAD_MAX_IN 512
#define DENSE_HEAD_THREADS 256u
#define DENSE_HEAD_SHARED 6144
int kernels_dense_head_fits(const struct head_req *h, int rows_per_block);
void kernels_dense_head(cudaStream_t stream, const struct kernel_geom *geom,
			const struct head_req *h, int rows_per_block);
/*
 * A head's weight gradients (struct head_req: the top's and below[]'s) in
 * one launch: each dW = dz^T x and db = dz's column sums, a block per 4 rows
 * of one dW x 32 of its columns (db as a column against ones), the batch's
 * rows split among the block's warps, their sums added in warp order. For a
 * request kernels_dense_wgrad_fits: every weight gradient dz^T x packed, k
 * the batch, with a bias gradient, no epilogue. Blocks of DENSE_HEAD_THREADS
 * threads, or a geometry's block rounded down to whole warps, at least one.
 */
int kernels_dense_wgrad_fits(const struct head_req *h);
void kernels_dense_wgrad(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct head_req *h);
/* Work: rows. */
void kernels_argmax_hits(cudaStream_t stream, const struct kernel_geom *geom,
			 const float *logits, const int32_t *labels, int rows, int cols,
			 int32_t *hits);
/*
 * Work: n, the whole flat buffer, then, unless then is NULL, the next batch's
 * gather (then->count * then->pixels items), in one launch. v may be NULL when
 * momentum is 0. The rate is lr[counters->step - 1].
 */
void kernels_sgd_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			const float *g, float *v, size_t n, const float *lr,
			const struct step_counters *counters, float momentum, float weight_decay,
			const struct gather_req *then);
/* Work: as kernels_sgd_update; t = counters->updates. */
void kernels_adamw_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			  const float *g, float *m, float *v, size_t n, const float *lr,
			  const struct step_counters *counters, struct adamw_hyper h,
			  const struct gather_req *then);
/*
 * Gradient clipping (backend.h, ->clip_grad_norm) in two launches. The norm:
 * *norm = the 2-norm of g (n) in elem.h's order (CLIP_PARTS), by block 0
 * alone (CLIP_PARTS threads, or the geometry's block; other blocks idle),
 * always launched. The scale: g (n) *= clip_coef_elem(*norm, max_norm)
 * where clip_scales_elem says so, read on the device; work: n.
 */
void kernels_clip_norm(cudaStream_t stream, const struct kernel_geom *geom, const float *g,
		       size_t n, float *norm);
void kernels_clip_scale(cudaStream_t stream, const struct kernel_geom *geom, float *g, size_t n,
			const float *norm, float max_norm);
/*
 * Micro-batch mode (backend.h, ->grad_accumulate, ->fixed_accumulate,
 * ->fixed_decode; docs/exact.md). grad_accumulate: acc (n) += g, work n.
 * fixed_accumulate: acc (n + 2 int64) as the op says, work n: each element
 * written by its one thread, an element out of range counted into acc[n]
 * by an integer atomic add (the one atomic in these files: an integer sum,
 * the same in any order; only a bad element's thread does it).
 * fixed_decode: g (n) from acc, and acc[n] moved into acc[n + 1] by item n,
 * work n + 1.
 */
void kernels_grad_accumulate(cudaStream_t stream, const struct kernel_geom *geom, float *acc,
			     const float *g, size_t n);
void kernels_fixed_accumulate(cudaStream_t stream, const struct kernel_geom *geom, int64_t *acc,
			      const float *g, size_t n, double limit, int first);
void kernels_fixed_decode(cudaStream_t stream, const struct kernel_geom *geom, float *g,
			  int64_t *acc, size_t n);
/* y (rows, cols) at row stride cols: bias_act_elem per column. Work: rows * cols. */
void kernels_bias_act(cudaStream_t stream, const struct kernel_geom *geom, float *y,
		      const float *bias, int rows, int cols, int relu);
/* dy (n) = relu_backward_elem(dy, y). Work: n. */
void kernels_relu_backward(cudaStream_t stream, const struct kernel_geom *geom, float *dy,
			   const float *y, size_t n);
/*
 * out (m) = the sums over l < k of op(A)[i, l], A row-major at row stride lda
 * (stored (k, m) when trans_a). Work: m (one thread per sum).
 */
void kernels_bias_grad(cudaStream_t stream, const struct kernel_geom *geom, const float *a,
		       int lda, int trans_a, int m, int k, float *out);
/*
 * The same sums by block reduction: a block's threads share each sum (a block
 * per sum, or per 32 neighbouring sums when trans_a). Work: 256 per block.
 */
void kernels_bias_grad_block(cudaStream_t stream, const struct kernel_geom *geom, const float *a,
			     int lda, int trans_a, int m, int k, float *out);
/*
 * A GEMM of few outputs and a long k (the convolutions' weight gradients:
 * m x n of 6 x 25 or 16 x 150, k up to 200,704), ours, for the plans to time
 * against cuBLAS: k split into `chunks` (at most one per tile of k), each
 * chunk's sums by one block into part (chunks * outs floats, outs = m * n,
 * plus m with a bias gradient), then each output's chunks summed by a block's
 * threads into C (alpha, beta as BLAS) and the bias gradient. A tile is
 * KSPLIT_TILE_MIN to KSPLIT_TILE_MAX values of k of each of op(A)'s rows and
 * op(B)'s columns, as many as KSPLIT_MICRO_TILE_FLOATS hold with each row
 * padded by one; a thread owns a micro-tile of KSPLIT_MICRO x KSPLIT_MICRO
 * outputs, its sums in registers (at most KSPLIT_MAX_MICRO micro-tiles, a
 * block's threads at the backend's geometry, so that the chunk is walked
 * once). (A thread per output, its running sums in shared memory, was timed
 * on the H100 on 2026-11-27 at 156 and 552 us against cuBLASLt's 76 and 51
 * for LeNet-5's weight gradients, chosen nowhere, and removed.) Requests
 * with no epilogue and (m + n) * (KSPLIT_TILE_MIN + 1) <= the tile's floats
 * only (kernels_gemm_ksplit_fits). Work: 256 per chunk, then 256 per 32 outs.
 */
#define KSPLIT_TILE_MIN 16
#define KSPLIT_TILE_MAX 128
#define KSPLIT_MICRO_TILE_FLOATS 8192
#define KSPLIT_MICRO 4
#define KSPLIT_MAX_MICRO KERNEL_BLOCK
#define KSPLIT_LOAD_BATCH 16 /* a thread's loads in flight at once filling a tile */
int kernels_gemm_ksplit_fits(const struct gemm_req *r);
/*
 * Where r->b_im2col is set and kernels_gemm_im2col_fits, kernels_gemm_ksplit
 * reads B's entries from its x (an implicit GEMM: im2col_elem, the same
 * values, summed in the same order) and never reads r->b.
 */
int kernels_gemm_im2col_fits(const struct gemm_req *r);
void kernels_gemm_ksplit(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct gemm_req *r, int chunks, float *part);
/*
 * A small GEMM, ours, whole in one launch, for the plans to time against
 * cuBLASLt: a block per GEMM_TILE x GEMM_TILE tile of C walking all of k in
 * steps of kstep (GEMM_TILE or GEMM_TILE_KMAX), the epilogue (gemm_map.h;
 * the ReLU record not written) or the bias gradient in the same kernel. For
 * the dense layers' products: k at most GEMM_TILE_MAX_K, at most
 * GEMM_TILE_MAX_TILES tiles (kernels_gemm_tile_fits). Work: 256 per tile.
 */
#define GEMM_TILE 32
#define GEMM_TILE_KMAX 128
#define GEMM_TILE_MAX_K 1024
#define GEMM_TILE_MAX_TILES 4096
int kernels_gemm_tile_fits(const struct gemm_req *r);
void kernels_gemm_tile(cudaStream_t stream, const struct kernel_geom *geom,
		       const struct gemm_req *r, int kstep);
/*
 * A convolution stage forward (struct conv_stage): work: the windows
 * (oc * ph * pw * rows), then the entries of cols (c*k*k * oh*ow*rows) unless
 * cols is NULL, in one launch.
 */
void kernels_conv_forward(cudaStream_t stream, const struct kernel_geom *geom,
			  const struct conv_stage *s, const float *x, const float *w,
			  const float *b, float *y, int32_t *arg, float *cols);
/*
 * The same stage forward (no im2col matrix), each input channel's patch
 * under a pool window read once into registers for CONV_PATCH_OC output
 * channels at once: work, 32 lanes for each group of up to 32 images, of
 * each group of channels and window (ceil(rows / 32) * 32 * ceil(oc /
 * CONV_PATCH_OC) * ph * pw; kernels_conv_patch_work); bitwise
 * kernels_conv_forward's y and argmax. Taps of at most CONV_PATCH_MAX_K,
 * pools of at most CONV_PATCH_MAX_POOL, a channel's offsets within 32 bits
 * (kernels_conv_patch_fits).
 */
#define CONV_PATCH_OC 4
#define CONV_PATCH_MAX_K 5
#define CONV_PATCH_MAX_POOL 2
int kernels_conv_patch_fits(const struct conv_stage *s);
size_t kernels_conv_patch_work(const struct conv_stage *s);
void kernels_conv_patch(cudaStream_t stream, const struct kernel_geom *geom,
			const struct conv_stage *s, const float *x, const float *w, const float *b,
			float *y, int32_t *arg);
/*
 * The same stage forward when a GEMM sums its convolution (cuda/conv_plan.cu):
 * first the im2col matrix alone (work: its entries), then, from the GEMM's
 * z = W cols (oc, oh, ow, rows), the bias, ReLU, pool and argmax (work: the
 * windows).
 */
void kernels_conv_im2col(cudaStream_t stream, const struct kernel_geom *geom,
			 const struct conv_stage *s, const float *x, float *cols);
void kernels_conv_pool(cudaStream_t stream, const struct kernel_geom *geom,
		       const struct conv_stage *s, const float *z, const float *b, float *y,
		       int32_t *arg);
/* Work: the stage's pool windows, oc * ph * pw * rows, each writing its k x k conv outputs. */
void kernels_pool_backward(cudaStream_t stream, const struct kernel_geom *geom,
			   const struct conv_stage *s, const float *dy, const float *y,
			   const int32_t *arg, float *dz);
/*
 * Work: the stage below's pool windows, c' * ph' * pw' * rows (this stage's
 * input pixels), each writing its k x k conv outputs of the stage below.
 * The convolution launchers need at most FASTDIV_MAX_N items (cuda/fastdiv.h).
 */
void kernels_conv_backward_data(cudaStream_t stream, const struct kernel_geom *geom,
				const struct conv_stage *s, const float *w, const float *dz,
				const struct conv_stage *below, const float *below_y,
				const int32_t *below_arg, float *dz_below);
/*
 * The same, each output channel's dz under a block of CONV_BACKWARD_PATCH_PIX
 * squared input pixels read once into registers for CONV_BACKWARD_PATCH_C
 * input channels at once: work, 32 lanes for each group of up to 32 images,
 * of each group of channels and block (ceil(rows / 32) * 32 * ceil(c /
 * CONV_BACKWARD_PATCH_C) * ceil(ph' / PIX) * ceil(pw' / PIX);
 * kernels_conv_backward_patch_work); bitwise kernels_conv_backward_data's
 * dz_below while the weights are finite. Taps of at most CONV_PATCH_MAX_K, a
 * channel of dz's offsets within 32 bits (kernels_conv_backward_patch_fits).
 */
#define CONV_BACKWARD_PATCH_C 3
#define CONV_BACKWARD_PATCH_PIX 2
int kernels_conv_backward_patch_fits(const struct conv_stage *s);
size_t kernels_conv_backward_patch_work(const struct conv_stage *s, const struct conv_stage *below);
void kernels_conv_backward_patch(cudaStream_t stream, const struct kernel_geom *geom,
				 const struct conv_stage *s, const float *w, const float *dz,
				 const struct conv_stage *below, const float *below_y,
				 const int32_t *below_arg, float *dz_below);
/* The same, each input pixel's gradient gathered from dcols = W^T dz (c*k*k, oh*ow*rows). */
void kernels_col2im_backward(cudaStream_t stream, const struct kernel_geom *geom,
			     const struct conv_stage *s, const float *dcols,
			     const struct conv_stage *below, const float *below_y,
			     const int32_t *below_arg, float *dz_below);

#if defined(CUDART_VERSION) /* a CUDA runtime: nvcc's, or the tests' simulator (tests/cudasim) */
/*
 * cudaSuccess when this binary holds code the current device can run
 * (cudaErrorNoKernelImageForDevice, for example, on a GPU older than sm_80).
 */
cudaError_t kernels_image_check(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_KERNELS_H */
