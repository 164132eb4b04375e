#include "comm/buffer_place.hpp"

#include "core/build_config.hpp"
#include "core/cuda_driver.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera {

BufferPlace bufferPlace(const void* ptr, int* device) {
  *device = -1;
#if TESSERA_HAVE_CUDA
  // Asked once: without a usable device no pointer can be device memory, and the runtime is then
  // never initialised by a host-only program.
  static const bool haveDevices = cudaDeviceCount(nullptr) > 0;
  if (!haveDevices || ptr == nullptr) return BufferPlace::kHost;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // older runtimes fail for pageable memory: clear it, it is host memory
    return BufferPlace::kHost;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice: *device = attr.device; return BufferPlace::kDevice;
    case cudaMemoryTypeManaged: *device = attr.device; return BufferPlace::kManaged;
    default: return BufferPlace::kHost;  // pinned or unregistered host memory
  }
#else
  (void)ptr;
  return BufferPlace::kHost;
#endif
}

}  // namespace tessera
