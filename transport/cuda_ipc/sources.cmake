# cuda_ipc and p2p share the CUDA memory and connection code, so this fragment lists both.
if(TESSERA_HAVE_CUDA)
  list(APPEND TESSERA_TRANSPORT_SOURCES
    cuda_ipc/cu_driver.cpp
    cuda_ipc/cuda_memory.cpp
    cuda_ipc/cuda_word_kernel.cu
    cuda_ipc/cuda_connection.cpp
    cuda_ipc/cuda_ipc_transport.cpp
    p2p/p2p_transport.cpp)
else()
  list(APPEND TESSERA_TRANSPORT_SOURCES cuda_ipc/cuda_unavailable.cpp)
endif()
