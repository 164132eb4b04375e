# The fused layer's GPU executor (paths relative to fused/). With CUDA and the CUTLASS headers:
# the executor's host code, the CuTe GEMM (gemm_sm80.cu, compiled for every TESSERA_CUDA_ARCHS:
# its mma.sync path runs on sm_80 and sm_90) and the small communication kernels. CUTLASS is a
# SYSTEM include of gemm_sm80.cu only, so its headers' warnings do not fail -Werror builds and no
# other file sees them. Without either: kernels_none.cpp, whose create() says which is missing.
if(TESSERA_HAVE_CUDA AND TESSERA_HAVE_CUTLASS)
  list(APPEND TESSERA_FUSED_SOURCES
    device/device_executor.cpp
    device/device_calls.cpp
    device/comm_kernels.cu
    device/gemm_sm80.cu)
  set_source_files_properties(device/gemm_sm80.cu PROPERTIES
    COMPILE_OPTIONS "-isystem;${TESSERA_CUTLASS_INCLUDE_DIR};--expt-relaxed-constexpr")
else()
  list(APPEND TESSERA_FUSED_SOURCES device/kernels_none.cpp)
endif()
