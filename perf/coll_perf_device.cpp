// CUDA buffers of the collective perf binaries (-m device). Device calls are made only here, so
// builds without CUDA compile the rest unchanged and say why -m device cannot run.
#include <string>

#include "coll_perf_ranks.hpp"
#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessera::perf {

#if TESSERA_HAVE_CUDA

namespace {
std::string cudaWhy(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}
}  // namespace

int cudaDevices(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = cudaWhy("cudaGetDeviceCount", e);
    return 0;
  }
  if (n == 0) *why = "no CUDA device";
  return n;
}

std::string cudaSelect(int device) {
  cudaError_t e = cudaSetDevice(device);
  return e == cudaSuccess ? "" : cudaWhy("cudaSetDevice", e);
}

std::string cudaAllocate(void** ptr, size_t bytes) {
  cudaError_t e = cudaMalloc(ptr, bytes);
  if (e != cudaSuccess) return cudaWhy("cudaMalloc", e);
  e = cudaMemset(*ptr, 0, bytes);
  return e == cudaSuccess ? "" : cudaWhy("cudaMemset", e);
}

void cudaRelease(void* ptr) { cudaFree(ptr); }

std::string cudaCopy(void* dst, const void* src, size_t bytes, bool toDevice) {
  cudaError_t e =
      cudaMemcpy(dst, src, bytes, toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? "" : cudaWhy("cudaMemcpy", e);
}

bool cudaIsDevicePointer(const void* ptr) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    cudaGetLastError();  // an unknown host pointer is not an error worth keeping
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

#else  // no CUDA in this build

namespace {
constexpr const char* kNoCuda = "this build has no CUDA (configured without the CUDA toolkit)";
}

int cudaDevices(std::string* why) {
  *why = kNoCuda;
  return 0;
}
std::string cudaSelect(int) { return kNoCuda; }
std::string cudaAllocate(void**, size_t) { return kNoCuda; }
void cudaRelease(void*) {}
std::string cudaCopy(void*, const void*, size_t, bool) { return kNoCuda; }
bool cudaIsDevicePointer(const void*) { return false; }

#endif

}  // namespace tessera::perf
