# The tree, rhd and hier algorithm families: shapes and volumes read back from their plans, and
# the verifier on non-powers of two, uneven host layouts and larger rank counts.
tessera_unit_test(test_algorithms_tree SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_algorithms_tree.cpp)
