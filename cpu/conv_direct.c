/*
 * conv_direct.c - direct convolution kernels for the host backend: see
 * cpu/conv_direct.h. The batch is innermost (include/conv_shape.h), so a
 * pixel's images are a contiguous run: a kernel holds a block of outputs
 * (a few channels by a few runs of DV images) in vector registers and adds
 * one tap to all of them per load of its input run and broadcast of its
 * weights. The vectors are GCC's vector extensions, DV floats wide; each
 * kernel is one always_inline body compiled three times, for AVX-512,
 * AVX2 and the baseline, with register blocks that fit each ISA's
 * registers (32 zmm, 16 ymm, 16 xmm), and host_isa() picks one at run time.
 * A block's shape never changes what is summed in which order, only how
 * many outputs are summed at once; but the weight gradient sums in DV lanes,
 * and this file is built with -ffp-contract=fast (multiply-adds become FMAs
 * where the ISA has them), so the ISAs agree to rounding, not bit for bit,
 * as a GEMM's results do. The element bodies (bias, ReLU, the pool's
 * choice) are bitwise elem.h's on every path.
 */
#include "conv_direct.h"

#include <stdlib.h>
#include <string.h>

#include "elem.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define CONV_DIRECT_X86 1
#else
#define CONV_DIRECT_X86 0
#endif

#define INLINE static inline __attribute__((always_inline))

/* ---- which ISA ------------------------------------------------------------------------ */

const char *host_isa_name(enum host_isa isa)
{
	return isa == HOST_ISA_AVX512 ? "avx512" : isa == HOST_ISA_AVX2 ? "avx2" : "generic";
}

enum host_isa host_cpu_isa(void)
{
	enum host_isa best = HOST_ISA_GENERIC;
#if CONV_DIRECT_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		best = HOST_ISA_AVX2;
	if (best == HOST_ISA_AVX2 && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl"))
		best = HOST_ISA_AVX512;
#endif
	return best;
}

static enum host_isa host_isa_detect(void)
{
	enum host_isa best = host_cpu_isa();
	const char *want = getenv("MNIST_DDP_HOST_ISA");
	if (want) {
		enum host_isa cap = !strcmp(want, "generic") ? HOST_ISA_GENERIC
				    : !strcmp(want, "avx2")  ? HOST_ISA_AVX2
							     : HOST_ISA_AVX512;
		if (cap < best)
			best = cap;
	}
	return best;
}

enum host_isa host_isa(void)
{
	static int isa = -1; /* every thread that finds it unset computes the same value */
	int v = __atomic_load_n(&isa, __ATOMIC_RELAXED);
	if (v < 0) {
		v = (int)host_isa_detect();
		__atomic_store_n(&isa, v, __ATOMIC_RELAXED);
	}
	return (enum host_isa)v;
}

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

#define DG_CB 6 /* input gradient: channels of a block, at most */
#define DG_NV 4 /* input gradient: runs of DV images of a block, at most */
#define WG_OB 4 /* weight gradient: output channels of a block, at most */
#define WG_TB 6 /* weight gradient: taps of a block, at most */
#define FW_OB 6 /* forward: output channels of a block, at most */
#define FW_FP 4 /* forward: pixels of a pool window summed at once, at most */

#define CD_CAT2(a, b) a##_##b
#define CD_CAT(a, b) CD_CAT2(a, b)
#define CD_NAME(x) CD_CAT(x, CD_ISA)

#if CONV_DIRECT_X86
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define CD_DV 16
#define CD_ISA avx512
#include "conv_direct_body.h"
#undef CD_DV
#undef CD_ISA
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define CD_DV 8
#define CD_ISA avx2
#include "conv_direct_body.h"
#undef CD_DV
#undef CD_ISA
#pragma GCC pop_options
#endif

#define CD_DV 4
#define CD_ISA generic
#include "conv_direct_body.h"
#undef CD_DV
#undef CD_ISA

/* NAME##_avx512, _avx2 or _generic (ARGS...), as host_isa() says: each public kernel's body. */
#if CONV_DIRECT_X86
#define ISA_DISPATCH(name, ...)                                                            \
	do {                                                                               \
		enum host_isa isa_ = host_isa();                                           \
		if (isa_ == HOST_ISA_AVX512)                                               \
			name##_avx512(__VA_ARGS__);                                        \
		else if (isa_ == HOST_ISA_AVX2)                                            \
			name##_avx2(__VA_ARGS__);                                          \
		else                                                                       \
			name##_generic(__VA_ARGS__);                                       \
	} while (0)
#else
#define ISA_DISPATCH(name, ...) name##_generic(__VA_ARGS__)
#endif

#define INPUT_GRAD_ARGS                                                                    \
	const float *w, const float *dz, const struct conv_shape *s, int oc, int batch, float *dx

#if CONV_DIRECT_X86
__attribute__((target("arch=x86-64-v4"))) static void input_grad_avx512(INPUT_GRAD_ARGS)
{
	dgrad_all_avx512(w, dz, s, oc, batch, dx, 6, 4); /* 24 of 32 zmm accumulate */
}
__attribute__((target("arch=x86-64-v3"))) static void input_grad_avx2(INPUT_GRAD_ARGS)
{
	dgrad_all_avx2(w, dz, s, oc, batch, dx, 6, 2); /* 12 of 16 ymm */
}
#endif
static void input_grad_generic(INPUT_GRAD_ARGS)
{
	dgrad_all_generic(w, dz, s, oc, batch, dx, 6, 2); /* 12 of 16 xmm */
}

void conv_direct_input_grad(INPUT_GRAD_ARGS)
{
	ISA_DISPATCH(input_grad, w, dz, s, oc, batch, dx);
}

#define WEIGHT_GRAD_ARGS                                                                   \
	const float *dz, const float *x, const struct conv_shape *s, int oc, int batch, float *dw

#if CONV_DIRECT_X86
__attribute__((target("arch=x86-64-v4"))) static void weight_grad_avx512(WEIGHT_GRAD_ARGS)
{
	wgrad_all_avx512(dz, x, s, oc, batch, dw, 4, 5); /* 20 of 32 zmm accumulate */
}
__attribute__((target("arch=x86-64-v3"))) static void weight_grad_avx2(WEIGHT_GRAD_ARGS)
{
	wgrad_all_avx2(dz, x, s, oc, batch, dw, 2, 5); /* 10 of 16 ymm */
}
#endif
static void weight_grad_generic(WEIGHT_GRAD_ARGS)
{
	wgrad_all_generic(dz, x, s, oc, batch, dw, 2, 5); /* 10 of 16 xmm */
}

void conv_direct_weight_grad(WEIGHT_GRAD_ARGS)
{
	ISA_DISPATCH(weight_grad, dz, x, s, oc, batch, dw);
}

#define FORWARD_ARGS                                                                       \
	const float *x, const float *w, const float *b, const struct conv_shape *s,         \
		const struct pool_shape *ps, int oc, int batch, float *y, int32_t *arg

#if CONV_DIRECT_X86
__attribute__((target("arch=x86-64-v4"))) static void forward_avx512(FORWARD_ARGS)
{
	fwd_all_avx512(x, w, b, s, ps, oc, batch, y, arg, 6, 4); /* 24 of 32 zmm accumulate */
}
__attribute__((target("arch=x86-64-v3"))) static void forward_avx2(FORWARD_ARGS)
{
	fwd_all_avx2(x, w, b, s, ps, oc, batch, y, arg, 6, 2); /* 12 of 16 ymm */
}
#endif
static void forward_generic(FORWARD_ARGS)
{
	fwd_all_generic(x, w, b, s, ps, oc, batch, y, arg, 6, 2); /* 12 of 16 xmm */
}

void conv_direct_forward(FORWARD_ARGS)
{
	ISA_DISPATCH(forward, x, w, b, s, ps, oc, batch, y, arg);
}
