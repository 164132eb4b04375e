# Transport-independent correctness, ordering and bad-input tests, run over every host transport
# (inproc thread ranks; shm and ucx over tcp and shared memory with process ranks).
tessera_transport_test(test_transport_generic SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_transport_correctness.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_transport_ordering.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_transport_bad_input.cpp)
# Semaphore waits that park on a futex and the signals that wake them (src/core/park.hpp).
tessera_transport_test(test_semaphore_park SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_semaphore_park.cpp)
# Semaphores at communicator scale: descriptors and imports grow with slabs, not semaphores.
tessera_transport_test(test_semaphore_pool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_semaphore_pool.cpp)
