# libFuzzer targets for the parsers in src/parse.c (smaps, meminfo, sysfs
# modes, mountinfo, options and sizes), built with clang by
# tests/fuzz/run.sh apart from this (gcc) build and run for a bounded time.
add_test(NAME fuzz_parsers
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/fuzz/run.sh ${PROJECT_SOURCE_DIR}
    ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
set_tests_properties(fuzz_parsers PROPERTIES SKIP_RETURN_CODE 77 LABELS fuzz
  TIMEOUT 900)
