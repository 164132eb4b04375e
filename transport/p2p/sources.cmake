# p2p is built from cuda_ipc/sources.cmake's CUDA files (they share the CUDA memory code).
