# The device executor's LL protocol (collectives/exec/device/ll.hpp), run on host threads.
tessera_unit_test(test_device_ll SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_ll.cpp
                  LAYERS tessera_core)
