# The fused layer's GPU executor (paths relative to fused/). With CUDA and the CUTLASS headers:
# the executor's host code, the CuTe GEMM (gemm_sm80.cu, compiled for every TESSERA_CUDA_ARCHS:
# its mma.sync path runs on sm_80 and sm_90, and is the fallback of the sm_90a one below) and the
# small communication kernels. CUTLASS is a SYSTEM include of the GEMM files only, so its
# headers' warnings do not fail -Werror builds and no other file sees them. Without either:
# kernels_none.cpp, whose create() says which is missing.
if(TESSERA_HAVE_CUDA AND TESSERA_HAVE_CUTLASS)
  list(APPEND TESSERA_FUSED_SOURCES
    device/device_executor.cpp
    device/device_calls.cpp
    device/comm_kernels.cu
    device/gemm_sm80.cu)
  set_source_files_properties(device/gemm_sm80.cu PROPERTIES
    COMPILE_OPTIONS "-isystem;${TESSERA_CUTLASS_INCLUDE_DIR};--expt-relaxed-constexpr")
  # The Hopper GEMM (gemm_sm90.cu: TMA + wgmma) where TESSERA_CUDA_ARCHS has 90 ("native" and
  # "all" do not count: the file needs the arch-specific sm_90a, which no other target uses).
  # Its own object library compiles it for sm_90a alone; the executor's files learn of it from
  # TESSERA_FUSED_HAVE_SM90 and run it on compute capability 9.x devices.
  set(_fused_sm90 OFF)
  foreach(_arch IN LISTS TESSERA_CUDA_ARCHS)
    if(_arch MATCHES "^90")
      set(_fused_sm90 ON)
    endif()
  endforeach()
  if(_fused_sm90)
    tessera_layer(tessera_fused_sm90 device/gemm_sm90.cu)
    set_target_properties(tessera_fused_sm90 PROPERTIES CUDA_ARCHITECTURES 90a-real)
    set_source_files_properties(device/gemm_sm90.cu PROPERTIES
      COMPILE_OPTIONS "-isystem;${TESSERA_CUTLASS_INCLUDE_DIR};--expt-relaxed-constexpr")
    set_source_files_properties(device/device_executor.cpp device/device_calls.cpp PROPERTIES
      COMPILE_DEFINITIONS TESSERA_FUSED_HAVE_SM90=1)
  endif()
else()
  list(APPEND TESSERA_FUSED_SOURCES device/kernels_none.cpp)
endif()
