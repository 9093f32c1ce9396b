/*
 * ways.cuh - every way the CUDA backend has to run an op that plans, in one
 * list (cuda/ways.cu): its name, the op it serves, what it runs, and how it
 * is checked against the host. An op lists its candidates for a problem by
 * walking the list in order (the first candidate is the heuristic's choice);
 * each entry appends its own candidates where they can run the problem.
 * Adding a way is one entry here and its code beside its op's.
 */
#ifndef MNIST_DDP_WAYS_CUH
#define MNIST_DDP_WAYS_CUH

#include "plan.cuh"

struct way_entry {
	int op;              /* enum plan_kind */
	const char *name;    /* its candidates' names */
	const char *runs;    /* what it runs, and where that is */
	const char *checked; /* how its result is checked against the host backend */
	/* Append its candidates to the op's listing (the op's own struct, below). */
	void (*list)(void *listing);
};

extern const struct way_entry way_registry[];
extern const int way_registry_count;

/* Each entry of op's, in the list's order, lists its candidates into `listing`. */
void ways_list(int op, void *listing);

/* The entries' list functions, each beside its op: struct gemm_listing (cuda/gemm_lt.cu), ... */
void gemm_list_lt(void *listing);
void gemm_list_sgemm(void *listing);
void gemm_list_ksplit(void *listing);
void gemm_list_tile(void *listing);
void conv_list_direct(void *listing);   /* struct conv_listing (cuda/conv_plan.cu) */
void conv_list_patch(void *listing);
void conv_list_gemm(void *listing);
void head_list_separate(void *listing); /* struct head_timed (cuda/head_plan.cu) */
void head_list_fused(void *listing);
void head_list_dense(void *listing);
void head_list_grouped(void *listing);

#endif /* MNIST_DDP_WAYS_CUH */
