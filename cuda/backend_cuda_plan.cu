/*
 * backend_cuda_plan.cu - the CUDA backend's plan and switches as the program
 * sees them (include/backend.h: ->plan_text, ->plan_follow, ->set): the plan
 * as its text (cuda/plan_json.c), a given plan followed where every rank's
 * GPU and library are its own, rank 0's choices shared with every rank, and
 * the switches. The plan itself is cuda/plan.cu's.
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_ctx.cuh"
#include "check.h"
#include "cuda_check.cuh"
#include "kernels.h"
#include "plan_json.h"

void cuda_share_choice(void *arg, int *index, char name[PLAN_NAME_LEN])
{
	struct cuda_ctx *c = (struct cuda_ctx *)arg;
	struct {
		int index;
		char name[PLAN_NAME_LEN];
	} msg;
	memset(&msg, 0, sizeof(msg));
	msg.index = *index;
	snprintf(msg.name, sizeof(msg.name), "%s", name);
	MPI_CHECK(MPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, c->dist->comm));
	*index = msg.index;
	snprintf(name, PLAN_NAME_LEN, "%s", msg.name);
}

void cuda_drain_stream(void *arg)
{
	cuda_wait((struct cuda_ctx *)arg);
}

/* The plan so far as a record: the entries, the device, the library, how kernels launch. */
static void plan_record(struct cuda_ctx *c, struct plan_info *out)
{
	memset(out, 0, sizeof(*out));
	plan_get(&c->plan, out);
	cuda_gemm_library(out->library, sizeof(out->library));
	snprintf(out->device, sizeof(out->device), "%s", c->name);
	snprintf(out->launch, sizeof(out->launch), "%s; %s",
		 kernels_pdl ? "programmatic dependent launch"
		 : c->pdl_able ? "plain launches (--no-pdl)" : c->pdl_note,
		 c->side_on ? "weight gradients on a second stream"
		 : c->side_able ? "one stream (--no-side-stream)" : c->side_note);
}

char *cuda_plan_text(void *ctx, enum plan_text_kind kind)
{
	struct plan_info p;
	plan_record(ctx_of(ctx), &p);
	return kind == PLAN_TABLE ? plan_json_table(&p) : plan_json_dump(&p, kind == PLAN_RECORD);
}

/*
 * Collective: a plan is followed only where every rank's GPU and library are
 * the ones it was measured on; otherwise no rank takes any of it (each op is
 * measured anew, rank 0 choosing for all), and why names the first rank that
 * differs and how. Text that is no plan is refused on every rank alike (every
 * rank reads the same text).
 */
int cuda_plan_follow(void *ctx, const char *text, const char *source, char *why,
			    size_t whylen)
{
	struct cuda_ctx *c = ctx_of(ctx);
	struct plan_info in;
	char lib[sizeof(in.library)], mine[256] = "";
	if (plan_json_parse(text, &in, why, whylen))
		return 2;
	for (int i = 0; i < in.n_ops; i++)
		snprintf(in.ops[i].source, sizeof(in.ops[i].source), "%s", source);
	cuda_gemm_library(lib, sizeof(lib));
	if (strcmp(in.device, c->name))
		snprintf(mine, sizeof(mine), "the plan is for %s, rank %d's GPU is %s", in.device,
			 c->dist->rank, c->name);
	else if (strcmp(in.library, lib))
		snprintf(mine, sizeof(mine), "the plan is for %s, rank %d's is %s", in.library,
			 c->dist->rank, lib);
	/*
	 * The agreement blocks the host: first the collectives queued before it
	 * complete on this rank too (as before a plan's timing), where a peer may
	 * be waiting for them.
	 */
	cuda_wait(c);
	int first = cuda_agree(c->dist, mine[0] != '\0');
	if (first >= 0) {
		MPI_CHECK(MPI_Bcast(mine, (int)sizeof(mine), MPI_CHAR, first, c->dist->comm));
		snprintf(why, whylen, "%s", mine);
	}
	plan_set(&c->plan, first < 0 ? &in : NULL); /* all of it, or nothing of it */
	plan_json_free(&in);
	return first < 0 ? 0 : 1;
}

int cuda_set(void *ctx, enum backend_switch sw, int value)
{
	struct cuda_ctx *c = ctx_of(ctx);
	switch (sw) {
	case BACKEND_TF32: {
		c->gemm.tf32 = value != 0;
		/* cublasSgemm, where cuBLASLt has no algorithm: each handle's math mode. */
		cublasMath_t mode = value ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
		CUBLAS_CHECK(cublasSetMathMode(c->gemm.blas, mode));
		if (c->side.blas)
			CUBLAS_CHECK(cublasSetMathMode(c->side.blas, mode));
		return 0;
	}
	case BACKEND_PDL:
		kernels_set_pdl(value && c->pdl_able);
		return 0;
	case BACKEND_SIDE_STREAM:
		cuda_join(c);
		c->side_on = value && c->side_able;
		return 0;
	case BACKEND_PLAN_POLICY:
		c->plan.policy = (enum plan_policy)value;
		return 0;
	case BACKEND_PLAN_COLLECTIVE:
		c->plan.collective = value != 0;
		return 0;
	}
	return -1;
}
