# The shared library's dynamic symbol table is exactly src/hpregion.map's
# global list (plus the header's HPR_API functions and the SONAME):
# tests/abi.sh; then a client built against the 0.1 header runs against it
# and the 0.1 layouts are checked field by field. Label "install": it
# checks the artefact we ship, built without sanitizers.
add_test(NAME abi COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/abi.sh
  $<TARGET_FILE:hpregion> ${PROJECT_SOURCE_DIR} ${CMAKE_C_COMPILER})
set_tests_properties(abi PROPERTIES LABELS install)
