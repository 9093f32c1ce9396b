/*
 * test_model.c - the models (host/train/model.c): the forward pass of every
 * model against a naive double-precision network (tests/ref.c ref_net_loss,
 * PyTorch's definitions), the parameter layout and tensor names, and
 * model_init_params.
 *
 *   ctest --test-dir build -R test_model --output-on-failure
 *
 * Gradients are test_gradcheck.c's.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "elem.h"
#include "io/idx.h"
#include "train/model.h"
#include "model_point.h"
#include "ref.h"

#define FWD_ROWS 3

/* ---- forward pass and row losses against the double network ------------------------ */

static void forward_check(enum model_kind kind, const int *hidden, int n_hidden, const char *name,
			  uint64_t seed)
{
	/* Parameters twice as wide as the initial ones (more ReLU units on), normalised random pixels. */
	struct model_point p;
	model_point_make(&p, kind, hidden, n_hidden, FWD_ROWS, seed, 31, 2.0f);
	model_point_run(&p);
	float logits[FWD_ROWS * IDX_CLASSES], loss[FWD_ROWS];
	backend_download(&p.be, logits, p.ws.act[p.m.n_layers], sizeof(logits));
	backend_download(&p.be, loss, p.ws.row_loss, sizeof(loss));
	backend_synchronize(&p.be);

	double want_logits[FWD_ROWS * IDX_CLASSES], want_loss[FWD_ROWS];
	double mean = ref_net_loss(&p.m, p.pd, p.x, p.labels, FWD_ROWS, want_logits, NULL);
	char what[96];
	snprintf(what, sizeof(what), "model_forward %s logits", name);
	struct ref_cmp c = ref_compare_f(what, logits, want_logits, FWD_ROWS * IDX_CLASSES, 1e-4, 1e-4,
					 seed);
	cr_assert_eq(c.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, c.bad, c.max_err,
		     (unsigned long long)seed);
	/* Row losses of the float logits, as model_backward reports them. */
	for (int i = 0; i < FWD_ROWS; i++)
		want_loss[i] = ref_softmax_xent_row(logits + i * IDX_CLASSES, p.labels[i], IDX_CLASSES,
						    1.0, NULL);
	snprintf(what, sizeof(what), "model_backward %s row_loss", name);
	c = ref_compare_f(what, loss, want_loss, FWD_ROWS, 1e-5, 1e-5, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, c.bad, c.max_err,
		     (unsigned long long)seed);
	double got_mean = (loss[0] + loss[1] + loss[2]) / 3.0;
	cr_assert(fabs(got_mean - mean) < 1e-4 * (1.0 + mean), "%s: mean loss %.9g, double network %.9g",
		  name, got_mean, mean);
	model_point_free(&p);
}

Test(model, forward_matches_naive_double)
{
	const int h2[] = {7, 5}, h1[] = {6};
	uint64_t seed = ref_seed(205);
	forward_check(MODEL_SEED, NULL, 0, "seed", seed);
	forward_check(MODEL_LINEAR, NULL, 0, "linear", seed);
	forward_check(MODEL_MLP, h2, 2, "mlp 7,5", seed);
	forward_check(MODEL_MLP, h1, 1, "mlp 6", seed);
	forward_check(MODEL_LENET, NULL, 0, "lenet", seed);
}

/* ---- layout and initial parameters ------------------------------------------ */

Test(model, layout_is_one_flat_buffer)
{
	const int hidden[] = {7, 5};
	struct model m;
	model_init(&m, MODEL_MLP, hidden, 2);
	cr_assert_eq(m.n_layers, 3);
	const int dims[] = {784, 7, 5, 10};
	size_t off = 0;
	for (int l = 0; l < 3; l++) {
		const struct layer *y = &m.layer[l];
		cr_assert(y->kind == LAYER_DENSE && y->in == dims[l] && y->out == dims[l + 1] &&
			  y->units == dims[l + 1] && y->fan_in == dims[l],
			  "layer %d: kind %d in %d out %d", l, y->kind, y->in, y->out);
		cr_assert_eq(y->w_off, off, "w_off[%d] = %zu, want %zu", l, y->w_off, off);
		off += (size_t)dims[l + 1] * dims[l];
		cr_assert_eq(y->b_off, off, "b_off[%d] = %zu, want %zu", l, y->b_off, off);
		off += (size_t)dims[l + 1];
		cr_assert_eq(y->relu, l < 2, "layer %d relu %d", l, y->relu);
	}
	cr_assert_eq(m.n_params, off, "n_params %zu, want %zu", m.n_params, off);
	char text[128];
	model_layers_text(&m, text, sizeof(text));
	cr_assert_str_eq(text, "784,7,5,10");

	model_init(&m, MODEL_SEED, NULL, 0);
	cr_assert(m.n_layers == 1 && m.n_params == 7850 && m.layer[0].relu == 1,
		  "seed model: %d layers, %zu params, relu %d", m.n_layers, m.n_params, m.layer[0].relu);
	model_init(&m, MODEL_LINEAR, hidden, 2); /* hidden sizes only shape the mlp */
	cr_assert(m.n_layers == 1 && m.n_params == 7850 && m.layer[0].relu == 0,
		  "linear model: %d layers, %zu params, relu %d", m.n_layers, m.n_params, m.layer[0].relu);
	struct model_tensor t;
	cr_assert_eq(model_n_tensors(&m), 2);
	model_tensor_at(&m, 0, &t);
	cr_assert(!strcmp(t.name, "fc0.weight") && t.ndim == 2 && t.shape[0] == 10 && t.shape[1] == 784 &&
		  t.offset == 0 && t.count == 7840, "%s", t.name);
}

/* LeNet-5 as PyTorch's tutorials build it: shapes, flat offsets, names. */
Test(model, lenet_layers_and_tensors)
{
	struct model m;
	model_init(&m, MODEL_LENET, NULL, 0);
	cr_assert_eq(m.n_layers, 9);
	/* The convolutional stack between two transposes: images in, (rows, 400) out. */
	const enum layer_kind kinds[] = {LAYER_TRANSPOSE, LAYER_CONV, LAYER_POOL, LAYER_CONV,
					 LAYER_POOL, LAYER_TRANSPOSE, LAYER_DENSE, LAYER_DENSE,
					 LAYER_DENSE};
	const int outs[] = {784, 6 * 28 * 28, 6 * 14 * 14, 16 * 10 * 10, 16 * 5 * 5, 400, 120, 84, 10};
	const int relus[] = {0, 1, 0, 1, 0, 0, 1, 1, 0};
	cr_assert(m.layer[0].batch_last == 1 && m.layer[5].batch_last == 0, "transposes: in %d, out %d",
		  m.layer[0].batch_last, m.layer[5].batch_last);
	for (int l = 0; l < 9; l++) {
		cr_assert_eq(m.layer[l].kind, kinds[l], "layer %d kind", l);
		cr_assert_eq(m.layer[l].out, outs[l], "layer %d out %d, want %d", l, m.layer[l].out, outs[l]);
		cr_assert_eq(m.layer[l].relu, relus[l], "layer %d relu", l);
		if (l)
			cr_assert_eq(m.layer[l].in, m.layer[l - 1].out, "layer %d reads layer %d", l, l - 1);
	}
	const struct conv_shape *c1 = &m.layer[1].conv, *c2 = &m.layer[3].conv;
	cr_assert(c1->c == 1 && c1->h == 28 && c1->k == 5 && c1->pad == 2 && c1->oh == 28 && c1->ow == 28);
	cr_assert(c2->c == 6 && c2->h == 14 && c2->k == 5 && c2->pad == 0 && c2->oh == 10 && c2->ow == 10);
	cr_assert(m.layer[4].pool.oh == 5 && m.layer[4].pool.k == 2);
	cr_assert_eq(m.n_params, 61706);

	const char *names[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
			       "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
	const int shapes[][4] = {{6, 1, 5, 5}, {6}, {16, 6, 5, 5}, {16}, {120, 400}, {120},
				 {84, 120}, {84}, {10, 84}, {10}};
	const int ndims[] = {4, 1, 4, 1, 2, 1, 2, 1, 2, 1};
	cr_assert_eq(model_n_tensors(&m), 10);
	size_t off = 0;
	for (int i = 0; i < 10; i++) {
		struct model_tensor t;
		model_tensor_at(&m, i, &t);
		size_t count = 1;
		cr_assert_str_eq(t.name, names[i]);
		cr_assert_eq(t.ndim, ndims[i], "%s ndim %d", t.name, t.ndim);
		for (int d = 0; d < t.ndim; d++) {
			cr_assert_eq(t.shape[d], shapes[i][d], "%s shape[%d] = %d", t.name, d, t.shape[d]);
			count *= (size_t)t.shape[d];
		}
		cr_assert(t.offset == off && t.count == count, "%s at %zu count %zu, want %zu, %zu", t.name,
			  t.offset, t.count, off, count);
		off += count;
	}
	cr_assert_eq(off, m.n_params);
	char text[128];
	model_layers_text(&m, text, sizeof(text));
	cr_assert_str_eq(text, "1x28x28,conv6k5p2,pool2,conv16k5p0,pool2,120,84,10");
}

Test(model, init_params_normal_for_seed_and_linear)
{
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_LINEAR};
	for (int k = 0; k < 2; k++) {
		struct model m;
		model_init(&m, kinds[k], NULL, 0);
		float *p = calloc(m.n_params, sizeof(float));
		cr_assert_not_null(p);
		model_init_params(&m, 1, p);
		size_t nw = 7840;
		double sum = 0.0, sq = 0.0;
		for (size_t i = 0; i < nw; i++) {
			sum += p[m.layer[0].w_off + i];
			sq += (double)p[m.layer[0].w_off + i] * p[m.layer[0].w_off + i];
		}
		double mean = sum / nw, std = sqrt(sq / nw - mean * mean);
		/* 7840 draws: the sample std is within 5% of 0.01, the mean within 4 standard errors. */
		cr_assert(fabs(std - 0.01) < 0.0005, "kind %d: weight std %g, want 0.01", k, std);
		cr_assert(fabs(mean) < 4.0 * 0.01 / sqrt((double)nw), "kind %d: weight mean %g", k, mean);
		for (int i = 0; i < 10; i++)
			cr_assert(p[m.layer[0].b_off + i] == 0.0f, "kind %d: bias[%d] = %g, want 0", k, i,
				  p[m.layer[0].b_off + i]);
		free(p);
	}
}

/* PyTorch's default for Linear and Conv2d: W and b ~ uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
static void check_uniform_init(enum model_kind kind, const int *hidden, int n_hidden)
{
	struct model m;
	model_init(&m, kind, hidden, n_hidden);
	float *p = calloc(m.n_params, sizeof(float));
	cr_assert_not_null(p);
	model_init_params(&m, 1, p);
	for (int l = 0; l < m.n_layers; l++) {
		const struct layer *y = &m.layer[l];
		if (!layer_has_params(y))
			continue;
		double bound = 1.0 / sqrt((double)y->fan_in);
		size_t nw = (size_t)y->units * y->fan_in;
		double sq = 0.0, amax = 0.0;
		for (size_t i = 0; i < nw; i++) {
			double w = p[y->w_off + i];
			cr_assert(fabs(w) <= bound, "%s: weight[%zu] = %g outside +-%g", y->name, i, w, bound);
			sq += w * w;
			amax = fmax(amax, fabs(w));
		}
		/* Uniform(-b, b) has variance b^2 / 3; at least 150 draws per layer. */
		double var = sq / nw;
		cr_assert(fabs(var / (bound * bound / 3.0) - 1.0) < 0.25,
			  "%s: weight variance %g, want about %g", y->name, var, bound * bound / 3.0);
		cr_assert(amax > 0.8 * bound, "%s: largest |weight| %g, bound %g", y->name, amax, bound);
		int nonzero = 0;
		for (int i = 0; i < y->units; i++) {
			double b = p[y->b_off + i];
			cr_assert(fabs(b) <= bound, "%s: bias[%d] = %g outside +-%g", y->name, i, b, bound);
			nonzero += b != 0.0;
		}
		cr_assert_eq(nonzero, y->units, "%s: biases should be drawn, %d of %d nonzero", y->name,
			     nonzero, y->units);
	}
	free(p);
}

Test(model, init_params_uniform_for_mlp_and_lenet)
{
	const int hidden[] = {64, 32};
	check_uniform_init(MODEL_MLP, hidden, 2);
	check_uniform_init(MODEL_LENET, NULL, 0);
}

Test(model, init_params_depend_on_seed_only)
{
	const int hidden[] = {7, 5};
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_LINEAR, MODEL_MLP, MODEL_LENET};
	for (int k = 0; k < 4; k++) {
		struct model m;
		model_init(&m, kinds[k], hidden, 2);
		float *a = calloc(m.n_params, sizeof(float));
		float *b = calloc(m.n_params, sizeof(float));
		float *c = calloc(m.n_params, sizeof(float));
		cr_assert(a && b && c);
		model_init_params(&m, 42, a);
		memset(b, 0xff, m.n_params * sizeof(float));
		model_init_params(&m, 42, b);
		model_init_params(&m, 43, c);
		cr_assert(memcmp(a, b, m.n_params * sizeof(float)) == 0,
			  "kind %d: the same seed gave different parameters", k);
		size_t nw = 0, differ = 0;
		for (int l = 0; l < m.n_layers; l++) {
			const struct layer *y = &m.layer[l];
			for (size_t i = 0; layer_has_params(y) && i < (size_t)y->units * y->fan_in; i++) {
				nw++;
				differ += a[y->w_off + i] != c[y->w_off + i];
			}
		}
		cr_assert(differ * 100 >= nw * 99, "kind %d: seeds 42 and 43 share %zu of %zu weights", k,
			  nw - differ, nw);
		free(a);
		free(b);
		free(c);
	}
}

/* ---- what the backward pass computes -------------------------------------------------- */

/*
 * The backward pass computes a layer's input gradient only where a layer
 * below it holds parameters. LeNet-5's first convolution sits on the input's
 * transpose alone: its input gradient (a GEMM and a col2im, about a sixth of
 * the step's time) must not be computed, and the second convolution's must.
 */
Test(model, backward_skips_the_input_gradient_of_the_lowest_parameters)
{
	struct model_point p;
	model_point_make(&p, MODEL_LENET, NULL, 0, 4, 7, 0, 1.0f);
	size_t n1 = (size_t)p.rows * (size_t)p.m.layer[1].in;
	size_t n2 = (size_t)p.rows * (size_t)p.m.layer[2].in;
	float *sentinel = malloc((n1 > n2 ? n1 : n2) * sizeof(float));
	float *got = malloc((n1 > n2 ? n1 : n2) * sizeof(float));
	cr_assert(sentinel && got);
	for (size_t i = 0; i < (n1 > n2 ? n1 : n2); i++)
		sentinel[i] = 12345.0f;
	backend_upload(&p.be, p.ws.dact[1], sentinel, n1 * sizeof(float));
	backend_upload(&p.be, p.ws.dact[2], sentinel, n2 * sizeof(float));
	model_point_run(&p);

	backend_download(&p.be, got, p.ws.dact[1], n1 * sizeof(float));
	cr_expect(!memcmp(got, sentinel, n1 * sizeof(float)),
		  "conv1's input gradient (dact[1]) was computed though nothing below it learns");
	backend_download(&p.be, got, p.ws.dact[2], n2 * sizeof(float));
	size_t written = 0;
	for (size_t i = 0; i < n2; i++)
		written += got[i] != 12345.0f;
	cr_expect(written > n2 / 2, "conv2's input gradient (dact[2]): %zu of %zu values written",
		  written, n2);
	free(sentinel);
	free(got);
	model_point_free(&p);
}
