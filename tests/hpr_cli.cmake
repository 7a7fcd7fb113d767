# The hpr command's test: tests/hpr_cli_test.sh runs every subcommand as
# root and as an unprivileged user and checks the answers against the
# sysfs/procfs files they come from. hpr_hold holds regions for hpr stat.
if(TARGET hpr)
  add_executable(hpr_hold ${CMAKE_CURRENT_LIST_DIR}/hpr_hold.c)
  target_link_libraries(hpr_hold PRIVATE hpregion)
  target_compile_options(hpr_hold PRIVATE ${HPR_WARN})
  add_test(NAME hpr_cli
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hpr_cli_test.sh $<TARGET_FILE:hpr>
      $<TARGET_FILE:hpr_hold>)
  set_tests_properties(hpr_cli PROPERTIES SKIP_RETURN_CODE 77 LABELS tools
    TIMEOUT 600)
endif()
