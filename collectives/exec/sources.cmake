# Sources of collectives/exec (paths relative to collectives/).
list(APPEND TESSERA_COLLECTIVES_SOURCES
  exec/host_ops.cpp)
