#include "comm/buffer_place.hpp"

#include "core/build_config.hpp"
#include "core/cuda_driver.hpp"
#include "core/log.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kComm;
}  // namespace

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

const char* bufferPlaceName(BufferPlace p) {
  return p == BufferPlace::kDevice ? "device" : p == BufferPlace::kManaged ? "managed" : "host";
}

Result executorPlace(int commDevice, const char* api, const char* name, const void* ptr,
                     bool* onDevice) {
  int device = -1;
  const BufferPlace place = bufferPlace(ptr, &device);
  *onDevice = place != BufferPlace::kHost;
  if (!*onDevice) return tsrSuccess;
  if (commDevice < 0)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: %s %p is CUDA %s memory (device %d), but this rank is host-only "
                    "(TSR_DEVICE_HOST): pass host buffers, or bind the communicator to a GPU",
                    api, name, ptr, bufferPlaceName(place), device);
  // Managed memory is reachable from every GPU; device memory only from its own.
  if (place == BufferPlace::kDevice && device != commDevice)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s: %s %p is device memory of CUDA device %d, but this rank runs on device %d",
                    api, name, ptr, device, commDevice);
  return tsrSuccess;
}

}  // namespace tessera
