# The host data kernels (collectives/exec/host_ops.cpp) against the core reference kernels. The
# source is compiled into the test with only the core layer linked: the kernels need nothing else,
# and the test then builds whatever state the rest of the collective layer is in.
tessera_unit_test(test_host_ops
  SOURCES test_host_ops.cpp ${PROJECT_SOURCE_DIR}/collectives/exec/host_ops.cpp
  LAYERS tessera_core)
