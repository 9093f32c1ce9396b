/*
 * test_gradcheck.c - the gradients by central differences: every model's
 * (seed, linear, mlp with hidden 7,5 and with one hidden layer of 6, LeNet-5)
 * and every layer's (conv: weights, bias and input through col2im; max-pool).
 *
 *   ctest --test-dir build -R test_gradcheck --output-on-failure
 *
 * Dense models: every parameter, the analytic gradient of the mean batch loss
 * from model_backward against (L(p + h) - L(p - h)) / (2h), with L the mean
 * of the per-row losses summed in double. In float32, h = 1e-2 keeps the
 * rounding noise of L near 5e-5 in the quotient while the truncation error
 * stays below that; the tolerance is atol 3e-4 + rtol 2e-2.
 *
 * ReLU kinks: parameters are drawn wider than the initial ones, then each
 * ReLU unit's bias is moved (layer by layer, in double) until every row's
 * pre-activation is at least GC_MARGIN = 0.1 from zero and the unit is on in
 * at least one row. One parameter moved by h shifts any pre-activation by
 * less than 0.03, so no difference quotient straddles a kink; the test also
 * verifies that: the ReLU on/off pattern at p - h and p + h must equal the
 * one at p for every component, and it requires that most checked
 * components are far from zero, so it cannot pass by checking nothing.
 *
 * LeNet-5 and the single layers: see their sections below.
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
		int in = m->layer[l].in, out = m->layer[l].out;
		const float *w = g->params + m->layer[l].w_off;
		float *b = g->params + m->layer[l].b_off;
		for (int o = 0; o < out; o++) {
			double z[GC_ROWS];
			for (int r = 0; r < rows; r++) {
				double s = 0.0;
				for (int i = 0; i < in; i++)
					s += cur[(size_t)r * in + i] * (double)w[(size_t)o * in + i];
				z[r] = s + (double)b[o];
			}
			int relu = m->layer[l].relu;
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
	g->act_len = IDX_PIXELS;
	for (int l = 0; l < g->m.n_layers; l++)
		if (g->m.layer[l].out > g->act_len)
			g->act_len = g->m.layer[l].out;
	g->act = calloc((size_t)g->rows * g->act_len, sizeof(float));
	cr_assert(g->params && g->x && g->labels && g->loss && g->act);

	/* Inputs: normalised random pixels, as gather would produce them. */
	struct rng r = rng_make(seed, 11);
	for (size_t i = 0; i < (size_t)g->rows * IDX_PIXELS; i++)
		g->x[i] = normalize_pixel_elem((uint8_t)rng_below(&r, 256));
	ref_fill_labels(&r, g->labels, (size_t)g->rows, IDX_CLASSES);
	/* Parameters: uniform, twice PyTorch's bound, biases spread too. */
	for (int l = 0; l < g->m.n_layers; l++) {
		const struct layer *y = &g->m.layer[l];
		double bound = 2.0 / sqrt((double)y->fan_in);
		ref_fill_uniform(&r, g->params + y->w_off, (size_t)y->units * y->fan_in, -bound, bound);
		ref_fill_uniform(&r, g->params + y->b_off, (size_t)y->units, -0.5, 0.5);
	}
	gc_steer_biases(g);

	g->params_d = backend_alloc(&g->be, np * sizeof(float));
	g->grads_d = backend_alloc(&g->be, np * sizeof(float));
	cr_assert(g->params_d && g->grads_d);
	backend_upload(&g->be, g->params_d, g->params, np * sizeof(float));
	backend_upload(&g->be, g->ws.act[0], g->x, (size_t)g->rows * IDX_PIXELS * sizeof(float));
	backend_upload(&g->be, g->ws.labels, g->labels, (size_t)g->rows * sizeof(int32_t));
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
	backend_softmax_xent(&g->be, g->ws.act[top], g->ws.labels, g->rows, IDX_CLASSES, 1.0f,
				g->ws.row_loss, NULL);
	backend_download(&g->be, g->loss, g->ws.row_loss, (size_t)g->rows * sizeof(float));
	backend_synchronize(&g->be);
	double sum = 0.0;
	for (int i = 0; i < g->rows; i++)
		sum += g->loss[i];
	if (pattern) {
		size_t at = 0;
		for (int l = 0; l < m->n_layers; l++) {
			if (!m->layer[l].relu)
				continue;
			size_t n = (size_t)g->rows * m->layer[l].out;
			backend_download(&g->be, g->act, g->ws.act[l + 1], n * sizeof(float));
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
		if (m->layer[l].relu)
			n += (size_t)rows * m->layer[l].out;
	return n ? n : 1;
}

static void gc_set_param(struct gc *g, size_t i, float v)
{
	backend_upload(&g->be, g->params_d + i, &v, sizeof(v));
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
	backend_download(&g.be, grads, g.grads_d, np * sizeof(float));
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

/* ---- LeNet-5: central differences of the network in double ----------------------- */

/*
 * The float network has too many ReLU units and pool windows for the bias
 * steering above: a step of 1e-2 in one conv weight moves a thousand
 * pre-activations, some across a kink. So the differences are taken of the
 * same network in double (ref_net_loss, PyTorch's definitions; test_model.c
 * holds it against model_forward), where a step of 1e-6 crosses a kink
 * rarely, and when it does (the ReLU and argmax pattern at p +- h differs from
 * the one at p) the step shrinks tenfold, down to 1e-9. The analytic gradient
 * is model_backward's in float, so the tolerance is float's: atol 2e-6 +
 * rtol 1e-3. Every conv parameter and bias is checked, with a sample of each
 * dense layer's weights.
 */
#define LN_ROWS 2
#define LN_ATOL 2e-6
#define LN_RTOL 1e-3

Test(gradcheck, lenet_against_double_differences)
{
	uint64_t seed = ref_seed(206);
	struct model_point pt;
	model_point_make(&pt, MODEL_LENET, NULL, 0, LN_ROWS, seed, 13, 1.0f);
	const struct model *m = &pt.m;
	size_t np = pt.np;
	double *pd = pt.pd;
	float *grads = calloc(np, sizeof(float)), *got = calloc(np, sizeof(float));
	double *fd = calloc(np, sizeof(double));
	cr_assert(grads && got && fd);
	struct rng r = rng_make(seed, 14);

	/* The analytic gradient of the mean loss, float, host backend. */
	model_point_run(&pt);
	backend_download(&pt.be, grads, pt.grads_d, np * sizeof(float));
	backend_synchronize(&pt.be);

	size_t plen = ref_net_pattern_len(m, LN_ROWS);
	uint8_t *p0 = calloc(plen, 1), *pp = calloc(plen, 1), *pm = calloc(plen, 1);
	cr_assert(p0 && pp && pm);
	double l0 = ref_net_loss(m, pd, pt.x, pt.labels, LN_ROWS, NULL, p0);
	cr_assert(isfinite(l0) && l0 > 0.0, "loss %g at the test point (seed %llu)", l0,
		  (unsigned long long)seed);

	size_t checked = 0, skipped = 0, large = 0, shrunk = 0;
	for (int l = 0; l < m->n_layers; l++) {
		const struct layer *y = &m->layer[l];
		if (!layer_has_params(y))
			continue;
		size_t nw = (size_t)y->units * y->fan_in;
		/* Conv layers: every weight; dense layers: 300 weights at random (all biases). */
		size_t picks = y->kind == LAYER_CONV || nw <= 300 ? nw : 300;
		for (size_t k = 0; k < picks + (size_t)y->units; k++) {
			size_t i = k < picks ? y->w_off + (picks == nw ? k : rng_below(&r, nw))
					     : y->b_off + (k - picks);
			double h = 1e-6, orig = pd[i], q = 0.0;
			int same = 0;
			for (; h >= 1e-9 && !same; h *= 0.1) {
				pd[i] = orig + h;
				double lp = ref_net_loss(m, pd, pt.x, pt.labels, LN_ROWS, NULL, pp);
				pd[i] = orig - h;
				double lm = ref_net_loss(m, pd, pt.x, pt.labels, LN_ROWS, NULL, pm);
				same = !memcmp(pp, p0, plen) && !memcmp(pm, p0, plen);
				q = (lp - lm) / (2.0 * h);
				shrunk += !same;
			}
			pd[i] = orig;
			if (!same) {
				skipped++;
				continue;
			}
			got[checked] = grads[i];
			fd[checked] = q;
			large += fabs(q) > 10.0 * LN_ATOL;
			checked++;
		}
	}
	char what[160];
	snprintf(what, sizeof(what),
		 "gradcheck lenet (%zu params, %zu checked, %zu steps shrunk, %zu straddle a kink)", np,
		 checked, shrunk, skipped);
	struct ref_cmp c = ref_compare_f(what, got, fd, checked, LN_ATOL, LN_RTOL, seed);
	fprintf(stderr, "%s: %zu far from zero, largest |analytic - difference quotient| %.3g\n", what,
		large, c.max_err);
	cr_assert_eq(c.bad, 0, "%s: %zu components disagree, largest |err| %g (seed %llu)", what, c.bad,
		     c.max_err, (unsigned long long)seed);
	cr_assert(skipped * 100 <= checked, "%s: too many components straddle a kink", what);
	cr_assert(checked > 3000 && large * 2 >= checked, "%s: only %zu of %zu far from zero", what,
		  large, checked);

	model_point_free(&pt);
	free(grads);
	free(got);
	free(fd);
	free(p0);
	free(pp);
	free(pm);
}

/* ---- single layers: conv (weights, bias, input through col2im) and max-pool ---------- */

/*
 * L = sum(r * y) of one layer's output y for fixed random r. Without ReLU a
 * conv is linear in each of W, b and x, so the central difference is exact
 * but for float rounding whatever the step: h = 1 keeps the rounding small
 * against it. A max-pool is linear while no window changes its argmax: its
 * inputs are a shuffled grid with spacing 1, and h = 0.25 moves none past a
 * neighbour.
 */
struct op_check {
	struct backend be;
	struct layer l;
	int rows;
	size_t np, nx, ny;
	float *params, *x, *r;          /* host copies */
	float *params_d, *x_d, *y_d, *dy_d, *grads_d, *dx_d, *cols_d, *ones_d;
	int32_t *arg_d;
};

static double op_loss(struct op_check *o)
{
	backend_upload(&o->be, o->params_d, o->params, o->np * sizeof(float));
	backend_upload(&o->be, o->x_d, o->x, o->nx * sizeof(float));
	layer_forward(&o->be, &o->l, o->params_d, o->x_d, o->y_d, o->cols_d, o->arg_d, o->rows);
	float *y = malloc(o->ny * sizeof(float));
	cr_assert_not_null(y);
	backend_download(&o->be, y, o->y_d, o->ny * sizeof(float));
	backend_synchronize(&o->be);
	double s = 0.0;
	for (size_t i = 0; i < o->ny; i++)
		s += (double)o->r[i] * y[i];
	free(y);
	return s;
}

/*
 * Central differences of every entry of v (n) against the analytic gradient;
 * at least min_large of them must be far from zero.
 */
static void op_check_vector(struct op_check *o, float *v, size_t n, const float *analytic,
			    double h, size_t min_large, const char *what, uint64_t seed)
{
	float *got = calloc(n, sizeof(float));
	double *fd = calloc(n, sizeof(double));
	cr_assert(got && fd);
	size_t large = 0;
	for (size_t i = 0; i < n; i++) {
		float orig = v[i];
		float plus = (float)(orig + h), minus = (float)(orig - h);
		v[i] = plus;
		double lp = op_loss(o);
		v[i] = minus;
		double lm = op_loss(o);
		v[i] = orig;
		fd[i] = (lp - lm) / ((double)plus - (double)minus);
		got[i] = analytic[i];
		large += fabs(fd[i]) > 1e-2;
	}
	struct ref_cmp c = ref_compare_f(what, got, fd, n, 2e-3, 1e-4, seed);
	fprintf(stderr, "%s: %zu checked, %zu far from zero, largest error %.3g\n", what, n, large,
		c.max_err);
	cr_assert_eq(c.bad, 0, "%s: %zu of %zu disagree (seed %llu)", what, c.bad, n,
		     (unsigned long long)seed);
	cr_assert(large >= min_large, "%s: only %zu of %zu far from zero (want %zu)", what, large, n,
		  min_large);
	free(got);
	free(fd);
}

static float *op_upload(const struct backend *be, const float *h, size_t n)
{
	float *d = backend_alloc(be, (n ? n : 1) * sizeof(float));
	cr_assert_not_null(d);
	if (h)
		backend_upload(be, d, h, n * sizeof(float));
	return d;
}

/* Builds the buffers around o->l (set by the caller) and checks dW, db (conv) and dx. */
static void op_check_run(struct op_check *o, const char *name, uint64_t seed, double h_params,
			 double h_x)
{
	size_t cols = 0, pixels = 0;
	o->np = o->l.kind == LAYER_CONV ? o->l.b_off + (size_t)o->l.units : 0;
	o->nx = (size_t)o->rows * o->l.in;
	o->ny = (size_t)o->rows * o->l.out;
	if (o->l.kind == LAYER_CONV) {
		pixels = (size_t)o->rows * o->l.conv.oh * o->l.conv.ow;
		cols = pixels * (size_t)o->l.fan_in;
	}
	o->params_d = op_upload(&o->be, o->params, o->np);
	o->x_d = op_upload(&o->be, o->x, o->nx);
	o->y_d = op_upload(&o->be, NULL, o->ny);
	o->dy_d = op_upload(&o->be, o->r, o->ny);
	o->grads_d = op_upload(&o->be, NULL, o->np);
	o->dx_d = op_upload(&o->be, NULL, o->nx);
	o->cols_d = op_upload(&o->be, NULL, cols);
	o->ones_d = op_upload(&o->be, NULL, pixels);
	o->arg_d = backend_alloc(&o->be, (o->ny ? o->ny : 1) * sizeof(int32_t));
	cr_assert_not_null(o->arg_d);
	float *ones = malloc((pixels ? pixels : 1) * sizeof(float));
	for (size_t i = 0; i < pixels; i++)
		ones[i] = 1.0f;
	backend_upload(&o->be, o->ones_d, ones, pixels * sizeof(float));
	free(ones);

	op_loss(o);
	layer_backward(&o->be, &o->l, o->params_d, o->x_d, o->y_d, o->dy_d, o->grads_d, o->dx_d,
		       o->cols_d, o->arg_d, o->ones_d, o->rows);
	float *grads = malloc((o->np ? o->np : 1) * sizeof(float)), *dx = malloc(o->nx * sizeof(float));
	cr_assert(grads && dx);
	backend_download(&o->be, grads, o->grads_d, o->np * sizeof(float));
	backend_download(&o->be, dx, o->dx_d, o->nx * sizeof(float));
	backend_synchronize(&o->be);

	char what[160];
	if (o->l.kind == LAYER_CONV) {
		snprintf(what, sizeof(what), "%s: dW", name);
		op_check_vector(o, o->params, o->l.b_off, grads, h_params, o->l.b_off / 2, what, seed);
		snprintf(what, sizeof(what), "%s: db", name);
		op_check_vector(o, o->params + o->l.b_off, (size_t)o->l.units, grads + o->l.b_off,
				h_params, (size_t)o->l.units / 2, what, seed);
	}
	/* A pool sends gradient to one input per window; a conv to nearly every input. */
	snprintf(what, sizeof(what), "%s: dx", name);
	op_check_vector(o, o->x, o->nx, dx, h_x, o->l.kind == LAYER_POOL ? o->ny : o->nx / 2, what,
			seed);

	free(grads);
	free(dx);
	backend_free(&o->be, o->params_d);
	backend_free(&o->be, o->x_d);
	backend_free(&o->be, o->y_d);
	backend_free(&o->be, o->dy_d);
	backend_free(&o->be, o->grads_d);
	backend_free(&o->be, o->dx_d);
	backend_free(&o->be, o->cols_d);
	backend_free(&o->be, o->ones_d);
	backend_free(&o->be, o->arg_d);
}

Test(gradcheck, conv_layer)
{
	/* c, h, w, oc, k, pad, rows: LeNet's second layer, padding, odd sizes, more taps than pixels */
	const int cases[][7] = {{6, 14, 14, 4, 5, 0, 1}, {1, 8, 8, 3, 5, 2, 2}, {2, 5, 4, 3, 3, 1, 2},
				{2, 3, 3, 2, 5, 2, 1}};
	uint64_t seed = ref_seed(207);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *q = cases[k];
		struct op_check o;
		memset(&o, 0, sizeof(o));
		cr_assert_eq(backend_host_create(NULL, 1, &o.be), 0);
		model_conv_layer(&o.l, q[0], q[1], q[2], q[3], q[4], q[5], 0, 0);
		o.rows = q[6];
		struct rng r = rng_make(seed, 300 + k);
		size_t np = o.l.b_off + (size_t)o.l.units, nx = (size_t)o.rows * o.l.in;
		size_t ny = (size_t)o.rows * o.l.out;
		o.params = malloc(np * sizeof(float));
		o.x = malloc(nx * sizeof(float));
		o.r = malloc(ny * sizeof(float));
		cr_assert(o.params && o.x && o.r);
		ref_fill_uniform(&r, o.params, np, -0.5, 0.5);
		ref_fill_uniform(&r, o.x, nx, -1.0, 1.0);
		ref_fill_uniform(&r, o.r, ny, -1.0, 1.0);
		char name[128];
		snprintf(name, sizeof(name), "conv c%d %dx%d -> %d, k%d pad%d, %d rows", q[0], q[1], q[2],
			 q[3], q[4], q[5], q[6]);
		op_check_run(&o, name, seed, 1.0, 1.0);
		backend_destroy(&o.be);
		free(o.params);
		free(o.x);
		free(o.r);
	}
}

Test(gradcheck, maxpool_layer)
{
	/* c, h, w, k, rows: LeNet's pools and a ragged one */
	const int cases[][5] = {{6, 28, 28, 2, 1}, {16, 10, 10, 2, 2}, {3, 5, 7, 2, 2}, {2, 6, 6, 3, 1}};
	uint64_t seed = ref_seed(208);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *q = cases[k];
		struct op_check o;
		memset(&o, 0, sizeof(o));
		cr_assert_eq(backend_host_create(NULL, 1, &o.be), 0);
		model_pool_layer(&o.l, q[0], q[1], q[2], q[3]);
		o.rows = q[4];
		struct rng r = rng_make(seed, 400 + k);
		size_t nx = (size_t)o.rows * o.l.in, ny = (size_t)o.rows * o.l.out;
		o.x = malloc(nx * sizeof(float));
		o.r = malloc(ny * sizeof(float));
		cr_assert(o.x && o.r);
		/* A shuffled grid 0, 1, 2, ...: every window's values differ by 1 or more. */
		for (size_t i = 0; i < nx; i++)
			o.x[i] = (float)i;
		for (size_t i = nx - 1; i > 0; i--) {
			size_t j = (size_t)rng_below(&r, i + 1);
			float t = o.x[i];
			o.x[i] = o.x[j];
			o.x[j] = t;
		}
		ref_fill_uniform(&r, o.r, ny, 0.5, 1.5);
		char name[128];
		snprintf(name, sizeof(name), "maxpool c%d %dx%d k%d, %d rows", q[0], q[1], q[2], q[3], q[4]);
		/* Input layout (c, rows, h, w): as the conv before it writes. */
		op_check_run(&o, name, seed, 0.0, 0.25);
		backend_destroy(&o.be);
		free(o.x);
		free(o.r);
	}
}
