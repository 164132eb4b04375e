# Fails unless FILE exists (tests/CMakeLists.txt, tessera_gpu_test: a gpu test binary that did not
# build must fail `ctest -L gpu`, not vanish from it).
if(NOT EXISTS "${FILE}")
  message(FATAL_ERROR "${FILE} was not built: its gpu tests did not run")
endif()
message(STATUS "${FILE} is built")
