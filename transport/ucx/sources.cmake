list(APPEND TESSERA_TRANSPORT_SOURCES ucx/ucx_unavailable.cpp)
