# examples/cassandra-like: correctness, crash replay, bad input and the
# standalone build (tests/cassandra.sh). Label "example": scripts/test.sh
# runs it in the plain build only.
if(HPR_BUILD_EXAMPLES AND TARGET cassandra-like)
  add_test(NAME example_cassandra
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cassandra.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(example_cassandra PROPERTIES LABELS example SKIP_RETURN_CODE 77
    TIMEOUT 900)
endif()
