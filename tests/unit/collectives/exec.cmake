# The collective engine (collectives/exec): executor, plan cache and binding, slicing, zero-copy,
# send/recv, failures, zero-copy bookkeeping. Thread ranks (inproc), forked processes (shm) and
# both at once (mixed) through the transport tests' helpers; one executable per part so ctest runs
# them side by side.
add_library(tessera_exec_test_common STATIC ${CMAKE_CURRENT_LIST_DIR}/test_exec_common.cpp)
target_link_libraries(tessera_exec_test_common PUBLIC tessera_transport_test_util
                      PRIVATE tessera_warnings)
foreach(_part collectives p2p failures processes zerocopy mixed parking cross_memory tuner_agreement host_ll)
  tessera_unit_test(test_exec_${_part} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_exec_${_part}.cpp)
  target_link_libraries(test_exec_${_part} PRIVATE tessera_exec_test_common)
endforeach()

# The send/recv ring, the LL protocols' and the handshake's exchange rounds as plans, verified.
tessera_unit_test(test_protocols SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_protocols.cpp)
