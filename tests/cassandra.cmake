# examples/cassandra-like: correctness, crash replay, bad input and the
# standalone build (tests/cassandra.sh). Label "example": scripts/test.sh
# runs it in the plain build only.
if(HPR_BUILD_EXAMPLES AND TARGET cassandra-like)
  add_test(NAME example_cassandra
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cassandra.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(example_cassandra PROPERTIES LABELS example SKIP_RETURN_CODE 77
    TIMEOUT 900)
  # The engine's own tests (tests/cass_*.c), linked with the example's
  # objects: they drive kv_open/kv_put/kv_get directly, stalling the
  # commit log through the engine's test hook (kv_opts.log_hook) and the
  # flusher through kv_opts.flush_hook (cass_restart: kill -9 and restart
  # on kept regions; root, its own tmpfs huge= mount, else 77).
  file(GLOB HPR_CASS_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cass_*.c)
  foreach(src ${HPR_CASS_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE cassandra-engine)
    target_compile_options(${name} PRIVATE ${HPR_WARN})
    add_test(NAME ${name} COMMAND ${name})
    # CASS_LIKE: the driver, for the suites that run it (cass_readfields)
    set_tests_properties(${name} PROPERTIES LABELS example SKIP_RETURN_CODE 77 TIMEOUT 300
      ENVIRONMENT "CASS_LIKE=$<TARGET_FILE:cassandra-like>")
  endforeach()
endif()
