/*
 * test_gradcheck.c - the models' gradients by central differences, their
 * forward pass against a naive double-precision forward, their parameter
 * layout, and model_init_params.
 *
 *   ctest --test-dir build -R test_gradcheck --output-on-failure
 *
 * Every parameter of every model (seed, linear, mlp with hidden 7,5 and with
 * one hidden layer of 6) is checked: the analytic gradient of the mean batch
 * loss from model_backward against (L(p + h) - L(p - h)) / (2h), with L the
 * mean of the per-row losses summed in double. In float32, h = 1e-2 keeps
 * the rounding noise of L near 5e-5 in the quotient while the truncation
 * error stays below that; the tolerance is atol 3e-4 + rtol 2e-2.
 *
 * ReLU kinks: parameters are drawn wider than the initial ones, then each
 * ReLU unit's bias is moved (layer by layer, in double) until every row's
 * pre-activation is at least GC_MARGIN = 0.1 from zero and the unit is on in
 * at least one row. One parameter moved by h shifts any pre-activation by
 * less than 0.03, so no difference quotient straddles a kink; the test also
 * verifies that: the ReLU on/off pattern at p - h and p + h must equal the
 * one at p for every component, and it requires that most checked
 * components are far from zero, so it cannot pass by checking nothing.
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
#include "ref.h"

#define GC_ROWS 4
#define GC_H 1e-2
#define GC_ATOL 3e-4
#define GC_RTOL 2e-2
#define GC_MARGIN 0.1

struct gc {
	struct backend be;
	struct model m;
	struct model_ws ws;
	int rows;
	float *params;   /* (n_params) host copy */
	float *params_d; /* backend copy */
	float *grads_d;
	float *x;        /* (rows, 784) inputs */
	int32_t *labels; /* (rows) */
	float *loss;     /* (rows) */
	float *act;      /* (rows, widest layer) scratch for downloads */
	int act_len;
};

static int gc_relu_layer(const struct model *m, int l) /* ReLU after layer l (act[l + 1]) */
{
	return l < m->n_layers - 1 || m->relu_out;
}

/* The smallest bias shift that keeps every row GC_MARGIN off the kink with the unit on somewhere. */
static double gc_pick_shift(const double *z, int rows)
{
	for (int k = 0; k <= 2000; k++)
		for (int sign = 1; sign >= -1; sign -= 2) {
			double s = sign * k * 0.01;
			int ok = 1, on = 0;
			for (int r = 0; r < rows; r++) {
				ok &= fabs(z[r] + s) >= GC_MARGIN;
				on |= z[r] + s > 0.0;
			}
			if (ok && on)
				return s;
		}
	cr_assert_fail("no bias shift keeps the ReLU units off their kinks");
	return 0.0;
}

/* Move the ReLU units' biases in g->params so that no pre-activation is near zero. */
static void gc_steer_biases(struct gc *g)
{
	const struct model *m = &g->m;
	int rows = g->rows;
	double *cur = calloc((size_t)rows * g->act_len, sizeof(double));
	double *next = calloc((size_t)rows * g->act_len, sizeof(double));
	cr_assert(cur && next);
	ref_widen(g->x, cur, (size_t)rows * IDX_PIXELS);
	for (int l = 0; l < m->n_layers; l++) {
		int in = m->dims[l], out = m->dims[l + 1];
		const float *w = g->params + m->w_off[l];
		float *b = g->params + m->b_off[l];
		for (int o = 0; o < out; o++) {
			double z[GC_ROWS];
			for (int r = 0; r < rows; r++) {
				double s = 0.0;
				for (int i = 0; i < in; i++)
					s += cur[(size_t)r * in + i] * (double)w[(size_t)o * in + i];
				z[r] = s + (double)b[o];
			}
			int relu = gc_relu_layer(m, l);
			if (relu) {
				double shift = gc_pick_shift(z, rows);
				b[o] = (float)(b[o] + shift); /* rounding moves z by ~1e-8, far below the margin */
				for (int r = 0; r < rows; r++)
					z[r] += shift;
			}
			for (int r = 0; r < rows; r++)
				next[(size_t)r * out + o] = relu && z[r] < 0.0 ? 0.0 : z[r];
		}
		double *t = cur;
		cur = next;
		next = t;
	}
	free(cur);
	free(next);
}

static void gc_setup(struct gc *g, enum model_kind kind, const int *hidden, int n_hidden,
		     uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	cr_assert_eq(backend_host_create(NULL, 1, &g->be), 0);
	model_init(&g->m, kind, hidden, n_hidden);
	g->rows = GC_ROWS;
	cr_assert_eq(model_ws_create(&g->be, &g->m, g->rows, &g->ws), 0);
	size_t np = g->m.n_params;
	g->params = calloc(np, sizeof(float));
	g->x = calloc((size_t)g->rows * IDX_PIXELS, sizeof(float));
	g->labels = calloc((size_t)g->rows, sizeof(int32_t));
	g->loss = calloc((size_t)g->rows, sizeof(float));
	g->act_len = 0;
	for (int l = 0; l <= g->m.n_layers; l++)
		if (g->m.dims[l] > g->act_len)
			g->act_len = g->m.dims[l];
	g->act = calloc((size_t)g->rows * g->act_len, sizeof(float));
	cr_assert(g->params && g->x && g->labels && g->loss && g->act);

	/* Inputs: normalised random pixels, as gather would produce them. */
	struct rng r = rng_make(seed, 11);
	for (size_t i = 0; i < (size_t)g->rows * IDX_PIXELS; i++)
		g->x[i] = normalize_pixel_elem((uint8_t)rng_below(&r, 256));
	ref_fill_labels(&r, g->labels, (size_t)g->rows, IDX_CLASSES);
	/* Parameters: uniform, twice PyTorch's bound, biases spread too. */
	for (int l = 0; l < g->m.n_layers; l++) {
		double bound = 2.0 / sqrt((double)g->m.dims[l]);
		ref_fill_uniform(&r, g->params + g->m.w_off[l],
				 (size_t)g->m.dims[l + 1] * g->m.dims[l], -bound, bound);
		ref_fill_uniform(&r, g->params + g->m.b_off[l], (size_t)g->m.dims[l + 1], -0.5, 0.5);
	}
	gc_steer_biases(g);

	g->params_d = backend_alloc(&g->be, np * sizeof(float));
	g->grads_d = backend_alloc(&g->be, np * sizeof(float));
	cr_assert(g->params_d && g->grads_d);
	g->be.ops->upload(g->be.ctx, g->params_d, g->params, np * sizeof(float));
	g->be.ops->upload(g->be.ctx, g->ws.act[0], g->x, (size_t)g->rows * IDX_PIXELS * sizeof(float));
	g->be.ops->upload(g->be.ctx, g->ws.labels, g->labels, (size_t)g->rows * sizeof(int32_t));
}

static void gc_teardown(struct gc *g)
{
	backend_free(&g->be, g->params_d);
	backend_free(&g->be, g->grads_d);
	model_ws_destroy(&g->be, &g->ws);
	backend_destroy(&g->be);
	free(g->params);
	free(g->x);
	free(g->labels);
	free(g->loss);
	free(g->act);
}

/*
 * Mean batch loss at the current backend parameters, summed in double.
 * pattern (optional): one byte per ReLU unit and row, 1 where the unit is on.
 */
static double gc_loss(struct gc *g, uint8_t *pattern)
{
	const struct model *m = &g->m;
	int top = m->n_layers;
	model_forward(&g->be, m, &g->ws, g->params_d, g->rows);
	g->be.ops->softmax_xent(g->be.ctx, g->ws.act[top], g->ws.labels, g->rows, m->dims[top], 1.0f,
				g->ws.row_loss, NULL);
	g->be.ops->download(g->be.ctx, g->loss, g->ws.row_loss, (size_t)g->rows * sizeof(float));
	backend_synchronize(&g->be);
	double sum = 0.0;
	for (int i = 0; i < g->rows; i++)
		sum += g->loss[i];
	if (pattern) {
		size_t at = 0;
		for (int l = 0; l < m->n_layers; l++) {
			if (!gc_relu_layer(m, l))
				continue;
			size_t n = (size_t)g->rows * m->dims[l + 1];
			g->be.ops->download(g->be.ctx, g->act, g->ws.act[l + 1], n * sizeof(float));
			backend_synchronize(&g->be);
			for (size_t i = 0; i < n; i++)
				pattern[at++] = g->act[i] > 0.0f;
		}
	}
	return sum / g->rows;
}

static size_t gc_pattern_len(const struct model *m, int rows)
{
	size_t n = 0;
	for (int l = 0; l < m->n_layers; l++)
		if (gc_relu_layer(m, l))
			n += (size_t)rows * m->dims[l + 1];
	return n ? n : 1;
}

static void gc_set_param(struct gc *g, size_t i, float v)
{
	g->be.ops->upload(g->be.ctx, g->params_d + i, &v, sizeof(v));
}

static void gradcheck_model(enum model_kind kind, const int *hidden, int n_hidden, const char *name,
			    uint64_t seed)
{
	struct gc g;
	gc_setup(&g, kind, hidden, n_hidden, seed);
	size_t np = g.m.n_params;

	/* Analytic gradient of the mean loss. */
	model_forward(&g.be, &g.m, &g.ws, g.params_d, g.rows);
	model_backward(&g.be, &g.m, &g.ws, g.params_d, g.grads_d, g.rows);
	float *grads = calloc(np, sizeof(float));
	cr_assert_not_null(grads);
	g.be.ops->download(g.be.ctx, grads, g.grads_d, np * sizeof(float));
	backend_synchronize(&g.be);

	size_t plen = gc_pattern_len(&g.m, g.rows);
	uint8_t *p0 = calloc(plen, 1), *pp = calloc(plen, 1), *pm = calloc(plen, 1);
	cr_assert(p0 && pp && pm);
	double l0 = gc_loss(&g, p0);
	cr_assert(isfinite(l0), "%s: loss %g at the test point (seed %llu)", name, l0,
		  (unsigned long long)seed);

	float *got = calloc(np, sizeof(float));
	double *fd = calloc(np, sizeof(double));
	cr_assert(got && fd);
	size_t checked = 0, skipped = 0, large = 0;
	for (size_t i = 0; i < np; i++) {
		float orig = g.params[i];
		float plus = (float)(orig + GC_H), minus = (float)(orig - GC_H);
		gc_set_param(&g, i, plus);
		double lp = gc_loss(&g, pp);
		gc_set_param(&g, i, minus);
		double lm = gc_loss(&g, pm);
		gc_set_param(&g, i, orig);
		if (memcmp(pp, p0, plen) || memcmp(pm, p0, plen)) {
			skipped++;
			continue;
		}
		/* The step actually taken in float, not the nominal 2h. */
		double q = (lp - lm) / ((double)plus - (double)minus);
		got[checked] = grads[i];
		fd[checked] = q;
		if (fabs(q) > 10.0 * GC_ATOL)
			large++;
		checked++;
	}
	char what[128];
	snprintf(what, sizeof(what), "gradcheck %s (%zu params, %zu checked, %zu straddle a ReLU kink)",
		 name, np, checked, skipped);
	struct ref_cmp c = ref_compare_f(what, got, fd, checked, GC_ATOL, GC_RTOL, seed);
	fprintf(stderr, "%s: %zu far from zero, largest |analytic - difference quotient| %.3g\n",
		what, large, c.max_err);
	cr_assert_eq(c.bad, 0, "%s: %zu components disagree, largest |err| %g (seed %llu)", what, c.bad,
		     c.max_err, (unsigned long long)seed);
	cr_assert_eq(skipped, 0, "%s: the test point was built %g away from every kink, yet a step "
		     "of %g changed the ReLU pattern (seed %llu)", what, GC_MARGIN, GC_H,
		     (unsigned long long)seed);
	cr_assert(large * 4 >= checked, "%s: only %zu of %zu checked components are far from zero",
		  what, large, checked);

	free(grads);
	free(got);
	free(fd);
	free(p0);
	free(pp);
	free(pm);
	gc_teardown(&g);
}

Test(gradcheck, seed_model)
{
	gradcheck_model(MODEL_SEED, NULL, 0, "seed", ref_seed(201));
}

Test(gradcheck, linear_model)
{
	gradcheck_model(MODEL_LINEAR, NULL, 0, "linear", ref_seed(202));
}

Test(gradcheck, mlp_hidden_7_5)
{
	const int hidden[] = {7, 5};
	gradcheck_model(MODEL_MLP, hidden, 2, "mlp 7,5", ref_seed(203));
}

Test(gradcheck, mlp_one_hidden_layer)
{
	const int hidden[] = {6};
	gradcheck_model(MODEL_MLP, hidden, 1, "mlp 6", ref_seed(204));
}

/* ---- forward pass and row losses against a naive double forward ------------ */

static void forward_check(enum model_kind kind, const int *hidden, int n_hidden, const char *name,
			  uint64_t seed)
{
	struct gc g;
	gc_setup(&g, kind, hidden, n_hidden, seed);
	const struct model *m = &g.m;
	int rows = g.rows, top = m->n_layers;

	/* Reference: act (rows, in) * W^T + b, ReLU where the model has one, all in double. */
	double *cur = calloc((size_t)rows * g.act_len, sizeof(double));
	double *next = calloc((size_t)rows * g.act_len, sizeof(double));
	cr_assert(cur && next);
	ref_widen(g.x, cur, (size_t)rows * IDX_PIXELS);
	for (int l = 0; l < m->n_layers; l++) {
		int in = m->dims[l], out = m->dims[l + 1];
		const float *w = g.params + m->w_off[l], *b = g.params + m->b_off[l];
		for (int r = 0; r < rows; r++)
			for (int o = 0; o < out; o++) {
				double s = b[o];
				for (int i = 0; i < in; i++)
					s += cur[(size_t)r * in + i] * (double)w[(size_t)o * in + i];
				next[(size_t)r * out + o] = gc_relu_layer(m, l) && s < 0.0 ? 0.0 : s;
			}
		double *t = cur;
		cur = next;
		next = t;
	}
	model_forward(&g.be, m, &g.ws, g.params_d, rows);
	model_backward(&g.be, m, &g.ws, g.params_d, g.grads_d, rows);
	size_t nl = (size_t)rows * m->dims[top];
	g.be.ops->download(g.be.ctx, g.act, g.ws.act[top], nl * sizeof(float));
	g.be.ops->download(g.be.ctx, g.loss, g.ws.row_loss, (size_t)rows * sizeof(float));
	backend_synchronize(&g.be);

	char what[96];
	snprintf(what, sizeof(what), "model_forward %s logits", name);
	struct ref_cmp c = ref_compare_f(what, g.act, cur, nl, 1e-4, 1e-4, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, c.bad, c.max_err,
		     (unsigned long long)seed);

	/* Row losses of the float logits, as model_backward reports them. */
	double want[GC_ROWS];
	for (int r = 0; r < rows; r++)
		want[r] = ref_softmax_xent_row(g.act + (size_t)r * m->dims[top], g.labels[r],
					       m->dims[top], 1.0, NULL);
	snprintf(what, sizeof(what), "model_backward %s row_loss", name);
	c = ref_compare_f(what, g.loss, want, (size_t)rows, 1e-5, 1e-5, seed);
	cr_assert_eq(c.bad, 0, "%s: %zu mismatches, largest %g (seed %llu)", what, c.bad, c.max_err,
		     (unsigned long long)seed);
	free(cur);
	free(next);
	gc_teardown(&g);
}

Test(model, forward_matches_naive_double)
{
	const int h2[] = {7, 5}, h1[] = {6};
	forward_check(MODEL_SEED, NULL, 0, "seed", ref_seed(205));
	forward_check(MODEL_LINEAR, NULL, 0, "linear", ref_seed(205));
	forward_check(MODEL_MLP, h2, 2, "mlp 7,5", ref_seed(205));
	forward_check(MODEL_MLP, h1, 1, "mlp 6", ref_seed(205));
}

/* ---- layout and initial parameters ------------------------------------------ */

Test(model, layout_is_one_flat_buffer)
{
	const int hidden[] = {7, 5};
	struct model m;
	model_init(&m, MODEL_MLP, hidden, 2);
	cr_assert_eq(m.n_layers, 3);
	const int dims[] = {784, 7, 5, 10};
	for (int l = 0; l <= 3; l++)
		cr_assert_eq(m.dims[l], dims[l], "dims[%d] = %d, want %d", l, m.dims[l], dims[l]);
	size_t off = 0;
	for (int l = 0; l < 3; l++) {
		cr_assert_eq(m.w_off[l], off, "w_off[%d] = %zu, want %zu", l, m.w_off[l], off);
		off += (size_t)dims[l + 1] * dims[l];
		cr_assert_eq(m.b_off[l], off, "b_off[%d] = %zu, want %zu", l, m.b_off[l], off);
		off += (size_t)dims[l + 1];
	}
	cr_assert_eq(m.n_params, off, "n_params %zu, want %zu", m.n_params, off);
	cr_assert_eq(m.relu_out, 0);

	model_init(&m, MODEL_SEED, NULL, 0);
	cr_assert(m.n_layers == 1 && m.n_params == 7850 && m.relu_out == 1,
		  "seed model: %d layers, %zu params, relu_out %d", m.n_layers, m.n_params, m.relu_out);
	model_init(&m, MODEL_LINEAR, hidden, 2); /* hidden sizes only shape the mlp */
	cr_assert(m.n_layers == 1 && m.n_params == 7850 && m.relu_out == 0,
		  "linear model: %d layers, %zu params, relu_out %d", m.n_layers, m.n_params, m.relu_out);
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
		size_t nw = (size_t)m.dims[1] * m.dims[0];
		double sum = 0.0, sq = 0.0;
		for (size_t i = 0; i < nw; i++) {
			sum += p[m.w_off[0] + i];
			sq += (double)p[m.w_off[0] + i] * p[m.w_off[0] + i];
		}
		double mean = sum / nw, std = sqrt(sq / nw - mean * mean);
		/* 7840 draws: the sample std is within 5% of 0.01, the mean within 4 standard errors. */
		cr_assert(fabs(std - 0.01) < 0.0005, "kind %d: weight std %g, want 0.01", k, std);
		cr_assert(fabs(mean) < 4.0 * 0.01 / sqrt((double)nw), "kind %d: weight mean %g", k, mean);
		for (int i = 0; i < m.dims[1]; i++)
			cr_assert(p[m.b_off[0] + i] == 0.0f, "kind %d: bias[%d] = %g, want 0", k, i,
				  p[m.b_off[0] + i]);
		free(p);
	}
}

Test(model, init_params_uniform_for_mlp)
{
	const int hidden[] = {64, 32};
	struct model m;
	model_init(&m, MODEL_MLP, hidden, 2);
	float *p = calloc(m.n_params, sizeof(float));
	cr_assert_not_null(p);
	model_init_params(&m, 1, p);
	for (int l = 0; l < m.n_layers; l++) {
		double bound = 1.0 / sqrt((double)m.dims[l]);
		size_t nw = (size_t)m.dims[l + 1] * m.dims[l];
		double sq = 0.0, amax = 0.0;
		for (size_t i = 0; i < nw; i++) {
			double w = p[m.w_off[l] + i];
			cr_assert(fabs(w) <= bound, "layer %d: weight[%zu] = %g outside +-%g", l, i, w, bound);
			sq += w * w;
			amax = fmax(amax, fabs(w));
		}
		/* Uniform(-b, b) has variance b^2 / 3; at least 320 draws per layer. */
		double var = sq / nw;
		cr_assert(fabs(var / (bound * bound / 3.0) - 1.0) < 0.2,
			  "layer %d: weight variance %g, want about %g", l, var, bound * bound / 3.0);
		cr_assert(amax > 0.8 * bound, "layer %d: largest |weight| %g, bound %g", l, amax, bound);
		int nonzero = 0;
		for (int i = 0; i < m.dims[l + 1]; i++) {
			double b = p[m.b_off[l] + i];
			cr_assert(fabs(b) <= bound, "layer %d: bias[%d] = %g outside +-%g", l, i, b, bound);
			nonzero += b != 0.0;
		}
		cr_assert_eq(nonzero, m.dims[l + 1], "layer %d: mlp biases should be drawn, %d of %d nonzero",
			     l, nonzero, m.dims[l + 1]);
	}
	free(p);
}

Test(model, init_params_depend_on_seed_only)
{
	const int hidden[] = {7, 5};
	const enum model_kind kinds[] = {MODEL_SEED, MODEL_LINEAR, MODEL_MLP};
	for (int k = 0; k < 3; k++) {
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
		for (int l = 0; l < m.n_layers; l++)
			for (size_t i = 0; i < (size_t)m.dims[l + 1] * m.dims[l]; i++) {
				nw++;
				differ += a[m.w_off[l] + i] != c[m.w_off[l] + i];
			}
		cr_assert(differ * 100 >= nw * 99, "kind %d: seeds 42 and 43 share %zu of %zu weights", k,
			  nw - differ, nw);
		free(a);
		free(b);
		free(c);
	}
}
