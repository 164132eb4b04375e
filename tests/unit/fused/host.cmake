# The host reference executor of the fused ops: thread ranks (inproc), process ranks (shm, ucx),
# failures. tessera_fused_test_ref is the serial double-precision reference every fused test may
# link (inputs every rank can regenerate, GEMM then the collective, error bounds per type).
add_library(tessera_fused_test_ref STATIC ${CMAKE_CURRENT_LIST_DIR}/fused_test_ref.cpp)
target_link_libraries(tessera_fused_test_ref PUBLIC tessera_test_support tessera_static
                      PRIVATE tessera_warnings)

add_library(tessera_host_fused_test_common STATIC
            ${CMAKE_CURRENT_LIST_DIR}/test_host_fused_common.cpp)
target_link_libraries(tessera_host_fused_test_common PUBLIC tessera_fused_test_ref
                      tessera_transport_test_util PRIVATE tessera_warnings)

foreach(_part threads processes failures)
  tessera_unit_test(test_host_fused_${_part}
                    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_host_fused_${_part}.cpp)
  target_link_libraries(test_host_fused_${_part} PRIVATE tessera_host_fused_test_common)
endforeach()
