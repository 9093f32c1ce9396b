/*
 * test_checkpoint.c - the safetensors checkpoint format (host/io/checkpoint_*.c):
 * round trips, corrupt files, the position a resume continues from, and
 * which run a checkpoint fits. Its files (save, load, resume, prune) and the
 * reliability flags: test_checkpoint_dir.c.
 *
 *   ctest --test-dir build -R test_checkpoint --output-on-failure
 *
 * Round trips must be bitwise; every malformed file (truncated at every
 * interesting length, a flipped byte anywhere, each structural defect of the
 * header) must be refused as corrupt (STATUS_BAD_INPUT) with a message naming
 * the file; a file of another model or configuration must be refused naming
 * what differs, and checkpoint_load must tell it from a corrupt one; --resume DIR must fall back past corrupt files with a warning and
 * never past a mismatch; pruning keeps the newest K; --gpu-plan-from reads the
 * plan back from a checkpoint or a --metrics file, refusing damaged ones; the
 * metadata read from the header alone and the parameters extracted alone
 * (--init-from, --eval-only). Files live in a fresh
 * mkdtemp directory per test (Criterion runs each test in its own process).
 * Random inputs come from a seed printed in every failure message.
 */

#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_fixture.h"
#include "io/metrics_read.h"
#include "train/optim.h"

TestSuite(checkpoint, .init = make_tmpdir, .fini = cleanup_tmpdir);

/* ---- round trips ------------------------------------------------------------------ */

Test(checkpoint, round_trip_is_bitwise)
{
	for (int mlp = 0; mlp < 3; mlp++) {
		struct image im;
		make_image(&im, mlp, 45);
		struct checkpoint_info info;
		struct checkpoint_view *view = malloc(sizeof(*view));
		char err[ERRLEN] = "";
		cr_assert_eq(checkpoint_parse(im.buf, im.len, "x", &info, view, err, sizeof(err)),
			     STATUS_OK, "seed %llu: %s", SEED, err);
		cr_expect_eq(header_len(im.buf) % 8, 0, "the data must start 8-aligned");
		cr_expect_eq(view->n_tensors, 2 * model_n_tensors(&im.m));
		cr_expect_eq(view->data_len, 2 * im.m.n_params * 4);
		float *p = calloc(im.m.n_params, sizeof(float));
		float *v = calloc(im.m.n_params, sizeof(float));
		cr_assert_eq(checkpoint_extract(view, &im.m, &info, "x", p, v, err, sizeof(err)), STATUS_OK,
			     "%s", err);
		cr_expect(!memcmp(p, im.params, im.m.n_params * 4), "params differ (seed %llu)", SEED);
		cr_expect(!memcmp(v, im.velocity, im.m.n_params * 4), "velocity differs (seed %llu)", SEED);
		/* The position: global step 45 of 32-step epochs. */
		cr_expect_eq(info.global_step, 45);
		cr_expect_eq(info.steps_per_epoch, 32);
		cr_expect_eq(info.cfg.model, im.c.model);
		if (mlp == 1)
			cr_expect(info.cfg.n_hidden == 2 && info.cfg.hidden[0] == 5 && info.cfg.hidden[1] == 3);
		cr_expect_eq(info.cfg.lr, im.c.lr);
		cr_expect_eq(info.cfg.momentum, im.c.momentum);
		cr_expect_eq(info.cfg.lr_schedule, im.c.lr_schedule);
		cr_expect_eq(info.cfg.warmup_steps, im.c.warmup_steps);
		cr_expect_eq(info.cfg.epochs, 4);
		cr_expect_eq(info.ranks, 2);
		cr_expect_eq(info.cfg.batch_size, 16);
		cr_expect_eq(info.examples, 1000);
		cr_expect_eq(info.train_crc32, 0x12345678u);
		cr_expect_eq(checkpoint_compat(&info, &im.info, "x", err, sizeof(err)), STATUS_OK,
			     "%s", err);
		free(p);
		free(v);
		free(view);
		free_image(&im);
	}
}

Test(checkpoint, layout_is_safetensors)
{
	struct image im;
	make_image(&im, 0, 32);
	size_t h = (size_t)header_len(im.buf);
	char *hdr = strndup((const char *)im.buf + 8, h);
	/* PyTorch's names and (out, in) layout; the velocity under optimizer.; all F32. */
	cr_expect(strstr(hdr, "\"fc0.weight\":{\"dtype\":\"F32\",\"shape\":[10,784],\"data_offsets\":[0,31360]}"),
		  "%s", hdr);
	cr_expect(strstr(hdr, "\"fc0.bias\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[31360,31400]}"),
		  "%s", hdr);
	cr_expect(strstr(hdr, "\"optimizer.fc0.weight\":{\"dtype\":\"F32\",\"shape\":[10,784]"), "%s", hdr);
	cr_expect(strstr(hdr, "\"__metadata__\":{\"format\":\"" CHECKPOINT_FORMAT "\""), "%s", hdr);
	/* Little-endian data in place: fc0.weight[0][0] is the first float. */
	uint32_t u;
	memcpy(&u, &im.params[0], 4);
	const uint8_t *d = im.buf + 8 + h;
	cr_expect(d[0] == (uint8_t)u && d[1] == (uint8_t)(u >> 8) && d[2] == (uint8_t)(u >> 16) &&
		  d[3] == (uint8_t)(u >> 24));
	/* The position is the global step and the steps per epoch, nothing derived. */
	cr_expect(strstr(hdr, "\"global_step\":\"32\",\"steps_per_epoch\":\"32\""), "%s", hdr);
	cr_expect(!strstr(hdr, "next_") && !strstr(hdr, "\"epoch\"") && !strstr(hdr, "sampler_offset"),
		  "%s", hdr);
	/* The settings in their command-line form, from the settings table. */
	cr_expect(strstr(hdr, "\"model\":\"seed\",\"hidden\":\"\",\"epochs\":\"4\",\"batch_size\":\"16\","
			      "\"optimizer\":\"sgd\",\"lr\":\"0.05\",\"momentum\":\"0\","
			      "\"weight_decay\":\"0\",\"beta1\":\"\",\"beta2\":\"\",\"eps\":\"\","
			      "\"clip_grad_norm\":\"\",\"lr_schedule\":\"constant\","
			      "\"warmup_steps\":\"0\",\"seed\":\"1\",\"grad_reduce\":\"mean\","
			      "\"drop_last\":\"off\""),
		  "%s", hdr);
	char err[ERRLEN];
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "x", &info, view, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(info.global_step, 32);
	free(view);
	free(hdr);
	free_image(&im);
}

/* ---- corrupt files ------------------------------------------------------------------ */

/*
 * AdamW: the moments under PyTorch-like names, the update count as a scalar
 * equal to the global step, the optimizer's settings in the metadata; a round
 * trip is bitwise, and an update count that is not the global step is refused.
 */
Test(checkpoint, adamw_state_round_trip)
{
	struct image im;
	make_image(&im, 3, 45);
	size_t n = im.m.n_params;
	size_t h = (size_t)header_len(im.buf);
	char *hdr = strndup((const char *)im.buf + 8, h);
	cr_expect(strstr(hdr, "\"optimizer.fc0.weight.exp_avg\":{\"dtype\":\"F32\",\"shape\":[5,784]"), "%s", hdr);
	cr_expect(strstr(hdr, "\"optimizer.fc2.bias.exp_avg_sq\":{\"dtype\":\"F32\",\"shape\":[10]"), "%s", hdr);
	cr_expect(strstr(hdr, "\"optimizer.step\":{\"dtype\":\"F32\",\"shape\":[],"), "%s", hdr);
	cr_expect(!strstr(hdr, "\"optimizer.fc0.weight\":"), "no SGD velocity in an AdamW file: %s", hdr);
	cr_expect(strstr(hdr, "\"optimizer\":\"adamw\",\"lr\":\"0.05\",\"momentum\":\"\","
			      "\"weight_decay\":\"0.01\",\"beta1\":\"0.9\",\"beta2\":\"0.99\","
			      "\"eps\":\"1e-08\""),
		  "%s", hdr);
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	char err[ERRLEN] = "";
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "x", &info, view, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_expect_eq(view->n_tensors, 3 * model_n_tensors(&im.m) + 1);
	cr_expect_eq(view->data_len, (3 * n + 1) * 4);
	cr_expect_eq(info.cfg.optimizer, OPTIMIZER_ADAMW);
	cr_expect(info.cfg.weight_decay == 0.01f && info.cfg.beta2 == 0.99f && info.cfg.eps == 1e-8f);
	float *p = calloc(n, sizeof(float)), *s = calloc(2 * n, sizeof(float));
	cr_assert_eq(checkpoint_extract(view, &im.m, &info, "x", p, s, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_expect(!memcmp(p, im.params, n * 4), "params differ (seed %llu)", SEED);
	cr_expect(!memcmp(s, im.velocity, 2 * n * 4), "moments differ (seed %llu)", SEED);
	/* The update count is the global step: a file that says otherwise is refused. */
	struct checkpoint_info moved = info;
	moved.global_step = 46;
	cr_expect_eq(checkpoint_extract(view, &im.m, &moved, "x", p, s, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "optimizer.step is 45, but the checkpoint is at global step 46"), "%s", err);
	/* Read as an SGD run's, the tensors do not fit: the moments are not a velocity. */
	struct checkpoint_info as_sgd = info;
	as_sgd.cfg.optimizer = OPTIMIZER_SGD;
	cr_expect_eq(checkpoint_extract(view, &im.m, &as_sgd, "x", p, s, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "no tensor optimizer.fc0.weight, which this model and --optimizer sgd have"),
		  "%s", err);
	/* And a run with the other optimizer is told so by name. */
	struct checkpoint_info run;
	struct train_config sgd = im.c;
	sgd.optimizer = OPTIMIZER_SGD;
	checkpoint_info_from_config(&run, &sgd, 2, 1000, 0x12345678u);
	run.steps_per_epoch = 32;
	cr_expect_eq(checkpoint_compat(&info, &run, "x", err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "--optimizer adamw in the checkpoint, sgd here"), "%s", err);
	free(p);
	free(s);
	free(view);
	free(hdr);
	free_image(&im);
}

/* A checkpoint written before --optimizer existed (no optimizer settings) reads as SGD without weight decay. */
Test(checkpoint, older_checkpoint_reads_as_sgd)
{
	uint8_t *b;
	size_t n = craft(&b, 32, "{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],"
				 "\"data_offsets\":[0,32]}}");
	cr_assert(!strstr((const char *)b + 8, "optimizer"), "the fixture must be an older file");
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	char err[ERRLEN] = "";
	cr_assert_eq(checkpoint_parse(b, n, "old", &info, view, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_expect_eq(info.cfg.optimizer, OPTIMIZER_SGD);
	cr_expect(info.cfg.weight_decay == 0.0f, "weight decay %g", info.cfg.weight_decay);
	cr_expect(info.cfg.clip_grad_norm == 0.0f, "no clipping, not %g", info.cfg.clip_grad_norm);
	/* A value given is still checked. */
	char json[4096];
	snprintf(json, sizeof(json), "{\"__metadata__\":{" META_OK ",\"optimizer\":\"adam\"},\"t\":{"
		 "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}");
	free(b);
	n = craft(&b, 32, "%s", json);
	cr_expect_eq(checkpoint_parse(b, n, "old", &info, view, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "unknown optimizer 'adam'"), "%s", err);
	free(b);
	free(view);
}

/*
 * --clip-grad-norm in the metadata: its value in command-line form, "" when
 * not given (a checkpoint from before the setting lacks the key: the same),
 * read back exactly; a value that is not a positive number is refused.
 */
Test(checkpoint, clip_grad_norm_round_trip)
{
	struct model m;
	struct train_config c;
	struct checkpoint_info info, back;
	uint8_t *buf = NULL;
	size_t len = 0;
	char err[ERRLEN] = "";
	small_model(&m, &c, 0);
	c.clip_grad_norm = 0.25f;
	run_info(&c, &info);
	set_position(&info, 3);
	float *params = random_floats(m.n_params, 1), *state = random_floats(m.n_params, 2);
	cr_assert_eq(checkpoint_encode(&m, &info, params, state, &buf, &len), 0);
	char *hdr = strndup((const char *)buf + 8, (size_t)header_len(buf));
	cr_expect(strstr(hdr, "\"eps\":\"\",\"clip_grad_norm\":\"0.25\",\"lr_schedule\""), "%s", hdr);
	struct checkpoint_view *view = malloc(sizeof(*view));
	cr_assert_eq(checkpoint_parse(buf, len, "x", &back, view, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_expect(back.cfg.clip_grad_norm == 0.25f, "read back as %g", back.cfg.clip_grad_norm);
	cr_expect_eq(checkpoint_compat(&back, &info, "x", err, sizeof(err)), STATUS_OK, "%s", err);
	free(buf);
	free(hdr);

	uint8_t *b;
	size_t n = craft(&b, 32, "{\"__metadata__\":{" META_OK ",\"clip_grad_norm\":\"-1\"},\"t\":{"
				 "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}");
	cr_expect_eq(checkpoint_parse(b, n, "old", &back, view, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "metadata \"clip_grad_norm\": '-1' is not a positive finite number"), "%s",
		  err);
	free(b);
	n = craft(&b, 32, "{\"__metadata__\":{" META_OK ",\"clip_grad_norm\":\"\"},\"t\":{"
			  "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}");
	cr_expect_eq(checkpoint_parse(b, n, "new", &back, view, err, sizeof(err)), STATUS_OK, "%s", err);
	cr_expect(back.cfg.clip_grad_norm == 0.0f, "\"\" reads as not given, not %g",
		  back.cfg.clip_grad_norm);
	free(b);
	free(view);
	free(params);
	free(state);
}

Test(checkpoint, truncated_at_every_boundary)
{
	struct image im;
	make_image(&im, 1, 7);
	size_t h = (size_t)header_len(im.buf);
	size_t cuts[] = {0, 1, 7, 8, 9, 8 + h / 2, 8 + h - 1, 8 + h, 8 + h + 1, 8 + h + 4000,
			 im.len - 4, im.len - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		EXPECT_CORRUPT(im.buf, cuts[i], "truncated");
	free_image(&im);
}

Test(checkpoint, every_flipped_byte_is_found)
{
	struct image im;
	make_image(&im, 1, 7);
	/* Every byte of the header and a spread of data bytes, one bit each. */
	size_t h = (size_t)header_len(im.buf);
	int missed = 0;
	for (size_t i = 0; i < im.len; i += i < 8 + h ? 1 : 97) {
		for (int bit = 0; bit < 8; bit += 3) {
			im.buf[i] ^= (uint8_t)(1u << bit);
			char err[ERRLEN] = "";
			enum status rc = parse_image(im.buf, im.len, err);
			im.buf[i] ^= (uint8_t)(1u << bit);
			if (rc != STATUS_BAD_INPUT) {
				if (missed++ < 5)
					cr_log_error("byte %zu bit %d: rc %d, not corrupt", i, bit, rc);
			}
		}
	}
	cr_expect_eq(missed, 0, "%d flipped bits went unnoticed", missed);
	/* A flipped data bit names the checksum. */
	im.buf[im.len - 10] ^= 0x10;
	EXPECT_CORRUPT(im.buf, im.len, "checksum mismatch");
	free_image(&im);
}

/* --init-from, --eval-only: a checkpoint's model is read from its header before the whole file. */
Test(checkpoint, metadata_from_the_header_alone)
{
	struct image im;
	make_image(&im, 1, 7);
	size_t h = (size_t)header_len(im.buf);
	struct checkpoint_info whole, head;
	struct checkpoint_view *view = malloc(sizeof(*view));
	char err[ERRLEN] = "";
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "ck.safetensors", &whole, view, err, sizeof(err)),
		     STATUS_OK, "%s", err);
	/* The header alone, or the whole file: the same metadata. */
	size_t lens[] = {8 + h, 8 + h + 1, im.len};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		cr_assert_eq(checkpoint_parse_meta(im.buf, lens[i], "ck.safetensors", &head, err,
						   sizeof(err)),
			     STATUS_OK, "%zu bytes: %s", lens[i], err);
		cr_expect(head.global_step == whole.global_step && head.cfg.model == MODEL_MLP &&
				  head.cfg.n_hidden == 2 && head.cfg.hidden[0] == 5 &&
				  head.cfg.hidden[1] == 3 && head.cfg.lr == whole.cfg.lr &&
				  head.ranks == whole.ranks,
			  "%zu bytes: another reading than checkpoint_parse's", lens[i]);
	}
	/* Not the data's checks: a flipped data byte is for the whole read to find. */
	im.buf[im.len - 10] ^= 0x10;
	cr_expect_eq(checkpoint_parse_meta(im.buf, im.len, "ck.safetensors", &head, err, sizeof(err)),
		     STATUS_OK, "%s", err);
	EXPECT_CORRUPT(im.buf, im.len, "checksum mismatch");
	/* A header cut short, one that is not JSON, a metadata value out of range: refused, named. */
	struct {
		const uint8_t *buf;
		size_t len;
		const char *says;
	} bad[] = {
		{im.buf, 8 + h - 1, "truncated"},
		{im.buf, 8 + h / 2, "truncated"},
		{im.buf, 8, "not a checkpoint"},
		{(const uint8_t *)"hello, world", 12, "not a checkpoint"},
		{(const uint8_t *)"", 0, "not a checkpoint"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(checkpoint_parse_meta(bad[i].buf, bad[i].len, "ck.safetensors", &head, err,
						   sizeof(err)),
			     STATUS_BAD_INPUT, "case %zu accepted", i);
		cr_expect(strstr(err, "ck.safetensors") && strstr(err, bad[i].says), "case %zu: %s", i,
			  err);
	}
	uint8_t *copy = malloc(im.len);
	memcpy(copy, im.buf, im.len);
	char *text = calloc(h + 1, 1);
	memcpy(text, copy + 8, h);
	char *lr = strstr(text, "\"lr\":\"0.05\"");
	cr_assert_not_null(lr, "%s", text);
	memcpy(copy + 8 + (lr - text) + 6, "-1.0", 4);
	free(text);
	cr_expect_eq(checkpoint_parse_meta(copy, im.len, "ck.safetensors", &head, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "metadata \"lr\""), "%s", err);
	free(copy);
	free(view);
	free_image(&im);
}

/* --init-from: the parameters alone are copied; the optimizer's tensors are checked, not copied. */
Test(checkpoint, extract_the_parameters_alone)
{
	struct image im;
	make_image(&im, 3, 7); /* AdamW: two moments and the update count */
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	char err[ERRLEN] = "";
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "ck.safetensors", &info, view, err, sizeof(err)),
		     STATUS_OK, "%s", err);
	float *p = calloc(im.m.n_params, sizeof(float));
	cr_assert_eq(checkpoint_extract(view, &im.m, &info, "ck.safetensors", p, NULL, err, sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect(!memcmp(p, im.params, im.m.n_params * sizeof(float)), "the parameters differ");
	/* The file must still hold this model's and its optimizer's tensors exactly. */
	struct model other;
	model_init(&other, MODEL_MLP, (const int[]){5, 4}, 2);
	cr_expect_eq(checkpoint_extract(view, &other, &info, "ck.safetensors", p, NULL, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "fc1.weight is F32 [3, 5], this model has F32 [4, 5]"), "%s", err);
	free(p);
	free(view);
	free_image(&im);
}

Test(checkpoint, header_length_out_of_bounds)
{
	uint8_t buf[64] = {0};
	EXPECT_CORRUPT(buf, sizeof(buf), "header length 0");
	buf[0] = 0xff;
	buf[7] = 0xff; /* 2^64-ish */
	EXPECT_CORRUPT(buf, sizeof(buf), "outside");
	memset(buf, 0, 8);
	buf[0] = 100; /* more than the file */
	EXPECT_CORRUPT(buf, sizeof(buf), "truncated");
}

Test(checkpoint, malformed_headers)
{
	uint8_t *b;
	size_t n;
	/* Each case is one defect in an otherwise valid file of one 8-float tensor. */
	struct {
		const char *json;
		const char *needle;
	} cases[] = {
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}", "'}' expected"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,32]}}", "dtype F16"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[9],\"data_offsets\":[0,32]}}", "needs 36"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", "cover 16 of the 32"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"u\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", "overlap"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"u\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}", "gap"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[32,0]}}", "outside"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32],\"x\":1}}", "unknown key"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8]}}", "lacks"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[08],\"data_offsets\":[0,32]}}", "invalid token"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[-8],\"data_offsets\":[0,32]}}", "non-negative integer"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8.0],\"data_offsets\":[0,32]}}", "fraction"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32,40]}}", "too many entries"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[32,32]}}", "duplicate object key near '\"t\"'"},
		{"{\"__metadata__\":{" META_OK ",\"seed\":\"2\"},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "duplicate object key near '\"seed\"'"},
		{"{\"__metadata__\":{" META_OK ",\"n\":5},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "must be strings"},
		{"{\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "no __metadata__"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}} x", "end of file expected"},
		{"{\"__metadata__\":{" META_OK "},\"t\\ud800\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "invalid Unicode '\\uD800'"},
		{"{\"__metadata__\":{" META_OK "},\"t\\q\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "invalid escape"},
		{"{\"__metadata__\":{\"format\":\"something-else\",\"checksum\":\"crc32:00000000\"},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "format 'something-else'"},
		{"{\"__metadata__\":{\"format\":\"" CHECKPOINT_FORMAT "\",\"checksum\":\"crc32:00000000\"},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "lacks \"global_step\""},
		{"{\"__metadata__\":{\"format\":\"" CHECKPOINT_FORMAT "\"},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "lacks \"checksum\""},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}", "'}' expected"},
		{"[]", "expected '{'"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[99999999999999999],\"data_offsets\":[0,32]}}", "too large"},
		{"{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,32]}}", "larger than the file"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = craft(&b, 32, "%s", cases[i].json);
		EXPECT_CORRUPT(b, n, cases[i].needle);
		free(b);
	}
	/* The control: the same shape, well formed, parses. */
	n = craft(&b, 32, "%s", "{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}  ");
	char err[ERRLEN] = "";
	cr_expect_eq(parse_image(b, n, err), STATUS_OK, "the control must parse: %s", err);
	free(b);
}

Test(checkpoint, inconsistent_metadata)
{
	/* Values that parse as JSON but are out of range, of the wrong form, or contradict each other. */
	const char *subs[][2] = {
		{"\"global_step\":\"1\"", "\"global_step\":\"129\""}, /* past 4 epochs of 32 steps */
		{"\"global_step\":\"1\"", "\"global_step\":\"0\""},
		{"\"global_step\":\"1\"", "\"global_step\":\"-1\""},
		{"\"global_step\":\"1\"", "\"global_step\":\"1.0\""},
		{"\"steps_per_epoch\":\"32\"", "\"steps_per_epoch\":\"0\""},
		{"\"model\":\"seed\"", "\"model\":\"resnet\""},
		{"\"hidden\":\"\"", "\"hidden\":\"5\""},
		{"\"lr\":\"0.05\"", "\"lr\":\"nan\""},
		{"\"lr\":\"0.05\"", "\"lr\":\"0\""},
		{"\"momentum\":\"0\"", "\"momentum\":\"1.5\""},
		{"\"grad_reduce\":\"mean\"", "\"grad_reduce\":\"max\""},
		{"\"lr_schedule\":\"constant\"", "\"lr_schedule\":\"linear\""},
		{"\"lr_schedule\":\"constant\"", "\"lr_schedule\":\"\""},
		{"\"warmup_steps\":\"0\"", "\"warmup_steps\":\"-3\""},
		{"\"warmup_steps\":\"0\"", "\"warmup_steps\":\"x\""},
		{"\"lr_schedule\":\"constant\",", ""},
		{"\"drop_last\":\"off\"", "\"drop_last\":\"0\""},
		{"\"train_crc32\":\"12345678\"", "\"train_crc32\":\"1234567\""},
		{"\"seed\":\"1\"", "\"seed\":\"-1\""},
		{"\"epochs\":\"4\"", "\"epochs\":\"0\""},
		{"\"batch_size\":\"16\"", "\"batch_size\":\"65537\""},
		{"\"ranks\":\"2\"", "\"ranks\":\"0\""},
		{"\"examples\":\"1000\"", "\"examples\":\"\""},
		{"\"epochs\":\"4\",", ""}, /* a setting missing */
		{"\"ranks\":\"2\",", ""},
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		char json[4096];
		snprintf(json, sizeof(json),
			 "{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}");
		char *at = strstr(json, subs[i][0]);
		cr_assert_not_null(at, "%s", subs[i][0]);
		char fixed[4096];
		snprintf(fixed, sizeof(fixed), "%.*s%s%s", (int)(at - json), json, subs[i][1],
			 at + strlen(subs[i][0]));
		uint8_t *b;
		size_t n = craft(&b, 32, "%s", fixed);
		EXPECT_CORRUPT(b, n, "metadata");
		free(b);
	}
}

Test(checkpoint, older_format_is_refused_by_name)
{
	char json[4096];
	snprintf(json, sizeof(json),
		 "{\"__metadata__\":{" META_OK "},\"t\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}");
	char *at = strstr(json, CHECKPOINT_FORMAT);
	cr_assert_not_null(at);
	at[strlen(CHECKPOINT_FORMAT) - 1] = '1';
	uint8_t *b;
	size_t n = craft(&b, 32, "%s", json);
	EXPECT_CORRUPT(b, n, "format 'mnist-ddp-checkpoint-1', expected '" CHECKPOINT_FORMAT
			     "' (a checkpoint of an older build)");
	free(b);
}

/* ---- the position ------------------------------------------------------------------- */

Test(checkpoint, position_a_resume_continues_from)
{
	struct {
		long long gs;
		int spe;
		int epoch, step, next_epoch, next_step;
	} cases[] = {
		{1, 32, 0, 0, 0, 1},        /* after the first step */
		{31, 32, 0, 30, 0, 31},     /* before the last step of an epoch */
		{32, 32, 0, 31, 1, 0},      /* the epoch boundary: the next epoch's first step */
		{33, 32, 1, 0, 1, 1},
		{45, 32, 1, 12, 1, 13},
		{128, 32, 3, 31, 4, 0},     /* the last step of 4 epochs: next is epoch 4, nothing left */
		{1, 1, 0, 0, 1, 0},         /* one step per epoch */
		{7, 1, 6, 0, 7, 0},
		{938, 938, 0, 937, 1, 0},   /* the seed model's epoch on 2 ranks */
		{1876, 938, 1, 937, 2, 0},
		{(1LL << 40) + 5, 1000000000, 1099, 511627780, 1099, 511627781},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct checkpoint_position p = checkpoint_position(cases[i].gs, cases[i].spe);
		cr_expect(p.epoch == cases[i].epoch && p.step == cases[i].step &&
				  p.next_epoch == cases[i].next_epoch && p.next_step == cases[i].next_step,
			  "global step %lld of %d-step epochs: last %d/%d next %d/%d, want %d/%d next %d/%d",
			  cases[i].gs, cases[i].spe, p.epoch, p.step, p.next_epoch, p.next_step,
			  cases[i].epoch, cases[i].step, cases[i].next_epoch, cases[i].next_step);
		/* The next step is the one after the last, whatever the epoch length. */
		long long last = (long long)p.epoch * cases[i].spe + p.step;
		long long next = (long long)p.next_epoch * cases[i].spe + p.next_step;
		cr_expect(last == cases[i].gs - 1 && next == cases[i].gs, "case %zu", i);
	}
}

/* ---- another model or configuration ------------------------------------------------- */

Test(checkpoint, other_model_is_a_mismatch)
{
	struct image im;
	make_image(&im, 1, 7);
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	char err[ERRLEN] = "";
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "x", &info, view, err, sizeof(err)), 0);
	struct model other;
	int hidden[2] = {6, 3};
	model_init(&other, MODEL_MLP, hidden, 2);
	float *p = calloc(other.n_params, 4), *v = calloc(other.n_params, 4);
	cr_expect_eq(checkpoint_extract(view, &other, &info, "x", p, v, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "fc0.weight is F32 [5, 784], this model has F32 [6, 784]"), "%s", err);
	hidden[0] = 5;
	model_init(&other, MODEL_MLP, hidden, 1);
	cr_expect_eq(checkpoint_extract(view, &other, &info, "x", p, v, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "fc1.weight is F32 [3, 5], this model has F32 [10, 5]"), "%s", err);
	free(p);
	free(v);
	free(view);
	free_image(&im);
}

/* LeNet-5's tensors under PyTorch's names and shapes (conv weights 4-D), in buffer order. */
Test(checkpoint, lenet_layout_is_pytorchs)
{
	struct image im;
	make_image(&im, 2, 32);
	size_t h = (size_t)header_len(im.buf);
	char *hdr = strndup((const char *)im.buf + 8, h);
	const char *want[] = {
		"\"conv1.weight\":{\"dtype\":\"F32\",\"shape\":[6,1,5,5],\"data_offsets\":[0,600]}",
		"\"conv1.bias\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[600,624]}",
		"\"conv2.weight\":{\"dtype\":\"F32\",\"shape\":[16,6,5,5],\"data_offsets\":[624,10224]}",
		"\"conv2.bias\":{\"dtype\":\"F32\",\"shape\":[16],",
		"\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[120,400],",
		"\"fc1.bias\":{\"dtype\":\"F32\",\"shape\":[120],",
		"\"fc2.weight\":{\"dtype\":\"F32\",\"shape\":[84,120],",
		"\"fc3.weight\":{\"dtype\":\"F32\",\"shape\":[10,84],",
		"\"fc3.bias\":{\"dtype\":\"F32\",\"shape\":[10],",
		"\"optimizer.conv1.weight\":{\"dtype\":\"F32\",\"shape\":[6,1,5,5],",
		"\"model\":\"lenet\"",
		"\"lr_schedule\":\"cosine\"",
		"\"warmup_steps\":\"10\"",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr(hdr, want[i]), "lacks %s: %s", want[i], hdr);
	cr_expect_eq(im.m.n_params, 61706, "LeNet-5 has 61706 parameters, not %zu", im.m.n_params);
	free(hdr);
	free_image(&im);
}

Test(checkpoint, compat_names_every_difference)
{
	struct model m;
	struct train_config c;
	struct checkpoint_info ck, run;
	char err[ERRLEN];
	small_model(&m, &c, 1);
	run_info(&c, &ck);
	set_position(&ck, 40);

	/* Same configuration: fine. A different rank count with the same global batch: fine. */
	run = ck;
	cr_expect_eq(checkpoint_compat(&ck, &run, "ck", err, sizeof(err)), STATUS_OK, "%s", err);
	run.ranks = 4;
	run.cfg.batch_size = 8;
	cr_expect_eq(checkpoint_compat(&ck, &run, "ck", err, sizeof(err)), STATUS_OK, "%s", err);

#define CASE(stmt, needle)                                                                   \
	do {                                                                                 \
		run = ck;                                                                    \
		stmt;                                                                        \
		cr_expect_eq(checkpoint_compat(&ck, &run, "ck", err, sizeof(err)),           \
			     STATUS_BAD_INPUT, "%s: accepted", #stmt);                       \
		cr_expect(strstr(err, needle), "%s: message lacks '%s': %s", #stmt, needle, err); \
		cr_expect(strstr(err, "ck does not fit this run"), "%s", err);             \
	} while (0)
	CASE(run.cfg.model = MODEL_LINEAR, "--model mlp in the checkpoint, linear here");
	CASE(run.cfg.hidden[0] = 6, "--hidden 5,3 in the checkpoint, 6,3 here");
	CASE(run.cfg.seed = 2, "--seed 1 in the checkpoint, 2 here");
	CASE(run.cfg.lr = 0.1f, "--lr 0.05 in the checkpoint, 0.1 here");
	CASE(run.cfg.lr = nextafterf(0.05f, 1.0f), "--lr 0.05 in the checkpoint, 0.050000004 here");
	CASE(run.cfg.momentum = 0.5f, "--momentum 0.9 in the checkpoint, 0.5 here");
	CASE(run.cfg.grad_reduce = GRAD_REDUCE_SUM, "--grad-reduce mean in the checkpoint, sum here");
	CASE(run.cfg.lr_schedule = LR_COSINE, "--lr-schedule constant in the checkpoint, cosine here");
	CASE(run.cfg.warmup_steps = 5, "--warmup-steps 0 in the checkpoint, 5 here");
	CASE(run.cfg.drop_last = 1, "--drop-last off in the checkpoint, on here");
	CASE(run.examples = 999, "(--limit)");
	CASE(run.train_crc32 = 1, "a different data set");
	CASE(run.ranks = 3, "global batch 32 in the checkpoint (2 ranks x --batch-size 16), 48 here");
	CASE(run.cfg.batch_size = 32, "global batch 32");
	CASE(run.cfg.epochs = 1, "--epochs 1 is the total, but the checkpoint is already at epoch 1 step 7");
	/* Two differences: both named. */
	CASE((run.cfg.seed = 9, run.cfg.lr = 1.0f), "--lr 0.05 in the checkpoint, 1 here; --seed 1 in the checkpoint, 9 here");
	/* Another model: named once, its hidden layers not as a second difference. */
	CASE(run.cfg.model = MODEL_SEED, "does not fit this run: --model mlp in the checkpoint, seed here");
	cr_expect(!strstr(err, "--hidden"), "%s", err);
	/* Summed gradients scale with the rank count. */
	ck.cfg.grad_reduce = GRAD_REDUCE_SUM;
	CASE((run.ranks = 4, run.cfg.batch_size = 8), "scales with the rank count");
	/* A cosine schedule spans the run: --epochs may not change, not even upwards. */
	ck.cfg.grad_reduce = GRAD_REDUCE_MEAN;
	ck.cfg.lr_schedule = LR_COSINE;
	CASE(run.cfg.epochs = 5, "--epochs 4 in the checkpoint, 5 here, with --lr-schedule cosine");
	ck.cfg.lr_schedule = LR_CONSTANT;
	/* --clip-grad-norm: given on one side only, or another value, is a difference. */
	CASE(run.cfg.clip_grad_norm = 0.5f, "--clip-grad-norm not given in the checkpoint, 0.5 here");
	ck.cfg.clip_grad_norm = 0.25f;
	CASE(run.cfg.clip_grad_norm = 0.5f, "--clip-grad-norm 0.25 in the checkpoint, 0.5 here");
	CASE(run.cfg.clip_grad_norm = 0.0f, "--clip-grad-norm 0.25 in the checkpoint, not given here");
	ck.cfg.clip_grad_norm = 0.0f;
#undef CASE
	run = ck;
	cr_expect_eq(checkpoint_compat(&ck, &run, "ck", err, sizeof(err)), STATUS_OK, "%s", err);
	ck.cfg.lr_schedule = LR_CONSTANT;
	/* Exactly at the end of training: nothing left, but allowed. */
	set_position(&ck, 4 * 32);
	run = ck;
	cr_expect_eq(checkpoint_compat(&ck, &run, "ck", err, sizeof(err)), STATUS_OK, "%s", err);
}


/* ---- the GPU plan (metadata gpu_plan: the backend's text, which only it reads) -------- */

/* A plan as the CUDA backend writes one (cuda/plan_json.c): to the program, opaque JSON. */
static const char *const plan_text =
	"{\"version\": 1, \"device\": \"NVIDIA H100 80GB HBM3\", \"library\": \"cublasLt 130100\", "
	"\"ops\": [{\"op\": \"gemm\", \"key\": \"nt m=6\", \"shape\": \"nt 6x25x200704\", "
	"\"chosen\": \"lt.bgradb.a0\", \"source\": \"measured\"}]}";

/* An image of the seed model whose metadata carries `plan` as its gpu_plan. */
static void image_with_plan(struct image *im, const char *plan)
{
	small_model(&im->m, &im->c, 0);
	run_info(&im->c, &im->info);
	set_position(&im->info, 3);
	snprintf(im->info.gpu_plan, sizeof(im->info.gpu_plan), "%s", plan);
	im->params = random_floats(im->m.n_params, 1);
	im->velocity = random_floats((size_t)optim_desc_of(im->c.optimizer).n_state * im->m.n_params, 2);
	cr_assert_eq(checkpoint_encode(&im->m, &im->info, im->params, im->velocity, &im->buf,
				       &im->len),
		     0);
}

Test(checkpoint, gpu_plan_round_trip)
{
	struct image im;
	image_with_plan(&im, plan_text);
	struct checkpoint_info info;
	struct checkpoint_view *view = malloc(sizeof(*view));
	char err[ERRLEN] = "";
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "x", &info, view, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_expect_str_eq(info.gpu_plan, plan_text, "the backend's text, as it gave it");
	/* Without a plan (the host backend's checkpoints): none read back. */
	free_image(&im);
	make_image(&im, 0, 3);
	cr_assert_eq(checkpoint_parse(im.buf, im.len, "x", &info, view, err, sizeof(err)), STATUS_OK,
		     "%s", err);
	cr_expect_str_eq(info.gpu_plan, "");
	free(view);
	free_image(&im);
}

/*
 * The program checks only that the plan is a JSON object (what is inside is the
 * backend's to check: tests/test_plan_json.c).
 */
Test(checkpoint, damaged_gpu_plan_is_bad_input)
{
	/* Sealed with a right checksum: only the plan is wrong. */
	const char *damaged[] = {
		"{\"device\": \"x\", \"library\": \"y\", \"ops\": [", /* not JSON */
		"[1, 2]",                                             /* not an object */
		"7",                                                  /* not an object */
	};
	for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
		struct image im;
		image_with_plan(&im, damaged[i]);
		char err[ERRLEN] = "";
		cr_expect_eq(parse_image(im.buf, im.len, err), STATUS_BAD_INPUT, "plan %zu: %s", i, err);
		cr_expect(strstr(err, "ck.safetensors: metadata \"gpu_plan\" is damaged: not a JSON object") != NULL,
			  "plan %zu: the message must name the file and the plan: %s", i, err);
		free_image(&im);
	}
	/* The control: the same file with an object parses. */
	struct image im;
	image_with_plan(&im, "{\"ops\": []}");
	char err[ERRLEN] = "";
	cr_expect_eq(parse_image(im.buf, im.len, err), STATUS_OK, "%s", err);
	free_image(&im);
}

/* ---- --gpu-plan-from: a plan read back from a file ------------------------------------ */

/* Text into a file (the fixture's write_file takes bytes). */
static void write_text(const char *path, const char *text)
{
	write_file(path, (const uint8_t *)text, strlen(text));
}

Test(checkpoint, gpu_plan_from_a_checkpoint)
{
	struct image im;
	image_with_plan(&im, plan_text);
	char path[700], other[700], plan[CHECKPOINT_PLAN_MAX], err[ERRLEN] = "";
	snprintf(path, sizeof(path), "%s/ckpt-0-3.safetensors", tmpdir);
	write_file(path, im.buf, im.len);
	cr_expect(checkpoint_is_file(path));
	cr_assert_eq(checkpoint_read_plan(path, &im.m, plan, sizeof(plan), err, sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(plan, plan_text);
	/* Too small a buffer for it: refused, not cut. */
	cr_expect_eq(checkpoint_read_plan(path, &im.m, plan, 20, err, sizeof(err)), STATUS_BAD_INPUT);
	cr_expect(strstr(err, "expected at most 19") != NULL, "%s", err);

	/* A byte changed in the data: its checksum says so, naming the file. */
	im.buf[im.len - 3] ^= 0x40;
	snprintf(other, sizeof(other), "%s/flipped.safetensors", tmpdir);
	write_file(other, im.buf, im.len);
	cr_expect_eq(checkpoint_read_plan(other, &im.m, plan, sizeof(plan), err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "flipped.safetensors: checksum mismatch") != NULL, "%s", err);
	/* Cut short: likewise refused. */
	write_file(other, im.buf, im.len / 2);
	cr_expect_eq(checkpoint_read_plan(other, &im.m, plan, sizeof(plan), err, sizeof(err)),
		     STATUS_BAD_INPUT, "%s", err);
	free_image(&im);

	/* A checkpoint without a plan (the host backend's). */
	make_image(&im, 0, 3);
	write_file(other, im.buf, im.len);
	cr_expect(checkpoint_is_file(other));
	cr_expect_eq(checkpoint_read_plan(other, &im.m, plan, sizeof(plan), err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "holds no GPU plan") != NULL, "%s", err);
	free_image(&im);

	/* Files that do not begin as a checkpoint: JSON lines, an empty file, none at all. */
	write_text(other, "{\"event\": \"gpu_plan\"}\n");
	cr_expect(!checkpoint_is_file(other));
	write_text(other, "");
	cr_expect(!checkpoint_is_file(other));
	snprintf(other, sizeof(other), "%s/none", tmpdir);
	cr_expect(!checkpoint_is_file(other));
}

/* The last record of an event in a --metrics file (io/metrics_read.h), as its text. */
Test(checkpoint, gpu_plan_from_a_metrics_file)
{
	const char *first = "{\"event\": \"gpu_plan\", \"device\": \"a\", \"ops\": []}";
	const char *last = "{\"event\": \"gpu_plan\", \"device\": \"b\", \"ops\": [{\"x\": 1}]}";
	const char *expect = "the --metrics file of a run on the CUDA backend";
	char path[700], err[ERRLEN] = "", text[16384], *got = NULL;
	long line = 0;

	/* The last record is the plan, whatever lines surround it. */
	snprintf(path, sizeof(path), "%s/m.jsonl", tmpdir);
	snprintf(text, sizeof(text),
		 "{\"epoch\": 0, \"step\": 0, \"loss\": 2.3}\n%s\n{\"event\": \"note\", \"x\": "
		 "\"gpu_plan\"}\n%s\n{\"event\": \"step_times\"}\n",
		 first, last);
	write_text(path, text);
	cr_assert_eq(metrics_last_event(path, "gpu_plan", expect, &got, &line, err, sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(got, last, "the record as written, without its newline");
	cr_expect_eq(line, 4);
	free(got);

	/* The last record cut short (a run killed while writing it): bad input at its line. */
	snprintf(text, sizeof(text), "%s\n%.*s", first, (int)strlen(last) / 2, last);
	write_text(path, text);
	cr_expect_eq(metrics_last_event(path, "gpu_plan", expect, &got, &line, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect_null(got);
	cr_expect(strstr(err, "m.jsonl line 2: the gpu_plan record is not JSON") != NULL, "%s", err);

	/* A record longer than any plan (17 MiB on one line): refused at its line, never read whole. */
	size_t huge = (size_t)17 << 20;
	char *big = malloc(huge + 1);
	cr_assert_not_null(big);
	memset(big, ' ', huge);
	memcpy(big, "{\"event\": \"gpu_plan\", \"device\": \"", 33);
	big[huge] = '\0';
	write_text(path, big);
	cr_expect_eq(metrics_last_event(path, "gpu_plan", expect, &got, &line, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "m.jsonl line 1: the gpu_plan record is longer than 16777216 bytes") != NULL,
		  "%s", err);
	/* The same length without a record in it, then the whole record: that record. */
	memcpy(big, "{\"no\": 1}", 9);
	big[huge - 1] = '\n';
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(big, f);
	fputs(last, f);
	fclose(f);
	cr_expect_eq(metrics_last_event(path, "gpu_plan", expect, &got, &line, err, sizeof(err)),
		     STATUS_OK, "%s", err);
	cr_expect_str_eq(got, last);
	cr_expect_eq(line, 2);
	free(got);
	free(big);

	/* No record; no file. */
	write_text(path, "{\"epoch\": 0}\n");
	cr_expect_eq(metrics_last_event(path, "gpu_plan", expect, &got, &line, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "m.jsonl holds no gpu_plan record: expected the --metrics file") != NULL,
		  "%s", err);
	snprintf(path, sizeof(path), "%s/none.jsonl", tmpdir);
	cr_expect_eq(metrics_last_event(path, "gpu_plan", expect, &got, &line, err, sizeof(err)),
		     STATUS_BAD_INPUT);
	cr_expect(strstr(err, "none.jsonl: cannot open") != NULL, "%s", err);
}
