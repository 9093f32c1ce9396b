/*
 * gpu_plan.c - every candidate of every op of seed, mlp and LeNet-5 run by
 * name on the CUDA backend, each against the host backend (ctest label gpu;
 * one rank).
 *
 *   mpirun -n 1 build/tests/gpu_plan [--self-test]
 *
 * A plan chooses, per problem, one of several ways to run it (cuda/gemm_lt.cu:
 * cuBLASLt's algorithms with the epilogue fused or not, cublasSgemm, the bias
 * gradient's kernel or cublasSgemv, GEMMs of ours, implicit ones for the
 * convolutions' weight gradients; cuda/conv_plan.cu: a convolution's forward
 * and input gradient direct or as a GEMM); which one wins is a measurement
 * on the GPU of the day, so every one of them must be right. For each model, one
 * training step (tests/gpu/gpu_train.h) in a collective stretch measures the
 * plan and lists each problem's candidates (->plan_text, read back by
 * cuda/plan_json.c); then, for each problem and each of its candidates, a
 * fresh replica takes a plan naming that candidate (->plan_follow, as a
 * resumed run takes a checkpoint's), runs
 * the same step, and must
 *   - report that problem run by that name, from the plan given ("checkpoint");
 *   - agree with the host backend's step: loss, and the gradient buffer
 *     (every layer's weight and bias gradients) to a normalised error of 1e-4.
 * Batch 8 keeps the simulator's runs short; the models are the trainer's.
 * A head's candidates run once more, the step captured as a graph and
 * replayed (one_graph_step), against the same host step.
 * And where a convolution's weight gradient may read its input in place of
 * the im2col matrix (an implicit way), the forward leaves the matrix
 * unwritten once that way is planned, with the same parameters bit for bit
 * as the explicit twin's (implicit_leaves_cols).
 * --self-test: a second host backend stands in (it plans nothing: the loop
 * over candidates is empty, and says so).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_common.h"
#include "gpu_train.h"
#include "plan_json.h"

#define PLAN_BATCH 8
#define PLAN_TOL 1e-4

/*
 * The backend's plan so far, read from its text (->plan_text, the --metrics
 * record's fields: every op with its candidates); none for a backend without
 * plans. plan_json_free it.
 */
static void plan_read(const struct backend *be, struct plan_info *out)
{
	char why[256];
	char *text = backend_plan_text(be, PLAN_RECORD);
	memset(out, 0, sizeof(*out));
	if (text && plan_json_parse(text, out, why, sizeof(why)))
		die(1, "the backend's plan does not read back: %s", why);
	free(text);
}

/* The plan `in` given to the backend as a checkpoint's (->plan_follow): 0 when followed, why filled else. */
static int plan_give(const struct backend *be, const struct plan_info *in, char *why, size_t len)
{
	char *text = plan_json_dump(in, 0);
	int rc = backend_plan_follow(be, text, "checkpoint", why, len);
	free(text);
	return rc;
}

/* One step of a fresh replica on be from p0: its loss and gradients (n_params) out. */
static double one_step(const struct backend *be, const struct model *m, const struct gpu_data *g,
		       const float *p0, float *grads)
{
	struct gpu_run r;
	gpu_run_create(&r, be, m, g, p0, PLAN_BATCH, 0.01f, 0.0f, REDUCE_MEAN);
	gpu_run_step(&r);
	double loss = gpu_run_loss(&r);
	gpu_download(be, grads, r.grads, m->n_params * sizeof(float));
	gpu_run_destroy(&r);
	return loss;
}

/*
 * The same step captured as a graph and replayed once, on a fresh replica,
 * the plan made by an eager step before (the caller's): its loss and
 * gradients out; NAN when the capture failed. On the simulator a replay
 * runs a graph's branches as early as their dependencies allow under
 * CUDASIM_GRAPH_ORDER=early (the ctest's setting), so a weight gradient
 * forked to the second stream before its input is written reads it stale.
 */
static double one_graph_step(const struct backend *be, const struct model *m,
			     const struct gpu_data *g, const float *p0, float *grads)
{
	struct gpu_run r;
	gpu_run_create(&r, be, m, g, p0, PLAN_BATCH, 0.01f, 0.0f, REDUCE_MEAN);
	void *graph = NULL;
	if (backend_capture_begin(be) == 0) {
		gpu_run_step(&r);
		graph = backend_capture_end(be);
	}
	double loss = NAN;
	if (graph) {
		backend_replay(be, graph);
		loss = gpu_run_loss(&r);
		gpu_download(be, grads, r.grads, m->n_params * sizeof(float));
		backend_graph_destroy(be, graph);
	}
	gpu_run_destroy(&r);
	return loss;
}

/*
 * A weight gradient's implicit way (`ksplit.cN.micro.im2col`: B's entries read
 * from the convolution's input) against its explicit twin (`ksplit.cN.micro`), each
 * given by name for the problem `op`, two steps each on a fresh replica, the
 * stage's im2col buffer filled with NaN between them: with the implicit way
 * the second step's forward leaves the buffer unwritten (nothing reads it)
 * and the parameters are bitwise the explicit way's, which rewrites it.
 */
static void implicit_leaves_cols(struct gpu_test *t, const char *name, const struct model *m,
				 const struct gpu_data *g, const float *p0,
				 const struct plan_info *measured, const struct plan_op *op, int stage)
{
	const char *imp = NULL;
	for (int j = 0; j < op->n_candidates && !imp; j++) {
		size_t n = strlen(op->cand[j].name);
		if (n > 7 && !strcmp(op->cand[j].name + n - 7, ".im2col"))
			imp = op->cand[j].name;
	}
	if (!imp)
		return;
	float *params[2];
	int untouched[2];
	for (int implicit = 0; implicit <= 1; implicit++) {
		struct plan_op want = *op;
		struct plan_info in = *measured;
		char why[256] = "";
		snprintf(want.chosen, sizeof(want.chosen), "%.*s", (int)strlen(imp) - (implicit ? 0 : 7),
			 imp);
		want.n_candidates = 0;
		snprintf(want.source, sizeof(want.source), "checkpoint");
		in.n_ops = 1;
		in.ops = &want;
		gpu_test_check(t, !plan_give(&t->dev, &in, why, sizeof(why)),
			       "%s: gemm %s given as %s %s", name, op->shape, want.chosen, why);
		struct gpu_run r;
		gpu_run_create(&r, &t->dev, m, g, p0, PLAN_BATCH, 0.01f, 0.0f, REDUCE_MEAN);
		gpu_run_step(&r);
		backend_synchronize(&t->dev);
		const struct conv_shape *cs = &m->layer[r.ws.plan.stage[stage].layer].conv;
		size_t n_cols = (size_t)cs->c * cs->k * cs->k * cs->oh * cs->ow * PLAN_BATCH;
		float *cols = xmalloc(n_cols * sizeof(float));
		for (size_t i = 0; i < n_cols; i++)
			cols[i] = NAN;
		backend_upload(&t->dev, r.ws.cols[stage], cols, n_cols * sizeof(float));
		gpu_run_step(&r);
		gpu_download(&t->dev, cols, r.ws.cols[stage], n_cols * sizeof(float));
		untouched[implicit] = 1;
		for (size_t i = 0; i < n_cols; i++)
			untouched[implicit] &= isnan(cols[i]) != 0;
		params[implicit] = xmalloc(m->n_params * sizeof(float));
		gpu_run_params(&r, params[implicit]);
		gpu_run_destroy(&r);
		free(cols);
	}
	int same = !memcmp(params[0], params[1], m->n_params * sizeof(float));
	int finite = 1;
	for (size_t i = 0; i < m->n_params; i++)
		finite &= isfinite(params[1][i]) != 0;
	gpu_test_check(t, untouched[1] && !untouched[0] && same && finite,
		       "%s: gemm %s as %s: the im2col matrix %s by the second step's forward (as its "
		       "explicit twin: %s), parameters %s the twin's bit for bit, %s",
		       name, op->shape, imp, untouched[1] ? "left unwritten" : "WRITTEN",
		       untouched[0] ? "UNWRITTEN" : "written", same ? "equal to" : "NOT",
		       finite ? "finite" : "NOT FINITE");
	free(params[0]);
	free(params[1]);
}

static void plan_model(struct gpu_test *t, const char *name, enum model_kind kind,
		       const int *hidden, int n_hidden, int block)
{
	struct model m;
	struct gpu_data g;
	struct plan_info measured;
	model_init(&m, kind, hidden, n_hidden);
	gpu_data_make(&g, t->seed, 64, 4 * PLAN_BATCH, block);
	float *p0 = xmalloc(m.n_params * sizeof(float));
	float *gh = xmalloc(m.n_params * sizeof(float));
	float *gd = xmalloc(m.n_params * sizeof(float));
	model_init_params(&m, t->seed, p0);
	double lh = one_step(&t->host, &m, &g, p0, gh);

	/* The measured plan (of this model's problems alone), and what each could run as. */
	struct plan_info none;
	char unused[256];
	plan_read(&t->dev, &none);
	plan_json_free(&none);
	plan_give(&t->dev, &none, unused, sizeof(unused)); /* forgets every plan so far */
	backend_set(&t->dev, BACKEND_PLAN_POLICY, PLAN_MEASURE);
	backend_set(&t->dev, BACKEND_PLAN_COLLECTIVE, 1);
	double ld = one_step(&t->dev, &m, &g, p0, gd);
	plan_read(&t->dev, &measured);
	const struct plan_op *ops = measured.ops;
	int n_ops = measured.n_ops, runs = 0;
	gpu_test_check(t, fabs(ld - lh) <= PLAN_TOL * fabs(lh) &&
				  gpu_norm_err(gd, gh, m.n_params, NULL) <= PLAN_TOL,
		       "%s: measured plan (%d problems): loss %.7g host %.7g, gradients within %.0e",
		       name, n_ops, ld, lh, PLAN_TOL);
	if (t->d.rank == 0 && !backend_has_plan(&t->dev))
		printf("# %s: this backend plans nothing; no candidates to run\n", name);
	/*
	 * Each run below names one problem's way; the model's other problems,
	 * planned anew, take the heuristic's first way untimed: measuring all of
	 * them again for each of some 200 runs was most of this test's time.
	 */
	backend_set(&t->dev, BACKEND_PLAN_POLICY, PLAN_HEURISTIC);

	for (int i = 0; i < n_ops; i++) {
		gpu_test_check(t, ops[i].n_candidates >= 1 && !strcmp(ops[i].source, "measured"),
			       "%s: %s %s: %d candidates, %s", name, ops[i].op, ops[i].shape,
			       ops[i].n_candidates, ops[i].source);
		for (int j = 0; j < ops[i].n_candidates; j++) {
			struct plan_op want = ops[i];
			struct plan_info in = measured;
			char why[256] = "";
			snprintf(want.chosen, sizeof(want.chosen), "%s", ops[i].cand[j].name);
			want.n_candidates = 0;
			snprintf(want.source, sizeof(want.source), "checkpoint");
			in.n_ops = 1;
			in.ops = &want;
			int refused = plan_give(&t->dev, &in, why, sizeof(why));
			double l = one_step(&t->dev, &m, &g, p0, gd);
			double err = gpu_norm_err(gd, gh, m.n_params, NULL);

			/* The problem ran as named, from the plan given. */
			struct plan_info now;
			const struct plan_op *ran = NULL;
			plan_read(&t->dev, &now);
			for (int k = 0; k < now.n_ops; k++)
				if (!strcmp(now.ops[k].key, want.key))
					ran = &now.ops[k];
			gpu_test_check(t,
				       !refused && ran && !strcmp(ran->chosen, want.chosen) &&
					       !strcmp(ran->source, "checkpoint") &&
					       fabs(l - lh) <= PLAN_TOL * fabs(lh) && err <= PLAN_TOL,
				       "%s: %s %s as %s: %s%s, loss %.7g host %.7g, gradients %.3g "
				       "(limit %.0e)",
				       name, want.op, want.shape, want.chosen,
				       refused ? "refused: " : "ran as ",
				       refused ? why : ran ? ran->chosen : "(not met)", l, lh, err,
				       PLAN_TOL);
			plan_json_free(&now);
			runs++;
			/*
			 * A head's ways send weight gradients to the second stream
			 * at points of their own: each way again as a graph.
			 */
			if (strcmp(want.op, "head") || !backend_can_capture(&t->dev))
				continue;
			double lg = one_graph_step(&t->dev, &m, &g, p0, gd);
			double eg = gpu_norm_err(gd, gh, m.n_params, NULL);
			gpu_test_check(t, fabs(lg - lh) <= PLAN_TOL * fabs(lh) && eg <= PLAN_TOL,
				       "%s: %s %s as %s, captured and replayed: loss %.7g host %.7g, "
				       "gradients %.3g (limit %.0e)",
				       name, want.op, want.shape, want.chosen, lg, lh, eg, PLAN_TOL);
		}
	}
	/* LeNet-5's first convolution's weight gradient (k = 784 x the batch): stage 0's matrix. */
	for (int i = 0; i < n_ops; i++)
		if (!strcmp(ops[i].op, "gemm") && strstr(ops[i].key, " im2col=1x28x28/"))
			implicit_leaves_cols(t, name, &m, &g, p0, &measured, &ops[i], 0);
	if (t->d.rank == 0)
		printf("# %s: %d problems, %d candidates run by name\n", name, n_ops, runs);
	plan_json_free(&measured);
	free(p0);
	free(gh);
	free(gd);
	gpu_data_free(&g);
}

int main(int argc, char **argv)
{
	struct gpu_test t;
	const int hidden[2] = {512, 256};

	gpu_test_init(&t, "gpu_plan", 4242, NULL, &argc, &argv);
	gpu_test_start(&t);
	plan_model(&t, "seed", MODEL_SEED, NULL, 0, 1);
	plan_model(&t, "mlp 784-512-256-10", MODEL_MLP, hidden, 2, 1);
	plan_model(&t, "lenet", MODEL_LENET, NULL, 0, 4);
	return gpu_test_finish(&t);
}
