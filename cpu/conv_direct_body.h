/*
 * conv_direct_body.h - the bodies of cpu/conv_direct.c's kernels, included
 * there once per ISA with these defined (and undefined after):
 *   CD_DV      floats per vector: 16 (AVX-512), 8 (AVX2), 4 (SSE2)
 *   CD_NAME(x) x with the ISA's suffix, so that each inclusion's functions
 *              and vector type have names of their own
 * inside a #pragma GCC target region for the ISA. The block shapes
 * (constants at the call sites in conv_direct.c) fit the ISA's registers.
 * Not a header of its own: only conv_direct.c includes it.
 */
#define DV CD_DV
#define dvec CD_NAME(dvec)
#define dimask CD_NAME(dimask)
#define dv_bias_relu CD_NAME(dv_bias_relu)
#define dv_takes CD_NAME(dv_takes)
#define dv_load CD_NAME(dv_load)
#define dv_store CD_NAME(dv_store)
#define dv_hold CD_NAME(dv_hold)
#define dgrad_block CD_NAME(dgrad_block)
#define dgrad_all CD_NAME(dgrad_all)
#define wgrad_block CD_NAME(wgrad_block)
#define wgrad_all CD_NAME(wgrad_all)
#define fwd_window CD_NAME(fwd_window)
#define fwd_all CD_NAME(fwd_all)

typedef float dvec __attribute__((vector_size(DV * sizeof(float))));
typedef int32_t dimask __attribute__((vector_size(DV * sizeof(int32_t)))); /* lanes 0 or -1 */

/* n <= DV floats from p; n is DV (a constant) on every path but a ragged batch's last run. */
INLINE dvec dv_load(const float *p, int n)
{
	dvec v = {0};
	if (n == DV)
		memcpy(&v, p, sizeof(v));
	else
		for (int j = 0; j < n; j++)
			v[j] = p[j];
	return v;
}

/*
 * Keep v in a register: one load of an x run then feeds every channel's
 * multiply-add. Left alone, GCC folds the load into each of them (a load per
 * channel: on AVX2 the weight gradient ran at 60% of the speed, measured in
 * docs/benchmarks.md). An empty asm that says it changes v; no instruction.
 */
INLINE void dv_hold(dvec *v)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__("" : "+v"(*v));
#else
	(void)v;
#endif
}

INLINE void dv_store(float *p, dvec v, int n)
{
	if (n == DV)
		memcpy(p, &v, sizeof(v));
	else
		for (int j = 0; j < n; j++)
			p[j] = v[j];
}

/* ---- input gradient: the transposed convolution --------------------------------------- */


/*
 * dx at pixel (iy, ix) for channels ci0 .. ci0+cb-1 (cb <= CB) and NV runs
 * of n images from b0 (n < DV only with NV == 1). CB and NV are constants
 * where inlined; a block past the last channel reads the last channel's
 * weights and stores nothing.
 */
INLINE void dgrad_block(const float *w, const float *dz, const struct conv_shape *s, int oc,
			size_t nb, int ci0, int cb, int iy, int ix, size_t b0, int n, float *dx,
			const int CB, const int NV)
{
	const int k = s->k, kk = k * k;
	const size_t fan = (size_t)s->c * kk, plane = (size_t)s->oh * s->ow * nb;
	int ky0 = imax(0, iy + s->pad - (s->oh - 1)), ky1 = imin(k - 1, iy + s->pad);
	int kx0 = imax(0, ix + s->pad - (s->ow - 1)), kx1 = imin(k - 1, ix + s->pad);
	dvec acc[DG_CB][DG_NV]; /* fixed sizes, not CB by NV: a VLA would live in memory */
#pragma GCC unroll 8
	for (int u = 0; u < CB; u++)
#pragma GCC unroll 4
		for (int q = 0; q < NV; q++)
			acc[u][q] = (dvec){0};
	for (int co = 0; co < oc; co++) {
		const float *wc = w + (size_t)co * fan + (size_t)ci0 * kk;
		const float *dzc = dz + (size_t)co * plane + b0;
		for (int ky = ky0; ky <= ky1; ky++) {
			int oy = iy + s->pad - ky;
			for (int kx = kx0; kx <= kx1; kx++) {
				int ox = ix + s->pad - kx;
				const float *p = dzc + ((size_t)oy * s->ow + ox) * nb;
				dvec v[DG_NV];
#pragma GCC unroll 4
				for (int q = 0; q < NV; q++)
					v[q] = dv_load(p + q * DV, n);
#pragma GCC unroll 8
				for (int u = 0; u < CB; u++) {
					float a = wc[(size_t)imin(u, cb - 1) * kk + ky * k + kx];
#pragma GCC unroll 4
					for (int q = 0; q < NV; q++)
						acc[u][q] += a * v[q];
				}
			}
		}
	}
#pragma GCC unroll 8
	for (int u = 0; u < CB; u++) {
		if (u >= cb)
			break;
		float *o = dx + (((size_t)(ci0 + u) * s->h + iy) * s->w + ix) * nb + b0;
#pragma GCC unroll 4
		for (int q = 0; q < NV; q++)
			dv_store(o + q * DV, acc[u][q], n);
	}
}

INLINE void dgrad_all(const float *w, const float *dz, const struct conv_shape *s, int oc,
		      int batch, float *dx, const int CB, const int NV)
{
	size_t nb = (size_t)batch;
	size_t full = nb - nb % DV, wide = nb - nb % ((size_t)NV * DV);
	for (int ci0 = 0; ci0 < s->c; ci0 += CB) {
		int cb = imin(CB, s->c - ci0);
		for (int iy = 0; iy < s->h; iy++)
			for (int ix = 0; ix < s->w; ix++) {
				size_t b0 = 0;
				for (; b0 < wide; b0 += (size_t)NV * DV)
					dgrad_block(w, dz, s, oc, nb, ci0, cb, iy, ix, b0, DV, dx, CB, NV);
				for (; b0 < full; b0 += DV)
					dgrad_block(w, dz, s, oc, nb, ci0, cb, iy, ix, b0, DV, dx, CB, 1);
				if (b0 < nb)
					dgrad_block(w, dz, s, oc, nb, ci0, cb, iy, ix, b0, (int)(nb - b0),
						    dx, CB, 1);
			}
	}
}

/* ---- weight gradient: dz against the taps of x ---------------------------------------- */

/*
 * dW for output channels co0 .. co0+ob-1 (ob <= OB) and taps kx0 ..
 * kx0+TB-1 of row (ci, ky): each a sum over output pixels (oy, ox), then
 * runs of DV images, of dz * x at the tap, in DV lanes summed in order at
 * the end (as cpu/gemm_small.c's dot form sums a row of dz against a row of
 * the im2col matrix). A tap past the row's end, or reading the padding, reads
 * zeros; a block past the last channel reads the last channel's dz and
 * stores nothing. OB and TB are constants where inlined.
 */
INLINE void wgrad_block(const float *dz, const float *x, const struct conv_shape *s, int oc,
			size_t nb, int co0, int ci, int ky, int kx0, float *dw, const int OB,
			const int TB)
{
	static const float zeros[DV];
	const int k = s->k;
	const size_t plane = (size_t)s->oh * s->ow * nb, fan = (size_t)s->c * k * k;
	const size_t full = nb - nb % DV;
	dvec acc[WG_OB][WG_TB];
#pragma GCC unroll 8
	for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
		for (int t = 0; t < TB; t++)
			acc[o][t] = (dvec){0};
	for (int oy = 0; oy < s->oh; oy++) {
		int iy = oy + ky - s->pad;
		if (iy < 0 || iy >= s->h)
			continue;
		const float *xrow = x + ((size_t)ci * s->h + iy) * s->w * nb;
		for (int ox = 0; ox < s->ow; ox++) {
			const float *dzp[WG_OB], *xp[WG_TB];
			size_t xstep[WG_TB];
			int all_in = 1;
#pragma GCC unroll 8
			for (int o = 0; o < OB; o++)
				dzp[o] = dz + (size_t)imin(co0 + o, oc - 1) * plane +
					 ((size_t)oy * s->ow + ox) * nb;
#pragma GCC unroll 8
			for (int t = 0; t < TB; t++) {
				int ix = ox + kx0 + t - s->pad;
				int in = kx0 + t < k && ix >= 0 && ix < s->w;
				xp[t] = in ? xrow + (size_t)ix * nb : zeros;
				xstep[t] = in ? DV : 0;
				all_in &= in;
			}
			if (all_in) {
				/*
				 * Every tap reads x: the same sums, with each x run
				 * found from b0 as dz's is, so that no tap keeps a
				 * pointer and a step of its own in the loop (with
				 * 16 registers they spilled). With whole vectors of
				 * images, this pixel and the row's next ones that
				 * read every tap (those left of the padding on the
				 * right) are one run of memory in dz and in x: one
				 * loop, in the same order.
				 */
				size_t len = full;
				if (full == nb) {
					int last = imin(s->ow, s->w + s->pad - kx0 - TB + 1);
					len = (size_t)(last - ox) * nb;
					ox = last - 1;
				}
				for (size_t b0 = 0; b0 < len; b0 += DV) {
					dvec d[WG_OB];
#pragma GCC unroll 8
					for (int o = 0; o < OB; o++)
						d[o] = dv_load(dzp[o] + b0, DV);
#pragma GCC unroll 8
					for (int t = 0; t < TB; t++) {
						dvec v = dv_load(xp[t] + b0, DV);
						dv_hold(&v);
#pragma GCC unroll 8
						for (int o = 0; o < OB; o++)
							acc[o][t] += d[o] * v;
					}
				}
				if (full == nb)
					continue;
#pragma GCC unroll 8
				for (int t = 0; t < TB; t++)
					xp[t] += full;
			}
			for (size_t b0 = all_in ? full : 0; b0 < nb; b0 += DV) {
				int n = b0 < full ? DV : (int)(nb - b0);
				dvec d[WG_OB];
#pragma GCC unroll 8
				for (int o = 0; o < OB; o++)
					d[o] = n == DV ? dv_load(dzp[o] + b0, DV) : dv_load(dzp[o] + b0, n);
#pragma GCC unroll 8
				for (int t = 0; t < TB; t++) {
					dvec v = n == DV ? dv_load(xp[t], DV) : dv_load(xp[t], n);
					dv_hold(&v);
					xp[t] += xstep[t];
#pragma GCC unroll 8
					for (int o = 0; o < OB; o++)
						acc[o][t] += d[o] * v;
				}
			}
		}
	}
#pragma GCC unroll 8
	for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
		for (int t = 0; t < TB; t++) {
			if (co0 + o >= oc || kx0 + t >= k)
				continue;
			float sum = 0.0f;
			for (int l = 0; l < DV; l++)
				sum += acc[o][t][l];
			dw[(size_t)(co0 + o) * fan + ((size_t)ci * k + ky) * k + kx0 + t] = sum;
		}
}

INLINE void wgrad_all(const float *dz, const float *x, const struct conv_shape *s, int oc,
		      int batch, float *dw, const int OB, const int TB)
{
	for (int co0 = 0; co0 < oc; co0 += OB)
		for (int ci = 0; ci < s->c; ci++)
			for (int ky = 0; ky < s->k; ky++)
				for (int kx0 = 0; kx0 < s->k; kx0 += TB)
					wgrad_block(dz, x, s, oc, (size_t)batch, co0, ci, ky, kx0, dw, OB,
						    TB);
}

/* ---- forward: convolution, bias, ReLU and max-pool in one pass ---------------------------- */

/*
 * Pool window (py, px) of output channels co0 .. co0+ob-1 (ob <= OB) for n
 * images from b0: the window's pixels in scan order, FP at a time, each the
 * sum over taps (ci, ky, kx) ascending of w * x (a tap in the padding reads
 * zeros: the im2col matrix's column, summed as cpu/gemm_small.c sums it),
 * then bias_act_elem and maxpool_takes_elem / select_elem as
 * maxpool_window_elem runs them, in vectors: the element bodies' operations
 * lane by lane (dv_bias_relu, dv_takes; tests/test_kernels_conv.c holds
 * them bitwise against the CUDA kernels, NaN and infinities included).
 * OB, FP and EDGE (0: every tap of the window inside the image, no test)
 * are constants where inlined.
 */
INLINE dvec dv_bias_relu(dvec z, float b) /* bias_act_elem(z, b, 1) */
{
	dvec y = z + b;
	return (dvec)((dimask)y & (y > 0.0f)); /* !(y > 0) (NaN included): 0 */
}

INLINE dimask dv_takes(dvec v, dvec best) /* maxpool_takes_elem */
{
	return (v > best) | ((v != v) & (best == best));
}

INLINE void fwd_window(const float *x, const float *w, const float *bias,
		       const struct conv_shape *s, const struct pool_shape *ps, int oc, size_t nb,
		       int co0, int py, int px, size_t b0, int n, float *y, int32_t *arg,
		       const int OB, const int FP, const int EDGE)
{
	static const float zeros[DV];
	const int k = s->k, pk = ps->k, npix = pk * pk;
	const size_t fan = (size_t)s->c * k * k, chan = (size_t)s->h * s->w * nb;
	dvec best[FW_OB] = {{0}};
	dimask at[FW_OB] = {{0}};
	for (int j0 = 0; j0 < npix; j0 += FP) {
		dvec acc[FW_OB][FW_FP];
		int oy[FW_FP], ox[FW_FP];
#pragma GCC unroll 8
		for (int j = 0; j < FP; j++) {
			int jj = imin(j0 + j, npix - 1); /* past the window: a repeat, not kept */
			oy[j] = py * pk + jj / pk;
			ox[j] = px * pk + jj % pk;
		}
#pragma GCC unroll 8
		for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
			for (int j = 0; j < FP; j++)
				acc[o][j] = (dvec){0};
		for (int ci = 0; ci < s->c; ci++) {
			const float *xc = x + (size_t)ci * chan + b0;
			for (int ky = 0; ky < k; ky++) {
				const float *row[FW_FP];
				int row_in[FW_FP];
#pragma GCC unroll 8
				for (int j = 0; j < FP; j++) {
					int iy = oy[j] + ky - s->pad;
					row_in[j] = !EDGE || (iy >= 0 && iy < s->h);
					row[j] = xc + ((ptrdiff_t)iy * s->w + ox[j] - s->pad) * (ptrdiff_t)nb;
				}
				const float *wk = w + ((size_t)ci * k + ky) * k;
				for (int kx = 0; kx < k; kx++) {
					dvec v[FW_FP];
#pragma GCC unroll 8
					for (int j = 0; j < FP; j++) {
						const float *p = row[j] + (size_t)kx * nb;
						if (EDGE) {
							int ix = ox[j] + kx - s->pad;
							if (!row_in[j] || ix < 0 || ix >= s->w)
								p = zeros;
						}
						v[j] = dv_load(p, n);
					}
#pragma GCC unroll 8
					for (int o = 0; o < OB; o++) {
						float a = wk[(size_t)imin(co0 + o, oc - 1) * fan + kx];
#pragma GCC unroll 8
						for (int j = 0; j < FP; j++)
							acc[o][j] += a * v[j];
					}
				}
			}
		}
		/* Bias, ReLU and the pool's running maximum, pixel by pixel in scan order. */
#pragma GCC unroll 8
		for (int o = 0; o < OB; o++) {
			const float b = bias[imin(co0 + o, oc - 1)];
#pragma GCC unroll 8
			for (int j = 0; j < FP; j++) {
				int jj = j0 + j;
				if (jj >= npix)
					break;
				dvec u = dv_bias_relu(acc[o][j], b);
				if (jj == 0) {
					best[o] = u;
					at[o] = (dimask){0};
					continue;
				}
				dimask take = dv_takes(u, best[o]);
				best[o] = (dvec)(((dimask)u & take) | ((dimask)best[o] & ~take));
				at[o] = (jj & take) | (at[o] & ~take);
			}
		}
	}
	const size_t out_ch = (size_t)ps->oh * ps->ow * nb, o0 = ((size_t)py * ps->ow + px) * nb + b0;
#pragma GCC unroll 8
	for (int o = 0; o < OB; o++) {
		if (co0 + o >= oc)
			break;
		dv_store(y + (size_t)(co0 + o) * out_ch + o0, best[o], n);
		int32_t *ao = arg + (size_t)(co0 + o) * out_ch + o0;
		if (n == DV)
			memcpy(ao, &at[o], sizeof(at[o]));
		else
			for (int l = 0; l < n; l++)
				ao[l] = at[o][l];
	}
}

INLINE void fwd_all(const float *x, const float *w, const float *bias, const struct conv_shape *s,
		    const struct pool_shape *ps, int oc, int batch, float *y, int32_t *arg,
		    const int OB, const int FP)
{
	size_t nb = (size_t)batch, full = nb - nb % DV;
	for (int co0 = 0; co0 < oc; co0 += OB)
		for (int py = 0; py < ps->oh; py++)
			for (int px = 0; px < ps->ow; px++) {
				size_t b0 = 0;
				/* Every tap of the window inside the image: no tests in its loops. */
				int inside = py * ps->k - s->pad >= 0 && px * ps->k - s->pad >= 0 &&
					     (py + 1) * ps->k - 1 + s->k - 1 - s->pad < s->h &&
					     (px + 1) * ps->k - 1 + s->k - 1 - s->pad < s->w;
				for (; b0 < full; b0 += DV) {
					if (inside)
						fwd_window(x, w, bias, s, ps, oc, nb, co0, py, px, b0, DV,
							   y, arg, OB, FP, 0);
					else
						fwd_window(x, w, bias, s, ps, oc, nb, co0, py, px, b0, DV,
							   y, arg, OB, FP, 1);
				}
				if (b0 < nb)
					fwd_window(x, w, bias, s, ps, oc, nb, co0, py, px, b0,
						   (int)(nb - b0), y, arg, OB, FP, 1);
			}
}

#undef DV
#undef dvec
#undef dimask
#undef dv_bias_relu
#undef dv_takes
#undef dv_load
#undef dv_store
#undef dv_hold
#undef dgrad_block
#undef dgrad_all
#undef wgrad_block
#undef wgrad_all
#undef fwd_window
#undef fwd_all
