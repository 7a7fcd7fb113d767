# examples/kvm-lite on real KVM (label "vm"), on every machine whether its
# own /dev/kvm is usable or not (kvmlite_native covers that one):
# tests/kvmlite-vm.sh boots Debian's 6.1 kernel under qemu TCG with
# -cpu max,+svm, loads kvm-amd there and runs kvm-lite inside (about 1-2
# minutes; see docs/kvm-lite-nested.md).
if(TARGET kvm-lite)
  add_test(NAME kvmlite_vm
    COMMAND ${PROJECT_SOURCE_DIR}/tests/kvmlite-vm.sh ${PROJECT_BINARY_DIR}
      ${PROJECT_BINARY_DIR}/kvmlite-vm)
  set_tests_properties(kvmlite_vm PROPERTIES
    LABELS vm SKIP_RETURN_CODE 77 TIMEOUT 1200 RUN_SERIAL TRUE)
endif()
