# The device backend and item runner (collectives/exec/device/device_backend.hpp) on host threads.
tessera_unit_test(test_device_backend
  SOURCES test_device_backend.cpp test_device_backend_world.cpp)
