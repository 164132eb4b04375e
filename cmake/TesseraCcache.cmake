# Use ccache for C, C++ and CUDA when it is installed (a clean clone still benefits when the
# cache folder survives between builds).
find_program(TESSERA_CCACHE ccache)
if(TESSERA_CCACHE)
  foreach(lang C CXX CUDA)
    if(NOT CMAKE_${lang}_COMPILER_LAUNCHER)
      set(CMAKE_${lang}_COMPILER_LAUNCHER "${TESSERA_CCACHE}")
    endif()
  endforeach()
endif()
