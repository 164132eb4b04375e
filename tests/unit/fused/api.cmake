# The fused API through the public C and C++ calls on thread ranks (test_api_fused.cpp), with the
# collective API tests' thread-rank communicators (tests/unit/collectives/api.cmake).
tessera_unit_test(tessera_api_fused_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_api_fused.cpp)
target_link_libraries(tessera_api_fused_test PRIVATE tessera_api_test_common)
target_link_libraries(tessera_api_fused_test PRIVATE tessera_fused_test_ref)
