# TESSERA_FUZZ: the libFuzzer targets of tests/fuzz (clang only; scripts/fuzz.sh builds and runs
# them in a build folder of their own). Included from tests/CMakeLists.txt.
option(TESSERA_FUZZ "Build the libFuzzer targets (tests/fuzz; needs clang)" OFF)
if(TESSERA_FUZZ)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/fuzz ${PROJECT_BINARY_DIR}/tests/fuzz)
endif()
