# The documents' claims that a script can check (label docs):
#
#   docs_flags          docs/flags.md documents exactly the flags `mnist-train --help` lists
#                       (each one missing on either side is named)
#   docs_readme_length  README.md is at most 150 lines
set(_docs ${CMAKE_CURRENT_SOURCE_DIR}/docs)
add_test(NAME docs_flags COMMAND bash ${_docs}/test_flags_doc.sh $<TARGET_FILE:mnist-train> ${CMAKE_SOURCE_DIR})
add_test(NAME docs_readme_length COMMAND bash ${_docs}/test_readme_length.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(docs_flags docs_readme_length PROPERTIES LABELS docs TIMEOUT 60)
