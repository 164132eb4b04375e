list(APPEND TESSERA_TRANSPORT_SOURCES shm/shm_transport.cpp)
