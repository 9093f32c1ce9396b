/* block_fibers.c - a thread block's threads as fibers, so that __syncthreads holds: block_fibers.h. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "block_fibers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

/* AddressSanitizer follows a switch of stacks only when told (its fiber annotations). */
#if defined(__SANITIZE_ADDRESS__)
#define BLOCK_FIBERS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCK_FIBERS_ASAN 1
#endif
#endif
#ifdef BLOCK_FIBERS_ASAN
#include <dlfcn.h>
#include <sanitizer/common_interface_defs.h>
#endif

/*
 * On x86-64, outside AddressSanitizer, a switch is a few instructions of our
 * own (block_fibers_switch below): the callee-saved registers pushed, the
 * stack pointer swapped, the other side's popped. glibc's _longjmp unwinds
 * its cleanup handlers on every jump (__pthread_cleanup_upto), and a
 * barrier-heavy kernel switches at each thread's every barrier: on the
 * simulator's measured LeNet-5 plan the jumps were a tenth of the run.
 * Elsewhere, and under the sanitizer (which must be told of each switch),
 * _setjmp/_longjmp as below.
 */
#if defined(__x86_64__) && !defined(BLOCK_FIBERS_ASAN)
#define BLOCK_FIBERS_OWN_SWITCH 1
#endif

/*
 * A fiber's stack top lies STACK_STAGGER bytes further down the mapping for
 * each fiber: the mappings are page-aligned, so the tops would otherwise share
 * their low address bits and the hot lines of every fiber's stack compete for
 * the same few cache sets as the block's threads take turns.
 */
enum { MAX_THREADS = 1024, STACK_BYTES = 256 << 10, STACK_STAGGER = 64 };

enum fiber_state { RUNNING, AT_BARRIER, RETURNED };

#ifdef BLOCK_FIBERS_OWN_SWITCH
/*
 * block_fibers_switch(&from, to): the callee-saved registers of the System V
 * ABI pushed on the running stack, its pointer stored in *from; then the
 * stack at `to`, its registers popped and its return taken. Neither the
 * signal mask nor the floating-point control words change between fibers of
 * one thread, so neither is saved.
 */
void block_fibers_switch(void **from, void *to);
__asm__(".pushsection .text\n"
	".p2align 4\n"
	".globl block_fibers_switch\n"
	".hidden block_fibers_switch\n"
	".type block_fibers_switch, @function\n"
	"block_fibers_switch:\n"
	"\tpushq %rbp\n"
	"\tpushq %rbx\n"
	"\tpushq %r12\n"
	"\tpushq %r13\n"
	"\tpushq %r14\n"
	"\tpushq %r15\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tpopq %r15\n"
	"\tpopq %r14\n"
	"\tpopq %r13\n"
	"\tpopq %r12\n"
	"\tpopq %rbx\n"
	"\tpopq %rbp\n"
	"\tret\n"
	".size block_fibers_switch, .-block_fibers_switch\n"
	".popsection\n");

/* A fiber's first switch "returns" into fiber_entry (start_fiber lays its stack out so). */
struct fiber {
	void *sp;       /* where it stopped: its saved registers, on its stack */
	void *stack;
	enum fiber_state state;
};
#else
/*
 * A fiber's first entry is a setcontext onto its own stack (ucontext); every
 * switch after is _setjmp/_longjmp, which saves no signal mask: no system call.
 */
struct fiber {
	ucontext_t start;
	jmp_buf at;     /* where it stopped */
	int started;
	void *stack;
	enum fiber_state state;
};
#endif

static struct {
	struct fiber fibers[MAX_THREADS];
#ifdef BLOCK_FIBERS_OWN_SWITCH
	void *scheduler;
#else
	jmp_buf scheduler;
#endif
	int active;             /* inside block_fibers_run */
	unsigned int current;   /* the fiber running */
	void (*body)(const void *);
	const void *arg;
	/* The block's sweep: block_fibers_run's arguments, and the next position in its order. */
	unsigned int threads, pos;
	int descending;
	unsigned int *thread_index;
	const struct block_fiber_hooks *hooks;
#ifdef BLOCK_FIBERS_ASAN
	void *fake_stack; /* the scheduler's, while a fiber runs */
	const void *sched_bottom;
	size_t sched_size;
#endif
} run;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "block_fibers: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/*
 * A switch: _longjmp to where `at` was set. Under AddressSanitizer, the C
 * library's own, not the sanitizer's interceptor, which unpoisons the whole
 * stack before every jump and asks the kernel for the signal stack to do it:
 * a system call a switch, most of a barrier-heavy kernel test's time. No
 * frame is ever jumped over here (each _setjmp is in the frame its _longjmp
 * returns to), and the fiber annotations tell the sanitizer of every switch.
 */
#ifdef BLOCK_FIBERS_ASAN
static void (*libc_longjmp)(struct __jmp_buf_tag *, int);

static void jump(jmp_buf at)
{
	if (!libc_longjmp) {
		void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
		if (libc)
			*(void **)&libc_longjmp = dlsym(libc, "_longjmp");
		if (!libc_longjmp)
			libc_longjmp = _longjmp;
	}
	libc_longjmp(at, 1); /* never returns; not said so, which would bring the sanitizer's unpoisoning back */
}
#else
#define jump(at) _longjmp(at, 1)
#endif

/*
 * A sweep runs the block's threads that have not returned, one after another
 * in the block's order, each until it waits at the barrier or returns.
 * sweep_next: the next of them (its position taken), or -1 after the last;
 * enter and leave frame each one's turn (*thread_index, the hooks).
 */
static int sweep_next(void)
{
	while (run.pos < run.threads) {
		unsigned int i = run.pos++;
		unsigned int t = run.descending ? run.threads - 1 - i : i;
		if (run.fibers[t].state != RETURNED)
			return (int)t;
	}
	return -1;
}

static void enter(unsigned int t)
{
	*run.thread_index = t;
	if (run.hooks && run.hooks->in)
		run.hooks->in(run.hooks->arg, t);
	run.current = t;
	run.fibers[t].state = RUNNING;
}

static void leave(void)
{
	if (run.hooks && run.hooks->out)
		run.hooks->out(run.hooks->arg, run.current);
}

#ifdef BLOCK_FIBERS_OWN_SWITCH
/*
 * The running fiber stops (it waits at the barrier or returned): the sweep's
 * next thread runs, switched to directly, or after the last the scheduler.
 * One switch a turn where going through the scheduler took two; the order,
 * the hooks and the states are the same.
 */
static void stop(void)
{
	struct fiber *f = &run.fibers[run.current];
	leave();
	int t = sweep_next();
	if (t < 0) {
		block_fibers_switch(&f->sp, run.scheduler);
		return;
	}
	enter((unsigned int)t);
	block_fibers_switch(&f->sp, run.fibers[t].sp);
}
#else
/* The running fiber stops (it waits at the barrier or returned): back to the scheduler. */
static void stop(void)
{
	struct fiber *f = &run.fibers[run.current];
#if defined(BLOCK_FIBERS_ASAN)
	void *fake = NULL;
	if (_setjmp(f->at) == 0) {
		__sanitizer_start_switch_fiber(&fake, run.sched_bottom, run.sched_size);
		jump(run.scheduler);
	}
	__sanitizer_finish_switch_fiber(fake, &run.sched_bottom, &run.sched_size);
#else
	if (_setjmp(f->at) == 0)
		jump(run.scheduler);
#endif
}
#endif

/* A fiber runs a thread of each block it is given, from its first call to its return. */
static void fiber_main(void)
{
#ifdef BLOCK_FIBERS_ASAN
	__sanitizer_finish_switch_fiber(NULL, &run.sched_bottom, &run.sched_size);
#endif
	for (;;) {
		run.body(run.arg);
		run.fibers[run.current].state = RETURNED;
		stop();
	}
}

#ifdef BLOCK_FIBERS_OWN_SWITCH
/* The bottom frame of every fiber: fiber_main never returns. */
static void fiber_entry(void)
{
	fiber_main();
	abort();
}

/* One sweep: into its first thread; back once its last has stopped. */
static void sweep(void)
{
	run.pos = 0;
	int t = sweep_next();
	if (t < 0)
		return;
	enter((unsigned int)t);
	block_fibers_switch(&run.scheduler, run.fibers[t].sp);
}
#else
/* From the scheduler into fiber t (entered) until it stops. */
static void resume(unsigned int t)
{
	struct fiber *f = &run.fibers[t];
	if (_setjmp(run.scheduler) == 0) {
#ifdef BLOCK_FIBERS_ASAN
		__sanitizer_start_switch_fiber(&run.fake_stack, f->stack, STACK_BYTES);
#endif
		if (f->started) {
			jump(f->at);
		} else {
			f->started = 1;
			setcontext(&f->start);
			perror("block_fibers: setcontext");
			abort();
		}
	}
#ifdef BLOCK_FIBERS_ASAN
	__sanitizer_finish_switch_fiber(run.fake_stack, NULL, NULL);
#endif
}

/* One sweep: each of its threads resumed from here until it stops. */
static void sweep(void)
{
	run.pos = 0;
	for (int t; (t = sweep_next()) >= 0;) {
		enter((unsigned int)t);
		resume((unsigned int)t);
		leave();
	}
}
#endif

/* Fiber t, ready to start a thread: made the first time it is needed, reused after. */
static void start_fiber(unsigned int t)
{
	struct fiber *f = &run.fibers[t];
	if (!f->stack) {
		f->stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (f->stack == MAP_FAILED) {
			perror("block_fibers: mmap of a fiber stack");
			abort();
		}
		size_t size = STACK_BYTES - (size_t)t * STACK_STAGGER;
#ifdef BLOCK_FIBERS_OWN_SWITCH
		/*
		 * The stack as a switch away from fiber_entry's caller would leave
		 * it: a return address of none, fiber_entry to return into (entered
		 * with the stack 16-byte aligned but for that return address, as a
		 * call leaves it), and six callee-saved registers, zero.
		 */
		void **top = (void **)((char *)f->stack + (size & ~(size_t)15));
		*--top = NULL;
		*--top = (void *)fiber_entry;
		for (int i = 0; i < 6; i++)
			*--top = NULL;
		f->sp = top;
#else
		if (getcontext(&f->start) != 0) {
			perror("block_fibers: getcontext");
			abort();
		}
		f->start.uc_stack.ss_sp = f->stack;
		f->start.uc_stack.ss_size = size;
		f->start.uc_link = NULL; /* fiber_main never returns */
		makecontext(&f->start, fiber_main, 0);
#endif
	}
	f->state = RUNNING;
}

void block_fibers_run(const char *kernel, unsigned int block, unsigned int threads,
		      unsigned int *thread_index, void (*body)(const void *arg), const void *arg,
		      const struct block_fiber_hooks *hooks, int descending)
{
	if (threads == 0 || threads > MAX_THREADS)
		fail("%s: block %u of %u threads (at most %u)", kernel, block, threads, (unsigned int)MAX_THREADS);
	if (run.active)
		fail("%s: block %u launched while a block runs", kernel, block);
	run.active = 1;
	run.body = body;
	run.arg = arg;
	run.threads = threads;
	run.descending = descending;
	run.thread_index = thread_index;
	run.hooks = hooks;
	for (unsigned int t = 0; t < threads; t++)
		start_fiber(t);
	for (unsigned int barrier = 0;; barrier++) {
		unsigned int waiting = 0, returned = 0;
		sweep();
		for (unsigned int t = 0; t < threads; t++) {
			waiting += run.fibers[t].state == AT_BARRIER;
			returned += run.fibers[t].state == RETURNED;
		}
		if (waiting == 0)
			break;
		if (returned > 0)
			fail("%s: block %u: %u threads wait at a __syncthreads that the block's other "
			     "threads never reach (they returned; CUDA requires a barrier's condition "
			     "to be the same across the block), barrier %u",
			     kernel, block, waiting, barrier + 1);
	}
	*thread_index = 0;
	run.active = 0;
}

void block_fibers_sync(void)
{
	if (!run.active)
		fail("__syncthreads in a kernel launched with KERNEL_LAUNCH; a kernel whose threads "
		     "wait at barriers is launched with KERNEL_LAUNCH_COOP");
	run.fibers[run.current].state = AT_BARRIER;
	stop();
}
