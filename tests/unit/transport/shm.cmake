# shm transport and the process's fd server: ranks as forked processes (and forced over threads).
tessera_transport_test(test_transport_shm SOURCES test_shm_fd_server.cpp test_shm_transport.cpp
                       test_shm_failures.cpp test_shm_user_memory.cpp)
# Cross-memory attach over shm (and inproc), its refusals and TESSERA_CMA.
tessera_transport_test(test_cross_memory SOURCES test_cross_memory.cpp)
