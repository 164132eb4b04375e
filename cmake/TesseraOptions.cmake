# User-facing options. Each dependency is AUTO (use it when found), ON (required) or OFF.
set(TESSERA_WITH_CUDA AUTO CACHE STRING "Build the CUDA paths (AUTO, ON, OFF)")
set(TESSERA_WITH_MPI AUTO CACHE STRING "Build the MPI bootstrap and MPI tests (AUTO, ON, OFF)")
set(TESSERA_WITH_UCX AUTO CACHE STRING "Build against UCX (AUTO, ON, OFF)")
set(TESSERA_WITH_HWLOC AUTO CACHE STRING "Discover topology with hwloc (AUTO, ON, OFF)")
set(TESSERA_WITH_NVML AUTO CACHE STRING "Look for NVML at configure time (AUTO, ON, OFF)")
foreach(dep CUDA MPI UCX HWLOC NVML)
  set_property(CACHE TESSERA_WITH_${dep} PROPERTY STRINGS AUTO ON OFF)
endforeach()

set(TESSERA_CUDA_ARCHS "90;80" CACHE STRING "CUDA architectures to compile for")
option(TESSERA_BUILD_TESTS "Build the tests" ON)
option(TESSERA_BUILD_TOOLS "Build tessera_info and the other tools" ON)
option(TESSERA_BUILD_PERF "Build the perf binaries" ON)
option(TESSERA_WERROR "Treat warnings as errors" OFF)
set(TESSERA_GTEST_SOURCE_DIR "" CACHE PATH
    "GoogleTest source folder to build from when find_package(GTest) finds nothing")
