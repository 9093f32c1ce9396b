/*
 * conv_shape.h - the geometry of a convolution and of a max-pool, shared by
 * the model, both backends, the kernels and the tests.
 *
 * Layouts (row-major, as everywhere). Inside a convolutional stack every
 * activation is batch-innermost, (channels, height, width, batch): the
 * transpose of PyTorch's (batch, channels, height, width), so that the element
 * ops walk contiguous runs of a whole batch and vectorize along it:
 *   activations  (c, h, w, batch): conv inputs, conv outputs, pool inputs and
 *                outputs; a transpose turns the images (batch, 784) into
 *                (784, batch) and the last pool's (400, batch) into (batch, 400),
 *                PyTorch's flatten order for the dense layers
 *   cols         (c * k * k, oh * ow * batch): the im2col matrix, one row per
 *                tap (ci, ky, kx) in PyTorch's weight order, one column per
 *                output pixel (oy, ox, b)
 * so that a convolution is out (oc, oh*ow*batch) = W (oc, c*k*k) * cols.
 */
#ifndef MNIST_DDP_CONV_SHAPE_H
#define MNIST_DDP_CONV_SHAPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* A k x k convolution, stride 1, zero padding pad, on (c, h, w) inputs. */
struct conv_shape {
	int c, h, w;  /* input channels, height, width */
	int k, pad;
	int oh, ow;   /* output height and width: h + 2 pad - k + 1 */
};

/* Max-pooling over k x k windows with stride k (PyTorch's MaxPool2d(k)): (c, h, w) inputs. */
struct pool_shape {
	int c, h, w;
	int k;
	int oh, ow;   /* h / k and w / k, rounded down: a ragged edge is not pooled */
};

static inline struct conv_shape conv_shape_make(int c, int h, int w, int k, int pad)
{
	struct conv_shape s = {c, h, w, k, pad, h + 2 * pad - k + 1, w + 2 * pad - k + 1};
	return s;
}

static inline struct pool_shape pool_shape_make(int c, int h, int w, int k)
{
	struct pool_shape s = {c, h, w, k, h / k, w / k};
	return s;
}

#ifdef __cplusplus
}
#endif

#endif /* MNIST_DDP_CONV_SHAPE_H */
