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
#define dv_load CD_NAME(dv_load)
#define dv_store CD_NAME(dv_store)
#define dgrad_block CD_NAME(dgrad_block)
#define dgrad_all CD_NAME(dgrad_all)

typedef float dvec __attribute__((vector_size(DV * sizeof(float))));

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

#undef DV
#undef dvec
#undef dv_load
#undef dv_store
#undef dgrad_block
#undef dgrad_all
