/*
 * test_plan_json.c - the CUDA backend's plan as text (cuda/plan_json.c: what
 * the program stores in --metrics and checkpoints and hands back without
 * reading): a plan written and read back, candidates and all or as a
 * checkpoint keeps it; a plan of the version before versions (no "version")
 * read as version 1, another version refused; each damage refused with a
 * message that says where; the table for people. Compiled by the host C
 * compiler, as the module compiles it (label unit).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "plan_json.h"

#define ERRLEN 512

/* A plan of two ops, as the CUDA backend records one. */
static void two_op_plan(struct plan_info *p, struct plan_op ops[2])
{
	memset(p, 0, sizeof(*p));
	memset(ops, 0, 2 * sizeof(ops[0]));
	snprintf(p->device, sizeof(p->device), "NVIDIA H100 80GB HBM3");
	snprintf(p->library, sizeof(p->library), "cublasLt 130100");
	snprintf(p->launch, sizeof(p->launch), "programmatic dependent launch");
	p->measure_ms = 12.25;
	p->warm_ms = 3.5;
	for (int i = 0; i < 2; i++) {
		snprintf(ops[i].op, sizeof(ops[i].op), i ? "head" : "gemm");
		snprintf(ops[i].key, sizeof(ops[i].key), "nt m=%d n=25 k=200704 epi=0", 6 + i);
		snprintf(ops[i].shape, sizeof(ops[i].shape), "nt %dx25x200704 bias_grad", 6 + i);
		snprintf(ops[i].chosen, sizeof(ops[i].chosen), "lt.bgradb.a%d.t15.s3.k8.r1", i);
		snprintf(ops[i].source, sizeof(ops[i].source), "measured");
		ops[i].n_candidates = 2;
		snprintf(ops[i].cand[0].name, sizeof(ops[i].cand[0].name), "%s", ops[i].chosen);
		ops[i].cand[0].us = 12.5;
		ops[i].cand[0].first_us = 18.0;
		snprintf(ops[i].cand[1].name, sizeof(ops[i].cand[1].name), "sgemm+bg.gemv");
		ops[i].cand[1].us = -1.0; /* not timed */
		ops[i].cand[1].first_us = -1.0;
	}
	p->n_ops = 2;
	p->ops = ops;
}

Test(plan_json, round_trip_with_candidates)
{
	struct plan_info p, back;
	struct plan_op ops[2];
	char err[ERRLEN] = "";
	two_op_plan(&p, ops);
	char *text = plan_json_dump(&p, 1);
	cr_expect(strncmp(text, "{\"version\": 1, ", 15) == 0, "the version first: %s", text);
	cr_assert_eq(plan_json_parse(text, &back, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_expect_str_eq(back.device, p.device);
	cr_expect_str_eq(back.library, p.library);
	cr_assert_eq(back.n_ops, 2);
	for (int i = 0; i < 2; i++) {
		cr_expect_str_eq(back.ops[i].op, ops[i].op);
		cr_expect_str_eq(back.ops[i].key, ops[i].key);
		cr_expect_str_eq(back.ops[i].shape, ops[i].shape);
		cr_expect_str_eq(back.ops[i].chosen, ops[i].chosen);
		cr_expect_str_eq(back.ops[i].source, "measured");
		cr_assert_eq(back.ops[i].n_candidates, 2);
		cr_expect_str_eq(back.ops[i].cand[1].name, "sgemm+bg.gemv");
		cr_expect_eq(back.ops[i].cand[0].us, 12.5);
		cr_expect_eq(back.ops[i].cand[0].first_us, 18.0);
		cr_expect_lt(back.ops[i].cand[1].us, 0.0, "untimed stays untimed");
		cr_expect_lt(back.ops[i].cand[1].first_us, 0.0);
	}
	plan_json_free(&back);
	cr_expect_null(back.ops);
	free(text);
}

Test(plan_json, kept_as_a_checkpoint_keeps_it)
{
	struct plan_info p, back;
	struct plan_op ops[2];
	char err[ERRLEN] = "";
	two_op_plan(&p, ops);
	char *text = plan_json_dump(&p, 0);
	cr_expect_null(strstr(text, "candidates"), "a checkpoint keeps no candidates: %s", text);
	cr_expect_null(strstr(text, "measure_ms"), "nor the times: %s", text);
	cr_assert_eq(plan_json_parse(text, &back, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_assert_eq(back.n_ops, 2);
	cr_expect_str_eq(back.ops[1].chosen, ops[1].chosen);
	cr_expect_eq(back.ops[1].n_candidates, 0);
	plan_json_free(&back);
	free(text);
}

Test(plan_json, versions)
{
	struct plan_info back;
	char err[ERRLEN] = "";
	/* Checkpoints written before plans had a version: version 1. */
	const char *old = "{\"device\": \"x\", \"library\": \"y\", \"ops\": [{\"op\": \"gemm\", "
			  "\"key\": \"k\", \"shape\": \"s\", \"chosen\": \"c\", \"source\": \"measured\"}]}";
	cr_assert_eq(plan_json_parse(old, &back, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_expect_str_eq(back.ops[0].chosen, "c");
	plan_json_free(&back);
	const char *later = "{\"version\": 2, \"device\": \"x\", \"library\": \"y\", \"ops\": []}";
	cr_expect_eq(plan_json_parse(later, &back, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "\"version\" is not 1") != NULL, "%s", err);
	cr_expect_null(back.ops);
}

Test(plan_json, damage_is_bad_input)
{
	const struct {
		const char *text, *says;
	} damaged[] = {
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": [", "not JSON"},
		{"[1, 2]", "not a JSON object"},
		{"{\"library\": \"y\", \"ops\": []}", "the plan: \"device\" is missing"},
		{"{\"device\": \"x\", \"library\": \"y\"}", "the plan: \"ops\" is missing"},
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": {}}", "\"ops\" is not an array"},
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": [7]}", "the plan's op 0 is not an object"},
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": [{\"op\": \"gemm\", \"shape\": \"s\", "
		 "\"chosen\": \"c\", \"source\": \"measured\"}]}",
		 "the plan's op 0: \"key\" is missing"},
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": [{\"op\": \"gemm\", \"key\": \"k\", "
		 "\"shape\": \"s\", \"chosen\": 3, \"source\": \"measured\"}]}",
		 "the plan's op 0: \"chosen\" is not a string"},
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": [{\"op\": \"gemm\", \"key\": \"k\", "
		 "\"shape\": \"s\", \"chosen\": \"c\", \"source\": \"measured\", \"candidates\": [{}]}]}",
		 "the plan's op 0's candidate 0: \"name\" is missing"},
		{"{\"device\": \"x\", \"library\": \"y\", \"ops\": [{\"op\": \"gemm\", \"key\": \"k\", "
		 "\"shape\": \"s\", \"chosen\": \"c\", \"source\": \"a source longer than sixteen\"}]}",
		 "\"source\" is 28 bytes long, expected at most 15"},
	};
	for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
		struct plan_info back;
		char err[ERRLEN] = "";
		cr_expect_eq(plan_json_parse(damaged[i].text, &back, err, sizeof(err)), STATUS_BAD_INPUT,
			     "plan %zu", i);
		cr_expect(strstr(err, damaged[i].says) != NULL, "plan %zu: expected '%s' in: %s", i,
			  damaged[i].says, err);
		cr_expect_null(back.ops, "plan %zu: nothing left to free", i);
	}
	/* Too many candidates for an op: refused, never written past the record. */
	char *many = malloc(8192);
	cr_assert_not_null(many);
	int at = snprintf(many, 8192, "{\"device\": \"x\", \"library\": \"y\", \"ops\": [{\"op\": \"gemm\", "
				  "\"key\": \"k\", \"shape\": \"s\", \"chosen\": \"c\", \"source\": \"m\", "
				  "\"candidates\": [");
	for (int i = 0; i <= PLAN_MAX_CANDIDATES; i++)
		at += snprintf(many + at, 8192 - (size_t)at, "%s{\"name\": \"w%d\"}", i ? ", " : "", i);
	snprintf(many + at, 8192 - (size_t)at, "]}]}");
	struct plan_info back;
	char err[ERRLEN] = "";
	cr_expect_eq(plan_json_parse(many, &back, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "an array of at most 64") != NULL, "%s", err);
	free(many);
}

Test(plan_json, table)
{
	struct plan_info p;
	struct plan_op ops[2];
	two_op_plan(&p, ops);
	char *table = plan_json_table(&p);
	cr_expect(strstr(table, "plan: 2 ops on NVIDIA H100 80GB HBM3 (cublasLt 130100)\n") != NULL,
		  "%s", table);
	cr_expect(strstr(table, "gemm nt 6x25x200704 bias_grad") != NULL, "%s", table);
	cr_expect(strstr(table, "12.50  lt.bgradb.a0.t15.s3.k8.r1") != NULL, "%s", table);
	cr_expect(strstr(table, "measured in 12.2 ms") != NULL, "%s", table);
	free(table);
}
