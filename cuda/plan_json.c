/* plan_json.c - the CUDA backend's plan as JSON and as a table: see cuda/plan_json.h. */
#include "plan_json.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Flags every dump uses: one line ("key": value, as the other metrics lines), keys in the order set. */
#define PLAN_JSON_FLAGS JSON_PRESERVE_ORDER

static json_t *op_json(const struct plan_op *o, int with_candidates)
{
	json_t *j = json_object();
	json_object_set_new(j, "op", json_string(o->op));
	json_object_set_new(j, "key", json_string(o->key));
	json_object_set_new(j, "shape", json_string(o->shape));
	json_object_set_new(j, "chosen", json_string(o->chosen));
	json_object_set_new(j, "source", json_string(o->source));
	if (with_candidates) {
		json_t *cands = json_array();
		for (int i = 0; i < o->n_candidates; i++) {
			json_t *c = json_object();
			json_object_set_new(c, "name", json_string(o->cand[i].name));
			json_object_set_new(c, "us", o->cand[i].us >= 0.0 ? json_real(o->cand[i].us)
									   : json_null());
			if (o->cand[i].first_us >= 0.0)
				json_object_set_new(c, "first_us", json_real(o->cand[i].first_us));
			json_array_append_new(cands, c);
		}
		json_object_set_new(j, "candidates", cands);
	}
	return j;
}

char *plan_json_dump(const struct plan_info *p, int with_candidates)
{
	json_t *root = json_object();
	json_object_set_new(root, "version", json_integer(PLAN_JSON_VERSION));
	json_object_set_new(root, "device", json_string(p->device));
	json_object_set_new(root, "library", json_string(p->library));
	json_t *ops = json_array();
	for (int i = 0; i < p->n_ops; i++)
		json_array_append_new(ops, op_json(&p->ops[i], with_candidates));
	json_object_set_new(root, "ops", ops);
	if (with_candidates && p->measure_ms >= 0.0)
		json_object_set_new(root, "measure_ms", json_real(p->measure_ms));
	if (with_candidates && p->warm_ms >= 0.0)
		json_object_set_new(root, "warm_ms", json_real(p->warm_ms));
	if (with_candidates && p->launch[0])
		json_object_set_new(root, "launch", json_string(p->launch));
	char *text = json_dumps(root, PLAN_JSON_FLAGS);
	json_decref(root);
	if (!text)
		die(1, "out of memory writing the GPU plan as JSON");
	return text;
}

/* A string member of o, at most len - 1 bytes, into buf: 0, or 1 with err filled. */
static int get_string(json_t *o, const char *name, const char *where, char *buf, size_t len,
		      char *err, size_t errlen)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_string(v)) {
		status_fail(err, errlen, STATUS_BAD_INPUT, "%s: \"%s\" is %s, expected a string",
			    where, name, v ? "not a string" : "missing");
		return 1;
	}
	if (strlen(json_string_value(v)) >= len) {
		status_fail(err, errlen, STATUS_BAD_INPUT,
			    "%s: \"%s\" is %zu bytes long, expected at most %zu", where, name,
			    strlen(json_string_value(v)), len - 1);
		return 1;
	}
	snprintf(buf, len, "%s", json_string_value(v));
	return 0;
}

/* A number member of o, or -1 where it is null or absent. */
static double get_us(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return json_is_number(v) ? json_number_value(v) : -1.0;
}

/* An op's candidates, when its record has them (a checkpoint's has none): 0, or 1 with err filled. */
static int get_candidates(json_t *o, const char *where, struct plan_op *op, char *err,
			  size_t errlen)
{
	json_t *cands = json_object_get(o, "candidates");
	if (!cands)
		return 0;
	if (!json_is_array(cands) || json_array_size(cands) > PLAN_MAX_CANDIDATES) {
		status_fail(err, errlen, STATUS_BAD_INPUT,
			    "%s: \"candidates\" is not an array of at most %d", where,
			    PLAN_MAX_CANDIDATES);
		return 1;
	}
	for (size_t i = 0; i < json_array_size(cands); i++) {
		json_t *c = json_array_get(cands, i);
		char at[96];
		snprintf(at, sizeof(at), "%s's candidate %zu", where, i);
		if (!json_is_object(c)) {
			status_fail(err, errlen, STATUS_BAD_INPUT, "%s is not an object", at);
			return 1;
		}
		struct plan_candidate *pc = &op->cand[op->n_candidates];
		if (get_string(c, "name", at, pc->name, sizeof(pc->name), err, errlen))
			return 1;
		pc->us = get_us(c, "us");
		pc->first_us = get_us(c, "first_us");
		op->n_candidates++;
	}
	return 0;
}

enum status plan_json_parse(const char *text, struct plan_info *out, char *err, size_t errlen)
{
	json_error_t je;
	enum status rc = STATUS_BAD_INPUT;
	memset(out, 0, sizeof(*out));
	out->measure_ms = -1.0;
	out->warm_ms = -1.0;
	json_t *root = json_loads(text, 0, &je);
	if (!root)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "not JSON (%s, at character %d)",
				   je.text, je.position);
	json_t *ops = json_object_get(root, "ops");
	if (!json_is_object(root)) {
		status_fail(err, errlen, STATUS_BAD_INPUT, "not a JSON object");
		goto out;
	}
	json_t *version = json_object_get(root, "version");
	if (version && (!json_is_integer(version) || json_integer_value(version) != PLAN_JSON_VERSION)) {
		status_fail(err, errlen, STATUS_BAD_INPUT,
			    "the plan: \"version\" is not %d (this build reads plans of version %d; "
			    "a plan without one is of version 1)",
			    PLAN_JSON_VERSION, PLAN_JSON_VERSION);
		goto out;
	}
	if (get_string(root, "device", "the plan", out->device, sizeof(out->device), err, errlen) ||
	    get_string(root, "library", "the plan", out->library, sizeof(out->library), err,
		       errlen))
		goto out;
	if (!json_is_array(ops)) {
		status_fail(err, errlen, STATUS_BAD_INPUT, "the plan: \"ops\" is %s, expected an array",
			    ops ? "not an array" : "missing");
		goto out;
	}
	size_t n = json_array_size(ops);
	if (n > 100000) {
		status_fail(err, errlen, STATUS_BAD_INPUT, "the plan: %zu ops, expected at most 100000",
			    n);
		goto out;
	}
	out->ops = calloc(n ? n : 1, sizeof(*out->ops));
	if (!out->ops)
		die(1, "out of memory reading the GPU plan");
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(ops, i);
		struct plan_op *op = &out->ops[i];
		char where[48];
		snprintf(where, sizeof(where), "the plan's op %zu", i);
		if (!json_is_object(o)) {
			status_fail(err, errlen, STATUS_BAD_INPUT, "%s is not an object", where);
			goto out;
		}
		if (get_string(o, "op", where, op->op, sizeof(op->op), err, errlen) ||
		    get_string(o, "key", where, op->key, sizeof(op->key), err, errlen) ||
		    get_string(o, "shape", where, op->shape, sizeof(op->shape), err, errlen) ||
		    get_string(o, "chosen", where, op->chosen, sizeof(op->chosen), err, errlen) ||
		    get_string(o, "source", where, op->source, sizeof(op->source), err, errlen) ||
		    get_candidates(o, where, op, err, errlen))
			goto out;
		out->n_ops++;
	}
	rc = STATUS_OK;
out:
	json_decref(root);
	if (rc != STATUS_OK)
		plan_json_free(out);
	return rc;
}

void plan_json_free(struct plan_info *p)
{
	free(p->ops);
	p->ops = NULL;
	p->n_ops = 0;
}

/* The table's row: op, how, us, chosen (or a candidate's name); TABLE_ROW_US with us a number. */
#define TABLE_ROW "  %-40s %-13s %10s  %s\n"
#define TABLE_ROW_US "  %-40s %-13s %10.2f  %s\n"

static void print_table(FILE *f, const struct plan_info *p)
{
	fprintf(f, "plan: %d ops on %s (%s)\n", p->n_ops, p->device, p->library);
	if (p->launch[0])
		fprintf(f, "launch: %s\n", p->launch);
	fprintf(f, TABLE_ROW, "op", "how", "us", "chosen");
	for (int i = 0; i < p->n_ops; i++) {
		const struct plan_op *o = &p->ops[i];
		double us = -1.0;
		for (int c = 0; c < o->n_candidates; c++)
			if (!strcmp(o->cand[c].name, o->chosen))
				us = o->cand[c].us;
		char op[48];
		snprintf(op, sizeof(op), "%s %s", o->op, o->shape);
		if (us >= 0.0)
			fprintf(f, TABLE_ROW_US, op, o->source, us, o->chosen);
		else
			fprintf(f, TABLE_ROW, op, o->source, "-", o->chosen);
		for (int c = 0; c < o->n_candidates; c++) {
			if (o->cand[c].us >= 0.0)
				fprintf(f, TABLE_ROW_US, "", "", o->cand[c].us,
					o->cand[c].name);
			else
				fprintf(f, TABLE_ROW, "", "", "-", o->cand[c].name);
		}
	}
	if (p->measure_ms > 0.0)
		fprintf(f, "plan: measured in %.1f ms, beside %.1f ms of each op's first way's first run "
			   "(which an untimed plan pays too)\n",
			p->measure_ms, p->warm_ms > 0.0 ? p->warm_ms : 0.0);
}

char *plan_json_table(const struct plan_info *p)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		die(1, "out of memory writing the GPU plan's table");
	print_table(f, p);
	if (fclose(f) != 0 || !text)
		die(1, "out of memory writing the GPU plan's table");
	return text;
}
