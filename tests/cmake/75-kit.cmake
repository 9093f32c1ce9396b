# The GPU-node kit (scripts/gpu-node/), what can be checked of it without a GPU node.
#
#   kit_ctest_summary  the summary of the kit's step all (below)
#   kit_run_quick      run.sh's step limits; quick and sanitize without a GPU; quick with
#                      stand-ins for a GPU's programs (below)
#   kit_pmix_plugins   the kit's relocated PMIx (scripts/gpu-node/pmix_env.sh) loads its
#                      own plugins where another PMIx's stand in Debian's place, as on the
#                      node of 2026-11-25; with a control that trips without that
#                      environment. Skipped (77, with the reason) without root, a mount
#                      namespace or Debian's libpmix2. Label kit.
add_library(broken_pmix_plugin MODULE ${CMAKE_CURRENT_SOURCE_DIR}/kit/broken_pmix_plugin.c)
set_target_properties(broken_pmix_plugin PROPERTIES PREFIX "" OUTPUT_NAME pmix_mca_pcompress_zlib
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/kit)
add_test(NAME kit_pmix_plugins
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kit/test_pmix_plugins.sh
                 $<TARGET_FILE:broken_pmix_plugin> ${MPIEXEC_EXECUTABLE})
set_tests_properties(kit_pmix_plugins PROPERTIES LABELS kit SKIP_RETURN_CODE 77 TIMEOUT 60)

# scripts/gpu-node/ctest_summary.py (the kit's step all) on a small ctest project of known
# outcome: the counts, the failure, each skip's reason, the labels not run.
add_test(NAME kit_ctest_summary
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kit/test_ctest_summary.sh ${CMAKE_COMMAND}
                 ${CMAKE_CTEST_COMMAND})
set_tests_properties(kit_ctest_summary PROPERTIES LABELS kit TIMEOUT 60)

# scripts/gpu-node/run.sh: its steps' time limits (env + build + quick <= 360 s, build +
# sanitize <= 420 s, sanitize <= 300 s, all <= 240 s); without a GPU (a failing nvidia-smi
# first on PATH, the system's MPI: KIT=none), quick reported skipped with the reason, never
# passed, and sanitize failed; and quick and sanitize where a stand-in nvidia-smi lists a
# GPU, every program they run a stand-in: quick's parts' statuses and SUMMARY.txt (goals,
# slowest ops, plan), sanitize's tests all at once with their time. Nothing is built: seconds.
add_test(NAME kit_run_quick COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kit/test_run_quick.sh ${CMAKE_COMMAND})
set_tests_properties(kit_run_quick PROPERTIES LABELS kit TIMEOUT 60)
