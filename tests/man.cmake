# Documentation check: every exported symbol has docs/man/<symbol>.3 and
# every man page renders without warnings (tests/man_check.sh).
add_test(NAME man_pages
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/man_check.sh $<TARGET_FILE:hpregion>
    ${PROJECT_SOURCE_DIR})
set_tests_properties(man_pages PROPERTIES LABELS docs TIMEOUT 120)
