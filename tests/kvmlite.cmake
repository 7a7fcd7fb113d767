# examples/kvm-lite (label "example"): unit tests of layout, page tables,
# checksum and the vCPU state file; the command line's refusal of bad input
# before /dev/kvm is opened; no port I/O in the guest's CPL 3 code (checked
# on the binary, so machines without kvm-pvm catch it too); and kvm-lite on
# this machine's /dev/kvm when kvm-lite --probe finds it usable; --keep:
# a VM killed at its checkpoint and resumed on its kept RAM, nothing copied
# (kvmlite-keep.sh, a private huge tmpfs; its refusals run without KVM too);
# kvmlite-guest.sh: the whole vCPU through a snapshot, a hostile guest, the
# watchdog and stop signals (77 without a usable /dev/kvm).
if(TARGET kvm-lite AND TARGET kvm-lite-unit)
  # kvmlite_cli waits for the system lock (other suites resize the
  # hugetlb pool under it), hence the long timeout.
  add_test(NAME kvmlite_unit COMMAND kvm-lite-unit)
  add_test(NAME kvmlite_cli
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-cli.sh $<TARGET_FILE:kvm-lite>)
  add_test(NAME kvmlite_noport
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-noport.sh $<TARGET_FILE:kvm-lite>)
  add_test(NAME kvmlite_native
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-native.sh $<TARGET_FILE:kvm-lite>)
  add_test(NAME kvmlite_keep
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-keep.sh $<TARGET_FILE:kvm-lite>)
  # what a guest can do to its VMM: the whole vCPU through a snapshot,
  # hostile requests, the watchdog, SIGINT/SIGTERM and both kinds of kick;
  # the shim (LD_PRELOAD) plays a KVM without some capabilities
  add_library(kvmlite_shim MODULE ${PROJECT_SOURCE_DIR}/tests/kvmlite_shim.c)
  target_compile_options(kvmlite_shim PRIVATE ${HPR_WARN})
  target_link_libraries(kvmlite_shim PRIVATE ${CMAKE_DL_LIBS})
  add_test(NAME kvmlite_guest
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-guest.sh $<TARGET_FILE:kvm-lite>
      $<TARGET_FILE:kvmlite_shim>)
  # structure: only ram.c calls hpregion, run.c has a handler per exit reason
  add_test(NAME kvmlite_layers
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-layers.sh $<TARGET_OBJECTS:kvm-lite>
    COMMAND_EXPAND_LISTS)
  set_tests_properties(kvmlite_unit kvmlite_cli kvmlite_noport kvmlite_native kvmlite_keep
    kvmlite_guest kvmlite_layers
    PROPERTIES
    LABELS example SKIP_RETURN_CODE 77 TIMEOUT 1200)
endif()
