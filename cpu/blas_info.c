/*
 * blas_info.c - which kernels the host backend's math runs on, and advice
 * when OpenBLAS chose pre-AVX2 kernels on a CPU with AVX2 (cpu/blas_info.h).
 */
#include "blas_info.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>


int blas_advice(const char *core, enum host_isa cpu, int user_set, char *out, size_t cap)
{
	static const char *const wide[] = { "Haswell", "Zen", "SkylakeX", "Cooperlake",
					    "SapphireRapids" };
	if (cap)
		out[0] = '\0';
	if (user_set || !core || cpu == HOST_ISA_GENERIC)
		return 0;
	for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++)
		if (!strcasecmp(core, wide[i]))
			return 0;
	const char *want = cpu == HOST_ISA_AVX512 ? "SkylakeX" : "Haswell";
	snprintf(out, cap,
		 "OpenBLAS runs its %s kernels on this CPU, which has %s (OpenBLAS does not know "
		 "the model); set OPENBLAS_CORETYPE=%s for GEMMs several times faster "
		 "(mpirun -x OPENBLAS_CORETYPE=%s ...)",
		 core, cpu == HOST_ISA_AVX512 ? "AVX-512" : "AVX2", want, want);
	return 1;
}

void blas_describe(char *out, size_t cap)
{
	int threads = openblas_get_num_threads();
	snprintf(out, cap, "cpu %s (OpenBLAS %s, %d thread%s)", host_isa_name(host_isa()),
		 openblas_get_corename(), threads, threads == 1 ? "" : "s");
}

void blas_advise(int rank, const char *host, int local_rank)
{
	char text[320];
	if (local_rank == 0 &&
	    blas_advice(openblas_get_corename(), host_cpu_isa(), getenv("OPENBLAS_CORETYPE") != NULL,
			text, sizeof(text)))
		fprintf(stderr, "mnist-train: rank %d on %s: %s\n", rank, host, text);
}
