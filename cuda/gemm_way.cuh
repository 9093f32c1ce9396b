/*
 * gemm_way.cuh - what cuda/gemm_lt.cu shares with cuda/gemm_names.cu and
 * cuda/conv_plan.cu: a GEMM problem's key, one way to run it (a plan's
 * candidate), their names, and running a way by itself (a convolution's
 * GEMM-based ways run one).
 */
#ifndef MNIST_DDP_GEMM_WAY_CUH
#define MNIST_DDP_GEMM_WAY_CUH

#include <stddef.h>

#include <cublasLt.h>

#include "backend.h"
#include "plan_record.h"

/* A problem, as far as a plan depends on it. */
struct gemm_key {
	int trans_a, trans_b, m, n, k, lda, ldb, ldc; /* the row-major request's */
	int epilogue, mask, bias_grad, tf32;
	unsigned align_a, align_b, align_c, align_bias;
	int im2col;                 /* B is an x's im2col matrix (struct gemm_im2col): then */
	struct conv_shape conv;     /* its convolution */
	int rows;
};

/* How a bias gradient is summed. */
enum bias_grad_way {
	BIAS_GRAD_NONE = 0, /* the request has none */
	BIAS_GRAD_FUSED,    /* cuBLASLt's BGRADB epilogue */
	BIAS_GRAD_KERNEL,   /* bias_grad_kernel: one thread per sum */
	BIAS_GRAD_GEMV,     /* cublasSgemv of op(A) with a vector of ones */
	BIAS_GRAD_BLOCK,    /* bias_grad_block_kernel: a block's threads per sum */
};

/* One way to run a problem: a candidate. */
struct gemm_way {
	int lt;                         /* 1: cublasLtMatmul with algo; 0: cublasSgemm or ours */
	int ksplit;                     /* > 0: ours, k split into this many chunks (not lt) */
	int tile;                       /* > 0: ours, whole in one kernel, k in steps of this */
	int im2col;                     /* ksplit reading B's entries from the im2col's x */
	cublasLtEpilogue_t lt_epilogue; /* what cuBLASLt does of the epilogue */
	cublasLtMatmulAlgo_t algo;
	int bias_grad;                  /* enum bias_grad_way */
	char name[PLAN_NAME_LEN];
};

/* cuBLASLt's descriptors of a problem with one epilogue. */
struct lt_desc {
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
};

struct cuda_gemm;
struct gemm_req;

/* Algorithms asked of cuBLASLt's heuristic per epilogue. */
#define GEMM_LT_CANDIDATES 8

/* ---- cuBLASLt's side (cuda/gemm_cublaslt.cu) ---- */

/* The pointers epilogue `epi` reads or writes for r, set on its descriptor. */
void gemm_lt_pointers(cublasLtMatmulDesc_t desc, cublasLtEpilogue_t epi, const struct gemm_req *r);
/*
 * The algorithms cuBLASLt's heuristic lists for r (problem k) with `epi`
 * that fit the workspace, in its order, at most `max`: their count.
 */
int gemm_lt_algos(const struct cuda_gemm *g, const struct gemm_req *r, const struct gemm_key *k,
		  cublasLtEpilogue_t epi, cublasLtMatmulAlgo_t *out, int max);

/* ---- the ways (cuda/gemm_lt.cu) ---- */

/* Every way to run r, best guess first (cuda/gemm_lt.cu's file comment): their count. */
int gemm_ways(struct cuda_gemm *g, const struct gemm_req *r, int capturing, struct gemm_way *ways);
/* w's descriptors for r (none for a way not cuBLASLt's): 1, or 0 when cuBLASLt refuses them. */
int gemm_way_desc(const struct cuda_gemm *g, const struct gemm_req *r, const struct gemm_way *w,
		  struct lt_desc *d);
void gemm_way_desc_destroy(struct lt_desc *d);
/* Queue r run as w (with its descriptors d) on g's stream. */
void gemm_way_run(struct cuda_gemm *g, const struct gemm_req *r, const struct gemm_way *w,
		  const struct lt_desc *d);
/* The same on lane's stream, with its cuBLAS handle and workspace. */
void gemm_way_run_on(struct cuda_gemm *g, const struct gemm_lane *lane, const struct gemm_req *r,
		     const struct gemm_way *w, const struct lt_desc *d);
/* The largest power of two dividing p's address, at most 256 (cuBLASLt's alignment preferences). */
unsigned gemm_alignment(const void *p);

/* The key as a plan names it: every field, so equal text means an equal problem. */
void gemm_key_text(const struct gemm_key *k, char *buf, size_t len);
/* For people: "nt 6x25x200704 bias_grad" (m x n x k of the row-major request). */
void gemm_shape_text(const struct gemm_key *k, char *buf, size_t len);
/* w->name from what w runs (gemm_names.cu says how). */
void gemm_way_name(struct gemm_way *w);

#endif /* MNIST_DDP_GEMM_WAY_CUH */
