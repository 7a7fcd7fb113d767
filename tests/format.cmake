# Formatting check with the repository's .clang-format (tests/format_check.sh).
add_test(NAME format COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/format_check.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(format PROPERTIES LABELS docs TIMEOUT 120)
