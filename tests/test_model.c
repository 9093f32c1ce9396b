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
	backend_download(&p.be, logits, model_logits(&p.ws), sizeof(logits));
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

/* ---- stages ------------------------------------------------------------------------- */

/* LeNet-5 runs as two convolution stages (conv, ReLU, pool) and three dense ones. */
Test(model, plan_groups_layers_into_stages)
{
	struct model m;
	struct model_plan plan;
	model_init(&m, MODEL_LENET, NULL, 0);
	model_plan_make(&m, &plan);
	cr_assert_eq(plan.n, 5, "lenet: %d stages, want 5", plan.n);
	cr_assert_eq(plan.input_batch_last, 1, "lenet reads its images as (784, rows)");
	const struct {
		enum stage_kind kind;
		int layer, pool, batch_first, relu, out;
	} want[] = {
		{STAGE_CONV, 1, 2, 0, 1, 6 * 14 * 14},
		{STAGE_CONV, 3, 4, 1, 1, 16 * 5 * 5},
		{STAGE_DENSE, 6, 0, 0, 1, 120},
		{STAGE_DENSE, 7, 0, 0, 1, 84},
		{STAGE_DENSE, 8, 0, 0, 0, 10},
	};
	for (int s = 0; s < 5; s++) {
		const struct stage *st = &plan.stage[s];
		cr_assert(st->kind == want[s].kind && st->layer == want[s].layer &&
				  (st->kind != STAGE_CONV || st->pool == want[s].pool) &&
				  st->batch_first == want[s].batch_first && st->relu == want[s].relu &&
				  st->out == want[s].out,
			  "lenet stage %d: kind %d layer %d pool %d batch_first %d relu %d out %d", s,
			  st->kind, st->layer, st->pool, st->batch_first, st->relu, st->out);
	}
	struct conv_stage cs = model_conv_stage(&m, &plan.stage[1], 37);
	cr_assert(cs.conv == &m.layer[3].conv && cs.pool == &m.layer[4].pool && cs.oc == 16 &&
			  cs.rows == 37 && cs.batch_first == 1,
		  "conv2's stage: oc %d rows %d batch_first %d", cs.oc, cs.rows, cs.batch_first);

	const int hidden[] = {7, 5};
	model_init(&m, MODEL_MLP, hidden, 2);
	model_plan_make(&m, &plan);
	cr_assert(plan.n == 3 && !plan.input_batch_last, "mlp: %d stages, batch_last %d", plan.n,
		  plan.input_batch_last);
	for (int s = 0; s < 3; s++)
		cr_assert(plan.stage[s].kind == STAGE_DENSE && plan.stage[s].layer == s &&
				  plan.stage[s].relu == (s < 2) && plan.stage[s].out == (s ? s == 1 ? 5 : 10 : 7),
			  "mlp stage %d", s);
	model_init(&m, MODEL_SEED, NULL, 0);
	model_plan_make(&m, &plan);
	cr_assert(plan.n == 1 && plan.stage[0].relu == 1 && plan.stage[0].out == 10,
		  "seed: one dense stage with its ReLU on the logits");
}

/*
 * A backend whose weight gradients read x (the host's): the workspace keeps
 * no im2col matrix, and a training step's gradients are those of a backend
 * that keeps one (the same host ops without conv_wgrad_reads_x).
 */
Test(model, no_cols_where_the_weight_gradient_reads_x)
{
	struct model_point p;
	model_point_make(&p, MODEL_LENET, NULL, 0, 3, ref_seed(211), 5, 1.0f);
	cr_assert(backend_conv_wgrad_reads_x(&p.be), "the host backend reads x");
	cr_expect(!p.ws.cols[0] && !p.ws.cols[1], "an im2col matrix was allocated");
	size_t bytes = p.np * sizeof(float);
	float *a = malloc(bytes), *b = malloc(bytes);
	cr_assert(a && b);
	model_point_run(&p);
	backend_download(&p.be, a, p.grads_d, bytes);

	struct backend_ops keeps = *p.be.ops;
	keeps.conv_wgrad_reads_x = NULL;
	model_ws_destroy(&p.be, &p.ws);
	p.be.ops = &keeps;
	cr_assert_eq(model_ws_create(&p.be, &p.m, p.rows, &p.ws), 0);
	cr_expect(p.ws.cols[0] && p.ws.cols[1], "no im2col matrix for a backend that reads it");
	model_point_upload_input(&p, p.x);
	backend_upload(&p.be, p.ws.labels, p.labels, (size_t)p.rows * sizeof(int32_t));
	model_point_run(&p);
	backend_download(&p.be, b, p.grads_d, bytes);
	cr_expect(!memcmp(a, b, bytes), "the gradients differ with the im2col matrix kept");
	free(a);
	free(b);
	model_point_free(&p);
}

/*
 * keep = 0 (scoring) keeps nothing for a backward pass: the im2col matrices
 * are left alone, and the logits are the same bits as with keep = 1. On a
 * backend that keeps them (the host's ops without conv_wgrad_reads_x).
 */
Test(model, forward_keeps_cols_only_when_asked)
{
	struct model_point p;
	model_point_make(&p, MODEL_LENET, NULL, 0, 3, ref_seed(209), 5, 1.0f);
	struct backend_ops keeps = *p.be.ops;
	keeps.conv_wgrad_reads_x = NULL;
	model_ws_destroy(&p.be, &p.ws);
	p.be.ops = &keeps;
	cr_assert_eq(model_ws_create(&p.be, &p.m, p.rows, &p.ws), 0);
	model_point_upload_input(&p, p.x);
	size_t n0 = (size_t)p.rows * 28 * 28 * 25, n1 = (size_t)p.rows * 10 * 10 * 150;
	size_t n = n0 > n1 ? n0 : n1;
	float *sentinel = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
	float a[3 * IDX_CLASSES], b[3 * IDX_CLASSES];
	cr_assert(sentinel && got);
	for (size_t i = 0; i < n; i++)
		sentinel[i] = 12345.0f;
	backend_upload(&p.be, p.ws.cols[0], sentinel, n0 * sizeof(float));
	backend_upload(&p.be, p.ws.cols[1], sentinel, n1 * sizeof(float));
	model_forward(&p.be, &p.m, &p.ws, p.params_d, p.rows, 0);
	backend_download(&p.be, a, model_logits(&p.ws), sizeof(a));
	backend_download(&p.be, got, p.ws.cols[0], n0 * sizeof(float));
	cr_expect(!memcmp(got, sentinel, n0 * sizeof(float)), "keep = 0 wrote conv1's cols");
	backend_download(&p.be, got, p.ws.cols[1], n1 * sizeof(float));
	cr_expect(!memcmp(got, sentinel, n1 * sizeof(float)), "keep = 0 wrote conv2's cols");

	model_forward(&p.be, &p.m, &p.ws, p.params_d, p.rows, 1);
	backend_download(&p.be, b, model_logits(&p.ws), sizeof(b));
	cr_expect(!memcmp(a, b, sizeof(a)), "the logits differ with keep = 1");
	size_t written = 0;
	backend_download(&p.be, got, p.ws.cols[1], n1 * sizeof(float));
	for (size_t i = 0; i < n1; i++)
		written += got[i] != 12345.0f;
	cr_expect(written > n1 / 2, "keep = 1: %zu of conv2's %zu cols written", written, n1);
	free(sentinel);
	free(got);
	model_point_free(&p);
}

/*
 * model_backward_scaled: the gradient of scale * (sum of the row losses), so
 * scale * rows times model_backward's; the loss op moves the step counters on
 * once (backend.h), and model_backward, with none, moves nothing.
 */
Test(model, backward_scaled_scales_and_moves_the_counters_once)
{
	const int hidden[] = {7, 5};
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_MLP, MODEL_LENET};
	uint64_t seed = ref_seed(210);
	for (int k = 0; k < 3; k++) {
		struct model_point p;
		model_point_make(&p, kinds[k], hidden, 2, 5, seed, 6, 2.0f);
		model_point_run(&p);
		float *mean = malloc(p.np * sizeof(float)), *got = malloc(p.np * sizeof(float));
		double *want = malloc(p.np * sizeof(double));
		cr_assert(mean && got && want);
		backend_download(&p.be, mean, p.grads_d, p.np * sizeof(float));
		const struct step_counters start = {.cursor = 40, .step = 3, .updates = 1003, .spare = -9};
		struct step_counters *c_d = backend_alloc(&p.be, sizeof(start)), c;
		cr_assert_not_null(c_d);
		backend_upload(&p.be, c_d, &start, sizeof(start));
		const float scale = 0.125f;
		model_backward_scaled(&p.be, &p.m, &p.ws, p.params_d, p.grads_d, p.rows, scale, c_d);
		backend_download(&p.be, got, p.grads_d, p.np * sizeof(float));
		backend_download(&p.be, &c, c_d, sizeof(c));
		backend_synchronize(&p.be);
		cr_assert(c.cursor == 45 && c.step == 4 && c.updates == 1004 && c.spare == -9,
			  "kind %d: counters {40, 3, 1003, -9} after a backward pass of 5 rows: "
			  "{%d, %d, %d, %d}, want {45, 4, 1004, -9}",
			  k, c.cursor, c.step, c.updates, c.spare);
		for (size_t i = 0; i < p.np; i++)
			want[i] = (double)mean[i] * scale * p.rows;
		char what[64];
		snprintf(what, sizeof(what), "model_backward_scaled kind %d", k);
		struct ref_cmp cmp = ref_compare_f(what, got, want, p.np, 1e-6, 1e-4, seed);
		cr_assert_eq(cmp.bad, 0, "%s: %zu of %zu off (seed %llu)", what, cmp.bad, p.np,
			     (unsigned long long)seed);
		backend_free(&p.be, c_d);
		free(mean);
		free(got);
		free(want);
		model_point_free(&p);
	}
}

/* ---- what the backward pass computes -------------------------------------------------- */

/*
 * A backend that runs the host backend's ops and records those a backward
 * pass asks for: which buffers its GEMMs write, which stages its convolution
 * ops run for and where they write.
 */
#define SPY_MAX 32
static struct spy {
	const struct backend_ops *real;
	int gemms, pool_backwards, conv_backward_datas;
	const float *gemm_c[SPY_MAX], *gemm_bias_grad[SPY_MAX];
	enum gemm_epilogue gemm_epilogue[SPY_MAX];
	const struct conv_shape *pool_conv[SPY_MAX], *cbd_conv[SPY_MAX];
	const float *pool_dz[SPY_MAX], *cbd_out[SPY_MAX];
} spy;

static void spy_gemm(void *ctx, const struct gemm_req *r)
{
	cr_assert_lt(spy.gemms, SPY_MAX);
	spy.gemm_c[spy.gemms] = r->c;
	spy.gemm_bias_grad[spy.gemms] = r->bias_grad;
	spy.gemm_epilogue[spy.gemms++] = r->epilogue;
	spy.real->gemm(ctx, r);
}

static void spy_pool_backward(void *ctx, const struct conv_stage *s, const float *dy,
			      const float *y, const int32_t *arg, float *dz)
{
	cr_assert_lt(spy.pool_backwards, SPY_MAX);
	spy.pool_conv[spy.pool_backwards] = s->conv;
	spy.pool_dz[spy.pool_backwards++] = dz;
	spy.real->pool_backward(ctx, s, dy, y, arg, dz);
}

static void spy_conv_backward_data(void *ctx, const struct conv_stage *s, const float *w,
				   const float *dz, const struct conv_stage *below,
				   const float *below_y, const int32_t *below_arg, float *dz_below)
{
	cr_assert_lt(spy.conv_backward_datas, SPY_MAX);
	spy.cbd_conv[spy.conv_backward_datas] = s->conv;
	spy.cbd_out[spy.conv_backward_datas++] = dz_below;
	spy.real->conv_backward_data(ctx, s, w, dz, below, below_y, below_arg, dz_below);
}

/* be, its ops recorded into spy (reset) from now on. */
static struct backend spy_on(const struct backend *be, struct backend_ops *ops)
{
	memset(&spy, 0, sizeof(spy));
	spy.real = be->ops;
	*ops = *be->ops;
	ops->gemm = spy_gemm;
	ops->pool_backward = spy_pool_backward;
	ops->conv_backward_data = spy_conv_backward_data;
	struct backend s = *be;
	s.ops = ops;
	return s;
}

/* The index of the backward GEMM that writes c, or -1. */
static int spy_gemm_writing(const float *c)
{
	for (int i = 0; i < spy.gemms; i++)
		if (spy.gemm_c[i] == c)
			return i;
	return -1;
}

/*
 * The backward pass computes a stage's input gradient only where a stage
 * below it holds parameters: the lowest stage computes none (for LeNet-5 its
 * convolution's would be a fifth of the step's work, thrown away). Every
 * other stage's is computed, into the stage below's dz (through its ReLU) or,
 * for the convolution stage under the dense ones, its dy.
 */
Test(model, backward_skips_the_input_gradient_of_the_lowest_parameters)
{
	struct model_point p;
	model_point_make(&p, MODEL_LENET, NULL, 0, 4, 7, 0, 1.0f);
	const struct model_ws *ws = &p.ws;
	size_t n_dz0 = (size_t)p.rows * p.m.layer[1].out, n_dy0 = (size_t)p.rows * ws->plan.stage[0].out;
	size_t n = n_dz0 > n_dy0 ? n_dz0 : n_dy0;
	float *sentinel = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
	cr_assert(sentinel && got);
	for (size_t i = 0; i < n; i++)
		sentinel[i] = 12345.0f;
	backend_upload(&p.be, ws->dz[0], sentinel, n_dz0 * sizeof(float));
	backend_upload(&p.be, ws->dy[0], sentinel, n_dy0 * sizeof(float));
	model_forward(&p.be, &p.m, &p.ws, p.params_d, p.rows, 1);
	struct backend_ops ops;
	struct backend be = spy_on(&p.be, &ops);
	model_backward(&be, &p.m, &p.ws, p.params_d, p.grads_d, p.rows);
	backend_synchronize(&p.be);

	/* conv2 (stage 1) alone goes back through a convolution, into conv1's dz; conv1 does not. */
	cr_expect_eq(spy.conv_backward_datas, 1, "%d conv_backward_data calls, want 1 (conv2's)",
		     spy.conv_backward_datas);
	cr_expect(spy.conv_backward_datas < 1 ||
			  (spy.cbd_conv[0] == &p.m.layer[3].conv && spy.cbd_out[0] == ws->dz[0]),
		  "conv_backward_data did not run for conv2 into conv1's dz");
	cr_expect(spy.pool_backwards == 1 && spy.pool_conv[0] == &p.m.layer[3].conv &&
			  spy.pool_dz[0] == ws->dz[1],
		  "%d pool_backward calls, want 1: conv2's, under fc1, into dz[1]", spy.pool_backwards);
	/* Five weight GEMMs (each with its bias gradient) and three input gradients (fc3, fc2, fc1). */
	cr_expect_eq(spy.gemms, 8, "%d GEMMs in the backward pass, want 8", spy.gemms);
	for (int s = 0; s < 5; s++) {
		const struct layer *l = &p.m.layer[ws->plan.stage[s].layer];
		int g = spy_gemm_writing(p.grads_d + l->w_off);
		cr_expect(g >= 0 && spy.gemm_bias_grad[g] == p.grads_d + l->b_off &&
				  spy.gemm_epilogue[g] == GEMM_EPILOGUE_NONE,
			  "stage %d: no GEMM for its dW with db as its bias gradient", s);
	}
	for (int s = 2; s < 4; s++)
		cr_expect(spy_gemm_writing(ws->dz[s]) >= 0 &&
				  spy.gemm_epilogue[spy_gemm_writing(ws->dz[s])] == GEMM_EPILOGUE_DRELU,
			  "fc%d's input gradient: no GEMM into dz[%d] through the ReLU", s + 1, s);
	cr_expect(spy_gemm_writing(ws->dy[1]) >= 0, "fc1's input gradient: no GEMM into conv2's dy");

	backend_download(&p.be, got, ws->dz[0], n_dz0 * sizeof(float));
	size_t written = 0;
	for (size_t i = 0; i < n_dz0; i++)
		written += got[i] != 12345.0f;
	cr_expect_eq(written, n_dz0, "conv1's dz: %zu of %zu values written by conv2's backward pass",
		     written, n_dz0);
	backend_download(&p.be, got, ws->dy[0], n_dy0 * sizeof(float));
	cr_expect(!memcmp(got, sentinel, n_dy0 * sizeof(float)),
		  "conv1's dy was written: the stage above it is a convolution, which writes dz[0]");
	free(sentinel);
	free(got);
	model_point_free(&p);
}

/* The same for the dense models: one GEMM per stage for dW and db, one per stage above the lowest for dx. */
Test(model, dense_backward_skips_the_input_gradient_of_the_lowest_stage)
{
	const int hidden[] = {7, 5};
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_LINEAR, MODEL_MLP};
	for (int k = 0; k < 3; k++) {
		struct model_point p;
		model_point_make(&p, kinds[k], hidden, 2, 3, 8, 0, 1.0f);
		const struct model_ws *ws = &p.ws;
		int n = ws->plan.n;
		model_forward(&p.be, &p.m, &p.ws, p.params_d, p.rows, 1);
		struct backend_ops ops;
		struct backend be = spy_on(&p.be, &ops);
		model_backward(&be, &p.m, &p.ws, p.params_d, p.grads_d, p.rows);
		backend_synchronize(&p.be);
		cr_expect_eq(spy.gemms, 2 * n - 1, "kind %d: %d GEMMs, want %d", k, spy.gemms, 2 * n - 1);
		for (int s = 0; s < n; s++) {
			const struct layer *l = &p.m.layer[ws->plan.stage[s].layer];
			int g = spy_gemm_writing(p.grads_d + l->w_off);
			cr_expect(g >= 0 && spy.gemm_bias_grad[g] == p.grads_d + l->b_off,
				  "kind %d stage %d: no GEMM for its dW with db", k, s);
			if (s + 1 < n)
				cr_expect(spy_gemm_writing(ws->dz[s]) >= 0 &&
						  spy.gemm_epilogue[spy_gemm_writing(ws->dz[s])] ==
							  GEMM_EPILOGUE_DRELU,
					  "kind %d: no GEMM into dz[%d] through the ReLU", k, s);
		}
		cr_expect(spy.pool_backwards == 0 && spy.conv_backward_datas == 0,
			  "kind %d: convolution ops in a dense model's backward pass", k);
		model_point_free(&p);
	}
}
