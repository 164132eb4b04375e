# Sends and receives on the device executor, emulated on host threads (enqueueP2P +
# deviceSynchronize): sizes, datatypes, rings, all-to-all, self, groups in a row, ordering with
# collectives, launch mode, processes; failures (size mismatch, missing peer, abort, refusals).
add_library(tessera_device_p2p_common STATIC ${CMAKE_CURRENT_LIST_DIR}/test_device_p2p_common.cpp)
target_link_libraries(tessera_device_p2p_common PUBLIC tessera_transport_test_util
                      PRIVATE tessera_warnings)
foreach(_part "" _failures)
  tessera_unit_test(test_device_p2p${_part}
                    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_p2p${_part}.cpp)
  target_link_libraries(test_device_p2p${_part} PRIVATE tessera_device_p2p_common)
endforeach()
