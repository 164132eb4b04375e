# The device executor emulated on host threads (EngineOptions::deviceEmulation): every collective
# through enqueue + deviceSynchronize, checked against the host executor and a serial reference;
# failures (a missing peer, abort, destroy while stuck); windows (zero-copy device calls).
add_library(tessera_device_emulation_common STATIC
            ${CMAKE_CURRENT_LIST_DIR}/test_device_emulation_common.cpp)
target_link_libraries(tessera_device_emulation_common PUBLIC tessera_exec_test_common
                      PRIVATE tessera_warnings)
foreach(_part "" _failures _windows)
  tessera_unit_test(test_device_emulation${_part}
                    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_emulation${_part}.cpp)
  target_link_libraries(test_device_emulation${_part} PRIVATE tessera_device_emulation_common)
endforeach()
