/*
 * kernels.cu - the CUDA backend's element kernels and their launchers.
 *
 * Each kernel is a grid-stride loop that computes indices and calls one body
 * from include/elem.h, the same body the host backend loops over. No shared
 * memory, no barriers, no atomics: every item is written by exactly one
 * thread, so the result does not depend on the launch geometry or on the
 * order threads run in. Reductions (bias gradients, losses over a batch) are
 * left to cuBLAS and the caller.
 *
 * The file is written in the common subset of C and C++. nvcc builds it into
 * the CUDA backend; the unit tests build it with the host C compiler and
 * a stand-in <cuda_runtime.h> (tests/cuda_host/), which runs each launch
 * as nested loops over blocks and threads, and with the host C++ compiler
 * against the CUDA simulator (tests/cudasim/), which queues each launch on
 * its stream. Every launch goes through KERNEL_LAUNCH, in every build: the
 * raw launch (KERNEL_LAUNCH_ON: nvcc's <<<grid, block, 0, stream>>> here, the
 * stand-in headers' loops or queue in the tests), then CUDA_CHECK_LAUNCH, the
 * check of cudaGetLastError that ends the job on a bad launch.
 */
#include "kernels.h"

#include "elem.h"

/* The C harness (tests/cuda_host) brings a CUDA_CHECK_LAUNCH of its own. */
#if defined(__CUDACC__) || defined(CUDASIM)
#include "cuda_check.cuh"
#endif

#if defined(__CUDACC__)
#define KERNEL_LAUNCH_ON(kernel, geom, stream, ...) \
	kernel<<<(geom).grid, (geom).block, 0, (stream)>>>(__VA_ARGS__)
#endif

#define KERNEL_LAUNCH(kernel, geom, stream, ...)                                          \
	do {                                                                              \
		KERNEL_LAUNCH_ON(kernel, geom, stream, __VA_ARGS__);                      \
		CUDA_CHECK_LAUNCH(#kernel);                                               \
	} while (0)

struct kernel_geom kernel_geom_for(size_t n)
{
	struct kernel_geom g;
	size_t blocks = (n + KERNEL_BLOCK - 1) / KERNEL_BLOCK;
	g.block = KERNEL_BLOCK;
	g.grid = (unsigned int)(blocks < KERNEL_MAX_GRID ? blocks : KERNEL_MAX_GRID);
	return g;
}

/* The geometry to launch with: the caller's, or the backend's for n items. */
static struct kernel_geom pick_geom(const struct kernel_geom *geom, size_t n)
{
	return geom ? *geom : kernel_geom_for(n);
}

/* rows * cols as a work size; 0 when either is not positive. */
static __host__ __device__ inline size_t work_2d(int rows, int cols)
{
	return rows > 0 && cols > 0 ? (size_t)rows * (size_t)cols : 0;
}

/* This thread's first item and the distance to its next one. */
static __device__ inline size_t grid_first(void)
{
	return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ inline size_t grid_stride(void)
{
	return (size_t)gridDim.x * blockDim.x;
}

/* x (count, pixels), y (count): item i is pixel i % pixels of batch row i / pixels. */
static __global__ void gather_kernel(const uint8_t *images, const uint8_t *labels, int pixels,
				     const int32_t *index, const int32_t *cursor, int count,
				     float *x, int32_t *y)
{
	size_t n = work_2d(count, pixels);
	size_t first = (size_t)*cursor;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		size_t row = i / (size_t)pixels;
		size_t col = i - row * (size_t)pixels;
		size_t e = (size_t)index[first + row];
		x[i] = normalize_pixel_elem(images[e * (size_t)pixels + col]);
		if (col == 0)
			y[row] = (int32_t)labels[e];
	}
}

/* One item: the cursor itself. */
static __global__ void advance_kernel(int32_t *cursor, int delta)
{
	for (size_t i = grid_first(); i < 1; i += grid_stride())
		*cursor += delta;
}

/* y (rows, cols), bias (cols): item i is column i % cols. */
static __global__ void bias_act_kernel(float *y, const float *bias, int rows, int cols, int relu)
{
	size_t n = work_2d(rows, cols);
	for (size_t i = grid_first(); i < n; i += grid_stride())
		y[i] = bias_act_elem(y[i], bias[i % (size_t)cols], relu);
}

static __global__ void relu_backward_kernel(float *dy, const float *y, size_t n)
{
	for (size_t i = grid_first(); i < n; i += grid_stride())
		dy[i] = relu_backward_elem(dy[i], y[i]);
}

/* Item r is row r of logits (rows, cols) and of dlogits. */
static __global__ void softmax_xent_kernel(const float *logits, const int32_t *labels, int rows,
					   int cols, float scale, float *row_loss, float *dlogits)
{
	for (size_t r = grid_first(); r < (size_t)rows; r += grid_stride()) {
		size_t off = r * (size_t)cols;
		row_loss[r] = softmax_xent_row_elem(logits + off, labels[r], cols, scale,
						    dlogits ? dlogits + off : NULL);
	}
}

static __global__ void argmax_hits_kernel(const float *logits, const int32_t *labels, int rows,
					  int cols, int32_t *hits)
{
	for (size_t r = grid_first(); r < (size_t)rows; r += grid_stride())
		hits[r] += argmax_hit_row_elem(logits + r * (size_t)cols, labels[r], cols);
}

static __global__ void sgd_update_kernel(float *p, const float *g, float *v, size_t n,
					 const float *lr, const int32_t *step, float momentum,
					 float weight_decay)
{
	float rate = lr[*step];
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		float unused = 0.0f;
		sgd_update_elem(&p[i], g[i], v ? &v[i] : &unused, rate, momentum, weight_decay);
	}
}

/* Reads the update count t; the launcher advances it after, in stream order. */
static __global__ void adamw_update_kernel(float *p, const float *g, float *m, float *v, size_t n,
					   const float *lr, const int32_t *step, const int32_t *t,
					   struct adamw_hyper h)
{
	struct adamw_step s = adamw_step_elem(lr[*step], *t + 1, h);
	for (size_t i = grid_first(); i < n; i += grid_stride())
		adamw_update_elem(&p[i], g[i], &m[i], &v[i], h, s);
}

static __global__ void scale_kernel(float *x, size_t n, float alpha)
{
	for (size_t i = grid_first(); i < n; i += grid_stride())
		x[i] = scale_elem(x[i], alpha);
}

/*
 * cols (c*k*k, oh*ow*batch): item i is tap row i / ld = (ci, ky, kx), column
 * i % ld = (oy, ox, b); it reads channel ci of x (c, h, w, batch).
 */
static __global__ void im2col_kernel(const float *x, struct conv_shape s, int batch, float *cols)
{
	size_t nb = (size_t)batch, ld = (size_t)s.oh * s.ow * nb;
	size_t n = ld * (size_t)s.c * s.k * s.k;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		size_t tap = i / ld, col = i - tap * ld;
		int kx = (int)(tap % (size_t)s.k), ky = (int)(tap / (size_t)s.k % (size_t)s.k);
		size_t ci = tap / ((size_t)s.k * s.k);
		int b = (int)(col % nb);
		size_t pixel = col / nb;
		int oy = (int)(pixel / (size_t)s.ow), ox = (int)(pixel % (size_t)s.ow);
		const float *channel = x + ci * (size_t)s.h * s.w * nb;
		cols[i] = im2col_elem(channel, &s, batch, oy, ox, ky, kx, b);
	}
}

/* Where item i of a (c, h, w, batch) array lies: image b, column x, row y, channel c. */
struct chwb {
	size_t c;
	int y, x, b;
};

static __host__ __device__ inline struct chwb chwb_of(size_t i, size_t batch, int h, int w)
{
	struct chwb p;
	size_t rest = i / batch;
	p.b = (int)(i % batch);
	p.x = (int)(rest % (size_t)w);
	rest /= (size_t)w;
	p.y = (int)(rest % (size_t)h);
	p.c = rest / (size_t)h;
	return p;
}

/* dx (c, h, w, batch): item i is pixel (ci, iy, ix) of image b, the sum of its taps in dcols. */
static __global__ void col2im_kernel(const float *dcols, struct conv_shape s, int batch,
				     float *dx)
{
	size_t nb = (size_t)batch, n = (size_t)s.c * s.h * s.w * nb;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		struct chwb p = chwb_of(i, nb, s.h, s.w);
		dx[i] = col2im_elem(dcols, &s, batch, (int)p.c, p.y, p.x, p.b);
	}
}

/* y (channels, n): item i has bias i / n. */
static __global__ void channel_bias_act_kernel(float *y, const float *bias, int channels,
					       size_t n, int relu)
{
	size_t total = (size_t)channels * n;
	for (size_t i = grid_first(); i < total; i += grid_stride())
		y[i] = bias_act_elem(y[i], bias[i / n], relu);
}

/* y, arg (c, oh, ow, batch): item i is window (py, px) of image b in channel ci of x (c, h, w, batch). */
static __global__ void maxpool_kernel(const float *x, struct pool_shape s, int batch, float *y,
				      int32_t *arg)
{
	size_t nb = (size_t)batch, n = (size_t)s.c * s.oh * s.ow * nb;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		struct chwb p = chwb_of(i, nb, s.oh, s.ow);
		const float *channel = x + p.c * (size_t)s.h * s.w * nb;
		y[i] = maxpool_window_elem(channel, s.w, s.k, batch, p.y, p.x, p.b, &arg[i]);
	}
}

/* dx (c, h, w, batch): item i is input pixel (ci, iy, ix) of image b, the gradient its window sends it. */
static __global__ void maxpool_backward_kernel(const float *dy, const int32_t *arg,
					       struct pool_shape s, int batch, float *dx)
{
	size_t nb = (size_t)batch, n = (size_t)s.c * s.h * s.w * nb;
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		struct chwb p = chwb_of(i, nb, s.h, s.w);
		int py = p.y / s.k, px = p.x / s.k;
		float g = 0.0f;
		if (py < s.oh && px < s.ow) {
			size_t o = ((p.c * (size_t)s.oh + (size_t)py) * s.ow + (size_t)px) * nb + (size_t)p.b;
			g = maxpool_backward_elem(dy[o], arg[o], p.y % s.k, p.x % s.k, s.k);
		}
		dx[i] = g;
	}
}

/* y (cols, rows): item i is y[j, r] = x[r, j], with j = i / rows, r = i % rows. */
static __global__ void transpose_kernel(const float *x, int rows, int cols, float *y)
{
	size_t n = work_2d(rows, cols);
	for (size_t i = grid_first(); i < n; i += grid_stride()) {
		size_t j = i / (size_t)rows, r = i - j * (size_t)rows;
		y[i] = x[r * (size_t)cols + j];
	}
}

void kernels_gather(cudaStream_t stream, const struct kernel_geom *geom, const uint8_t *images,
		    const uint8_t *labels, int pixels, const int32_t *index, const int32_t *cursor,
		    int count, float *x, int32_t *y)
{
	size_t n = work_2d(count, pixels);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(gather_kernel, g, stream, images, labels, pixels, index, cursor, count, x, y);
}

void kernels_advance(cudaStream_t stream, const struct kernel_geom *geom, int32_t *cursor,
		     int delta)
{
	struct kernel_geom g = pick_geom(geom, 1);
	KERNEL_LAUNCH(advance_kernel, g, stream, cursor, delta);
}

void kernels_bias_act(cudaStream_t stream, const struct kernel_geom *geom, float *y,
		      const float *bias, int rows, int cols, int relu)
{
	size_t n = work_2d(rows, cols);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(bias_act_kernel, g, stream, y, bias, rows, cols, relu);
}

void kernels_relu_backward(cudaStream_t stream, const struct kernel_geom *geom, float *dy,
			   const float *y, size_t n)
{
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(relu_backward_kernel, g, stream, dy, y, n);
}

void kernels_softmax_xent(cudaStream_t stream, const struct kernel_geom *geom,
			  const float *logits, const int32_t *labels, int rows, int cols, float scale,
			  float *row_loss, float *dlogits)
{
	if (work_2d(rows, cols) == 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)rows);
	KERNEL_LAUNCH(softmax_xent_kernel, g, stream, logits, labels, rows, cols, scale, row_loss,
		      dlogits);
}

void kernels_argmax_hits(cudaStream_t stream, const struct kernel_geom *geom,
			 const float *logits, const int32_t *labels, int rows, int cols,
			 int32_t *hits)
{
	if (work_2d(rows, cols) == 0)
		return;
	struct kernel_geom g = pick_geom(geom, (size_t)rows);
	KERNEL_LAUNCH(argmax_hits_kernel, g, stream, logits, labels, rows, cols, hits);
}

void kernels_sgd_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			const float *g, float *v, size_t n, const float *lr, const int32_t *step,
			float momentum, float weight_decay)
{
	if (n == 0)
		return;
	struct kernel_geom gm = pick_geom(geom, n);
	KERNEL_LAUNCH(sgd_update_kernel, gm, stream, p, g, v, n, lr, step, momentum, weight_decay);
}

void kernels_adamw_update(cudaStream_t stream, const struct kernel_geom *geom, float *p,
			  const float *g, float *m, float *v, size_t n, const float *lr,
			  const int32_t *step, int32_t *t, struct adamw_hyper h)
{
	if (n > 0) {
		struct kernel_geom gm = pick_geom(geom, n);
		KERNEL_LAUNCH(adamw_update_kernel, gm, stream, p, g, m, v, n, lr, step, t, h);
	}
	kernels_advance(stream, NULL, t, 1);
}

void kernels_scale(cudaStream_t stream, const struct kernel_geom *geom, float *x, size_t n,
		   float alpha)
{
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(scale_kernel, g, stream, x, n, alpha);
}

void kernels_im2col(cudaStream_t stream, const struct kernel_geom *geom, const float *x,
		    const struct conv_shape *s, int batch, float *cols)
{
	size_t n = work_2d(batch, s->oh * s->ow) * (size_t)(s->c * s->k * s->k);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(im2col_kernel, g, stream, x, *s, batch, cols);
}

void kernels_col2im(cudaStream_t stream, const struct kernel_geom *geom, const float *dcols,
		    const struct conv_shape *s, int batch, float *dx)
{
	size_t n = work_2d(batch, s->c * s->h * s->w);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(col2im_kernel, g, stream, dcols, *s, batch, dx);
}

void kernels_channel_bias_act(cudaStream_t stream, const struct kernel_geom *geom, float *y,
			      const float *bias, int channels, size_t n, int relu)
{
	size_t total = channels > 0 ? (size_t)channels * n : 0;
	if (total == 0)
		return;
	struct kernel_geom g = pick_geom(geom, total);
	KERNEL_LAUNCH(channel_bias_act_kernel, g, stream, y, bias, channels, n, relu);
}

void kernels_maxpool(cudaStream_t stream, const struct kernel_geom *geom, const float *x,
		     const struct pool_shape *s, int batch, float *y, int32_t *arg)
{
	size_t n = work_2d(batch, s->c * s->oh * s->ow);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(maxpool_kernel, g, stream, x, *s, batch, y, arg);
}

void kernels_maxpool_backward(cudaStream_t stream, const struct kernel_geom *geom,
			      const float *dy, const int32_t *arg, const struct pool_shape *s,
			      int batch, float *dx)
{
	size_t n = work_2d(batch, s->c * s->h * s->w);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(maxpool_backward_kernel, g, stream, dy, arg, *s, batch, dx);
}

void kernels_transpose(cudaStream_t stream, const struct kernel_geom *geom, const float *x,
		       int rows, int cols, float *y)
{
	size_t n = work_2d(rows, cols);
	if (n == 0)
		return;
	struct kernel_geom g = pick_geom(geom, n);
	KERNEL_LAUNCH(transpose_kernel, g, stream, x, rows, cols, y);
}

#if defined(CUDART_VERSION)
cudaError_t kernels_image_check(void)
{
	struct cudaFuncAttributes attr;
	return cudaFuncGetAttributes(&attr, advance_kernel);
}
#endif
