# The collective API (tsrAllReduce ... tsrRecv, groups, registration) over thread ranks. One
# executable per part so ctest runs them side by side; each parameter (rank count, collective)
# is its own ctest test. The shared driver and references are compiled once.
add_library(tessera_api_test_common STATIC ${CMAKE_CURRENT_LIST_DIR}/test_api_common.cpp
            ${CMAKE_CURRENT_LIST_DIR}/test_api_cases.cpp)
target_link_libraries(tessera_api_test_common PUBLIC tessera_static tessera_test_support
                      PRIVATE tessera_warnings)
foreach(_part allreduce reducing data large group bad_input alltoallv probe)
  tessera_unit_test(tessera_api_${_part}_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_api_${_part}.cpp)
  target_link_libraries(tessera_api_${_part}_test PRIVATE tessera_api_test_common)
endforeach()
