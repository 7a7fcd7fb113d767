# examples/kvm-lite: the parts that need no /dev/kvm (label "example"): unit
# tests of layout, page tables, checksum and the vCPU state file, and the
# command line's refusal of bad input before /dev/kvm is opened.
if(TARGET kvm-lite AND TARGET kvm-lite-unit)
  # kvmlite_cli waits for /tmp/hpr-system.lock (other suites resize the
  # hugetlb pool under it), hence the long timeout.
  add_test(NAME kvmlite_unit COMMAND kvm-lite-unit)
  add_test(NAME kvmlite_cli
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-cli.sh $<TARGET_FILE:kvm-lite>)
  set_tests_properties(kvmlite_unit kvmlite_cli PROPERTIES
    LABELS example SKIP_RETURN_CODE 77 TIMEOUT 1200)
endif()
