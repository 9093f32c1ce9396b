/*
 * test_cudasim_cublaslt.cc - rule 7's cuBLASLt part (cudasim.h), in the
 * test_cudasim_rules program: each epilogue against a hand-computed case, the
 * ReLU bit-mask from RELU_AUX_BIAS read back by DRELU (its leading dimension
 * as cublasLt.h requires it), the bias gradients,
 * the heuristic's split-K choices and its workspace filter, split-K's extra
 * node in a captured graph, the documented refusals, and TF32.
 *
 *   ctest --test-dir build -R test_cudasim_rules --output-on-failure
 *
 * Matrices are written as they are stored, column-major: {a00, a10, a01, a11, ...}.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublasLt.h"
#include "cuda_runtime.h"
#include "cudasim.h"

static float *lt_dalloc(size_t n)
{
	void *p = NULL;
	cr_assert_eq(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
	return (float *)p;
}

static float *lt_upload(const std::vector<float> &h)
{
	float *d = lt_dalloc(h.size());
	cr_assert_eq(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

/* n floats at d, once the stream's work is done (a pageable download waits for its stream). */
static std::vector<float> lt_download(cudaStream_t s, const float *d, size_t n)
{
	std::vector<float> h(n);
	cr_assert_eq(cudaMemcpyAsync(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
	return h;
}

static cublasLtMatrixLayout_t layout(uint64_t rows, uint64_t cols, int64_t ld = 0)
{
	cublasLtMatrixLayout_t l;
	cr_assert_eq(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld ? ld : (int64_t)rows),
		     CUBLAS_STATUS_SUCCESS);
	return l;
}

/* One matmul problem: D (m x n) = epilogue(alpha op(A) op(B) + beta C), all set up by hand. */
struct lt_case {
	cublasLtHandle_t h;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, c, d;
	cublasLtMatmulPreference_t pref;
	cudaStream_t s;
	void *ws;
	size_t ws_bytes;
};

static lt_case lt_make(int m, int n, int k, cublasOperation_t ta = CUBLAS_OP_N,
		       cublasOperation_t tb = CUBLAS_OP_N,
		       cublasComputeType_t compute = CUBLAS_COMPUTE_32F)
{
	lt_case c;
	cr_assert_eq(cublasLtCreate(&c.h), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasLtMatmulDescCreate(&c.desc, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
	int32_t opa = ta, opb = tb;
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)),
		     CUBLAS_STATUS_SUCCESS);
	c.a = ta == CUBLAS_OP_N ? layout(m, k) : layout(k, m);
	c.b = tb == CUBLAS_OP_N ? layout(k, n) : layout(n, k);
	c.c = layout(m, n);
	c.d = layout(m, n);
	cr_assert_eq(cublasLtMatmulPreferenceCreate(&c.pref), CUBLAS_STATUS_SUCCESS);
	c.ws_bytes = 1 << 20;
	cr_assert_eq(cudaMalloc(&c.ws, c.ws_bytes), cudaSuccess);
	uint64_t max = c.ws_bytes;
	cr_assert_eq(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							  &max, sizeof(max)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking), cudaSuccess);
	return c;
}

static void set_epilogue(lt_case &c, cublasLtEpilogue_t e, const void *bias = NULL,
			 const void *aux = NULL, int64_t aux_ld = 0)
{
	uint32_t ev = e;
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ev, sizeof(ev)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
						    sizeof(bias)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
						    sizeof(aux)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
						    sizeof(aux_ld)),
		     CUBLAS_STATUS_SUCCESS);
}

/* The heuristic's results for c; *count of them. */
static cublasStatus_t heuristic(const lt_case &c, cublasLtMatmulHeuristicResult_t *res, int want,
				int *count)
{
	return cublasLtMatmulAlgoGetHeuristic(c.h, c.desc, c.a, c.b, c.c, c.d, c.pref, want, res, count);
}

/* The heuristic's first algorithm, run: D = alpha A B + beta C. */
static cublasStatus_t run(lt_case &c, const float *A, const float *B, float beta, const float *C,
			  float *D, float alpha = 1.0f)
{
	cublasLtMatmulHeuristicResult_t res[4];
	int count = 0;
	cublasStatus_t rc = heuristic(c, res, 4, &count);
	if (rc != CUBLAS_STATUS_SUCCESS)
		return rc;
	cr_assert_gt(count, 0);
	return cublasLtMatmul(c.h, c.desc, &alpha, A, c.a, B, c.b, &beta, C, c.c, D, c.d, &res[0].algo,
			      c.ws, c.ws_bytes, c.s);
}

static void expect_floats(const char *what, const std::vector<float> &got,
			  const std::vector<float> &want)
{
	cr_assert_eq(got.size(), want.size());
	for (size_t i = 0; i < got.size(); i++)
		cr_assert(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
			  "%s: element %zu is %g, expected %g", what, i, (double)got[i], (double)want[i]);
}

/* A (2 x 3) {1 2 3; 4 5 6}, B (3 x 2) {1 0; 0 1; 1 1}: A B = {4 5; 10 11}. */
static const std::vector<float> A23 = {1, 4, 2, 5, 3, 6}, B32 = {1, 0, 1, 0, 1, 1};

Test(cublaslt, default_bias_relu_and_relu_bias_epilogues_give_the_hand_computed_result)
{
	lt_case c = lt_make(2, 2, 3);
	float *A = lt_upload(A23), *B = lt_upload(B32), *D = lt_dalloc(4);
	float *bias = lt_upload({1.0f, -10.5f});
	float *C = lt_upload({1, 1, 1, -30});
	cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS, "DEFAULT, C NULL with beta 0");
	expect_floats("DEFAULT", lt_download(c.s, D, 4), {4, 10, 5, 11});
	cr_assert_eq(run(c, A, B, 0.5f, C, D, 2.0f), CUBLAS_STATUS_SUCCESS);
	expect_floats("2 A B + 0.5 C", lt_download(c.s, D, 4), {8.5f, 20.5f, 10.5f, 7});
	set_epilogue(c, CUBLASLT_EPILOGUE_BIAS, bias);
	cr_assert_eq(run(c, A, B, 0.0f, C, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("BIAS: the bias of row i on every column", lt_download(c.s, D, 4), {5, -0.5f, 6, 0.5f});
	set_epilogue(c, CUBLASLT_EPILOGUE_RELU_BIAS, bias);
	cr_assert_eq(run(c, A, B, 0.0f, C, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("RELU_BIAS", lt_download(c.s, D, 4), {5, 0, 6, 0.5f});
	set_epilogue(c, CUBLASLT_EPILOGUE_RELU);
	cr_assert_eq(run(c, A, B, 1.0f, C, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("RELU of A B + C", lt_download(c.s, D, 4), {5, 11, 6, 0});
}

/* cuBLASLt's ReLU epilogue gives 0 for NaN (NVIDIA's forum report; rule 7). */
Test(cublaslt, relu_epilogues_turn_nan_into_zero)
{
	lt_case c = lt_make(2, 2, 3);
	std::vector<float> a = A23;
	a[0] = NAN; /* row 0 of A B is NaN */
	float *A = lt_upload(a), *B = lt_upload(B32), *D = lt_dalloc(4);
	set_epilogue(c, CUBLASLT_EPILOGUE_RELU);
	cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("RELU with NaN", lt_download(c.s, D, 4), {0, 10, 0, 11});
	set_epilogue(c, CUBLASLT_EPILOGUE_DEFAULT);
	cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("DEFAULT keeps NaN", lt_download(c.s, D, 4), {NAN, 10, NAN, 11});
}

/*
 * Forward RELU_AUX_BIAS stores which elements passed the ReLU; backward DRELU
 * and DRELU_BGRAD keep the product only there, and sum the kept values per row.
 */
Test(cublaslt, the_relu_bit_mask_of_relu_aux_bias_is_what_drelu_reads_back)
{
	const int m = 3, n = 2;
	lt_case fwd = lt_make(m, n, 2), bwd = lt_make(m, n, 2);
	/* A (3 x 2) {1 0; 0 1; 1 1}, B (2 x 2) {2 -3; -1 5}: A B = {2 -3; -1 5; 1 2}. */
	float *A = lt_upload({1, 0, 1, 0, 1, 1}), *B = lt_upload({2, -1, -3, 5});
	float *bias = lt_upload({0.5f, 0.5f, -1.0f}), *Y = lt_dalloc(m * n);
	void *mask = NULL;
	const int64_t ld = 128; /* bits: divisible by 128 and at least m */
	cr_assert_eq(cudaMalloc(&mask, (size_t)ld * n / 8), cudaSuccess);
	set_epilogue(fwd, CUBLASLT_EPILOGUE_RELU_AUX_BIAS, bias, mask, ld);
	cr_assert_eq(run(fwd, A, B, 0.0f, NULL, Y), CUBLAS_STATUS_SUCCESS);
	/* A B + bias = {2.5 -2.5; -0.5 5.5; 0 1}: positive at (0,0), (1,1), (2,1). */
	expect_floats("RELU_AUX_BIAS", lt_download(fwd.s, Y, m * n), {2.5f, 0, 0, 0, 5.5f, 1});

	/* Backward: G = A' B' with A' the identity (3 x 2 padded) and B' = {7 8; 9 10}. */
	float *I = lt_upload({1, 0, 0, 0, 1, 0}), *G = lt_upload({7, 9, 8, 10}), *dX = lt_dalloc(m * n);
	float *dbias = lt_dalloc(m);
	set_epilogue(bwd, CUBLASLT_EPILOGUE_DRELU, NULL, mask, ld);
	cr_assert_eq(run(bwd, I, G, 0.0f, NULL, dX), CUBLAS_STATUS_SUCCESS);
	/* I G = {7 8; 9 10; 0 0}; kept where the forward ReLU passed. */
	expect_floats("DRELU", lt_download(bwd.s, dX, m * n), {7, 0, 0, 0, 10, 0});
	set_epilogue(bwd, CUBLASLT_EPILOGUE_DRELU_BGRAD, dbias, mask, ld);
	cr_assert_eq(run(bwd, I, G, 0.0f, NULL, dX), CUBLAS_STATUS_SUCCESS);
	expect_floats("DRELU_BGRAD's D", lt_download(bwd.s, dX, m * n), {7, 0, 0, 0, 10, 0});
	expect_floats("DRELU_BGRAD's bias gradient: D summed over its columns", lt_download(bwd.s, dbias, m),
		      {7, 10, 0});
}

Test(cublaslt, bgrada_sums_op_a_over_k_and_bgradb_sums_op_b_over_k)
{
	/* op(A) = {1 2 3; 4 5 6} (2 x 3), op(B) = {1 0; 0 1; 1 1} (3 x 2), each given both ways. */
	const std::vector<float> At = {1, 2, 3, 4, 5, 6}, Bt = {1, 0, 0, 1, 1, 1};
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			lt_case c = lt_make(2, 2, 3, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N);
			float *A = lt_upload(ta ? At : A23), *B = lt_upload(tb ? Bt : B32);
			float *D = lt_dalloc(4), *grad = lt_dalloc(2);
			set_epilogue(c, CUBLASLT_EPILOGUE_BGRADA, grad);
			cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
			expect_floats("BGRADA's D", lt_download(c.s, D, 4), {4, 10, 5, 11});
			expect_floats("BGRADA: rows of op(A) summed (length m)", lt_download(c.s, grad, 2), {6, 15});
			set_epilogue(c, CUBLASLT_EPILOGUE_BGRADB, grad);
			cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
			expect_floats("BGRADB: columns of op(B) summed (length n)", lt_download(c.s, grad, 2), {2, 2});
		}
}

static int32_t splitk_of(const cublasLtMatmulAlgo_t *algo)
{
	int32_t parts = 0;
	size_t written = 0;
	cr_assert_eq(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &parts,
							  sizeof(parts), &written),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(written, sizeof(parts));
	return parts;
}

static uint32_t scheme_of(const cublasLtMatmulAlgo_t *algo)
{
	uint32_t scheme = 99;
	cr_assert_eq(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
							  &scheme, sizeof(scheme), NULL),
		     CUBLAS_STATUS_SUCCESS);
	return scheme;
}

static void set_max_workspace(lt_case &c, uint64_t bytes)
{
	cr_assert_eq(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
							  &bytes, sizeof(bytes)),
		     CUBLAS_STATUS_SUCCESS);
}

/* The seed model's forward GEMM: D (10 x 32) from k = 784, long against m n (rule 7's own rule). */
Test(cublaslt, a_long_k_gets_split_k_first_and_the_workspace_limit_filters)
{
	lt_case c = lt_make(10, 32, 784, CUBLAS_OP_T, CUBLAS_OP_N);
	cublasLtMatmulHeuristicResult_t res[8];
	int count = 0;
	cr_assert_eq(heuristic(c, res, 8, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(count, 3);
	cr_assert(splitk_of(&res[0].algo) > 1 &&
			  scheme_of(&res[0].algo) == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE &&
			  res[0].workspaceSize > 0,
		  "first: split-K with a separate reduction, got %d parts, scheme %u, %zu bytes",
		  splitk_of(&res[0].algo), scheme_of(&res[0].algo), res[0].workspaceSize);
	cr_assert_eq(res[0].workspaceSize, (size_t)splitk_of(&res[0].algo) * 10 * 32 * sizeof(float));
	cr_assert(splitk_of(&res[1].algo) == 1 && scheme_of(&res[1].algo) == CUBLASLT_REDUCTION_SCHEME_NONE &&
		  res[1].workspaceSize == 0);
	cr_assert(splitk_of(&res[2].algo) > 1 && scheme_of(&res[2].algo) == CUBLASLT_REDUCTION_SCHEME_INPLACE);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(res[i].state, CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(heuristic(c, res, 1, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(count, 1, "no more than requested");
	set_max_workspace(c, res[0].workspaceSize - 1);
	cr_assert_eq(heuristic(c, res, 8, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert(count == 2 && scheme_of(&res[0].algo) == CUBLASLT_REDUCTION_SCHEME_NONE &&
			  scheme_of(&res[1].algo) == CUBLASLT_REDUCTION_SCHEME_INPLACE,
		  "an algorithm needing more workspace than allowed was returned");
	set_max_workspace(c, 0);
	cr_assert_eq(heuristic(c, res, 8, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert(count == 1 && splitk_of(&res[0].algo) == 1, "no workspace: no split-K");
	uint32_t mask = CUBLASLT_REDUCTION_SCHEME_INPLACE;
	set_max_workspace(c, 1 << 20);
	cr_assert_eq(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
							  &mask, sizeof(mask)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(heuristic(c, res, 8, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert(count == 2 && scheme_of(&res[0].algo) == CUBLASLT_REDUCTION_SCHEME_NONE &&
			  scheme_of(&res[1].algo) == CUBLASLT_REDUCTION_SCHEME_INPLACE,
		  "the reduction scheme mask");
	/* The weight gradient's shape (784 x 10 from k = 32): no split-K. */
	lt_case g = lt_make(784, 10, 32, CUBLAS_OP_N, CUBLAS_OP_T);
	cr_assert_eq(heuristic(g, res, 8, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert(count >= 1 && splitk_of(&res[0].algo) == 1, "a short k comes without split-K first");
	size_t need = 0;
	cr_assert_eq(cublasLtMatmulAlgoConfigGetAttribute(&res[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, NULL,
							  0, &need),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(need, sizeof(int32_t), "size 0 asks for the size");
	int64_t wrong = 0;
	cr_assert_eq(cublasLtMatmulAlgoConfigGetAttribute(&res[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &wrong,
							  sizeof(wrong), NULL),
		     CUBLAS_STATUS_INVALID_VALUE);
}

/* Every algorithm the heuristic offers computes the product (to float rounding of its partial sums). */
Test(cublaslt, every_offered_algorithm_gives_the_product)
{
	const int m = 3, n = 2, k = 200;
	lt_case c = lt_make(m, n, k);
	std::vector<float> a((size_t)m * k), b((size_t)k * n);
	for (size_t i = 0; i < a.size(); i++)
		a[i] = (float)((int)(i * 7 % 13) - 6) / 8.0f;
	for (size_t i = 0; i < b.size(); i++)
		b[i] = (float)((int)(i * 5 % 11) - 5) / 4.0f;
	std::vector<float> want((size_t)m * n);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0.0;
			for (int l = 0; l < k; l++)
				s += (double)a[(size_t)(i + l * m)] * b[(size_t)(l + j * k)];
			want[(size_t)(i + j * m)] = (float)s; /* exact: small dyadic sums */
		}
	float *A = lt_upload(a), *B = lt_upload(b), *D = lt_dalloc((size_t)m * n);
	cublasLtMatmulHeuristicResult_t res[8];
	int count = 0;
	cr_assert_eq(heuristic(c, res, 8, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(count, 3, "k = 200 against m n = 6: the split-K algorithms too");
	float one = 1.0f, zero = 0.0f;
	for (int r = 0; r < count; r++) {
		cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &zero, D, c.c, D, c.d,
					    &res[r].algo, c.ws, res[r].workspaceSize, c.s),
			     CUBLAS_STATUS_SUCCESS);
		expect_floats("the product", lt_download(c.s, D, want.size()), want);
	}
	cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &zero, D, c.c, D, c.d, NULL, NULL, 0,
				    c.s),
		     CUBLAS_STATUS_SUCCESS, "no algorithm: the heuristic's with no workspace");
	expect_floats("the product", lt_download(c.s, D, want.size()), want);
}

static size_t graph_nodes(cudaGraph_t g)
{
	size_t n = 0;
	cr_assert_eq(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
	return n;
}

/*
 * A split-K algorithm with a separate reduction is two nodes of a captured
 * graph (partial products, then cublasLt::splitKreduce_kernel on the H100),
 * in place and no split one; the scalars are those of the call.
 */
Test(cublaslt, split_k_with_a_separate_reduction_is_two_graph_nodes)
{
	lt_case c = lt_make(2, 2, 64);
	std::vector<float> a(2 * 64, 0.5f), b(64 * 2, 2.0f);
	float *A = lt_upload(a), *B = lt_upload(b), *D = lt_dalloc(4);
	cublasLtMatmulHeuristicResult_t res[3];
	int count = 0;
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(count, 3);
	const size_t want_nodes[3] = {2, 1, 1};
	for (int r = 0; r < 3; r++) {
		float alpha = 1.0f, zero = 0.0f;
		cudaGraph_t g = NULL;
		cudaGraphExec_t x = NULL;
		cr_assert_eq(cudaStreamBeginCapture(c.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
		cr_assert_eq(cublasLtMatmul(c.h, c.desc, &alpha, A, c.a, B, c.b, &zero, D, c.c, D, c.d,
					    &res[r].algo, c.ws, res[r].workspaceSize, c.s),
			     CUBLAS_STATUS_SUCCESS);
		cr_assert_eq(cudaStreamEndCapture(c.s, &g), cudaSuccess);
		cr_assert_eq(graph_nodes(g), want_nodes[r], "algorithm %d (split %d, scheme %u)", r,
			     splitk_of(&res[r].algo), scheme_of(&res[r].algo));
		alpha = 3.0f; /* too late: the graph holds 1 */
		cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
		cr_assert_eq(cudaGraphLaunch(x, c.s), cudaSuccess);
		expect_floats("the replayed product", lt_download(c.s, D, 4), {64, 64, 64, 64});
		cudaGraphExecDestroy(x);
		cudaGraphDestroy(g);
	}
}

Test(cublaslt, arguments_cublaslt_documents_as_invalid_are_refused)
{
	lt_case c = lt_make(2, 2, 3);
	float *A = lt_upload(A23), *B = lt_upload(B32), *D = lt_dalloc(4), one = 1.0f;
	int32_t op = CUBLAS_OP_T;
	int64_t big = 0;
	cublasLtMatmulHeuristicResult_t res[3];
	int count = 0;
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &big, sizeof(big)),
		     CUBLAS_STATUS_INVALID_VALUE, "a wrong size");
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, (cublasLtMatmulDescAttributes_t)1000, &op, sizeof(op)),
		     CUBLAS_STATUS_INVALID_VALUE, "an unknown attribute");
	cr_assert_eq(heuristic(c, res, 0, &count), CUBLAS_STATUS_INVALID_VALUE, "no algorithm requested");
	/* A transposed would be 3 x 2 given as 2 x 3: k no longer agrees. */
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_INVALID_VALUE, "sizes that disagree");
	op = CUBLAS_OP_N;
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op)),
		     CUBLAS_STATUS_SUCCESS);
	set_epilogue(c, CUBLASLT_EPILOGUE_BIAS);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_INVALID_VALUE, "BIAS without a bias");
	void *mask = NULL;
	cr_assert_eq(cudaMalloc(&mask, 64), cudaSuccess);
	set_epilogue(c, CUBLASLT_EPILOGUE_DRELU, NULL, mask, 64);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_INVALID_VALUE, "a mask ld not divisible by 128");
	set_epilogue(c, CUBLASLT_EPILOGUE_DRELU, NULL, NULL, 128);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_INVALID_VALUE, "DRELU without a mask");
	set_epilogue(c, CUBLASLT_EPILOGUE_DEFAULT);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_SUCCESS);
	/* In place needs C's layout to be D's. */
	cublasLtMatrixLayout_t wide = layout(2, 2, 4);
	float *CD = lt_dalloc(8);
	cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &one, CD, wide, CD, c.d, &res[0].algo,
				    c.ws, c.ws_bytes, c.s),
		     CUBLAS_STATUS_INVALID_VALUE, "C == D with another layout");
	cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &one, D, c.c, D, c.d, &res[0].algo,
				    (char *)c.ws + 16, 4096, c.s),
		     CUBLAS_STATUS_INVALID_VALUE, "a workspace not aligned to 256 bytes");
	int32_t device_mode = CUBLASLT_POINTER_MODE_DEVICE;
	cr_assert_eq(cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &device_mode,
						    sizeof(device_mode)),
		     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_NOT_SUPPORTED, "device pointer mode");
	/* Too little workspace for the algorithm given. */
	lt_case s = lt_make(2, 2, 64);
	std::vector<float> ones(128, 1.0f);
	float *A2 = lt_upload(ones), *B2 = lt_upload(ones);
	cr_assert_eq(heuristic(s, res, 3, &count), CUBLAS_STATUS_SUCCESS);
	cr_assert_gt(res[0].workspaceSize, 0);
	cr_assert_eq(cublasLtMatmul(s.h, s.desc, &one, A2, s.a, B2, s.b, &one, D, s.c, D, s.d, &res[0].algo,
				    s.ws, res[0].workspaceSize - 1, s.s),
		     CUBLAS_STATUS_INVALID_VALUE, "workspaceSizeInBytes below the algorithm's need");
}

/*
 * The ReLU bit-mask's leading dimension (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD),
 * in bits: cublasLt.h says it "must be divisible by 128 and be no less than
 * the number of rows in the output matrix". A program that gives D's rows
 * (120, as LeNet-5's first dense layer has) is refused, by the heuristic and
 * by cublasLtMatmul with an algorithm the heuristic gave for a right ld, for
 * the forward's RELU_AUX_BIAS and the backward's DRELU alike; so is a
 * multiple of 128 short of the rows; the rows rounded up to 128 are taken.
 */
Test(cublaslt, a_relu_mask_ld_not_a_multiple_of_128_at_least_the_rows_is_refused)
{
	const int m = 120, n = 4, k = 8;
	lt_case c = lt_make(m, n, k);
	std::vector<float> ones((size_t)m * k, 1.0f);
	float *A = lt_upload(ones), *B = lt_upload(std::vector<float>((size_t)k * n, 1.0f));
	float *bias = lt_dalloc(m), *D = lt_dalloc((size_t)m * n), one = 1.0f, zero = 0.0f;
	void *mask = NULL;
	cr_assert_eq(cudaMalloc(&mask, (size_t)256 * n / 8), cudaSuccess);
	cublasLtMatmulHeuristicResult_t res[3];
	int count = 0;
	const cublasLtEpilogue_t epilogues[] = {CUBLASLT_EPILOGUE_RELU_AUX_BIAS, CUBLASLT_EPILOGUE_DRELU};
	for (cublasLtEpilogue_t e : epilogues) {
		const void *b = e == CUBLASLT_EPILOGUE_DRELU ? NULL : bias;
		set_epilogue(c, e, b, mask, m);
		cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_INVALID_VALUE,
			     "epilogue %d: a mask ld of D's 120 rows", (int)e);
		set_epilogue(c, e, b, mask, 128);
		cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_SUCCESS, "epilogue %d: ld 128", (int)e);
		cr_assert_gt(count, 0);
		cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &zero, D, c.d, D, c.d, &res[0].algo,
					    c.ws, c.ws_bytes, c.s),
			     CUBLAS_STATUS_SUCCESS, "epilogue %d: ld 128 at the matmul", (int)e);
		set_epilogue(c, e, b, mask, m);
		cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &zero, D, c.d, D, c.d, &res[0].algo,
					    c.ws, c.ws_bytes, c.s),
			     CUBLAS_STATUS_INVALID_VALUE, "epilogue %d: ld 120 at the matmul", (int)e);
	}
	/* 200 rows: 128 divides, but is short of them; 256 is taken. */
	lt_case t = lt_make(200, n, k);
	float *bias2 = lt_dalloc(200);
	set_epilogue(t, CUBLASLT_EPILOGUE_RELU_AUX_BIAS, bias2, mask, 128);
	cr_assert_eq(heuristic(t, res, 3, &count), CUBLAS_STATUS_INVALID_VALUE, "ld 128 for 200 rows");
	set_epilogue(t, CUBLASLT_EPILOGUE_RELU_AUX_BIAS, bias2, mask, 256);
	cr_assert_eq(heuristic(t, res, 3, &count), CUBLAS_STATUS_SUCCESS, "ld 256 for 200 rows");
	cr_assert_eq(cudaStreamSynchronize(c.s), cudaSuccess);
}

Test(cublaslt, an_operand_in_host_memory_is_stopped, .signal = SIGABRT)
{
	lt_case c = lt_make(2, 2, 3);
	std::vector<float> host(6, 1.0f);
	float *B = lt_upload(B32), *D = lt_dalloc(4);
	cr_assert_eq(run(c, host.data(), B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
}

Test(cublaslt, beta_zero_ignores_c_and_c_may_be_d)
{
	lt_case c = lt_make(2, 2, 3);
	float *A = lt_upload(A23), *B = lt_upload(B32), *D = lt_dalloc(4); /* D: garbage, NaN */
	cr_assert_eq(run(c, A, B, 0.0f, D, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("beta 0 over NaN", lt_download(c.s, D, 4), {4, 10, 5, 11});
	cr_assert_eq(run(c, A, B, 1.0f, D, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("D += A B in place", lt_download(c.s, D, 4), {8, 20, 10, 22});
}

/* CUDASIM_LT_EPILOGUES: the library offers fewer epilogues, so the heuristic finds nothing. */
Test(cublaslt, an_epilogue_not_on_offer_gives_no_algorithm)
{
	setenv("CUDASIM_LT_EPILOGUES", "default", 1);
	lt_case c = lt_make(2, 2, 3);
	float *A = lt_upload(A23), *B = lt_upload(B32), *D = lt_dalloc(4), *bias = lt_upload({1, 1});
	cublasLtMatmulHeuristicResult_t res[3];
	int count = -1;
	set_epilogue(c, CUBLASLT_EPILOGUE_BIAS, bias);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_NOT_SUPPORTED);
	cr_assert_eq(count, 0);
	float one = 1.0f, zero = 0.0f;
	cr_assert_eq(cublasLtMatmul(c.h, c.desc, &one, A, c.a, B, c.b, &zero, D, c.c, D, c.d, NULL, NULL, 0, c.s),
		     CUBLAS_STATUS_NOT_SUPPORTED);
	set_epilogue(c, CUBLASLT_EPILOGUE_DEFAULT);
	cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS, "DEFAULT is always offered");
	setenv("CUDASIM_LT_EPILOGUES", "BIAS, CUBLASLT_EPILOGUE_DRELU_BGRAD", 1);
	set_epilogue(c, CUBLASLT_EPILOGUE_BIAS, bias);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_SUCCESS);
	set_epilogue(c, CUBLASLT_EPILOGUE_RELU_BIAS, bias);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_NOT_SUPPORTED, "not listed");
	unsetenv("CUDASIM_LT_EPILOGUES");
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_SUCCESS, "every modelled one by default");
	set_epilogue(c, CUBLASLT_EPILOGUE_GELU_BIAS, bias);
	cr_assert_eq(heuristic(c, res, 3, &count), CUBLAS_STATUS_NOT_SUPPORTED, "GELU is not modelled");
}

/* CUBLAS_COMPUTE_32F_FAST_TF32 rounds A and B to TF32; CUBLAS_COMPUTE_32F does not. */
static float lt_product(cublasComputeType_t compute, float a, float b)
{
	lt_case c = lt_make(1, 1, 1, CUBLAS_OP_N, CUBLAS_OP_N, compute);
	float *A = lt_upload({a}), *B = lt_upload({b}), *D = lt_dalloc(1);
	cr_assert_eq(run(c, A, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
	return lt_download(c.s, D, 1)[0];
}

Test(cublaslt, fast_tf32_rounds_the_inputs_unless_nvidia_tf32_override_is_0)
{
	const float a = 1.0f + ldexpf(1.0f, -12), b = 3.0f; /* a is 1 in TF32 */
	cr_assert_eq(lt_product(CUBLAS_COMPUTE_32F, a, b), a * b);
	cr_assert_eq(lt_product(CUBLAS_COMPUTE_32F_PEDANTIC, a, b), a * b);
	cr_assert_eq(lt_product(CUBLAS_COMPUTE_32F_FAST_TF32, a, b), 3.0f);
	setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
	cr_assert_eq(lt_product(CUBLAS_COMPUTE_32F_FAST_TF32, a, b), a * b);
}

/*
 * Alignment: an algorithm chosen with the default preference (256-byte
 * operands) must not be given an operand that is only 4-byte aligned (a
 * tensor at an odd offset into a flat buffer); chosen with
 * CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 4, it runs.
 */
static void run_at_offset_a(uint32_t min_align_a)
{
	lt_case c = lt_make(2, 2, 3);
	std::vector<float> padded = A23;
	padded.insert(padded.begin(), 0.0f); /* A starts one float into its allocation */
	float *base = lt_upload(padded), *B = lt_upload(B32), *D = lt_dalloc(4);
	if (min_align_a)
		cr_assert_eq(cublasLtMatmulPreferenceSetAttribute(
				     c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &min_align_a,
				     sizeof(min_align_a)),
			     CUBLAS_STATUS_SUCCESS);
	cr_assert_eq(run(c, base + 1, B, 0.0f, NULL, D), CUBLAS_STATUS_SUCCESS);
	expect_floats("A B with A at a 4-byte offset", lt_download(c.s, D, 4), {4, 10, 5, 11});
}

Test(cublaslt, an_operand_less_aligned_than_the_algorithm_was_chosen_for_is_stopped,
     .signal = SIGABRT)
{
	run_at_offset_a(0);
}

Test(cublaslt, an_algorithm_chosen_for_4_byte_operands_takes_them)
{
	run_at_offset_a(4);
}
