# The ucx transport where UCX was found; otherwise a factory that says why it is missing.
if(TESSERA_HAVE_UCX)
  list(APPEND TESSERA_TRANSPORT_SOURCES ucx/ucx_worker.cpp ucx/ucx_endpoint.cpp
       ucx/ucx_transport.cpp)
else()
  list(APPEND TESSERA_TRANSPORT_SOURCES ucx/ucx_unavailable.cpp)
endif()
