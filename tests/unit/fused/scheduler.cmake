# The tile scheduler and workspace layout shared by the host executor and the GPU kernels.
tessera_unit_test(test_tile_scheduler SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tile_scheduler.cpp)
