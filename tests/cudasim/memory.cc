/*
 * memory.cc - the simulator's device and pinned memory (rule 1 of cudasim.h).
 *
 * Each cudaMalloc is its own mapping: a guard page, the data pages, a guard
 * page. The data ends at the end of its last page (start aligned to 256
 * bytes), so an overrun past the end hits the guard at once. The data pages
 * are PROT_NONE except inside a window (while the simulator runs queued
 * work), and even then only once touched: the first access to an allocation
 * inside a window faults, and the handler opens that allocation until the
 * window closes, so the cost follows what the work touches, not what is
 * allocated. Any other SIGSEGV inside a mapping is the simulator's to
 * explain: outside a window the host touched device memory; inside one a
 * kernel or copy left its allocation. Faults elsewhere go to the handler that
 * was there before.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <iterator>
#include <map>
#include <string>

#include "cudasim.h"

namespace cudasim {

struct region {
	char *base;      /* what the caller got */
	size_t size;     /* bytes asked for */
	char *map;       /* the whole mapping, guards included (device) */
	size_t map_len;
	char *data;      /* the data pages (device) */
	size_t data_len;
	bool device;
};

/* Live regions by base address. */
static std::map<uintptr_t, region> regions;
static size_t device_bytes; /* allocated, against device_memory_limit() */
static int window_depth;
/* Allocations opened (made readable and writable) inside the current window. */
enum { max_opened = 4096 };
static struct {
	char *data;
	size_t len;
} opened[max_opened];
static int n_opened;
static struct sigaction previous_segv;
static bool handler_installed;

static size_t page_size()
{
	static size_t page;
	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	return page;
}

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

/* The region whose mapping (guards included) holds address a, or NULL. */
static const region *region_around(uintptr_t a)
{
	auto it = regions.upper_bound(a);
	if (it == regions.begin())
		return NULL;
	--it;
	const region &r = it->second;
	uintptr_t lo = (uintptr_t)(r.device ? r.map : r.base);
	uintptr_t hi = r.device ? (uintptr_t)(r.map + r.map_len) : (uintptr_t)(r.base + r.size);
	if (a >= lo && a < hi)
		return &r;
	/* The next region's leading guard page lies below its base. */
	++it;
	if (it != regions.end() && it->second.device && a >= (uintptr_t)it->second.map &&
	    a < (uintptr_t)it->second.base)
		return &it->second;
	return NULL;
}

/* The live region containing [p, p + 1), or NULL. */
static const region *region_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	auto it = regions.upper_bound(a);
	if (it == regions.begin())
		return NULL;
	--it;
	const region &r = it->second;
	return a < (uintptr_t)r.base + (r.size ? r.size : 1) ? &r : NULL;
}

static void say(const char *msg)
{
	ssize_t unused = write(2, msg, strlen(msg));
	(void)unused;
}

static void on_segv(int sig, siginfo_t *info, void *uctx)
{
	uintptr_t a = (uintptr_t)info->si_addr;
	const region *r = region_around(a);
	if (r && r->device && window_depth > 0 && a >= (uintptr_t)r->data &&
	    a < (uintptr_t)(r->data + r->data_len) && n_opened < max_opened &&
	    mprotect(r->data, r->data_len, PROT_READ | PROT_WRITE) == 0) {
		/* Work inside a window reached this allocation: open it, and retry the access. */
		opened[n_opened].data = r->data;
		opened[n_opened].len = r->data_len;
		n_opened++;
		return;
	}
	if (!r || !r->device) {
		/* Not ours: let the previous handler (or the default action) have it. */
		sigaction(SIGSEGV, &previous_segv, NULL);
		(void)sig;
		(void)uctx;
		return;
	}
	char msg[512];
	long off = (long)(a - (uintptr_t)r->base);
	if (window_depth == 0)
		snprintf(msg, sizeof(msg),
			 "cudasim: rank %d: host code touched device memory at %p (byte %ld of a "
			 "%zu-byte cudaMalloc allocation): device memory is reached only through "
			 "copies, kernels and library calls\n",
			 rank(), (void *)a, off, r->size);
	else
		snprintf(msg, sizeof(msg),
			 "cudasim: rank %d: a kernel, copy or library call reached %p, byte %ld of a "
			 "%zu-byte device allocation: outside it (an illegal address on a GPU)\n",
			 rank(), (void *)a, off, r->size);
	say(msg);
	signal(SIGABRT, SIG_DFL);
	abort();
}

static void install_handler()
{
	struct sigaction sa, cur;
	sigaction(SIGSEGV, NULL, &cur);
	if (handler_installed && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_segv)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &previous_segv);
	handler_installed = true;
}

static void protect(const region &r, int prot)
{
	if (mprotect(r.data, r.data_len, prot) != 0)
		fatal("mprotect of a device allocation failed: %s", strerror(errno));
}

window::window()
{
	window_depth++;
}

window::~window()
{
	if (--window_depth > 0)
		return;
	for (int i = 0; i < n_opened; i++)
		if (mprotect(opened[i].data, opened[i].len, PROT_NONE) != 0)
			fatal("mprotect of a device allocation failed: %s", strerror(errno));
	n_opened = 0;
}

mem_kind classify(const void *p)
{
	const region *r = region_of(p);
	if (!r)
		return MEM_PAGEABLE;
	return r->device ? MEM_DEVICE : MEM_PINNED;
}

bool device_range(const void *p, size_t bytes)
{
	const region *r = region_of(p);
	if (!r || !r->device)
		return false;
	return (size_t)((const char *)p - r->base) + bytes <= r->size;
}

std::string describe(const void *p)
{
	char buf[160];
	if (!p)
		return "a NULL pointer";
	const region *r = region_of(p);
	if (!r) {
		const region *near = region_around((uintptr_t)p);
		if (near && near->device)
			snprintf(buf, sizeof(buf), "%p, outside the %zu-byte device allocation at %p", p,
				 near->size, (void *)near->base);
		else
			snprintf(buf, sizeof(buf), "%p, in no live allocation (host memory, or freed)", p);
		return buf;
	}
	snprintf(buf, sizeof(buf), "%p, byte %zu of a %zu-byte %s allocation", p,
		 (size_t)((const char *)p - r->base), r->size,
		 r->device ? "device (cudaMalloc)" : "pinned host (cudaMallocHost)");
	return buf;
}

cudaError_t device_alloc(void **ptr, size_t bytes)
{
	size_t page = page_size();
	size_t aligned = round_up(bytes ? bytes : 1, 256);
	if (device_bytes + aligned > device_memory_limit())
		return cudaErrorMemoryAllocation;
	region r;
	r.size = bytes;
	r.device = true;
	r.data_len = round_up(aligned, page);
	r.map_len = r.data_len + 2 * page;
	void *m = mmap(NULL, r.map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return cudaErrorMemoryAllocation;
	r.map = (char *)m;
	r.data = r.map + page;
	r.base = r.data + r.data_len - aligned;
	/* cudaMalloc does not clear: garbage, all bits set (NaN as float, -1 as integer). */
	protect(r, PROT_READ | PROT_WRITE);
	memset(r.data, 0xff, r.data_len);
	protect(r, PROT_NONE);
	install_handler();
	regions[(uintptr_t)r.base] = r;
	device_bytes += aligned;
	*ptr = r.base;
	return cudaSuccess;
}

cudaError_t device_free(void *ptr)
{
	auto it = regions.find((uintptr_t)ptr);
	if (it == regions.end() || !it->second.device)
		return cudaErrorInvalidValue;
	region r = it->second;
	regions.erase(it);
	for (int i = 0; i < n_opened; i++)
		if (opened[i].data == r.data)
			opened[i] = opened[--n_opened];
	device_bytes -= round_up(r.size ? r.size : 1, 256);
	munmap(r.map, r.map_len);
	return cudaSuccess;
}

cudaError_t pinned_alloc(void **ptr, size_t bytes)
{
	size_t len = round_up(bytes ? bytes : 1, page_size());
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return cudaErrorMemoryAllocation;
	region r = {};
	r.base = (char *)m;
	r.size = bytes;
	r.map = r.base;
	r.map_len = len;
	r.device = false;
	regions[(uintptr_t)r.base] = r;
	*ptr = m;
	return cudaSuccess;
}

cudaError_t pinned_free(void *ptr)
{
	auto it = regions.find((uintptr_t)ptr);
	if (it == regions.end() || it->second.device)
		return cudaErrorInvalidValue;
	munmap(it->second.map, it->second.map_len);
	regions.erase(it);
	return cudaSuccess;
}

} /* namespace cudasim */
