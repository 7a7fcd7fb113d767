# The kernel and NUMA matrix (tests/vm/run.sh): qemu guests with Debian's
# 6.1 kernel -- one node, two NUMA nodes, and one node with 1 GiB pages and
# the hugetlb cgroup on v2 (1g) -- running the suites inside.
# Label "vm": the plain ctest run excludes it (scripts/test.sh runs it as
# its own step with `ctest -L vm`). --quick keeps both guests within a few
# minutes; HPR_VM_FULL=ON runs every suite.
#
# numa_multi and vm_probe are guest-only programs, not host suites: on a
# one-node host numa_multi could only skip.
add_executable(numa_multi ${CMAKE_CURRENT_SOURCE_DIR}/vm/numa_multi.c)
target_link_libraries(numa_multi PRIVATE hpr_testcommon)
target_compile_options(numa_multi PRIVATE ${HPR_WARN} -Wno-missing-prototypes)
add_executable(vm_probe ${CMAKE_CURRENT_SOURCE_DIR}/vm/vm_probe.c)
target_link_libraries(vm_probe PRIVATE hpregion_static)
target_compile_options(vm_probe PRIVATE ${HPR_WARN})

option(HPR_VM_FULL "VM matrix: run every suite, not --quick" OFF)
if(NOT HPR_SANITIZE)
  if(HPR_VM_FULL)
    set(vm_mode "")
    set(vm_timeout 4000)
  else()
    set(vm_mode --quick)
    # run.sh stops a guest silent for 400 s, or after 1200 s in all (an
    # emulated guest's speed follows the host's load)
    set(vm_timeout 1500)
  endif()
  foreach(cfg 1node 2node 1g)
    add_test(NAME vm_6.1_${cfg}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/vm/run.sh ${vm_mode} --config ${cfg}
              --build-dir ${PROJECT_BINARY_DIR})
    set_tests_properties(vm_6.1_${cfg} PROPERTIES LABELS vm TIMEOUT ${vm_timeout}
      SKIP_RETURN_CODE 77 RUN_SERIAL ON)
  endforeach()
endif()
