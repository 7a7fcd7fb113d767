# examples/kvm-lite (label "example"): unit tests of layout, page tables,
# checksum and the vCPU state file; the command line's refusal of bad input
# before /dev/kvm is opened; no port I/O in the guest's CPL 3 code (checked
# on the binary, so machines without kvm-pvm catch it too); and kvm-lite on
# this machine's /dev/kvm when kvm-lite --probe finds it usable; --keep:
# a VM killed at its checkpoint and resumed on its kept RAM, nothing copied
# (kvmlite-keep.sh, a private huge tmpfs; its refusals run without KVM too).
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
  set_tests_properties(kvmlite_unit kvmlite_cli kvmlite_noport kvmlite_native kvmlite_keep
    PROPERTIES
    LABELS example SKIP_RETURN_CODE 77 TIMEOUT 1200)
endif()
