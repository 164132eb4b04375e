# CUDA and host sources of collectives/exec/device (paths relative to collectives/).
list(APPEND TESSERA_COLLECTIVES_SOURCES exec/device/device_executor.cpp)
