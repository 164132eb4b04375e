# shm: host memory between processes of one host (memfds passed by the process's fd server).
list(APPEND TESSERA_TRANSPORT_SOURCES shm/shm_transport.cpp shm/cross_memory.cpp common/fd_server.cpp
            common/fd_client.cpp)
