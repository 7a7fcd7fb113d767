# The installed tree works for a consumer: tests/consumer/run.sh installs
# this build into a temporary prefix and builds C and C++ programs against
# it with pkg-config alone and with CMake's find_package. Label "install":
# only the plain build runs it (a sanitizer build's library cannot be
# linked by a consumer built without the sanitizer).
add_test(NAME consumer
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.sh ${PROJECT_BINARY_DIR})
set_tests_properties(consumer PROPERTIES LABELS install SKIP_RETURN_CODE 77
  TIMEOUT 600)
