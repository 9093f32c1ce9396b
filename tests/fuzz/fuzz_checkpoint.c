/*
 * fuzz_checkpoint.c - libFuzzer target for the checkpoint reader
 * (host/io/checkpoint_read.c, its JSON header through jansson).
 *
 *   CC=clang cmake -S . -B build-fuzz -DMNIST_DDP_FUZZ=ON -DMNIST_DDP_CUDA=OFF
 *   cmake --build build-fuzz --target fuzz_checkpoint
 *   tests/fuzz/run_fuzz.sh build-fuzz/tests/fuzz_checkpoint tests/fuzz/corpus/checkpoint 60
 *
 * The input is a whole checkpoint file. checkpoint_parse must refuse it with
 * a message naming the file, or accept it with a tensor table that lies
 * inside the data. An accepted file is then taken as far as a real resume
 * takes it: the model its metadata names is built (when the file is large
 * enough to hold it, so no input asks for a huge allocation), its tensors
 * extracted (and the parameters alone, as --init-from takes them: the same
 * bits), and the configuration compared with itself; its header alone must
 * read as the same metadata (checkpoint_parse_meta). A successful
 * extraction must survive a round trip: encoding the same parameters and
 * metadata again and parsing that must give back the same bits. The first
 * bytes also go through the file-name parser.
 *
 * Nearly every mutation breaks the whole-file checksum, which would keep the
 * fuzzer in front of it; so each input is also re-sealed (its checksum
 * digits recomputed, when it has the field) and the copy taken through the
 * same path, reaching the metadata and tensor checks behind the checksum with
 * arbitrary headers. An accepted file's GPU plan goes on to the CUDA
 * backend's reader (cuda/plan_json.c), as --resume hands it over: refused
 * with a message, or read back and written again as the same plan. Built with
 * tests/fuzz/replay_main.c instead of libFuzzer, it replays the corpus in the
 * ordinary test suite (ctest -R fuzz_checkpoint_corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/crc32.h"
#include "io/checkpoint.h"
#include "plan_json.h"
#include "io/idx.h"
#include "train/model.h"
#include "train/optim.h"

#define FUZZ_CHECK(cond)                                                                       \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "fuzz_checkpoint: invariant broken: %s (%s:%d)\n", #cond, \
				__FILE__, __LINE__);                                           \
			abort();                                                               \
		}                                                                              \
	} while (0)

static struct checkpoint_view view, view2;

static void round_trip(const struct model *m, const struct checkpoint_info *info,
		       const float *params, const float *velocity)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	char err[2048] = "";
	struct checkpoint_info again;
	FUZZ_CHECK(checkpoint_encode(m, info, params, velocity, &buf, &len) == STATUS_OK);
	FUZZ_CHECK(checkpoint_parse(buf, len, "again", &again, &view2, err, sizeof(err)) == STATUS_OK);
	size_t ns = (size_t)optim_desc_of(info->cfg.optimizer).n_state * m->n_params;
	float *p = malloc(m->n_params * sizeof(float));
	float *v = malloc(ns * sizeof(float));
	FUZZ_CHECK(p && v);
	FUZZ_CHECK(checkpoint_extract(&view2, m, &again, "again", p, v, err, sizeof(err)) == STATUS_OK);
	FUZZ_CHECK(!memcmp(p, params, m->n_params * sizeof(float)));
	FUZZ_CHECK(!memcmp(v, velocity, ns * sizeof(float)));
	FUZZ_CHECK(again.global_step == info->global_step &&
		   again.steps_per_epoch == info->steps_per_epoch && again.ranks == info->ranks &&
		   again.examples == info->examples && again.train_crc32 == info->train_crc32);
	/* Every stored setting reads back as the same text. */
	for (int i = 0; i < config_n_settings; i++) {
		char x[CHECKPOINT_VALUE_MAX], y[CHECKPOINT_VALUE_MAX];
		if (!(config_settings[i].where & SETTING_CHECKPOINT))
			continue;
		config_format(&config_settings[i], &again.cfg, x, sizeof(x));
		config_format(&config_settings[i], &info->cfg, y, sizeof(y));
		FUZZ_CHECK(!strcmp(x, y));
	}
	FUZZ_CHECK(checkpoint_compat(&again, info, "again", err, sizeof(err)) == STATUS_OK);
	free(p);
	free(v);
	free(buf);
}

/* A checkpoint's GPU plan as the CUDA backend reads it: refused with a reason, or a fixed point. */
static void check_plan(const char *text)
{
	struct plan_info p, again;
	char err[512] = "";
	if (!text[0])
		return;
	if (plan_json_parse(text, &p, err, sizeof(err)) != STATUS_OK) {
		FUZZ_CHECK(err[0] && !p.ops);
		return;
	}
	char *dumped = plan_json_dump(&p, 0);
	FUZZ_CHECK(plan_json_parse(dumped, &again, err, sizeof(err)) == STATUS_OK);
	FUZZ_CHECK(again.n_ops == p.n_ops && !strcmp(again.device, p.device) &&
		   !strcmp(again.library, p.library));
	for (int i = 0; i < p.n_ops; i++)
		FUZZ_CHECK(!strcmp(again.ops[i].key, p.ops[i].key) &&
			   !strcmp(again.ops[i].chosen, p.ops[i].chosen));
	free(dumped);
	plan_json_free(&again);
	plan_json_free(&p);
}

/* Parse, and when accepted, extract and round-trip as a resume would. */
static void check_file(const uint8_t *data, size_t size)
{
	char err[2048] = "", merr[2048] = "";
	struct checkpoint_info info, head;
	/* The metadata from the header alone (--init-from, --eval-only read it first). */
	enum status mrc = checkpoint_parse_meta(data, size, "fuzz.safetensors", &head, merr,
						sizeof(merr));
	FUZZ_CHECK(mrc == STATUS_OK || ((mrc == STATUS_BAD_INPUT || mrc == STATUS_RUNTIME) &&
					strstr(merr, "fuzz.safetensors")));
	enum status rc = checkpoint_parse(data, size, "fuzz.safetensors", &info, &view, err, sizeof(err));
	if (rc != STATUS_OK) {
		FUZZ_CHECK(rc == STATUS_BAD_INPUT || rc == STATUS_RUNTIME);
		FUZZ_CHECK(err[0] && strstr(err, "fuzz.safetensors"));
		return;
	}
	/* A whole checkpoint's header alone reads as the same metadata. */
	FUZZ_CHECK(mrc == STATUS_OK && head.global_step == info.global_step &&
		   head.steps_per_epoch == info.steps_per_epoch && head.ranks == info.ranks &&
		   head.cfg.model == info.cfg.model && head.cfg.n_hidden == info.cfg.n_hidden &&
		   !memcmp(head.cfg.hidden, info.cfg.hidden, sizeof(info.cfg.hidden)));
	FUZZ_CHECK(view.data >= data && view.data + view.data_len == data + size);
	FUZZ_CHECK(view.n_tensors >= 0 && view.n_tensors <= CHECKPOINT_MAX_TENSORS);
	for (int i = 0; i < view.n_tensors; i++)
		FUZZ_CHECK(view.tensors[i].begin <= view.tensors[i].end &&
			   view.tensors[i].end <= view.data_len);
	FUZZ_CHECK(info.global_step >= 1 && info.steps_per_epoch >= 1 &&
		   info.global_step <= (long long)info.cfg.epochs * info.steps_per_epoch);
	FUZZ_CHECK(checkpoint_compat(&info, &info, "self", err, sizeof(err)) == STATUS_OK);
	check_plan(info.gpu_plan);

	struct model m;
	model_init(&m, info.cfg.model, info.cfg.hidden, info.cfg.n_hidden);
	if (m.n_params > size / 8)
		return; /* the file cannot hold this model: extract would refuse it anyway */
	float *params = malloc(m.n_params * sizeof(float));
	float *velocity = malloc((size_t)optim_desc_of(info.cfg.optimizer).n_state * m.n_params *
				 sizeof(float));
	FUZZ_CHECK(params && velocity);
	rc = checkpoint_extract(&view, &m, &info, "fuzz.safetensors", params, velocity, err,
				sizeof(err));
	if (rc == STATUS_OK)
		round_trip(&m, &info, params, velocity);
	else
		FUZZ_CHECK(rc == STATUS_BAD_INPUT && strstr(err, "fuzz.safetensors"));
	/* The parameters alone (--init-from, --eval-only): the same verdict, the same bits. */
	float *alone = malloc((m.n_params ? m.n_params : 1) * sizeof(float));
	FUZZ_CHECK(alone != NULL);
	enum status arc = checkpoint_extract(&view, &m, &info, "fuzz.safetensors", alone, NULL, err,
					     sizeof(err));
	FUZZ_CHECK(arc == rc);
	FUZZ_CHECK(rc != STATUS_OK || !memcmp(alone, params, m.n_params * sizeof(float)));
	free(alone);
	free(params);
	free(velocity);
}

/* A copy of data with its checksum digits recomputed; NULL when it has no checksum field. */
static uint8_t *reseal(const uint8_t *data, size_t size)
{
	static const char tag[] = "\"checksum\":\"crc32:";
	size_t tl = sizeof(tag) - 1;
	if (size < 8)
		return NULL;
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)data[i] << (8 * i);
	if (h > size - 8)
		return NULL;
	for (size_t at = 8; at + tl + 8 <= 8 + h; at++) {
		if (memcmp(data + at, tag, tl))
			continue;
		uint8_t *copy = malloc(size);
		FUZZ_CHECK(copy != NULL);
		memcpy(copy, data, size);
		memcpy(copy + at + tl, "00000000", 8);
		char hex[9];
		snprintf(hex, sizeof(hex), "%08x", (unsigned)crc32_bytes(0, copy, size));
		memcpy(copy + at + tl, hex, 8);
		return copy;
	}
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The file-name parser on the first bytes. */
	char name[72];
	size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
	memcpy(name, data, n);
	name[n] = '\0';
	int epoch;
	long long gs;
	if (checkpoint_parse_file_name(name, &epoch, &gs) == 0) {
		char back[64];
		FUZZ_CHECK(epoch >= 0 && gs >= 1);
		checkpoint_file_name(epoch, gs, back, sizeof(back));
		FUZZ_CHECK(!strcmp(back, name));
	}

	check_file(data, size);
	uint8_t *sealed = reseal(data, size);
	if (sealed) {
		check_file(sealed, size);
		free(sealed);
	}
	return 0;
}
