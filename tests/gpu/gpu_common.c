/* gpu_common.c - shared start-up, skip rule and checks of the GPU parity programs. */
#include "gpu_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"

void gpu_test_init(struct gpu_test *t, const char *name, uint64_t default_seed, int *argc,
		   char ***argv)
{
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->module = MNIST_TEST_CUDA_MODULE;
	dist_init(argc, argv, &t->d);
	for (int i = 1; i < *argc; i++) {
		if (!strcmp((*argv)[i], "--self-test")) {
			t->self_test = 1;
		} else if (!strcmp((*argv)[i], "--module") && i + 1 < *argc) {
			t->module = (*argv)[++i];
		} else {
			if (t->d.rank == 0)
				fprintf(stderr, "%s: unknown argument '%s' (--self-test, --module PATH)\n",
					name, (*argv)[i]);
			dist_finalize(&t->d);
			exit(2);
		}
	}
	t->seed = ref_seed(default_seed);
	if (t->d.rank == 0)
		printf("# %s: %d rank%s, %s, seed %llu (MNIST_TEST_SEED)\n", name, t->d.size,
		       t->d.size == 1 ? "" : "s",
		       t->self_test ? "self-test: host backend in place of CUDA" : "CUDA vs host",
		       (unsigned long long)t->seed);
}

/*
 * This rank's CUDA module and device: 0 usable (*m set), GPU_START_SKIP when
 * there is no driver or no usable device, GPU_START_FAIL when the module
 * itself did not load (a broken build, never a skip).
 */
enum { GPU_START_OK = 0, GPU_START_SKIP = 1, GPU_START_FAIL = 2 };
static int cuda_start(struct gpu_test *t, const struct backend_module **m, char *why,
		      size_t whylen)
{
	int no_driver = 0;
	*m = backend_cuda_open(t->module, &no_driver, why, whylen);
	if (!*m)
		return no_driver ? GPU_START_SKIP : GPU_START_FAIL;
	return (*m)->probe(&t->d, why, whylen) ? GPU_START_OK : GPU_START_SKIP;
}

void gpu_test_start(struct gpu_test *t)
{
	char why[1024] = "";
	int bad = -1;

	if (!t->self_test) {
		const struct backend_module *m = NULL;
		int worst = dist_agree(&t->d, cuda_start(t, &m, why, sizeof(why)), &bad);
		if (worst) {
			/* Rank 0 prints the first failing rank's reason. */
			MPI_CHECK(MPI_Bcast(why, (int)sizeof(why), MPI_CHAR, bad, t->d.comm));
			why[sizeof(why) - 1] = '\0';
			if (t->d.rank == 0 && worst == GPU_START_SKIP)
				printf("SKIP %s: no usable CUDA device on rank %d (%s): %s\n", t->name, bad,
				       t->d.host, why);
			else if (t->d.rank == 0)
				printf("FAIL %s: the CUDA module did not load on rank %d: %s\n", t->name,
				       bad, why);
			fflush(stdout);
			dist_finalize(&t->d);
			exit(worst == GPU_START_SKIP ? GPU_TEST_SKIP : 1);
		}
		if (m->create(&t->d, &t->dev, why, sizeof(why)) != 0)
			die(1, "%s: the CUDA backend did not start although the probe passed: %s",
			    t->name, why);
	} else {
		if (backend_host_create(&t->d, 1, &t->dev) != 0)
			die(1, "%s: host backend (self-test) did not start", t->name);
	}
	if (backend_host_create(&t->d, 1, &t->host) != 0)
		die(1, "%s: host backend did not start", t->name);
	if (t->d.rank == 0)
		printf("# device: %s; oracle: %s\n", t->dev.device, t->host.device);
}

void gpu_test_check(struct gpu_test *t, int ok, const char *fmt, ...)
{
	va_list ap;
	t->checks++;
	if (!ok)
		t->failures++;
	if (ok && t->d.rank != 0)
		return;
	printf("%s rank %d: ", ok ? "ok  " : "FAIL", t->d.rank);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

int gpu_test_finish(struct gpu_test *t)
{
	int bad = -1;
	backend_synchronize(&t->dev);
	backend_destroy(&t->dev);
	backend_destroy(&t->host);
	int failed = dist_agree(&t->d, t->failures > 0, &bad);
	if (t->d.rank == 0)
		printf("%s %s: %d checks on rank 0, %s\n", failed ? "FAIL" : "PASS", t->name, t->checks,
		       failed ? "failures on some rank (see FAIL lines; seed above)" : "all passed");
	fflush(stdout);
	dist_finalize(&t->d);
	return failed ? 1 : 0;
}

void *gpu_upload_new(const struct backend *b, const void *host, size_t bytes)
{
	void *p = backend_alloc(b, bytes);
	if (!p)
		die(1, "%s backend: out of memory for %zu bytes", backend_name(b), bytes);
	if (host)
		backend_upload(b, p, host, bytes);
	return p;
}

void gpu_download(const struct backend *b, void *host, const void *dev, size_t bytes)
{
	backend_download(b, host, dev, bytes);
}

double gpu_norm_err(const float *got, const float *ref, size_t n, size_t *at)
{
	double max_diff = 0.0, max_ref = 0.0;
	size_t where = 0;
	for (size_t i = 0; i < n; i++) {
		double diff = fabs((double)got[i] - (double)ref[i]);
		if (isnan(diff)) {
			if (at)
				*at = i;
			return INFINITY;
		}
		if (diff > max_diff) {
			max_diff = diff;
			where = i;
		}
		if (fabs((double)ref[i]) > max_ref)
			max_ref = fabs((double)ref[i]);
	}
	if (at)
		*at = where;
	return max_diff / (max_ref > 1e-30 ? max_ref : 1e-30);
}

size_t gpu_count_diff(const float *a, const float *b, size_t n)
{
	size_t diff = 0;
	for (size_t i = 0; i < n; i++)
		diff += !(a[i] == b[i]);
	return diff;
}
