# Detects CUDA, MPI, UCX, hwloc and NVML. Each sets TESSERA_HAVE_<DEP> and records a line for
# the summary block printed at the end of configure (TesseraSummary.cmake).
include(CheckLanguage)
find_package(PkgConfig QUIET)

# tessera_dep_note(<DEP> <found?> <what it enables or why it is skipped>)
function(tessera_dep_note dep found detail)
  set_property(GLOBAL APPEND PROPERTY TESSERA_SUMMARY_DEPS "${dep}")
  set_property(GLOBAL PROPERTY TESSERA_SUMMARY_${dep}_FOUND "${found}")
  set_property(GLOBAL PROPERTY TESSERA_SUMMARY_${dep}_DETAIL "${detail}")
endfunction()

macro(tessera_require dep found)
  if(TESSERA_WITH_${dep} STREQUAL "ON" AND NOT ${found})
    message(FATAL_ERROR "TESSERA_WITH_${dep}=ON but ${dep} was not found")
  endif()
endmacro()

# ---- CUDA ---------------------------------------------------------------------------------
set(TESSERA_HAVE_CUDA OFF)
if(NOT TESSERA_WITH_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${TESSERA_CUDA_ARCHS}")
    enable_language(CUDA)
    # CMake before 3.26 knows no C++20 flag for nvcc ("requires the language dialect CUDA20");
    # nvcc 12+ accepts -std=c++20.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(TESSERA_HAVE_CUDA ON)
      set(CMAKE_CUDA_STANDARD 20)
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    endif()
  endif()
endif()
tessera_require(CUDA TESSERA_HAVE_CUDA)
if(TESSERA_HAVE_CUDA)
  tessera_dep_note(CUDA "${CUDAToolkit_VERSION}"
    "device queries, driver entry points, gpu tests for sm ${TESSERA_CUDA_ARCHS} (cudart linked statically; libcuda never linked)")
else()
  tessera_dep_note(CUDA "" "host-only build: GPU paths report that CUDA was not built in")
endif()

# ---- MPI ----------------------------------------------------------------------------------
set(TESSERA_HAVE_MPI OFF)
if(NOT TESSERA_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
    set(TESSERA_HAVE_MPI ON)
  endif()
endif()
tessera_require(MPI TESSERA_HAVE_MPI)
if(TESSERA_HAVE_MPI)
  tessera_dep_note(MPI "${MPI_C_VERSION}"
    "MPI bootstrap (tsrCommInitMpi), tests labelled mpi via ${MPIEXEC_EXECUTABLE}")
else()
  tessera_dep_note(MPI "" "no MPI bootstrap, mpi tests not built")
endif()

# ---- CUTLASS ------------------------------------------------------------------------------
# Header-only. From TESSERA_CUTLASS_DIR, else from the nvidia-cutlass Python package (which
# scripts/setup.sh installs where the package index is reachable): its module folder holds the
# headers under source/include. find_spec locates the package without importing it (importing
# needs its Python dependencies, which the build does not).
set(TESSERA_HAVE_CUTLASS OFF)
set(TESSERA_CUTLASS_INCLUDE_DIR "")
if(NOT TESSERA_WITH_CUTLASS STREQUAL "OFF" AND TESSERA_HAVE_CUDA)
  set(_cutlass_candidates "")
  if(TESSERA_CUTLASS_DIR)
    list(APPEND _cutlass_candidates "${TESSERA_CUTLASS_DIR}" "${TESSERA_CUTLASS_DIR}/include")
  else()
    find_program(TESSERA_PYTHON3 NAMES python3 python)
    if(TESSERA_PYTHON3)
      execute_process(
        COMMAND ${TESSERA_PYTHON3} -c
          "import importlib.util as u; s = u.find_spec('cutlass_library'); print(list(s.submodule_search_locations)[0] if s else '')"
        OUTPUT_VARIABLE _cutlass_pkg OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_cutlass_pkg)
        list(APPEND _cutlass_candidates "${_cutlass_pkg}/source/include")
      endif()
    endif()
  endif()
  foreach(_dir IN LISTS _cutlass_candidates)
    if(EXISTS "${_dir}/cutlass/cutlass.h" AND EXISTS "${_dir}/cute/tensor.hpp")
      set(TESSERA_CUTLASS_INCLUDE_DIR "${_dir}")
      set(TESSERA_HAVE_CUTLASS ON)
      break()
    endif()
  endforeach()
  if(TESSERA_HAVE_CUTLASS)
    file(STRINGS "${TESSERA_CUTLASS_INCLUDE_DIR}/cutlass/version.h" _cv REGEX "define CUTLASS_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*CUTLASS_MAJOR ([0-9]+).*CUTLASS_MINOR ([0-9]+).*CUTLASS_PATCH ([0-9]+).*"
           "\\1.\\2.\\3" TESSERA_CUTLASS_VERSION "${_cv}")
  endif()
endif()
tessera_require(CUTLASS TESSERA_HAVE_CUTLASS)
if(TESSERA_HAVE_CUTLASS)
  tessera_dep_note(CUTLASS "${TESSERA_CUTLASS_VERSION}"
    "fused GEMM kernels (CuTe mainloop) from ${TESSERA_CUTLASS_INCLUDE_DIR}")
elseif(NOT TESSERA_HAVE_CUDA)
  tessera_dep_note(CUTLASS "" "no CUDA: the fused layer runs its host executor only")
else()
  tessera_dep_note(CUTLASS ""
    "not found (pip install nvidia-cutlass, or -DTESSERA_CUTLASS_DIR=<include folder>): fused GEMM kernels are skipped; the fused layer runs its host executor only and device buffers get tsrInvalidUsage")
endif()

# ---- UCX ----------------------------------------------------------------------------------
set(TESSERA_HAVE_UCX OFF)
if(NOT TESSERA_WITH_UCX STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
  if(UCX_FOUND)
    set(TESSERA_HAVE_UCX ON)
  endif()
endif()
tessera_require(UCX TESSERA_HAVE_UCX)
if(TESSERA_HAVE_UCX)
  tessera_dep_note(UCX "${UCX_VERSION}"
    "the ucx transport (UCP one-sided RMA with a progress thread)")
else()
  tessera_dep_note(UCX "" "the ucx transport (inter-host RDMA) will be unavailable")
endif()

# ---- hwloc --------------------------------------------------------------------------------
set(TESSERA_HAVE_HWLOC OFF)
if(NOT TESSERA_WITH_HWLOC STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
  if(HWLOC_FOUND)
    set(TESSERA_HAVE_HWLOC ON)
  endif()
endif()
tessera_require(HWLOC TESSERA_HAVE_HWLOC)
if(TESSERA_HAVE_HWLOC)
  tessera_dep_note(HWLOC "${HWLOC_VERSION}"
    "topology: NUMA nodes, cores, PCI GPUs and NICs, path classes, TESSERA_TOPO_FILE")
else()
  tessera_dep_note(HWLOC ""
    "topology knows hosts and processes only: no PCI tree, GPU pairs are classed SYS, TESSERA_TOPO_FILE unsupported")
endif()

# ---- NVML ---------------------------------------------------------------------------------
# tessera never links NVML: it dlopens libnvidia-ml.so.1 at run time (the driver ships it). At
# configure time we only report whether this machine has it.
set(TESSERA_HAVE_NVML_LIB OFF)
if(NOT TESSERA_WITH_NVML STREQUAL "OFF")
  find_library(TESSERA_NVML_LIBRARY NAMES nvidia-ml libnvidia-ml.so.1
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_DIR}/stubs)
  if(TESSERA_NVML_LIBRARY)
    set(TESSERA_HAVE_NVML_LIB ON)
  endif()
endif()
tessera_require(NVML TESSERA_HAVE_NVML_LIB)
if(TESSERA_WITH_NVML STREQUAL "OFF")
  tessera_dep_note(NVML "" "left out: libnvidia-ml is never loaded; NVLinks come from hwloc distances only")
elseif(TESSERA_HAVE_NVML_LIB)
  tessera_dep_note(NVML "${TESSERA_NVML_LIBRARY}" "NVLink discovery (loaded with dlopen at run time)")
else()
  tessera_dep_note(NVML ""
    "not on this machine; the library still dlopens libnvidia-ml.so.1 at run time for NVLink discovery where a driver provides it")
endif()
if(TESSERA_WITH_NVML STREQUAL "OFF")
  set(TESSERA_NVML_ENABLED OFF)
else()
  set(TESSERA_NVML_ENABLED ON)
endif()

# ---- JSON (nlohmann-json, header-only) -------------------------------------------------------
# Plans read and write JSON. TESSERA_JSON_INCLUDE_DIR points at a folder holding
# nlohmann/json.hpp where no CMake package is installed (the GPU machine carries the header).
set(TESSERA_HAVE_JSON OFF)
set(TESSERA_JSON_INCLUDE_DIR "" CACHE PATH "Folder with nlohmann/json.hpp (when no package is found)")
if(NOT TESSERA_WITH_JSON STREQUAL "OFF")
  find_package(nlohmann_json 3 QUIET)
  if(nlohmann_json_FOUND)
    set(TESSERA_HAVE_JSON ON)
    set(_json_where "nlohmann_json ${nlohmann_json_VERSION}")
  elseif(TESSERA_JSON_INCLUDE_DIR AND EXISTS "${TESSERA_JSON_INCLUDE_DIR}/nlohmann/json.hpp")
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
    set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_JSON_INCLUDE_DIR}")
    set(TESSERA_HAVE_JSON ON)
    set(_json_where "${TESSERA_JSON_INCLUDE_DIR}")
  endif()
endif()
tessera_require(JSON TESSERA_HAVE_JSON)
if(TESSERA_HAVE_JSON)
  tessera_dep_note(JSON "${_json_where}" "plan files (tessera_plan, --plan), TESSERA_TUNER_FILE")
else()
  tessera_dep_note(JSON "" "plan files and TESSERA_TUNER_FILE report that JSON support was not built in")
endif()

# ---- SimGrid (the simulated executor) -------------------------------------------------------
set(TESSERA_HAVE_SIMGRID OFF)
if(NOT TESSERA_WITH_SIMGRID STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(SIMGRID QUIET IMPORTED_TARGET simgrid>=3.32)
  if(SIMGRID_FOUND)
    set(TESSERA_HAVE_SIMGRID ON)
  endif()
endif()
tessera_require(SIMGRID TESSERA_HAVE_SIMGRID)
if(TESSERA_HAVE_SIMGRID)
  tessera_dep_note(SIMGRID "${SIMGRID_VERSION}"
    "collectives/sim and tessera_sim: plans simulated on machine models, and their tests")
else()
  tessera_dep_note(SIMGRID ""
    "skipped: collectives/sim, tessera_sim and the sim tests (install libsimgrid-dev)")
endif()

# ---- GoogleTest ---------------------------------------------------------------------------
set(TESSERA_GTEST_FROM "")
if(TESSERA_BUILD_TESTS)
  find_package(GTest QUIET)
  if(GTest_FOUND)
    set(TESSERA_GTEST_FROM "installed package (find_package)")
  else()
    set(_gtest_src "${TESSERA_GTEST_SOURCE_DIR}")
    if(NOT _gtest_src AND EXISTS /usr/src/googletest/CMakeLists.txt)
      set(_gtest_src /usr/src/googletest)
    endif()
    if(_gtest_src AND EXISTS "${_gtest_src}/CMakeLists.txt")
      set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
      set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
      add_subdirectory("${_gtest_src}" "${PROJECT_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL)
      # GoogleTest 1.11+ defines these aliases itself.
      if(NOT TARGET GTest::gtest)
        add_library(GTest::gtest ALIAS gtest)
        add_library(GTest::gtest_main ALIAS gtest_main)
      endif()
      set(TESSERA_GTEST_FROM "built from source ${_gtest_src}")
    else()
      message(FATAL_ERROR "GoogleTest not found: install googletest (scripts/setup.sh), set "
                          "TESSERA_GTEST_SOURCE_DIR to its source folder, or TESSERA_BUILD_TESTS=OFF")
    endif()
  endif()
endif()
