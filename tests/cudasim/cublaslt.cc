/*
 * cublaslt.cc - the simulator's cuBLASLt (rule 7 of cudasim.h): handles,
 * descriptors, the heuristic and cublasLtMatmul with its epilogues, checked
 * and computed from cuBLASLt's column-major definition, queued on a stream.
 *
 * Descriptors are the real semi-opaque structs; the simulator keeps its own
 * fields inside their data words and a set of the live ones, so a destroyed
 * or foreign descriptor is caught. The reference is written from the
 * definition only (element (i, j) of a column-major X with leading dimension
 * ld is X[i + j * ld]; op(X) is X or its transpose), accumulating each split
 * of the k dimension in double, independent of the project's GEMM mapping and
 * of cublas.cc. How the partial sums of a split-K algorithm meet follows the
 * reduction scheme's documented storage: in the compute type in the
 * workspace (COMPUTE_TYPE, OUTPUT_TYPE: float32 here, reduced by a second
 * operation on the stream), or in the output type in D itself (INPLACE).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <set>
#include <string>
#include <vector>

#include "cublasLt.h"
#include "cudasim.h"

struct cublasLtContext {
	int unused;
};

namespace cudasim {

static std::set<const void *> live; /* handles and descriptors not yet destroyed */

/* What the simulator keeps in a descriptor's data words. */
struct lt_layout {
	int32_t type;
	uint64_t rows, cols;
	int64_t ld;
};
struct lt_desc {
	int32_t compute, scale, pointer_mode, transa, transb, transc;
	uint32_t epilogue;
	const void *bias;
	void *aux;
	int64_t aux_ld;
	int32_t bias_type;
};
struct lt_pref {
	uint32_t search_mode, reduction_mask;
	uint64_t max_workspace;
	uint32_t align[4]; /* CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES */
};
/*
 * An algorithm as the heuristic returns it (the config attributes' values),
 * and the alignments, in bytes, it was chosen for: A, B, C, D from the
 * preference, the bias and the ReLU mask from the descriptor's pointers.
 */
enum { ALIGN_A, ALIGN_B, ALIGN_C, ALIGN_D, ALIGN_BIAS, ALIGN_AUX, ALIGNS };
struct lt_algo {
	uint64_t magic;
	int32_t id, splitk;
	uint32_t scheme, tile, swizzle, custom, stages;
	uint16_t inner_shape, cluster_shape;
	uint16_t align[ALIGNS];
};
static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout fits");
static_assert(sizeof(lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor fits");
static_assert(sizeof(lt_pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference fits");
static_assert(sizeof(lt_algo) <= sizeof(cublasLtMatmulAlgo_t), "algorithm fits");
static const uint64_t algo_magic = 0x63756461736c7431ull; /* written by the heuristic only */

template <class T, class O> static T get(const O *o)
{
	T v;
	memcpy(&v, o->data, sizeof(v));
	return v;
}

template <class T, class O> static void put(O *o, const T &v)
{
	memcpy(o->data, &v, sizeof(v));
}

template <class O> static void check_live(const O *o, const char *call, const char *what)
{
	if (o && !live.count(o))
		fatal("%s: %s %p was never created or is destroyed (undefined behaviour in cuBLASLt)",
		      call, what, (const void *)o);
}

/* ---- the epilogues on offer (CUDASIM_LT_EPILOGUES) -------------------------------- */

static const struct {
	const char *name;
	uint32_t value;
} epilogue_names[] = {
	{"DEFAULT", CUBLASLT_EPILOGUE_DEFAULT},
	{"RELU", CUBLASLT_EPILOGUE_RELU},
	{"RELU_AUX", CUBLASLT_EPILOGUE_RELU_AUX},
	{"BIAS", CUBLASLT_EPILOGUE_BIAS},
	{"RELU_BIAS", CUBLASLT_EPILOGUE_RELU_BIAS},
	{"RELU_AUX_BIAS", CUBLASLT_EPILOGUE_RELU_AUX_BIAS},
	{"DRELU", CUBLASLT_EPILOGUE_DRELU},
	{"DRELU_BGRAD", CUBLASLT_EPILOGUE_DRELU_BGRAD},
	{"BGRADA", CUBLASLT_EPILOGUE_BGRADA},
	{"BGRADB", CUBLASLT_EPILOGUE_BGRADB},
};

static bool modelled_epilogue(uint32_t e)
{
	for (const auto &n : epilogue_names)
		if (n.value == e)
			return true;
	return false;
}

/*
 * Whether the simulated library has kernels for epilogue e: every modelled
 * one (NVIDIA documents no restriction for float32 in column-major order),
 * unless CUDASIM_LT_EPILOGUES lists those it offers ("default": DEFAULT only;
 * "none": not even that, a library with no algorithm for any problem, so a
 * program must manage without cuBLASLt).
 */
static bool offered(uint32_t e)
{
	if (!modelled_epilogue(e))
		return false; /* the GELU family: not modelled */
	const char *env = getenv("CUDASIM_LT_EPILOGUES");
	if (env && !strcmp(env, "none"))
		return false;
	if (e == CUBLASLT_EPILOGUE_DEFAULT)
		return true;
	if (!env || !*env)
		return true;
	std::string list(env);
	size_t at = 0;
	while (at <= list.size()) {
		size_t comma = list.find(',', at);
		std::string tok = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
		tok.erase(0, tok.find_first_not_of(" \t"));
		tok.erase(tok.find_last_not_of(" \t") + 1);
		if (tok.rfind("CUBLASLT_EPILOGUE_", 0) == 0)
			tok = tok.substr(strlen("CUBLASLT_EPILOGUE_"));
		bool known = tok == "default";
		for (const auto &n : epilogue_names)
			if (tok == n.name) {
				known = true;
				if (n.value == e)
					return true;
			}
		if (!known)
			fatal("CUDASIM_LT_EPILOGUES=%s: '%s' is no epilogue the simulator models (%s)", env,
			      tok.c_str(), "DEFAULT, RELU, RELU_AUX, BIAS, RELU_BIAS, RELU_AUX_BIAS, DRELU, "
					   "DRELU_BGRAD, BGRADA, BGRADB, default, or none alone");
		if (comma == std::string::npos)
			break;
		at = comma + 1;
	}
	return false;
}

/* The GELU family: cuBLASLt's, not modelled, so never on offer here. */
static bool gelu(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_AUX ||
	       e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
	       e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

static bool has_bias_input(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
	       e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
}

static bool has_bias_output(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_DRELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA ||
	       e == CUBLASLT_EPILOGUE_BGRADB;
}

static bool writes_mask(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
}

static bool reads_mask(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}

static bool relu(uint32_t e)
{
	return e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS || writes_mask(e);
}

/* ---- the problem ---------------------------------------------------------------------- */

/* One matmul as described: sizes from the layouts, attributes from the descriptor. */
struct lt_problem {
	lt_desc desc;
	lt_layout a, b, c, d;
	bool ta, tb;
	int64_t m, n, k;
};

static bool is_fp32_compute(int32_t c)
{
	return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_PEDANTIC ||
	       c == CUBLAS_COMPUTE_32F_FAST_TF32;
}

/*
 * The problem's consistency, as cublasLtMatmulAlgoGetHeuristic and
 * cublasLtMatmul check it: CUBLAS_STATUS_INVALID_VALUE for what conflicts,
 * CUBLAS_STATUS_NOT_SUPPORTED for what the simulated library has no kernel
 * for (types other than float32, pointer modes other than host, epilogues not
 * on offer).
 */
static cublasStatus_t describe_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A,
				       cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
				       cublasLtMatrixLayout_t D, const char *call, lt_problem *p)
{
	if (!desc || !A || !B || !D)
		return CUBLAS_STATUS_INVALID_VALUE;
	check_live(desc, call, "matmul descriptor");
	check_live(A, call, "layout A");
	check_live(B, call, "layout B");
	check_live(C, call, "layout C");
	check_live(D, call, "layout D");
	p->desc = get<lt_desc>(desc);
	p->a = get<lt_layout>(A);
	p->b = get<lt_layout>(B);
	p->d = get<lt_layout>(D);
	p->c = C ? get<lt_layout>(C) : p->d; /* Cdesc omitted: taken to be Ddesc */
	const lt_desc &q = p->desc;
	const lt_layout *all[] = {&p->a, &p->b, &p->c, &p->d};
	for (const lt_layout *l : all)
		if (l->ld < (int64_t)(l->rows > 1 ? l->rows : 1) || l->rows > INT32_MAX || l->cols > INT32_MAX)
			return CUBLAS_STATUS_INVALID_VALUE; /* columns may not overlap */
	if ((q.transa != CUBLAS_OP_N && q.transa != CUBLAS_OP_T && q.transa != CUBLAS_OP_C) ||
	    (q.transb != CUBLAS_OP_N && q.transb != CUBLAS_OP_T && q.transb != CUBLAS_OP_C) ||
	    q.transc != CUBLAS_OP_N)
		return CUBLAS_STATUS_INVALID_VALUE;
	p->ta = q.transa != CUBLAS_OP_N;
	p->tb = q.transb != CUBLAS_OP_N;
	p->m = (int64_t)p->d.rows;
	p->n = (int64_t)p->d.cols;
	p->k = (int64_t)(p->ta ? p->a.rows : p->a.cols);
	if ((int64_t)(p->ta ? p->a.cols : p->a.rows) != p->m ||
	    (int64_t)(p->tb ? p->b.rows : p->b.cols) != p->n ||
	    (int64_t)(p->tb ? p->b.cols : p->b.rows) != p->k || p->c.rows != p->d.rows ||
	    p->c.cols != p->d.cols)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!modelled_epilogue(q.epilogue) && !gelu(q.epilogue))
		return CUBLAS_STATUS_INVALID_VALUE; /* no epilogue of cublasLtEpilogue_t */
	/* The attributes the epilogue needs (cublasLtMatmulDescAttributes_t). */
	if ((has_bias_input(q.epilogue) || has_bias_output(q.epilogue)) && !q.bias)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (writes_mask(q.epilogue) || reads_mask(q.epilogue)) {
		if (!q.aux)
			return CUBLAS_STATUS_INVALID_VALUE;
		/*
		 * cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: the ReLU bit-mask's
		 * leading dimension, in bits, "must be divisible by 128 and be no less
		 * than the number of rows in the output matrix". A mask laid out with
		 * D's rows as its ld is refused, as the parameters in conflict.
		 */
		if (q.aux_ld <= 0 || q.aux_ld % 128 != 0 || q.aux_ld < p->m) {
			note("%s: the ReLU bit-mask's leading dimension (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) "
			     "is %lld bits for D of %lld rows; cuBLASLt requires a multiple of 128 and at "
			     "least the rows (%lld here): CUBLAS_STATUS_INVALID_VALUE",
			     call, (long long)q.aux_ld, (long long)p->m, (long long)((p->m + 127) / 128 * 128));
			return CUBLAS_STATUS_INVALID_VALUE;
		}
	}
	for (const lt_layout *l : all)
		if (l->type != CUDA_R_32F)
			return CUBLAS_STATUS_NOT_SUPPORTED;
	if (!is_fp32_compute(q.compute) || q.scale != CUDA_R_32F ||
	    (q.bias_type != -1 && q.bias_type != CUDA_R_32F))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	if (q.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
		return CUBLAS_STATUS_NOT_SUPPORTED; /* device pointer modes: not modelled */
	if (!offered(q.epilogue))
		return CUBLAS_STATUS_NOT_SUPPORTED;
	return CUBLAS_STATUS_SUCCESS;
}

/*
 * The heuristic's own rule, as the project's H100 run showed cuBLAS choosing
 * (split-K GEMMs with a separate cublasLt::splitKreduce_kernel where k is long
 * against m x n; NVIDIA documents no rule): split-K first when k^2 > 4 m n,
 * into min(8, k) parts; then no split-K; split-K in place last (candidates()).
 */
static int64_t splitk_parts(const lt_problem &p)
{
	if (p.m == 0 || p.n == 0 || p.k < 2 || (double)p.k * (double)p.k <= 4.0 * (double)p.m * (double)p.n)
		return 1;
	return p.k < 8 ? p.k : 8;
}

/* The workspace an algorithm needs for a problem: partial products, or in-place counters. */
static size_t workspace_needed(const lt_algo &a, const lt_problem &p)
{
	if (a.splitk <= 1)
		return 0;
	if (a.scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE) {
		size_t tiles = (size_t)((p.m + 31) / 32) * (size_t)((p.n + 31) / 32);
		return (tiles * sizeof(int32_t) + 255) / 256 * 256;
	}
	return (size_t)a.splitk * (size_t)p.m * (size_t)p.n * sizeof(float);
}

static lt_algo make_algo(int32_t splitk, uint32_t scheme)
{
	lt_algo a = {};
	a.magic = algo_magic;
	a.id = splitk > 1 ? 1 : 0;
	a.splitk = splitk;
	a.scheme = scheme;
	return a;
}

/* The largest power of two dividing p's address, at most 256; 256 for NULL. */
static unsigned alignment_of(const void *p)
{
	unsigned a = 256;
	while (p && a > 1 && ((uintptr_t)p & (a - 1)))
		a >>= 1;
	return a;
}

/* A preference's alignment as a power of two, at most 256 (and at least 1). */
static unsigned alignment_cap(uint32_t v)
{
	unsigned a = 1;
	while (a < 256 && a * 2 <= v)
		a *= 2;
	return a;
}

/* The candidates for a problem, best first, before the preference filters them. */
static std::vector<lt_algo> candidates(const lt_problem &p)
{
	std::vector<lt_algo> out;
	int32_t parts = (int32_t)splitk_parts(p);
	if (parts > 1)
		out.push_back(make_algo(parts, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
	out.push_back(make_algo(1, CUBLASLT_REDUCTION_SCHEME_NONE));
	if (parts > 1)
		out.push_back(make_algo(parts, CUBLASLT_REDUCTION_SCHEME_INPLACE));
	return out;
}

/* ---- the reference ---------------------------------------------------------------------- */

/* What one queued matmul reads and writes, fixed at the call (a graph keeps it). */
struct lt_run {
	lt_problem p;
	lt_algo algo;
	double alpha, beta;
	const float *a, *b, *c;
	float *d;
	float *workspace;
	bool tf32;
};

static double input(float x, bool tf32)
{
	return tf32 ? (double)tf32_round(x) : (double)x;
}

/*
 * Partial products of column j of op(A) op(B): part[s * m + i] is the sum, in
 * double, over the s-th of `parts` consecutive ranges of l, of op(A)[i, l]
 * op(B)[l, j]. A is gathered once into `opa` (m x k, column-major doubles).
 */
static void column_partials(const lt_run &r, const std::vector<double> &opa, int64_t j, int64_t parts,
			    std::vector<double> &part)
{
	const lt_problem &p = r.p;
	part.assign((size_t)(parts * p.m), 0.0);
	for (int64_t s = 0; s < parts; s++) {
		int64_t lo = s * p.k / parts, hi = (s + 1) * p.k / parts;
		double *acc = &part[(size_t)(s * p.m)];
		for (int64_t l = lo; l < hi; l++) {
			float bv = p.tb ? r.b[j + l * p.b.ld] : r.b[l + j * p.b.ld];
			double blj = input(bv, r.tf32);
			const double *col = &opa[(size_t)(l * p.m)];
			for (int64_t i = 0; i < p.m; i++)
				acc[i] += col[i] * blj;
		}
	}
}

static std::vector<double> gather_opa(const lt_run &r)
{
	const lt_problem &p = r.p;
	std::vector<double> opa((size_t)(p.m * p.k));
	for (int64_t l = 0; l < p.k; l++)
		for (int64_t i = 0; i < p.m; i++)
			opa[(size_t)(i + l * p.m)] =
				input(p.ta ? r.a[l + i * p.a.ld] : r.a[i + l * p.a.ld], r.tf32);
	return opa;
}

/* The ReLU bit-mask's layout, the simulator's own (cuBLASLt's is undocumented): bit i + j ld, LSB first. */
static bool mask_get(const void *aux, int64_t ld, int64_t i, int64_t j)
{
	uint64_t bit = (uint64_t)(i + j * ld);
	return (((const uint8_t *)aux)[bit / 8] >> (bit % 8)) & 1u;
}

static void mask_set(void *aux, int64_t ld, int64_t i, int64_t j, bool on)
{
	uint64_t bit = (uint64_t)(i + j * ld);
	uint8_t *byte = &((uint8_t *)aux)[bit / 8];
	*byte = (uint8_t)(on ? *byte | (1u << (bit % 8)) : *byte & ~(1u << (bit % 8)));
}

/*
 * The epilogue on one element: v is alpha op(A) op(B) + beta C rounded to
 * float. Bias is added in float, then ReLU, which gives 0 for NaN as
 * cuBLASLt's ReLU epilogue does (NVIDIA's forum, "Incorrect result of
 * cublasLtMatmul with CUBLASLT_EPILOGUE_RELU when input is NaN").
 */
static float epilogue_elem(const lt_run &r, int64_t i, int64_t j, float v)
{
	const lt_desc &q = r.p.desc;
	if (has_bias_input(q.epilogue))
		v = v + ((const float *)q.bias)[i];
	if (relu(q.epilogue)) {
		bool pass = v > 0.0f; /* false for NaN */
		if (writes_mask(q.epilogue))
			mask_set(q.aux, q.aux_ld, i, j, pass);
		v = pass ? v : 0.0f;
	}
	if (reads_mask(q.epilogue) && !mask_get(q.aux, q.aux_ld, i, j))
		v = 0.0f;
	return v;
}

/* The bias gradients, summed in double and rounded once, after D is complete. */
static void bias_gradients(const lt_run &r)
{
	const lt_problem &p = r.p;
	float *grad = (float *)p.desc.bias;
	switch (p.desc.epilogue) {
	case CUBLASLT_EPILOGUE_DRELU_BGRAD: /* over the columns of D */
		for (int64_t i = 0; i < p.m; i++) {
			double sum = 0.0;
			for (int64_t j = 0; j < p.n; j++)
				sum += r.d[i + j * p.d.ld];
			grad[i] = (float)sum;
		}
		break;
	case CUBLASLT_EPILOGUE_BGRADA: /* over the k columns of op(A): length m */
		for (int64_t i = 0; i < p.m; i++) {
			double sum = 0.0;
			for (int64_t l = 0; l < p.k; l++)
				sum += p.ta ? r.a[l + i * p.a.ld] : r.a[i + l * p.a.ld];
			grad[i] = (float)sum;
		}
		break;
	case CUBLASLT_EPILOGUE_BGRADB: /* over the k rows of op(B): length n */
		for (int64_t j = 0; j < p.n; j++) {
			double sum = 0.0;
			for (int64_t l = 0; l < p.k; l++)
				sum += p.tb ? r.b[j + l * p.b.ld] : r.b[l + j * p.b.ld];
			grad[j] = (float)sum;
		}
		break;
	default:
		break;
	}
}

/* C's element (i, j) scaled by beta; beta == 0 ignores C, whatever it holds. */
static double beta_c(const lt_run &r, int64_t i, int64_t j)
{
	return r.beta == 0.0 ? 0.0 : r.beta * (double)r.c[i + j * r.p.c.ld];
}

/*
 * One operation: the whole matmul (no split, or split-K reduced in place in D,
 * each part added in float), or the reduction of the partial products a
 * previous operation left in the workspace. Every element of D is computed
 * before any is stored, so that C may be D.
 */
static void finish(const lt_run &r, bool from_workspace)
{
	const lt_problem &p = r.p;
	int64_t parts = r.algo.splitk > 1 ? r.algo.splitk : 1;
	std::vector<double> opa, part;
	if (!from_workspace)
		opa = gather_opa(r);
	std::vector<float> out((size_t)(p.m * p.n));
	for (int64_t j = 0; j < p.n; j++) {
		if (!from_workspace)
			column_partials(r, opa, j, parts, part);
		for (int64_t i = 0; i < p.m; i++) {
			float v;
			if (from_workspace) {
				double acc = 0.0;
				for (int64_t s = 0; s < parts; s++)
					acc += r.workspace[(size_t)(s * p.m * p.n + i + j * p.m)];
				v = (float)(r.alpha * acc + beta_c(r, i, j));
			} else if (r.algo.scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE && parts > 1) {
				v = (float)(r.alpha * part[(size_t)i] + beta_c(r, i, j));
				for (int64_t s = 1; s < parts; s++)
					v = (float)((double)v + r.alpha * part[(size_t)(s * p.m + i)]);
			} else {
				double acc = 0.0;
				for (int64_t s = 0; s < parts; s++)
					acc += part[(size_t)(s * p.m + i)];
				v = (float)(r.alpha * acc + beta_c(r, i, j));
			}
			out[(size_t)(i + j * p.m)] = v;
		}
	}
	for (int64_t j = 0; j < p.n; j++)
		for (int64_t i = 0; i < p.m; i++)
			r.d[i + j * p.d.ld] = epilogue_elem(r, i, j, out[(size_t)(i + j * p.m)]);
	bias_gradients(r);
}

/* The first of two operations: each part's products, stored as float in the workspace. */
static void partial_products(const lt_run &r)
{
	const lt_problem &p = r.p;
	std::vector<double> opa = gather_opa(r), part;
	for (int64_t j = 0; j < p.n; j++) {
		column_partials(r, opa, j, r.algo.splitk, part);
		for (int64_t s = 0; s < r.algo.splitk; s++)
			for (int64_t i = 0; i < p.m; i++)
				r.workspace[(size_t)(s * p.m * p.n + i + j * p.m)] = (float)part[(size_t)(s * p.m + i)];
	}
}

/* ---- pointer checks (rule 1): fatal, as an illegal address would be ---------------------- */

static void check_matrix(const char *name, const void *ptr, const lt_layout &l)
{
	if (l.rows == 0 || l.cols == 0)
		return;
	size_t elems = (size_t)(l.cols - 1) * (size_t)l.ld + (size_t)l.rows;
	if (!device_range(ptr, elems * sizeof(float)))
		fatal("cublasLtMatmul: %s (%llu x %llu, leading dimension %lld, %zu floats from its start) "
		      "is not inside one device allocation: %s",
		      name, (unsigned long long)l.rows, (unsigned long long)l.cols, (long long)l.ld, elems,
		      describe(ptr).c_str());
}

static void check_vector(const char *name, const void *ptr, size_t bytes)
{
	if (bytes && !device_range(ptr, bytes))
		fatal("cublasLtMatmul: %s (%zu bytes) is not inside one device allocation: %s", name, bytes,
		      describe(ptr).c_str());
}

/*
 * An algorithm chosen for operands aligned to `want` bytes reads them with
 * loads that wide: a less aligned pointer is a misaligned access on a GPU
 * (the MIN_ALIGNMENT preferences say so: a smaller value excludes algorithms
 * that need more; the bias and mask pointers' alignment the heuristic reads
 * from the descriptor).
 */
static void check_alignment(const char *what, const void *ptr, unsigned want)
{
	if (ptr && alignment_of(ptr) < want)
		fatal("cublasLtMatmul: %s at %p is %u-byte aligned, but the algorithm was chosen for "
		      "%u-byte aligned operands (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, or the "
		      "descriptor's pointer when the heuristic ran): a misaligned address on a GPU",
		      what, ptr, alignment_of(ptr), want);
}

static void check_pointers(const lt_run &r)
{
	const lt_problem &p = r.p;
	const lt_desc &q = p.desc;
	if (p.m == 0 || p.n == 0)
		return;
	if (r.algo.magic == algo_magic) {
		check_alignment("A", r.a, r.algo.align[ALIGN_A]);
		check_alignment("B", r.b, r.algo.align[ALIGN_B]);
		if (r.beta != 0.0)
			check_alignment("C", r.c, r.algo.align[ALIGN_C]);
		check_alignment("D", r.d, r.algo.align[ALIGN_D]);
		if (has_bias_input(q.epilogue) || has_bias_output(q.epilogue))
			check_alignment("the bias", q.bias, r.algo.align[ALIGN_BIAS]);
		if (writes_mask(q.epilogue) || reads_mask(q.epilogue))
			check_alignment("the ReLU bit-mask", q.aux, r.algo.align[ALIGN_AUX]);
	}
	if ((p.k > 0 && r.alpha != 0.0) || q.epilogue == CUBLASLT_EPILOGUE_BGRADA)
		check_matrix("A", r.a, p.a);
	if ((p.k > 0 && r.alpha != 0.0) || q.epilogue == CUBLASLT_EPILOGUE_BGRADB)
		check_matrix("B", r.b, p.b);
	if (r.beta != 0.0)
		check_matrix("C", r.c, p.c);
	check_matrix("D", r.d, p.d);
	if (has_bias_input(q.epilogue) || has_bias_output(q.epilogue))
		check_vector("the bias (CUBLASLT_MATMUL_DESC_BIAS_POINTER)", q.bias,
			     (size_t)(q.epilogue == CUBLASLT_EPILOGUE_BGRADB ? p.n : p.m) * sizeof(float));
	if (writes_mask(q.epilogue) || reads_mask(q.epilogue))
		check_vector("the ReLU bit-mask (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER)", q.aux,
			     (size_t)q.aux_ld * (size_t)p.n / 8);
	check_vector("the workspace", r.workspace, workspace_needed(r.algo, p));
}

} /* namespace cudasim */

using namespace cudasim;

extern "C" {

/* The simulator's cuBLASLt: a version of its own (plans name their library by it). */
size_t cublasLtGetVersion(void)
{
	return 990000;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
	if (!lightHandle)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (init_error() != cudaSuccess)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*lightHandle = new cublasLtContext();
	live.insert(*lightHandle);
	return CUBLAS_STATUS_SUCCESS;
}

/* cuBLASLt's destroy synchronizes the device (its documentation says so). */
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
	if (!lightHandle)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!live.count(lightHandle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	drain_all("cublasLtDestroy");
	live.erase(lightHandle);
	delete lightHandle;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status)
{
	return cublasGetStatusName(status);
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
	return cublasGetStatusString(status);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
					  uint64_t rows, uint64_t cols, int64_t ld)
{
	if (!matLayout)
		return CUBLAS_STATUS_INVALID_VALUE;
	cublasLtMatrixLayout_t l = new cublasLtMatrixLayoutOpaque_t();
	put(l, lt_layout{(int32_t)type, rows, cols, ld});
	live.insert(l);
	*matLayout = l;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
	check_live(matLayout, "cublasLtMatrixLayoutDestroy", "layout");
	live.erase(matLayout);
	delete matLayout;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
					cublasComputeType_t computeType, cudaDataType_t scaleType)
{
	if (!matmulDesc)
		return CUBLAS_STATUS_INVALID_VALUE;
	cublasLtMatmulDesc_t d = new cublasLtMatmulDescOpaque_t();
	lt_desc q = {};
	q.compute = computeType;
	q.scale = scaleType;
	q.pointer_mode = CUBLASLT_POINTER_MODE_HOST;
	q.transa = q.transb = q.transc = CUBLAS_OP_N;
	q.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
	q.bias_type = -1;
	put(d, q);
	live.insert(d);
	*matmulDesc = d;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
	check_live(matmulDesc, "cublasLtMatmulDescDestroy", "matmul descriptor");
	live.erase(matmulDesc);
	delete matmulDesc;
	return CUBLAS_STATUS_SUCCESS;
}

/* Where attribute attr lives in a descriptor and its size; NULL for one the simulator does not take. */
static void *desc_field(lt_desc &q, cublasLtMatmulDescAttributes_t attr, size_t *size)
{
	switch (attr) {
	case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: *size = sizeof(q.compute); return &q.compute;
	case CUBLASLT_MATMUL_DESC_SCALE_TYPE: *size = sizeof(q.scale); return &q.scale;
	case CUBLASLT_MATMUL_DESC_POINTER_MODE: *size = sizeof(q.pointer_mode); return &q.pointer_mode;
	case CUBLASLT_MATMUL_DESC_TRANSA: *size = sizeof(q.transa); return &q.transa;
	case CUBLASLT_MATMUL_DESC_TRANSB: *size = sizeof(q.transb); return &q.transb;
	case CUBLASLT_MATMUL_DESC_TRANSC: *size = sizeof(q.transc); return &q.transc;
	case CUBLASLT_MATMUL_DESC_EPILOGUE: *size = sizeof(q.epilogue); return &q.epilogue;
	case CUBLASLT_MATMUL_DESC_BIAS_POINTER: *size = sizeof(q.bias); return &q.bias;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: *size = sizeof(q.aux); return &q.aux;
	case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: *size = sizeof(q.aux_ld); return &q.aux_ld;
	case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: *size = sizeof(q.bias_type); return &q.bias_type;
	}
	return NULL;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
					      cublasLtMatmulDescAttributes_t attr, const void *buf,
					      size_t sizeInBytes)
{
	if (!matmulDesc || !buf)
		return CUBLAS_STATUS_INVALID_VALUE;
	check_live(matmulDesc, "cublasLtMatmulDescSetAttribute", "matmul descriptor");
	lt_desc q = get<lt_desc>(matmulDesc);
	size_t size = 0;
	void *field = desc_field(q, attr, &size);
	if (!field || size != sizeInBytes)
		return CUBLAS_STATUS_INVALID_VALUE;
	memcpy(field, buf, size);
	put(matmulDesc, q);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
					      cublasLtMatmulDescAttributes_t attr, void *buf,
					      size_t sizeInBytes, size_t *sizeWritten)
{
	if (!matmulDesc)
		return CUBLAS_STATUS_INVALID_VALUE;
	check_live(matmulDesc, "cublasLtMatmulDescGetAttribute", "matmul descriptor");
	lt_desc q = get<lt_desc>(matmulDesc);
	size_t size = 0;
	void *field = desc_field(q, attr, &size);
	if (!field || (sizeInBytes == 0 && !sizeWritten) || (sizeInBytes && (!buf || sizeInBytes != size)))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (sizeInBytes)
		memcpy(buf, field, size);
	if (sizeWritten)
		*sizeWritten = size;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
	if (!pref)
		return CUBLAS_STATUS_INVALID_VALUE;
	cublasLtMatmulPreference_t p = new cublasLtMatmulPreferenceOpaque_t();
	put(p, lt_pref{CUBLASLT_SEARCH_BEST_FIT, CUBLASLT_REDUCTION_SCHEME_MASK, 0,
		       {256, 256, 256, 256}});
	live.insert(p);
	*pref = p;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
	check_live(pref, "cublasLtMatmulPreferenceDestroy", "preference");
	live.erase(pref);
	delete pref;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
						    cublasLtMatmulPreferenceAttributes_t attr,
						    const void *buf, size_t sizeInBytes)
{
	if (!pref || !buf)
		return CUBLAS_STATUS_INVALID_VALUE;
	check_live(pref, "cublasLtMatmulPreferenceSetAttribute", "preference");
	lt_pref p = get<lt_pref>(pref);
	switch (attr) {
	case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
		if (sizeInBytes != sizeof(p.search_mode))
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&p.search_mode, buf, sizeInBytes);
		break;
	case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
		if (sizeInBytes != sizeof(p.max_workspace))
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&p.max_workspace, buf, sizeInBytes);
		break;
	case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
		if (sizeInBytes != sizeof(p.reduction_mask))
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&p.reduction_mask, buf, sizeInBytes);
		break;
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
	case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
		uint32_t v;
		if (sizeInBytes != sizeof(v))
			return CUBLAS_STATUS_INVALID_VALUE;
		memcpy(&v, buf, sizeof(v));
		p.align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
		break;
	}
	default:
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	put(pref, p);
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
					      cublasLtMatmulDesc_t operationDesc,
					      cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
					      cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
					      cublasLtMatmulPreference_t preference,
					      int requestedAlgoCount,
					      cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
					      int *returnAlgoCount)
{
	const char *call = "cublasLtMatmulAlgoGetHeuristic";
	if (!lightHandle || !live.count(lightHandle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount || !preference)
		return CUBLAS_STATUS_INVALID_VALUE;
	*returnAlgoCount = 0;
	check_live(preference, call, "preference");
	lt_problem p;
	cublasStatus_t rc = describe_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, call, &p);
	if (rc != CUBLAS_STATUS_SUCCESS)
		return rc;
	lt_pref pref = get<lt_pref>(preference);
	if (pref.search_mode != CUBLASLT_SEARCH_BEST_FIT)
		return CUBLAS_STATUS_NOT_SUPPORTED;
	int found = 0;
	for (const lt_algo &a : candidates(p)) {
		size_t need = workspace_needed(a, p);
		if (found == requestedAlgoCount || need > pref.max_workspace ||
		    (a.scheme != CUBLASLT_REDUCTION_SCHEME_NONE && !(a.scheme & pref.reduction_mask)))
			continue;
		cublasLtMatmulHeuristicResult_t &out = heuristicResultsArray[found++];
		memset(&out, 0, sizeof(out));
		lt_algo chosen = a;
		for (int i = ALIGN_A; i <= ALIGN_D; i++)
			chosen.align[i] = (uint16_t)alignment_cap(pref.align[i]);
		chosen.align[ALIGN_BIAS] = (uint16_t)alignment_of(p.desc.bias);
		chosen.align[ALIGN_AUX] = (uint16_t)alignment_of(p.desc.aux);
		put(&out.algo, chosen);
		out.workspaceSize = need;
		out.state = CUBLAS_STATUS_SUCCESS;
		out.wavesCount = 1.0f;
	}
	*returnAlgoCount = found;
	return found ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
						    cublasLtMatmulAlgoConfigAttributes_t attr,
						    void *buf, size_t sizeInBytes,
						    size_t *sizeWritten)
{
	if (!algo)
		return CUBLAS_STATUS_INVALID_VALUE;
	lt_algo a = get<lt_algo>(algo);
	const void *field;
	size_t size;
	switch (attr) {
	case CUBLASLT_ALGO_CONFIG_ID: field = &a.id; size = sizeof(a.id); break;
	case CUBLASLT_ALGO_CONFIG_TILE_ID: field = &a.tile; size = sizeof(a.tile); break;
	case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: field = &a.splitk; size = sizeof(a.splitk); break;
	case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: field = &a.scheme; size = sizeof(a.scheme); break;
	case CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING: field = &a.swizzle; size = sizeof(a.swizzle); break;
	case CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION: field = &a.custom; size = sizeof(a.custom); break;
	case CUBLASLT_ALGO_CONFIG_STAGES_ID: field = &a.stages; size = sizeof(a.stages); break;
	case CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID:
		field = &a.inner_shape;
		size = sizeof(a.inner_shape);
		break;
	case CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID:
		field = &a.cluster_shape;
		size = sizeof(a.cluster_shape);
		break;
	default:
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if ((sizeInBytes == 0 && !sizeWritten) || (sizeInBytes && (!buf || sizeInBytes != size)))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (sizeInBytes)
		memcpy(buf, field, size);
	if (sizeWritten)
		*sizeWritten = size;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
			      const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
			      const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
			      const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
			      cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
			      void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
	const char *call = "cublasLtMatmul";
	if (!lightHandle || !live.count(lightHandle))
		return CUBLAS_STATUS_NOT_INITIALIZED;
	if (!alpha || !beta || !D)
		return CUBLAS_STATUS_INVALID_VALUE;
	lt_run r;
	cublasStatus_t rc = describe_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, call, &r.p);
	if (rc != CUBLAS_STATUS_SUCCESS)
		return rc;
	const lt_problem &p = r.p;
	/* In place only with C's layout D's; out of place C and D are different buffers. */
	if (C == D && (p.c.ld != p.d.ld || p.c.rows != p.d.rows || p.c.cols != p.d.cols))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (algo) {
		r.algo = get<lt_algo>(algo);
		if (r.algo.magic != algo_magic || r.algo.splitk < 1 || r.algo.splitk > (p.k > 1 ? p.k : 1))
			return CUBLAS_STATUS_INVALID_VALUE; /* not an algorithm the heuristic gave for this problem */
	} else {
		/* No algorithm: cuBLASLt asks its heuristic, with the default preference (no workspace). */
		for (const lt_algo &a : candidates(p))
			if (workspace_needed(a, p) == 0) {
				r.algo = a;
				break;
			}
	}
	size_t need = workspace_needed(r.algo, p);
	if (workspaceSizeInBytes < need)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (workspaceSizeInBytes && ((uintptr_t)workspace & 255))
		return CUBLAS_STATUS_INVALID_VALUE; /* 256-byte alignment, as documented */
	if (p.m == 0 || p.n == 0)
		return CUBLAS_STATUS_SUCCESS;
	/* Host pointer mode: the scalars are read now, and a graph keeps these values. */
	r.alpha = *(const float *)alpha;
	r.beta = *(const float *)beta;
	r.a = (const float *)A;
	r.b = (const float *)B;
	r.c = (const float *)(C ? C : D);
	r.d = (float *)D;
	r.workspace = (float *)workspace;
	r.tf32 = p.desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && !tf32_disabled();
	check_pointers(r);
	bool two = r.algo.splitk > 1 && (r.algo.scheme == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE ||
					 r.algo.scheme == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
	std::string what = r.tf32 ? "cublasLtMatmul (TF32)" : "cublasLtMatmul";
	/*
	 * The time model (rule 10): the GEMM kernel over its blocks (32 x 32
	 * tiles of D, times the split-K parts); the separate reduction kernel of
	 * a COMPUTE_TYPE or OUTPUT_TYPE split; a bias-gradient epilogue as the
	 * separate kernel the H100 runs (epilogue::globalKernelBgradAB).
	 */
	double parts = r.algo.splitk > 1 ? (double)r.algo.splitk : 1.0;
	gemm_cost g = gemm_model((double)p.m, (double)p.n, (double)p.k, parts);
	uint32_t ep = p.desc.epilogue;
	bool bgrad = ep == CUBLASLT_EPILOGUE_DRELU_BGRAD || ep == CUBLASLT_EPILOGUE_BGRADA ||
		     ep == CUBLASLT_EPILOGUE_BGRADB;
	double bg_out = ep == CUBLASLT_EPILOGUE_BGRADB ? (double)p.n : (double)p.m;
	double bg_len = ep == CUBLASLT_EPILOGUE_BGRADA || ep == CUBLASLT_EPILOGUE_BGRADB ? (double)p.k
									      : (double)p.n;
	char shape[160];
	snprintf(shape, sizeof(shape), " m=%lld n=%lld k=%lld, %g block%s of k=%g%s",
		 (long long)p.m, (long long)p.n, (long long)p.k, g.blocks, g.blocks == 1 ? "" : "s",
		 g.k_per_block, parts > 1 ? (two ? ", split-K" : ", split-K in place") : "");
	/* Its kernel (rule 10's lazy loading): one per algorithm, tile, stages and epilogue. */
	char kernel[160];
	snprintf(kernel, sizeof(kernel), "%s algo %d tile %d stages %d epilogue %u", what.c_str(),
		 (int)r.algo.id, (int)r.algo.tile, (int)r.algo.stages, (unsigned)ep);
	if (two) {
		op first;
		first.label = what + " (split-K partial products)";
		first.module = kernel;
		first.run = [r]() {
			check_pointers(r);
			partial_products(r);
		};
		first.us = g.us;
		first.share = gemm_share(g);
		first.detail = what + " (split-K partial products)" + shape;
		if (submit(stream, std::move(first)) != cudaSuccess)
			return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	op last;
	last.label = two ? what + " (split-K reduction)" : what;
	last.run = [r, two]() {
		check_pointers(r);
		finish(r, two);
	};
	last.us = two ? splitk_reduce_us((double)p.m, (double)p.n, parts) : g.us;
	/* The reduction: a thread per element of D, 256 a block, 8 blocks an SM. */
	last.share = two ? sm_share(ceil((double)p.m * p.n / 256.0), 8.0) : gemm_share(g);
	last.detail = two ? what + " (split-K reduction)" + shape : what + shape;
	last.module = two ? what + " split-K reduction" : std::string(kernel);
	if (bgrad) {
		last.us += bgrad_us(bg_out, bg_len);
		last.kernels += 1;
		last.detail += " + bias-gradient kernel";
	}
	return submit(stream, std::move(last)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
							       : CUBLAS_STATUS_EXECUTION_FAILED;
}

} /* extern "C" */
