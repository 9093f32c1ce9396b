/*
 * kernels_conv_patch.cu - the patch kernels, a way of the convolution plan
 * (cuda/conv_plan.cu, "direct.patch"): a stage forward with each input
 * channel's patch under a pool window in registers for several output
 * channels at once, and the input gradient with each output channel's dz under
 * a block of input pixels in registers for several input channels at once;
 * each bitwise the direct kernels' result (cuda/kernels_conv.cu).
 */
#include "kernels.h"

#include "kernels_conv.cuh"

/* ---- kernels ---------------------------------------------------------------------------- */

/*
 * The patch kernels' patch: PATCH_SPAN squared pixels of one channel, read
 * once into registers. Both kernels' patches are the taps' reach over two
 * pixels: CONV_PATCH_MAX_K + 1.
 */
#if CONV_BACKWARD_PATCH_PIX != CONV_PATCH_MAX_POOL
#error "the patch kernels share one patch size: CONV_BACKWARD_PATCH_PIX == CONV_PATCH_MAX_POOL"
#endif
#define PATCH_SPAN (CONV_PATCH_MAX_K + CONV_PATCH_MAX_POOL - 1)

/*
 * A patch's entries, where each lies in its channel (bit 8 r + c of `in`
 * for entry (r, c)), and where: first + r row_step + c col_step from the
 * channel's first pixel of the thread's image. rows_in, cols_in: bit r for
 * row (column) r. Offsets in 32 bits (the fits functions check a channel's).
 */
struct patch_at {
	uint64_t in;
	unsigned rows_in, cols_in;
	uint32_t first, row_step, col_step;
};

/*
 * The patch whose entry (0, 0) is pixel (y0, x0) of an h x w channel (batch
 * innermost, rows images), its rows and columns lo to hi - 1 read (the
 * others no tap reaches).
 */
static __host__ __device__ inline struct patch_at patch_at_make(int y0, int x0, int h, int w,
								int rows, int lo, int hi)
{
	struct patch_at p;
	p.rows_in = p.cols_in = 0;
	for (int r = 0; r < PATCH_SPAN; r++) {
		int used = r >= lo && r < hi;
		p.rows_in |= (unsigned)(used && y0 + r >= 0 && y0 + r < h) << r;
		p.cols_in |= (unsigned)(used && x0 + r >= 0 && x0 + r < w) << r;
	}
	p.in = 0;
	for (int r = 0; r < PATCH_SPAN; r++)
		if ((p.rows_in >> r) & 1u)
			p.in |= (uint64_t)p.cols_in << (8 * r);
	p.col_step = (uint32_t)rows;
	p.row_step = (uint32_t)w * p.col_step;
	p.first = (uint32_t)y0 * p.row_step + (uint32_t)x0 * p.col_step;
	return p;
}

/* The patch of the channel whose first pixel of the thread's image is at c: 0 outside it. */
static __device__ inline void patch_load(float patch[PATCH_SPAN][PATCH_SPAN], const float *c,
					 const struct patch_at *at)
{
	KERNEL_UNROLL
	for (int r = 0; r < PATCH_SPAN; r++)
		KERNEL_UNROLL
		for (int q = 0; q < PATCH_SPAN; q++)
			patch[r][q] = (at->in >> (8 * r + q)) & 1u
					      ? c[at->first + (uint32_t)r * at->row_step +
						  (uint32_t)q * at->col_step]
					      : 0.0f;
}

/*
 * A patch kernel's item i: lane i % 32 of a group of 32 images, the rest
 * (i / 32) split into *q by d (q->c the group of images); its image, which
 * may lie past the batch's last in the last group.
 */
static __host__ __device__ inline int patch_item(uint32_t i, const struct chwb_divs *d,
						 struct chwb *q)
{
	*q = chwb_of(i / 32u, d);
	return (int)(q->c * 32u + i % 32u);
}

/* Copy a patch (the next channel's, loaded while the last was summed). */
static __device__ inline void patch_move(float to[PATCH_SPAN][PATCH_SPAN],
					 float from[PATCH_SPAN][PATCH_SPAN])
{
	KERNEL_UNROLL
	for (int r = 0; r < PATCH_SPAN; r++)
		KERNEL_UNROLL
		for (int q = 0; q < PATCH_SPAN; q++)
			to[r][q] = from[r][q];
}

/*
 * Item i < a.total: lane i % 32 of a group of 32 images, the rest (i / 32)
 * split as a (c, h, w, batch) array's index by a.win: c the group of
 * images, y the group of CONV_PATCH_OC output channels (the last one
 * short), x and b the pool window's row and column. So a block's warps are
 * neighbouring windows of the same images, whose input they share through
 * L1. Each does what conv_forward_kernel does for its windows, the same
 * sums in the same order (conv_pixel_elem: over ci, ky, kx; a tap in the
 * padding adds its weight times 0), then bias_act_elem and the window's
 * choice in its order (conv_pool_window_elem): bitwise its output and
 * argmax. Each input channel's patch of the input under the window's
 * k + pool - 1 squared pixels is read once into registers (the next
 * channel's while this one's taps are summed) and serves every tap of
 * every pixel of the window for the group's channels; the direct kernel
 * reads an input value once per tap, pixel and channel.
 */
static __global__ void conv_patch_kernel(struct conv_forward_args a)
{
	KERNEL_WAIT_PREVIOUS();
	const int G = CONV_PATCH_OC, Q = CONV_PATCH_MAX_POOL;
	size_t nb = (size_t)a.rows, plane = (size_t)a.s.h * a.s.w * nb;
	size_t fan_in = (size_t)a.s.c * a.s.k * a.s.k;
	int k = a.s.k, pk = a.p.k;
	uint32_t stride = (uint32_t)grid_stride();
	for (uint32_t i = (uint32_t)grid_first(); i < a.total; i += stride) {
		struct chwb q;
		int b = patch_item(i, &a.win, &q);
		if (b >= a.rows)
			continue;
		int o0 = q.y * G, py = q.x, px = q.b;
		int iy0 = py * pk - a.s.pad, ix0 = px * pk - a.s.pad;
		struct patch_at at = patch_at_make(iy0, ix0, a.s.h, a.s.w, a.rows, 0, k + pk - 1);
		/* Each output channel's row of W; a short group's missing ones read the last's. */
		size_t w_of[CONV_PATCH_OC];
		float acc[CONV_PATCH_OC][CONV_PATCH_MAX_POOL * CONV_PATCH_MAX_POOL];
		for (int g = 0; g < G; g++) {
			w_of[g] = (size_t)(o0 + g < a.oc ? o0 + g : a.oc - 1) * fan_in;
			for (int d = 0; d < Q * Q; d++)
				acc[g][d] = 0.0f;
		}
		const float *xb = a.x + (size_t)b;
		float patch[PATCH_SPAN][PATCH_SPAN], next[PATCH_SPAN][PATCH_SPAN];
		patch_load(patch, xb, &at);
		for (int ci = 0; ci < a.s.c; ci++) {
			if (ci + 1 < a.s.c)
				patch_load(next, xb + (size_t)(ci + 1) * plane, &at);
			KERNEL_UNROLL
			for (int ky = 0; ky < CONV_PATCH_MAX_K; ky++)
				KERNEL_UNROLL
				for (int kx = 0; kx < CONV_PATCH_MAX_K; kx++) {
					if (ky >= k || kx >= k)
						continue;
					size_t tap = (size_t)((ci * k + ky) * k + kx);
					float wv[CONV_PATCH_OC];
					for (int g = 0; g < G; g++)
						wv[g] = a.w[w_of[g] + tap];
					for (int dy = 0; dy < Q; dy++)
						for (int dx = 0; dx < Q; dx++) {
							if (dy >= pk || dx >= pk)
								continue;
							float v = patch[ky + dy][kx + dx];
							for (int g = 0; g < G; g++)
								acc[g][dy * Q + dx] += wv[g] * v;
						}
				}
			if (ci + 1 < a.s.c)
				patch_move(patch, next);
		}
		for (int g = 0; g < G; g++) {
			int o = o0 + g;
			if (o >= a.oc)
				continue;
			float best = 0.0f;
			int32_t arg = 0;
			for (int dy = 0; dy < Q; dy++)
				for (int dx = 0; dx < Q; dx++)
					if (dy < pk && dx < pk)
						pool_pick_elem(bias_act_elem(acc[g][dy * Q + dx], a.bias[o], 1),
							       dy * pk + dx, &best, &arg);
			size_t window = (((size_t)o * a.p.oh + (size_t)py) * a.p.ow + (size_t)px) * nb +
					(size_t)b;
			a.y[pooled_at(&a.p, a.batch_first, nb, (size_t)o, py, px, b)] = best;
			a.arg[window] = arg;
		}
	}
}

/*
 * The input gradient summed as conv_backward_data_kernel sums it, a thread
 * for a block of CONV_BACKWARD_PATCH_PIX x CONV_BACKWARD_PATCH_PIX input
 * pixels of CONV_BACKWARD_PATCH_C input channels (a group, the last one
 * short) of one image. Item i: lane i % 32 of a group of 32 images, the
 * rest (i / 32) split as a (c, h, w, batch) array's index by a.win: c the
 * group of images, y the group of channels, x the block's row, b its
 * column. So a block's warps are neighbouring pixel blocks of the same
 * images, whose dz they share through L1, and a warp's lanes read 32
 * neighbouring floats.
 *
 * For each output channel o, the dz the block's taps read is one patch of
 * (CONV_PATCH_MAX_K + PIX - 1) squared pixels, read once into registers
 * (pixel y0 + dy's tap ky reads patch row dy - ky + CONV_PATCH_MAX_K - 1;
 * rows and columns outside dz hold 0, and a tap whose row or column lies
 * outside dz for every pixel of the block is skipped); each of its values
 * then serves every tap of every pixel and channel that reads it. The
 * sums are conv_backward_data_elem's, in its order (o, then ky, kx); a tap
 * outside dz for one pixel of a block adds its weight times 0, which
 * leaves a sum that starts at +0 unchanged while the weights are finite:
 * bitwise the direct kernel's gradient. Then each pixel's gradient goes
 * through the stage below's pool and ReLU as there.
 */
static __global__ void conv_backward_patch_kernel(struct conv_shape s, int oc,
						  struct window_args a, const float *w,
						  const float *dz, const float *below_y,
						  const int32_t *below_arg, float *dz_below)
{
	KERNEL_WAIT_PREVIOUS();
	const int K = CONV_PATCH_MAX_K, Q = CONV_BACKWARD_PATCH_PIX, G = CONV_BACKWARD_PATCH_C;
	const unsigned pix_mask = (1u << CONV_BACKWARD_PATCH_PIX) - 1u;
	size_t nb = (size_t)a.rows, plane = (size_t)s.oh * s.ow * nb;
	size_t fan_in = (size_t)s.c * s.k * s.k;
	int k = s.k;
	uint32_t stride = (uint32_t)grid_stride();
	for (uint32_t i = (uint32_t)grid_first(); i < a.n; i += stride) {
		struct chwb q;
		int b = patch_item(i, &a.win, &q);
		if (b >= a.rows)
			continue;
		int c0 = q.y * G, y0 = q.x * Q, x0 = q.b * Q;
		/* Patch row (column) r: dz's row oy0 + r; those before K - k no tap reaches. */
		int oy0 = y0 + s.pad - (K - 1), ox0 = x0 + s.pad - (K - 1);
		struct patch_at at = patch_at_make(oy0, ox0, s.oh, s.ow, a.rows, K - k, PATCH_SPAN);
		/* Each channel's weights in a row of W; a short group's missing ones read the last's. */
		size_t w_of[CONV_BACKWARD_PATCH_C];
		float acc[CONV_BACKWARD_PATCH_C][CONV_BACKWARD_PATCH_PIX * CONV_BACKWARD_PATCH_PIX];
		for (int g = 0; g < G; g++) {
			w_of[g] = (size_t)(c0 + g < s.c ? c0 + g : s.c - 1) * k * k;
			for (int d = 0; d < Q * Q; d++)
				acc[g][d] = 0.0f;
		}
		/*
		 * Output channel o's patch in `patch`, o + 1's loading into `next`
		 * meanwhile: the loads' round trip to L2 overlaps the taps' sums.
		 */
		float patch[PATCH_SPAN][PATCH_SPAN], next[PATCH_SPAN][PATCH_SPAN];
		const float *dzb = dz + (size_t)b;
		patch_load(patch, dzb, &at);
		for (int o = 0; o < oc; o++) {
			const float *wo = w + (size_t)o * fan_in;
			if (o + 1 < oc)
				patch_load(next, dzb + (size_t)(o + 1) * plane, &at);
			KERNEL_UNROLL
			for (int ky = 0; ky < CONV_PATCH_MAX_K; ky++) {
				if (ky >= k || !((at.rows_in >> (K - 1 - ky)) & pix_mask))
					continue;
				KERNEL_UNROLL
				for (int kx = 0; kx < CONV_PATCH_MAX_K; kx++) {
					if (kx >= k || !((at.cols_in >> (K - 1 - kx)) & pix_mask))
						continue;
					float wv[CONV_BACKWARD_PATCH_C];
					for (int g = 0; g < G; g++)
						wv[g] = wo[w_of[g] + (size_t)(ky * k + kx)];
					for (int dy = 0; dy < Q; dy++)
						for (int dx = 0; dx < Q; dx++) {
							float v = patch[dy - ky + K - 1][dx - kx + K - 1];
							for (int g = 0; g < G; g++)
								acc[g][dy * Q + dx] += wv[g] * v;
						}
				}
			}
			if (o + 1 < oc)
				patch_move(patch, next);
		}
		for (int g = 0; g < G; g++) {
			int c = c0 + g;
			if (c >= s.c)
				continue;
			for (int dy = 0; dy < Q; dy++)
				for (int dx = 0; dx < Q; dx++) {
					int y = y0 + dy, x = x0 + dx;
					if (y >= s.h || x >= s.w)
						continue;
					size_t win = chwb_at(s.h, s.w, nb, (size_t)c, y, x, b);
					float grad = acc[g][dy * Q + dx], gate = below_y[win];
					int32_t best = below_arg[win];
					for (int ky = 0; ky < a.p.k; ky++)
						for (int kx = 0; kx < a.p.k; kx++)
							dz_below[chwb_at(a.p.h, a.p.w, nb, (size_t)c,
									 y * a.p.k + ky, x * a.p.k + kx, b)] =
								pool_relu_backward_elem(grad, gate, best, ky,
											kx, a.p.k);
				}
		}
	}
}

/* ---- launchers ------------------------------------------------------------------------- */

int kernels_conv_patch_fits(const struct conv_stage *s)
{
	return s->conv->k >= 1 && s->conv->k <= CONV_PATCH_MAX_K && s->pool->k >= 1 &&
	       s->pool->k <= CONV_PATCH_MAX_POOL && s->pool->c == s->oc &&
	       work_2d(s->rows, s->conv->h * s->conv->w) <= FASTDIV_MAX_N;
}

/* conv_patch_kernel's groups of output channels. */
static int patch_oc_groups(const struct conv_stage *s)
{
	return (s->oc + CONV_PATCH_OC - 1) / CONV_PATCH_OC;
}

size_t kernels_conv_patch_work(const struct conv_stage *s)
{
	if (work_2d(s->rows, s->oc * s->pool->oh * s->pool->ow) == 0)
		return 0;
	return work_2d((s->rows + 31) / 32, patch_oc_groups(s) * s->pool->oh * s->pool->ow) * 32u;
}

void kernels_conv_patch(cudaStream_t stream, const struct kernel_geom *geom,
			const struct conv_stage *s, const float *x, const float *w, const float *b,
			float *y, int32_t *arg)
{
	size_t n = kernels_conv_patch_work(s);
	if (n == 0)
		return;
	conv_items_fit("conv_patch_kernel", n);
	/* The items, as conv_patch_kernel says: a.win splits i / 32 into them. */
	struct conv_forward_args a = forward_args(s, x, w, b, y, arg);
	a.total = (uint32_t)n;
	a.win = chwb_divs_make(s->pool->ow, patch_oc_groups(s), s->pool->oh);
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(conv_patch_kernel, g, stream, a);
}

int kernels_conv_backward_patch_fits(const struct conv_stage *s)
{
	return s->conv->k >= 1 && s->conv->k <= CONV_PATCH_MAX_K &&
	       work_2d(s->rows, s->conv->oh * s->conv->ow) <= FASTDIV_MAX_N;
}

/* conv_backward_patch_kernel's blocks of pixels along an edge of len pixels. */
static int patch_blocks(int len)
{
	return (len + CONV_BACKWARD_PATCH_PIX - 1) / CONV_BACKWARD_PATCH_PIX;
}

/* Its groups of input channels. */
static int patch_groups(const struct conv_stage *s)
{
	return (s->conv->c + CONV_BACKWARD_PATCH_C - 1) / CONV_BACKWARD_PATCH_C;
}

size_t kernels_conv_backward_patch_work(const struct conv_stage *s, const struct conv_stage *below)
{
	const struct pool_shape *bp = below->pool;
	if (work_2d(s->rows, bp->c * bp->oh * bp->ow) == 0)
		return 0;
	return work_2d((s->rows + 31) / 32, patch_groups(s) * patch_blocks(bp->oh) *
						   patch_blocks(bp->ow)) * 32u;
}

void kernels_conv_backward_patch(cudaStream_t stream, const struct kernel_geom *geom,
				 const struct conv_stage *s, const float *w, const float *dz,
				 const struct conv_stage *below, const float *below_y,
				 const int32_t *below_arg, float *dz_below)
{
	const struct pool_shape *bp = below->pool;
	size_t n = kernels_conv_backward_patch_work(s, below);
	if (n == 0)
		return;
	conv_items_fit("conv_backward_patch_kernel", n);
	/* The pool whose windows the pixels are; the items' blocks, as conv_backward_patch_kernel says. */
	struct window_args a = window_args_make(bp, s->rows, 0);
	a.n = (uint32_t)n;
	a.win = chwb_divs_make(patch_blocks(bp->ow), patch_groups(s), patch_blocks(bp->oh));
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(conv_backward_patch_kernel, g, stream, *s->conv, s->oc, a, w, dz, below_y,
		      below_arg, dz_below);
}
