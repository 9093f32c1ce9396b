/*
 * broken_pmix_plugin.c - a PMIx plugin of another PMIx version, as a GPU node's own
 * /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix holds them for the kit's older PMIx: built as
 * pmix_mca_pcompress_zlib.so, it needs pmix_output_info, which PMIx 4.2 lacks, so
 * dlopen() fails on it exactly as it did there (tests/kit/test_pmix_plugins.sh).
 */
extern void pmix_output_info(int id, const char *format);

/* A data relocation: resolved when the library is loaded, whatever RTLD_LAZY says. */
void *broken_pmix_plugin_needs = (void *)&pmix_output_info;
