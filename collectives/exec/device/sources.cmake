# CUDA and host sources of collectives/exec/device (paths relative to collectives/). With CUDA,
# kernels.cu is compiled for TESSERA_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES) into the layer's
# OBJECT library and stream_ops.cpp reaches the driver through entry points; without it,
# kernels_none.cpp answers every launch with a sentence, stream_ops.cpp compiles to functions
# that do the same, and executing_side_cuda.cpp to the one that refuses a GPU executing side.
list(APPEND TESSERA_COLLECTIVES_SOURCES
  exec/device/device_executor.cpp
  exec/device/executing_side_host.cpp
  exec/device/executing_side_cuda.cpp
  exec/device/stream_ops.cpp)
if(TESSERA_HAVE_CUDA)
  list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/kernels.cu)
else()
  list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/kernels_none.cpp)
endif()
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_bind.cpp)
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_ll.cpp)
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_p2p.cpp)
