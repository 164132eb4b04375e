# The host data kernels (collectives/exec/host_ops.cpp) against the core reference kernels.
tessera_unit_test(test_host_ops SOURCES test_host_ops.cpp)
