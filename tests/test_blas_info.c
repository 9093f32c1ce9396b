/*
 * test_blas_info.c - the host backend's device line and its OpenBLAS advice
 * (cpu/blas_info.c).
 *
 *   ctest --test-dir build -R test_blas_info --output-on-failure
 *
 * blas_advice: a pre-AVX2 core (Prescott: what OpenBLAS 0.3.21 ran on an
 * AVX-512 Xeon it did not know; Nehalem, Sandybridge, Barcelona) on an AVX2 or
 * AVX-512 CPU gets the OPENBLAS_CORETYPE to set; the AVX2 and AVX-512 cores in
 * any case, a CPU without AVX2, and a value the user set get none.
 * blas_describe: names this process's ISA path and OpenBLAS's core and threads.
 */
#include <criterion/criterion.h>

#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "blas_info.h"
#include "conv_direct.h"

static int advice(const char *core, enum host_isa cpu, int user_set, char *out, size_t cap)
{
	memset(out, 'x', cap);
	return blas_advice(core, cpu, user_set, out, cap);
}

Test(blas_info, old_cores_on_wide_cpus_get_the_coretype)
{
	static const char *const old[] = { "Prescott", "Nehalem", "Sandybridge", "Barcelona", "Core2" };
	char out[320];
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
		cr_assert_eq(advice(old[i], HOST_ISA_AVX512, 0, out, sizeof(out)), 1, "%s", old[i]);
		cr_assert(strstr(out, "OPENBLAS_CORETYPE=SkylakeX"), "%s: %s", old[i], out);
		cr_assert(strstr(out, old[i]) && strstr(out, "AVX-512"), "%s: %s", old[i], out);
		cr_assert_eq(advice(old[i], HOST_ISA_AVX2, 0, out, sizeof(out)), 1, "%s", old[i]);
		cr_assert(strstr(out, "OPENBLAS_CORETYPE=Haswell") && !strstr(out, "SkylakeX"), "%s: %s",
			  old[i], out);
	}
}

Test(blas_info, no_advice_otherwise)
{
	static const char *const wide[] = { "Haswell", "Zen", "SkylakeX", "Cooperlake",
					    "SapphireRapids", "haswell", "SKYLAKEX" };
	char out[320];
	for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++) {
		cr_assert_eq(advice(wide[i], HOST_ISA_AVX512, 0, out, sizeof(out)), 0, "%s", wide[i]);
		cr_assert_str_empty(out);
		cr_assert_eq(advice(wide[i], HOST_ISA_AVX2, 0, out, sizeof(out)), 0, "%s", wide[i]);
	}
	cr_assert_eq(advice("Prescott", HOST_ISA_GENERIC, 0, out, sizeof(out)), 0);
	cr_assert_str_empty(out);
	cr_assert_eq(advice("Prescott", HOST_ISA_AVX512, 1, out, sizeof(out)), 0, "the user's value stands");
	cr_assert_str_empty(out);
	cr_assert_eq(advice(NULL, HOST_ISA_AVX512, 0, out, sizeof(out)), 0);
}

Test(blas_info, describe_names_the_kernels)
{
	char out[128], want[128];
	openblas_set_num_threads(1);
	blas_describe(out, sizeof(out));
	snprintf(want, sizeof(want), "cpu %s (OpenBLAS %s, 1 thread)", host_isa_name(host_isa()),
		 openblas_get_corename());
	cr_assert_str_eq(out, want);
}
