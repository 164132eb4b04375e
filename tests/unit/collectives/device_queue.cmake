# The device executor's work queue and persistent scheduler loop, run on host threads.
tessera_unit_test(test_work_queue SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_work_queue.cpp)
