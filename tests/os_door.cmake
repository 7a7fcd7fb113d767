# The OS layer is the only door to the kernel (tests/os_door.sh).
add_test(NAME os_door COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/os_door.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(os_door PROPERTIES LABELS docs TIMEOUT 60)
