// CUDA buffers, streams and graphs of the collective perf binaries (-m device). Device calls are
// made only here, so builds without CUDA compile the rest unchanged and say why -m device cannot
// run. Nothing here synchronizes the whole device: a communicator's resident kernel never ends,
// so cudaDeviceSynchronize (and the implicit one of a plain cudaFree) would never return.
#include <functional>
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

std::string cudaStreamMake(void** stream) {
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = s;
  return e == cudaSuccess ? "" : cudaWhy("cudaStreamCreateWithFlags", e);
}

void cudaStreamFree(void* stream) {
  if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

std::string cudaStreamWait(void* stream) {
  cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? "" : cudaWhy("cudaStreamSynchronize", e);
}

std::string cudaAllocate(void** ptr, size_t bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMallocAsync(ptr, bytes, s);
  if (e != cudaSuccess) return cudaWhy("cudaMallocAsync", e);
  e = cudaMemsetAsync(*ptr, 0, bytes, s);
  if (e != cudaSuccess) return cudaWhy("cudaMemsetAsync", e);
  return cudaStreamWait(stream);
}

void cudaRelease(void* ptr, void* stream) {
  cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
}

std::string cudaCopy(void* dst, const void* src, size_t bytes, bool toDevice, void* stream) {
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, toDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                      static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? cudaStreamWait(stream) : cudaWhy("cudaMemcpyAsync", e);
}

std::string cudaGraphRecord(void* stream, const std::function<void()>& record, void** exec) {
  auto s = static_cast<cudaStream_t>(stream);
  // Thread-local: the other ranks' threads keep making CUDA calls while this one captures.
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return cudaWhy("cudaStreamBeginCapture", e);
  record();
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(s, &graph);
  if (e != cudaSuccess) return cudaWhy("cudaStreamEndCapture", e);
  cudaGraphExec_t g = nullptr;
  e = cudaGraphInstantiate(&g, graph, 0);
  cudaGraphDestroy(graph);
  *exec = g;
  return e == cudaSuccess ? "" : cudaWhy("cudaGraphInstantiate", e);
}

std::string cudaGraphRun(void* exec, void* stream) {
  cudaError_t e =
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? "" : cudaWhy("cudaGraphLaunch", e);
}

void cudaGraphFree(void* exec) {
  if (exec != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
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
std::string cudaStreamMake(void** stream) {
  *stream = nullptr;
  return kNoCuda;
}
void cudaStreamFree(void*) {}
std::string cudaStreamWait(void*) { return kNoCuda; }
std::string cudaAllocate(void**, size_t, void*) { return kNoCuda; }
void cudaRelease(void*, void*) {}
std::string cudaCopy(void*, const void*, size_t, bool, void*) { return kNoCuda; }
std::string cudaGraphRecord(void*, const std::function<void()>&, void** exec) {
  *exec = nullptr;
  return kNoCuda;
}
std::string cudaGraphRun(void*, void*) { return kNoCuda; }
void cudaGraphFree(void*) {}
bool cudaIsDevicePointer(const void*) { return false; }

#endif

}  // namespace tessera::perf
