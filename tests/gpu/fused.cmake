# The fused layer's GPU executor against cuBLAS (label gpu): test_gpu_fused.cpp, with
# gpu_fused_support.cpp (CUDA buffers and the cuBLAS reference) and test_gpu_coll_ranks.cpp, which
# sets CUDA_DEVICE_MAX_CONNECTIONS and CUDA_MODULE_LOADING before main (see there why). Without
# CUDA, CUTLASS or cuBLAS every GPU test skips with the reason.
tessera_gpu_test(test_gpu_fused
  SOURCES test_gpu_fused.cpp gpu_fused_support.cpp test_gpu_coll_ranks.cpp)
target_link_libraries(test_gpu_fused PRIVATE tessera_transport_test_util)
if(TESSERA_HAVE_CUDA AND TARGET CUDA::cublas)
  target_link_libraries(test_gpu_fused PRIVATE CUDA::cublas)
  set_source_files_properties(gpu_fused_support.cpp PROPERTIES
    COMPILE_DEFINITIONS TESSERA_TEST_HAVE_CUBLAS=1)
endif()
