# Sources of collectives/exec (paths relative to collectives/): the host element kernels, then the
# engine (plan cache and binding, the executor, zero-copy, point-to-point, the run loop).
list(APPEND TESSERA_COLLECTIVES_SOURCES
  exec/host_ops.cpp
  exec/plan_cache.cpp
  exec/bind.cpp
  exec/engine.cpp
  exec/planner.cpp
  exec/protocol_plans.cpp
  exec/host_executor.cpp
  exec/zero_copy.cpp
  exec/p2p.cpp
  exec/host_ll.cpp
  exec/run.cpp
  exec/pending_dump.cpp
  exec/profile.cpp
  exec/device_engine.cpp)
include(${CMAKE_CURRENT_LIST_DIR}/device/sources.cmake)
