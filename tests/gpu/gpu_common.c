/* gpu_common.c - shared start-up, skip rule and checks of the GPU parity programs. */
#include "gpu_common.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"

/* 1 when the space-separated list holds word. */
static int listed(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list ? strstr(list, word) : NULL; p; p = strstr(p + 1, word))
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

void gpu_test_init(struct gpu_test *t, const char *name, uint64_t default_seed,
		   const char *options, int *argc, char ***argv)
{
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->module = MNIST_TEST_CUDA_MODULE;
	dist_init(argc, argv, &t->d);
	t->argc = *argc;
	t->argv = *argv;
	for (int i = 1; i < *argc; i++) {
		const char *a = (*argv)[i];
		if (!strcmp(a, "--self-test")) {
			t->self_test = 1;
		} else if (!strcmp(a, "--module") && i + 1 < *argc) {
			t->module = (*argv)[++i];
		} else if (!strcmp(a, "--quick")) {
			t->quick = 1;
		} else if (!listed(options, a)) {
			if (t->d.rank == 0)
				fprintf(stderr, "%s: unknown argument '%s' (--self-test, --module PATH, --quick%s%s)\n",
					name, a, options ? ", " : "", options ? options : "");
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

int gpu_test_option(const struct gpu_test *t, const char *flag)
{
	for (int i = 1; i < t->argc; i++)
		if (!strcmp(t->argv[i], flag))
			return 1;
	return 0;
}

/*
 * The skip for a node with fewer GPUs than the test's ranks there (one rank
 * per GPU): those ranks are refused as sharing a GPU or too many, which is
 * what the probe says and what a misconfigured node says too; the count of
 * GPUs the node's ranks see together tells the two apart. Returns when no
 * node is short or when some rank's GPUs are unusable for another reason
 * (then the test fails); else every rank exits 77 after rank 0 says why.
 * Collective.
 */
static void skip_short_node(struct gpu_test *t, const struct cuda_probe *mine)
{
	struct {
		int need, have;
		char host[sizeof(t->d.host)];
	} node;
	int is_short = mine->node_gpus > 0 && mine->node_gpus < t->d.local_size;
	int rank_count = mine->verdict == CUDA_UNUSABLE && (!strcmp(mine->reason, "shared-gpu") ||
							    !strcmp(mine->reason, "too-many-ranks"));
	int other = mine->verdict == CUDA_UNUSABLE && !(is_short && rank_count);
	int who = -1;
	if (dist_agree(&t->d, other ? 2 : is_short, &who) != 1)
		return;
	memset(&node, 0, sizeof(node));
	node.need = t->d.local_size;
	node.have = mine->node_gpus;
	snprintf(node.host, sizeof(node.host), "%s", t->d.host);
	dist_bcast(&t->d, &node, sizeof(node), who, "gpu test skip");
	if (t->d.rank == 0) {
		printf("SKIP %s: needs %d GPUs, %d visible (%d ranks on %s, one GPU per rank; run it on a "
		       "node with %d GPUs or more)\n",
		       t->name, node.need, node.have, node.need, node.host, node.need);
		fflush(stdout);
	}
	dist_finalize(&t->d);
	exit(GPU_TEST_SKIP);
}

void gpu_test_start(struct gpu_test *t)
{
	char why[1024] = "";
	int bad = -1;

	if (!t->self_test) {
		struct cuda_probe mine, p;
		const struct backend_module *m = NULL;
		int worst = backend_cuda_job_probe(&t->d, t->module, &m, &mine, &p, &bad);
		if (worst != CUDA_USABLE)
			skip_short_node(t, &mine);
		if (worst != CUDA_USABLE) {
			/* Rank 0 prints the worst-off rank's verdict. */
			if (t->d.rank == 0) {
				if (worst == CUDA_UNUSABLE)
					printf("FAIL %s: GPUs present but unusable on rank %d (%s) [%s]: %s\n",
					       t->name, bad, t->d.host, p.reason, p.why);
				else
					printf("SKIP %s: no usable CUDA device on rank %d (%s) [%s]: %s\n", t->name,
					       bad, t->d.host, p.reason, p.why);
				fflush(stdout);
			}
			dist_finalize(&t->d);
			exit(worst == CUDA_UNUSABLE ? 1 : GPU_TEST_SKIP);
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

/*
 * NCCL's mean of floats is sum_r fl(x_r * fl(1/ranks)): rounding 1/ranks, each
 * product and each of the ranks - 1 additions bounds the relative error by
 * (ranks + 1) / 2 units of FLT_EPSILON, to first order; ranks units leave room
 * for any summation order. A power of two scales exactly, and the suite's
 * small-integer patterns then sum exactly: no error at all.
 */
double gpu_mean_tolerance(int ranks, double want)
{
	int pow2 = (ranks & (ranks - 1)) == 0;
	return pow2 ? 0.0 : (double)ranks * FLT_EPSILON * fabs(want);
}

size_t gpu_count_diff(const float *a, const float *b, size_t n)
{
	size_t diff = 0;
	for (size_t i = 0; i < n; i++)
		diff += !(a[i] == b[i]);
	return diff;
}
