# CUDA and host sources of collectives/exec/device (paths relative to collectives/). With CUDA,
# the kernel files are compiled for TESSERA_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES) into the layer's
# OBJECT library and stream_ops.cpp reaches the driver through entry points; without it,
# kernels_none.cpp answers every launch with a sentence, stream_ops.cpp compiles to functions
# that do the same, and executing_side_cuda.cpp to the one that refuses a GPU executing side.
# The kernels are one file per kernel that instantiates the interpreter plus kernels.cu (triggers,
# launch checks, kernel table), so that nvcc builds them in parallel (kernels_common.hpp); each is
# compiled on its own, without relocatable device code. device_kernels.no_spill
# (tests/unit/collectives/device_spill.cmake) checks every .cu file of this layer.
list(APPEND TESSERA_COLLECTIVES_SOURCES
  exec/device/device_executor.cpp
  exec/device/executing_side_host.cpp
  exec/device/executing_side_cuda.cpp
  exec/device/stream_ops.cpp)
if(TESSERA_HAVE_CUDA)
  list(APPEND TESSERA_COLLECTIVES_SOURCES
    exec/device/kernels.cu
    exec/device/kernels_resident.cu
    exec/device/kernels_item.cu
    exec/device/kernels_sendrecv_item.cu)
else()
  list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/kernels_none.cpp)
endif()
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_bind.cpp)
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_ll.cpp)
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_p2p.cpp)
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_window.cpp)
