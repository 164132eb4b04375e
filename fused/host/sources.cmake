# The host reference executor of the fused ops (paths relative to fused/): the tiled host GEMM,
# then the executor (workspace and signalling, the reducing ops, AllGather+GEMM).
list(APPEND TESSERA_FUSED_SOURCES
  host/host_gemm.cpp
  host/host_executor.cpp
  host/host_reduce.cpp
  host/host_allgather.cpp)
