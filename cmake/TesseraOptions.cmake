# User-facing options. Each dependency is AUTO (use it when found), ON (required) or OFF.
set(TESSERA_WITH_CUDA AUTO CACHE STRING "Build the CUDA paths (AUTO, ON, OFF)")
set(TESSERA_WITH_MPI AUTO CACHE STRING "Build the MPI bootstrap and MPI tests (AUTO, ON, OFF)")
set(TESSERA_WITH_UCX AUTO CACHE STRING "Build against UCX (AUTO, ON, OFF)")
set(TESSERA_WITH_HWLOC AUTO CACHE STRING "Discover topology with hwloc (AUTO, ON, OFF)")
set(TESSERA_WITH_NVML AUTO CACHE STRING "Look for NVML at configure time (AUTO, ON, OFF)")
set(TESSERA_WITH_JSON AUTO CACHE STRING "Plan files via nlohmann-json (AUTO, ON, OFF)")
set(TESSERA_WITH_CUTLASS AUTO CACHE STRING
    "The fused GEMM kernels' CUTLASS mainloop (AUTO, ON, OFF); needs CUDA")
set(TESSERA_WITH_TORCH AUTO CACHE STRING
    "Build tessera_torch (python/, the torch.distributed backend) and its tests (AUTO, ON, OFF)")
set(TESSERA_WITH_SIMGRID AUTO CACHE STRING
    "Build tessera_sim, the simulated executor on SimGrid (AUTO, ON, OFF)")
set(TESSERA_CUTLASS_DIR "" CACHE PATH
    "CUTLASS include folder (holds cutlass/ and cute/); empty: the nvidia-cutlass Python package")
foreach(dep CUDA MPI UCX HWLOC NVML JSON CUTLASS TORCH SIMGRID)
  set_property(CACHE TESSERA_WITH_${dep} PROPERTY STRINGS AUTO ON OFF)
  # Accept any CMake boolean spelling (off, NO, 0, true...); anything else is an error, never
  # a silent AUTO.
  string(TOUPPER "${TESSERA_WITH_${dep}}" _v)
  if(_v STREQUAL "AUTO")
    set(_norm AUTO)
  elseif(_v MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(_norm ON)
  elseif(_v MATCHES "^(OFF|NO|FALSE|N|0)$")
    set(_norm OFF)
  else()
    message(FATAL_ERROR "TESSERA_WITH_${dep}=${TESSERA_WITH_${dep}}: expected AUTO, ON or OFF")
  endif()
  set(TESSERA_WITH_${dep} ${_norm} CACHE STRING "" FORCE)
endforeach()

set(TESSERA_CUDA_ARCHS "90;80" CACHE STRING "CUDA architectures to compile for")
option(TESSERA_BUILD_TESTS "Build the tests" ON)
option(TESSERA_BUILD_TOOLS "Build tessera_info and the other tools" ON)
option(TESSERA_BUILD_PERF "Build the perf binaries" ON)
option(TESSERA_WERROR "Treat warnings as errors" OFF)
set(TESSERA_GTEST_SOURCE_DIR "" CACHE PATH
    "GoogleTest source folder to build from when find_package(GTest) finds nothing")
