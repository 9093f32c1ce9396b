/*
 * test_gradcheck.c - the gradients by central differences: every model's
 * (seed, linear, mlp with hidden 7,5 and with one hidden layer of 6, LeNet-5)
 * through model_forward / model_backward, and two convolution stages' on
 * their own (conv, ReLU and max-pool each: weights and biases of both, the
 * lower one's through conv_backward_data and its pool).
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
 * LeNet-5 and the convolution stages: see their sections below.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_module.h"
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
	const struct model_plan *plan = &g->ws.plan;
	model_forward(&g->be, &g->m, &g->ws, g->params_d, g->rows, 0);
	struct xent_req x = {.logits = model_logits(&g->ws), .labels = g->ws.labels,
			     .rows = g->rows, .cols = IDX_CLASSES, .scale = 1.0f,
			     .row_loss = g->ws.row_loss};
	backend_softmax_xent(&g->be, &x);
	backend_download(&g->be, g->loss, g->ws.row_loss, (size_t)g->rows * sizeof(float));
	backend_synchronize(&g->be);
	double sum = 0.0;
	for (int i = 0; i < g->rows; i++)
		sum += g->loss[i];
	if (pattern) {
		size_t at = 0;
		for (int s = 0; s < plan->n; s++) {
			if (!plan->stage[s].relu)
				continue;
			size_t n = (size_t)g->rows * plan->stage[s].out;
			backend_download(&g->be, g->act, g->ws.act[s + 1], n * sizeof(float));
			backend_synchronize(&g->be);
			for (size_t i = 0; i < n; i++)
				pattern[at++] = g->act[i] > 0.0f;
		}
	}
	return sum / g->rows;
}

static size_t gc_pattern_len(const struct model_plan *plan, int rows)
{
	size_t n = 0;
	for (int s = 0; s < plan->n; s++)
		if (plan->stage[s].relu)
			n += (size_t)rows * plan->stage[s].out;
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
	model_forward(&g.be, &g.m, &g.ws, g.params_d, g.rows, 1);
	model_backward(&g.be, &g.m, &g.ws, g.params_d, g.grads_d, g.rows);
	float *grads = calloc(np, sizeof(float));
	cr_assert_not_null(grads);
	backend_download(&g.be, grads, g.grads_d, np * sizeof(float));
	backend_synchronize(&g.be);

	size_t plen = gc_pattern_len(&g.ws.plan, g.rows);
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
 * rtol 1e-3. Every bias is checked, every weight of conv1, and samples of
 * conv2's weights (800 of 2,400) and of each dense layer's (300; fewer under
 * AddressSanitizer, below): the stages'
 * own check below takes every weight of a conv1 and samples a conv2's too;
 * here the whole network's composition is what is checked, and conv2's
 * every weight made this the longest unit test under AddressSanitizer (66 s).
 */
#define LN_ROWS 2
#define LN_ATOL 2e-6
#define LN_RTOL 1e-3
/*
 * Weights sampled per conv and per dense layer. Under AddressSanitizer
 * (scripts/test.sh's second pass, which looks for memory errors, not for
 * numbers: the main suite runs the full sample) a quarter: the same code runs,
 * and the whole check took 31 s of that pass's 54 s there (2026-11-27).
 */
#if defined(__SANITIZE_ADDRESS__)
#define LN_CONV_SAMPLE 200
#define LN_DENSE_SAMPLE 75
#define LN_MIN_CHECKED 700 /* of about 810 */
#else
#define LN_CONV_SAMPLE 800
#define LN_DENSE_SAMPLE 300
#define LN_MIN_CHECKED 1800 /* of about 2,090 */
#endif

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
	/*
	 * A weight moves its own layer and those after: each difference runs the network from
	 * that layer's input at the test point (kept here), the same loss, bit for bit, as the
	 * whole network's (checked below at the test point, layer by layer), at a fraction of
	 * the cost for the dense layers.
	 */
	double *inputs = calloc(ref_net_inputs_len(m, LN_ROWS), sizeof(double));
	cr_assert(inputs);
	double l0 = ref_net_loss_inputs(m, pd, pt.x, pt.labels, LN_ROWS, p0, inputs);
	cr_assert(isfinite(l0) && l0 > 0.0, "loss %g at the test point (seed %llu)", l0,
		  (unsigned long long)seed);
	cr_assert(l0 == ref_net_loss(m, pd, pt.x, pt.labels, LN_ROWS, NULL, pp) && !memcmp(pp, p0, plen),
		  "ref_net_loss_inputs differs from ref_net_loss");

	size_t checked = 0, skipped = 0, large = 0, shrunk = 0;
	for (int l = 0; l < m->n_layers; l++) {
		const struct layer *y = &m->layer[l];
		if (!layer_has_params(y))
			continue;
		memcpy(pp, p0, plen);
		memcpy(pm, p0, plen);
		double from0 = ref_net_loss_from(m, pd, inputs, l, pt.labels, LN_ROWS, pp);
		cr_assert(from0 == l0 && !memcmp(pp, p0, plen),
			  "layer %d on from its kept input: loss %.17g, the whole network's %.17g", l,
			  from0, l0);
		size_t nw = (size_t)y->units * y->fan_in;
		/* At most LN_CONV_SAMPLE of a conv layer's weights, LN_DENSE_SAMPLE of a dense layer's, at random (all biases). */
		size_t most = y->kind == LAYER_CONV ? LN_CONV_SAMPLE : LN_DENSE_SAMPLE;
		size_t picks = nw <= most ? nw : most;
		for (size_t k = 0; k < picks + (size_t)y->units; k++) {
			size_t i = k < picks ? y->w_off + (picks == nw ? k : rng_below(&r, nw))
					     : y->b_off + (k - picks);
			double h = 1e-6, orig = pd[i], q = 0.0;
			int same = 0;
			for (; h >= 1e-9 && !same; h *= 0.1) {
				pd[i] = orig + h;
				double lp = ref_net_loss_from(m, pd, inputs, l, pt.labels, LN_ROWS, pp);
				pd[i] = orig - h;
				double lm = ref_net_loss_from(m, pd, inputs, l, pt.labels, LN_ROWS, pm);
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
	cr_assert(checked > LN_MIN_CHECKED && large * 2 >= checked, "%s: only %zu of %zu far from zero", what,
		  large, checked);

	model_point_free(&pt);
	free(grads);
	free(got);
	free(fd);
	free(p0);
	free(pp);
	free(pm);
	free(inputs);
}

static float *op_upload(const struct backend *be, const float *h, size_t n)
{
	float *d = backend_alloc(be, (n ? n : 1) * sizeof(float));
	cr_assert_not_null(d);
	if (h)
		backend_upload(be, d, h, n * sizeof(float));
	return d;
}

/* ---- convolution stages: conv, ReLU and max-pool, two of them ------------------------- */

/*
 * Two stages, A under B as LeNet-5's conv1 and conv2, run by the backend's
 * ops as model_backward runs them: L = sum(r * y) of B's output y (in B's
 * layout, batch-innermost or (rows, features)) for fixed random r; its
 * gradient from ->pool_backward, the weight GEMMs with their bias gradients
 * and ->conv_backward_data through A's pool and ReLU. The differences are
 * those of the same stages in double (ref_conv_stage), h = 1e-6, shrunk
 * tenfold down to 1e-9 while a step changes a ReLU decision or an argmax,
 * as for LeNet-5 above; the analytic gradient is float, so the tolerance is
 * float's. Every weight and bias of A and every bias of B is checked, and B's
 * weights, or 300 of them at random where B has more.
 */
#define ST_ATOL 2e-6
#define ST_RTOL 1e-3

struct stage_pair {
	struct conv_shape sa, sb;
	struct pool_shape pa, pb;
	int oc_a, oc_b, rows, batch_first;
	size_t nx, nya, nyb, wa, ba, wb, bb, np, plen_a;
	double *xd, *ya, *yb, *r; /* r in B's output layout */
	int32_t *arga, *argb;
};

/*
 * L at parameters pd (double), and the pattern of both stages. b_only: A's
 * output (and its part of pattern) as the last call left them, for a step in
 * B's parameters.
 */
static double pair_loss(struct stage_pair *q, const double *pd, uint8_t *pattern, int b_only)
{
	if (!b_only)
		ref_conv_stage(q->xd, pd + q->wa, pd + q->ba, &q->sa, &q->pa, q->oc_a, q->rows,
			       q->ya, q->arga, NULL, pattern);
	ref_conv_stage(q->ya, pd + q->wb, pd + q->bb, &q->sb, &q->pb, q->oc_b, q->rows, q->yb,
		       q->argb, NULL, pattern ? pattern + q->plen_a : NULL);
	size_t features = q->nyb / (size_t)q->rows;
	double sum = 0.0;
	for (size_t f = 0; f < features; f++)
		for (int b = 0; b < q->rows; b++)
			sum += q->yb[f * q->rows + b] *
			       q->r[q->batch_first ? (size_t)b * features + f : f * q->rows + b];
	return sum;
}

/* c, h, w; A's oc, k, pad, pool; B's oc, k, pad, pool; rows, batch_first */
static void gradcheck_stages(const int *c, uint64_t seed, uint64_t stream)
{
	struct stage_pair q;
	memset(&q, 0, sizeof(q));
	q.sa = conv_shape_make(c[0], c[1], c[2], c[4], c[5]);
	q.pa = pool_shape_make(c[3], q.sa.oh, q.sa.ow, c[6]);
	q.sb = conv_shape_make(c[3], q.pa.oh, q.pa.ow, c[8], c[9]);
	q.pb = pool_shape_make(c[7], q.sb.oh, q.sb.ow, c[10]);
	cr_assert(q.sa.oh % c[6] == 0 && q.sa.ow % c[6] == 0 && q.sb.oh % c[10] == 0 &&
			  q.sb.ow % c[10] == 0 && q.pb.oh > 0 && q.pb.ow > 0,
		  "a case whose pools do not tile the convolutions");
	q.oc_a = c[3];
	q.oc_b = c[7];
	q.rows = c[11];
	q.batch_first = c[12];
	int fan_a = q.sa.c * q.sa.k * q.sa.k, fan_b = q.sb.c * q.sb.k * q.sb.k;
	int p_a = q.rows * q.sa.oh * q.sa.ow, p_b = q.rows * q.sb.oh * q.sb.ow;
	q.nx = (size_t)q.sa.c * q.sa.h * q.sa.w * q.rows;
	q.nya = (size_t)q.oc_a * q.pa.oh * q.pa.ow * q.rows;
	q.nyb = (size_t)q.oc_b * q.pb.oh * q.pb.ow * q.rows;
	q.wa = 0;
	q.ba = (size_t)q.oc_a * fan_a;
	q.wb = q.ba + (size_t)q.oc_a;
	q.bb = q.wb + (size_t)q.oc_b * fan_b;
	q.np = q.bb + (size_t)q.oc_b;
	q.plen_a = ref_conv_stage_pattern_len(&q.sa, &q.pa, q.oc_a, q.rows);
	size_t plen = q.plen_a + ref_conv_stage_pattern_len(&q.sb, &q.pb, q.oc_b, q.rows);
	char name[160];
	snprintf(name, sizeof(name),
		 "gradcheck stages c%d %dx%d -> %d k%d pad%d pool%d -> %d k%d pad%d pool%d, %d rows%s",
		 c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11],
		 c[12] ? ", batch_first" : "");

	/* The test point: PyTorch's initial weights twice as wide, biases mostly positive (fewer dead units). */
	struct rng r = rng_make(seed, stream);
	float *x = calloc(q.nx, sizeof(float)), *params = calloc(q.np, sizeof(float));
	float *rf = calloc(q.nyb, sizeof(float)), *grads = calloc(q.np, sizeof(float));
	double *pd = calloc(q.np, sizeof(double)), *fd = calloc(q.np, sizeof(double));
	float *got = calloc(q.np, sizeof(float));
	q.xd = calloc(q.nx, sizeof(double));
	q.ya = calloc(q.nya, sizeof(double));
	q.yb = calloc(q.nyb, sizeof(double));
	q.r = calloc(q.nyb, sizeof(double));
	q.arga = calloc(q.nya, sizeof(int32_t));
	q.argb = calloc(q.nyb, sizeof(int32_t));
	uint8_t *p0 = calloc(plen, 1), *pp = calloc(plen, 1), *pm = calloc(plen, 1);
	cr_assert(x && params && rf && grads && pd && fd && got && q.xd && q.ya && q.yb && q.r &&
		  q.arga && q.argb && p0 && pp && pm);
	ref_fill_uniform(&r, x, q.nx, -1.0, 1.0);
	ref_fill_uniform(&r, params + q.wa, q.ba - q.wa, -2.0 / sqrt(fan_a), 2.0 / sqrt(fan_a));
	ref_fill_uniform(&r, params + q.ba, q.wb - q.ba, -0.1, 0.5);
	ref_fill_uniform(&r, params + q.wb, q.bb - q.wb, -2.0 / sqrt(fan_b), 2.0 / sqrt(fan_b));
	ref_fill_uniform(&r, params + q.bb, q.np - q.bb, -0.1, 0.5);
	ref_fill_uniform(&r, rf, q.nyb, -1.0, 1.0);
	ref_widen(x, q.xd, q.nx);
	ref_widen(params, pd, q.np);
	ref_widen(rf, q.r, q.nyb);

	/* The analytic gradient: the backend's ops, as model_backward calls them. */
	struct backend be;
	cr_assert_eq(backend_host_create(NULL, 1, &be), 0);
	struct conv_stage A = {&q.sa, &q.pa, q.oc_a, q.rows, 0};
	struct conv_stage B = {&q.sb, &q.pb, q.oc_b, q.rows, q.batch_first};
	float *params_d = op_upload(&be, params, q.np), *x_d = op_upload(&be, x, q.nx);
	float *dy_d = op_upload(&be, rf, q.nyb), *grads_d = op_upload(&be, NULL, q.np);
	float *ya_d = op_upload(&be, NULL, q.nya), *yb_d = op_upload(&be, NULL, q.nyb);
	float *colsa_d = op_upload(&be, NULL, (size_t)fan_a * p_a);
	float *colsb_d = op_upload(&be, NULL, (size_t)fan_b * p_b);
	float *dza_d = op_upload(&be, NULL, (size_t)q.oc_a * p_a);
	float *dzb_d = op_upload(&be, NULL, (size_t)q.oc_b * p_b);
	int32_t *arga_d = backend_alloc(&be, q.nya * sizeof(int32_t));
	int32_t *argb_d = backend_alloc(&be, q.nyb * sizeof(int32_t));
	cr_assert(arga_d && argb_d);
	backend_conv_forward(&be, &A, x_d, params_d + q.wa, params_d + q.ba, ya_d, arga_d, colsa_d);
	backend_conv_forward(&be, &B, ya_d, params_d + q.wb, params_d + q.bb, yb_d, argb_d, colsb_d);
	backend_pool_backward(&be, &B, dy_d, yb_d, argb_d, dzb_d);
	struct gemm_req g = {.trans_b = 1, .m = q.oc_b, .n = fan_b, .k = p_b, .alpha = 1.0f,
			     .a = dzb_d, .lda = p_b, .b = colsb_d, .ldb = p_b, .c = grads_d + q.wb,
			     .ldc = fan_b, .bias_grad = grads_d + q.bb};
	backend_gemm(&be, &g);
	backend_conv_backward_data(&be, &B, params_d + q.wb, dzb_d, &A, ya_d, arga_d, dza_d);
	g = (struct gemm_req){.trans_b = 1, .m = q.oc_a, .n = fan_a, .k = p_a, .alpha = 1.0f,
			      .a = dza_d, .lda = p_a, .b = colsa_d, .ldb = p_a, .c = grads_d + q.wa,
			      .ldc = fan_a, .bias_grad = grads_d + q.ba};
	backend_gemm(&be, &g);
	backend_download(&be, grads, grads_d, q.np * sizeof(float));
	backend_synchronize(&be);

	double l0 = pair_loss(&q, pd, p0, 0);
	cr_assert(isfinite(l0), "%s: loss %g at the test point", name, l0);
	/* All of A's parameters and B's biases; B's weights (a GEMM's gradient) all, or 300 of them. */
	size_t nw_b = q.bb - q.wb, picks = nw_b <= 300 ? nw_b : 300;
	size_t n_check = q.wb + picks + (size_t)q.oc_b;
	size_t checked = 0, skipped = 0, large = 0, shrunk = 0;
	for (size_t k = 0; k < n_check; k++) {
		size_t i = k < q.wb ? k
			   : k < q.wb + picks ? q.wb + (picks == nw_b ? k - q.wb : rng_below(&r, nw_b))
					       : q.bb + (k - q.wb - picks);
		int b_only = i >= q.wb;
		if (k == q.wb) { /* A's output at the test point again, for the steps in B */
			pair_loss(&q, pd, NULL, 0);
			memcpy(pp, p0, plen);
			memcpy(pm, p0, plen);
		}
		double h = 1e-6, orig = pd[i], d = 0.0;
		int same = 0;
		for (; h >= 1e-9 && !same; h *= 0.1) {
			pd[i] = orig + h;
			double lp = pair_loss(&q, pd, pp, b_only);
			pd[i] = orig - h;
			double lm = pair_loss(&q, pd, pm, b_only);
			same = !memcmp(pp, p0, plen) && !memcmp(pm, p0, plen);
			d = (lp - lm) / (2.0 * h);
			shrunk += !same;
		}
		pd[i] = orig;
		if (!same) {
			skipped++;
			continue;
		}
		got[checked] = grads[i];
		fd[checked] = d;
		large += fabs(d) > 10.0 * ST_ATOL;
		checked++;
	}
	char what[256];
	snprintf(what, sizeof(what), "%s (%zu params, %zu checked, %zu steps shrunk, %zu straddle a kink)",
		 name, q.np, checked, shrunk, skipped);
	cr_assert_eq(checked + skipped, n_check);
	struct ref_cmp cmp = ref_compare_f(what, got, fd, checked, ST_ATOL, ST_RTOL, seed);
	fprintf(stderr, "%s: %zu far from zero, largest |analytic - difference quotient| %.3g\n", what,
		large, cmp.max_err);
	cr_assert_eq(cmp.bad, 0, "%s: %zu components disagree, largest |err| %g (seed %llu)", what,
		     cmp.bad, cmp.max_err, (unsigned long long)seed);
	cr_assert(skipped * 50 <= checked, "%s: too many components straddle a kink", what);
	/* Zeros are checked too (taps that read only padding, units off in every row), but not only them. */
	cr_assert(large * 5 >= checked, "%s: only %zu of %zu far from zero", what, large, checked);

	void *bufs[] = {params_d, x_d, dy_d, grads_d, ya_d, yb_d, colsa_d, colsb_d, dza_d, dzb_d,
			arga_d, argb_d};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		backend_free(&be, bufs[i]);
	backend_destroy(&be);
	void *hbufs[] = {x, params, rf, grads, pd, fd, got, q.xd, q.ya, q.yb, q.r, q.arga, q.argb,
			 p0, pp, pm};
	for (size_t i = 0; i < sizeof(hbufs) / sizeof(hbufs[0]); i++)
		free(hbufs[i]);
}

Test(gradcheck, conv_stages_lenet_shapes)
{
	/* conv1 under conv2, one image, conv2 writing (rows, 400) for the dense layers */
	const int c[13] = {1, 28, 28, 6, 5, 2, 2, 16, 5, 0, 2, 1, 1};
	gradcheck_stages(c, ref_seed(207), 300);
}

Test(gradcheck, conv_stages_odd_shapes)
{
	/* c, h, w; A's oc, k, pad, pool; B's oc, k, pad, pool; rows, batch_first */
	const int cases[][13] = {
		{2, 6, 9, 3, 3, 1, 3, 4, 2, 1, 1, 2, 0},  /* pool 3 of 6x9; B through a 1x1 pool */
		{2, 6, 9, 3, 3, 1, 3, 4, 2, 1, 1, 3, 1},
		{3, 8, 8, 2, 3, 1, 2, 5, 4, 0, 1, 2, 1},  /* B's taps cover its whole input */
		{2, 3, 3, 2, 5, 2, 3, 3, 3, 1, 1, 2, 0},  /* taps wider than the image */
		{4, 6, 6, 1, 1, 0, 2, 3, 3, 0, 1, 5, 1},  /* 1x1 convolution to one channel */
		{1, 8, 4, 2, 3, 1, 4, 3, 2, 1, 1, 2, 0},  /* pool 4 of 8x4 */
	};
	uint64_t seed = ref_seed(208);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		gradcheck_stages(cases[k], seed, 400 + k);
}
