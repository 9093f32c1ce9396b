/*
 * checkpoint_fixture.h - what the checkpoint tests share (tests/checkpoint_fixture.c):
 * a fresh temporary directory per test, small models and their run
 * configuration, valid checkpoint images, crafted headers, and the check
 * that an image is refused as corrupt with a message naming the file.
 */
#ifndef MNIST_DDP_TESTS_CHECKPOINT_FIXTURE_H
#define MNIST_DDP_TESTS_CHECKPOINT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "io/checkpoint.h"
#include "train/model.h"

#define ERRLEN 2048
#define SEED 20240606ull

/* The test's directory: made by make_tmpdir (a suite's .init), removed by cleanup_tmpdir (.fini). */
extern char tmpdir[512];
void make_tmpdir(void);
void cleanup_tmpdir(void);

void small_model(struct model *m, struct train_config *c, int mlp);
void run_info(const struct train_config *c, struct checkpoint_info *run);
void set_position(struct checkpoint_info *info, long long gs);
float *random_floats(size_t n, uint64_t stream);

struct image {
	uint8_t *buf;
	size_t len;
	struct model m;
	struct train_config c;
	struct checkpoint_info info;
	float *params, *velocity;
};

void make_image(struct image *im, int mlp, long long gs);
void free_image(struct image *im);
void write_file(const char *path, const uint8_t *buf, size_t len);
uint64_t header_len(const uint8_t *buf);
void reseal(uint8_t *buf, size_t len);
size_t craft(uint8_t **out, size_t data_len, const char *json, ...);
enum status parse_image(const uint8_t *buf, size_t len, char *err);

/* The metadata of a valid position-1 checkpoint of a 1-tensor file, as JSON members. */
#define META_OK                                                                                \
	"\"format\":\"" CHECKPOINT_FORMAT "\",\"version\":\"0.1.0\",\"global_step\":\"1\","        \
	"\"steps_per_epoch\":\"32\",\"model\":\"seed\",\"hidden\":\"\",\"epochs\":\"4\","         \
	"\"batch_size\":\"16\",\"lr\":\"0.05\",\"momentum\":\"0\",\"lr_schedule\":\"constant\","  \
	"\"warmup_steps\":\"0\",\"seed\":\"1\","                                                  \
	"\"grad_reduce\":\"mean\",\"drop_last\":\"off\",\"ranks\":\"2\",\"examples\":\"1000\","  \
	"\"train_crc32\":\"12345678\",\"checksum\":\"crc32:00000000\""

#define EXPECT_CORRUPT(buf, len, needle)                                                        \
	do {                                                                                     \
		char err_[ERRLEN] = "";                                                          \
		enum status rc_ = parse_image((buf), (len), err_);                               \
		cr_expect_eq(rc_, STATUS_BAD_INPUT, "expected corrupt (%s), got %d: %s",         \
			     (needle), rc_, err_);                                               \
		cr_expect(strstr(err_, "ck.safetensors") != NULL, "message does not name the file: %s", \
			  err_);                                                                 \
		cr_expect(strstr(err_, (needle)) != NULL, "message lacks '%s': %s", (needle), err_); \
	} while (0)

#endif /* MNIST_DDP_TESTS_CHECKPOINT_FIXTURE_H */
