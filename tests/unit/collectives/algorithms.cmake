# Algorithm generators (collectives/algorithms) against the plan verifier, and the registry.
tessera_unit_test(test_algorithms SOURCES test_algorithms.cpp)
