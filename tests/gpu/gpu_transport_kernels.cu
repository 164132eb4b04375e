#include "gpu_transport_kernels.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#endif

#include "core/status.hpp"

namespace tessera::test {

#if defined(__CUDACC__)
namespace {

using device::FifoDeviceHandle;
using device::MemoryChannelDeviceHandle;
using device::PortChannelDeviceHandle;
using device::ProxyTrigger;
using device::SemaphoreDeviceHandle;

std::string cudaText(const char* what, cudaError_t e) {
  std::string s = strprintf("%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
  cudaGetLastError();
  return s;
}

#define TK_CUDA(expr)                                        \
  do {                                                       \
    cudaError_t tk_e_ = (expr);                              \
    if (tk_e_ != cudaSuccess) return cudaText(#expr, tk_e_); \
  } while (0)

// Waits for `stream` until `seconds` passed (the kernels have their own, shorter deadlines).
std::string waitFor(cudaStream_t stream, double seconds, const char* what) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return "";
    if (e != cudaErrorNotReady) return cudaText(what, e);
    if (std::chrono::steady_clock::now() > until)
      return strprintf("%s did not finish within %.3g s", what, seconds);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A stream, device buffers and the host copies they are uploaded from, for one launch.
// Stream-ordered allocations: cudaMalloc/cudaFree may synchronize the whole device, i.e. wait for
// another thread rank's kernel, which may be waiting for this rank. A launch that did not finish
// leaks all of them rather than block, or free host memory a pending copy still reads or writes.
struct Launch {
  int device;
  cudaStream_t stream = nullptr;
  std::vector<void*> buffers;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> hostBuffers;
  bool finished = false;
  explicit Launch(int dev) : device(dev) {}
  std::string start() {
    TK_CUDA(cudaSetDevice(device));
    TK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return "";
  }
  // Host memory of `bytes` that lives as long as this launch (for an asynchronous copy).
  unsigned char* hostBuffer(size_t bytes) {
    hostBuffers.push_back(std::make_unique<std::vector<unsigned char>>(bytes));
    return hostBuffers.back()->data();
  }
  template <typename T>
  std::string upload(const std::vector<T>& v, T** out) {
    const size_t bytes = sizeof(T) * v.size();
    unsigned char* staged = hostBuffer(bytes);
    std::memcpy(staged, v.data(), bytes);
    void* p = nullptr;
    TK_CUDA(cudaMallocAsync(&p, bytes, stream));
    buffers.push_back(p);
    TK_CUDA(cudaMemcpyAsync(p, staged, bytes, cudaMemcpyHostToDevice, stream));
    *out = static_cast<T*>(p);
    return "";
  }
  std::string statuses(size_t n, int** out) {
    std::vector<int> init(n, -1);
    return upload(init, out);
  }
  // Waits and reads back the per-block statuses; "" when every block reported 0.
  std::string finish(const int* status, size_t n, double seconds, const char* what) {
    std::string w = waitFor(stream, seconds, what);
    if (!w.empty()) return w;
    auto* got = reinterpret_cast<int*>(hostBuffer(sizeof(int) * n));
    TK_CUDA(cudaMemcpyAsync(got, status, sizeof(int) * n, cudaMemcpyDeviceToHost, stream));
    w = waitFor(stream, seconds, "reading the kernel's status");
    if (!w.empty()) return w;
    finished = true;
    std::string out;
    for (size_t b = 0; b < n; ++b)
      if (got[b] != 0) out += strprintf("%s block %zu failed at step %d; ", what, b, got[b]);
    return out;
  }
  ~Launch() {
    if (!finished) {
      for (auto& h : hostBuffers) (void)h.release();  // a copy may still be pending
      return;
    }
    for (void* p : buffers) cudaFreeAsync(p, stream);
    if (stream != nullptr) cudaStreamDestroy(stream);
    cudaGetLastError();
  }
};

__global__ void memoryChannelKernel(const MemoryChannelDeviceHandle* handles, uint64_t n,
                                    uint64_t tail, int rounds, uint64_t timeoutNs, int* status) {
  const MemoryChannelDeviceHandle& h = handles[blockIdx.x];
  __shared__ int step;
  if (threadIdx.x == 0) step = 0;
  __syncthreads();
  if (!h.put(5 * n, 1 * n, n, threadIdx.x, blockDim.x)) step = 1;
  __syncthreads();
  if (threadIdx.x == 0 && step == 0) {
    h.signal();
    if (!h.wait(timeoutNs)) step = 2;
  }
  __syncthreads();
  if (step == 0 && !h.get(6 * n, 1 * n, n, threadIdx.x, blockDim.x)) step = 3;
  __syncthreads();
  if (threadIdx.x == 0 && step == 0) {
    h.signal();
    if (!h.wait(timeoutNs)) step = 4;
    for (int i = 0; i < rounds && step == 0; ++i) {
      h.signal();
      if (!h.wait(timeoutNs)) step = 5;
    }
    if (step == 0 && !h.putWithSignal(8 * n, 1 * n, tail)) step = 6;
    if (step == 0 && !h.wait(timeoutNs)) step = 7;
    if (step == 0 && h.put(h.remoteBytes - 8, 0, 16)) step = 8;
    if (step == 0 && h.get(0, h.remoteBytes, 1)) step = 9;
  }
  __syncthreads();
  if (threadIdx.x == 0) status[blockIdx.x] = step;
}

__global__ void portChannelKernel(const PortChannelDeviceHandle* handles, uint64_t n,
                                  uint64_t timeoutNs, int* status) {
  if (threadIdx.x != 0) return;
  const PortChannelDeviceHandle& h = handles[blockIdx.x];
  int step = 0;
  if (!h.putWithSignal(7 * n, 2 * n, n)) step = 1;
  if (step == 0 && !h.flush()) step = 2;
  if (step == 0 && !h.wait(timeoutNs)) step = 3;
  if (step == 0 && h.put(h.remoteBytes, 0, 1)) step = 4;
  if (step == 0 && (!h.put(0, 0, 0) || !h.signal() || !h.flush())) step = 5;
  if (step == 0 && !h.wait(timeoutNs)) step = 6;
  status[blockIdx.x] = step;
}

__global__ void fifoKernel(FifoDeviceHandle fifo, SemaphoreDeviceHandle sem, uint32_t count,
                           uint64_t timeoutNs, int* status) {
  int step = 0;
  for (uint32_t i = 0; i < count && step == 0; ++i)
    if (fifo.push(device::kTriggerPut, i, i * 3, i * 5, i * 7 + 1) == device::kFifoFailed) step = 1;
  if (step == 0 && !sem.wait(timeoutNs)) step = 2;
  if (step == 0) sem.signal();
  *status = step;
}

}  // namespace

std::string gpuCopy(int device, void* dst, const void* src, size_t bytes, double seconds) {
  Launch l(device);
  std::string s = l.start();
  if (!s.empty()) return s;
  TK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, l.stream));
  s = waitFor(l.stream, seconds, "gpuCopy");
  l.finished = s.empty();
  return s;
}

std::string runMemoryChannelKernel(int device,
                                   const std::vector<device::MemoryChannelDeviceHandle>& handles,
                                   uint64_t n, uint64_t tail, int rounds, double seconds) {
  Launch l(device);
  std::string s = l.start();
  MemoryChannelDeviceHandle* h = nullptr;
  int* status = nullptr;
  if (s.empty()) s = l.upload(handles, &h);
  if (s.empty()) s = l.statuses(handles.size(), &status);
  if (!s.empty()) return s;
  auto timeoutNs = static_cast<uint64_t>(seconds * 1e9);
  memoryChannelKernel<<<static_cast<unsigned>(handles.size()), 256, 0, l.stream>>>(
      h, n, tail, rounds, timeoutNs, status);
  TK_CUDA(cudaGetLastError());
  return l.finish(status, handles.size(), seconds + 10, "memory channel kernel");
}

std::string runPortChannelKernel(int device,
                                 const std::vector<device::PortChannelDeviceHandle>& handles,
                                 uint64_t n, double seconds) {
  Launch l(device);
  std::string s = l.start();
  PortChannelDeviceHandle* h = nullptr;
  int* status = nullptr;
  if (s.empty()) s = l.upload(handles, &h);
  if (s.empty()) s = l.statuses(handles.size(), &status);
  if (!s.empty()) return s;
  portChannelKernel<<<static_cast<unsigned>(handles.size()), 32, 0, l.stream>>>(
      h, n, static_cast<uint64_t>(seconds * 1e9), status);
  TK_CUDA(cudaGetLastError());
  return l.finish(status, handles.size(), seconds + 10, "port channel kernel");
}

std::string runFifoAndSemaphoreKernel(int device, uint32_t count, double seconds) {
  constexpr uint32_t kSlots = 8;  // small, so that producers wait for a full ring
  struct Host {
    ProxyTrigger triggers[kSlots];
    uint64_t head, tail, error, inbound, remoteInbound;
  };
  Launch l(device);
  std::string s = l.start();
  if (!s.empty()) return s;
  Host* host = nullptr;
  TK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(Host), cudaHostAllocMapped));
  std::memset(static_cast<void*>(host), 0, sizeof(Host));
  Host* dev = nullptr;
  TK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
  std::vector<uint64_t> expectedInit(1, 0);
  uint64_t* expected = nullptr;
  int* status = nullptr;
  s = l.upload(expectedInit, &expected);
  if (s.empty()) s = l.statuses(1, &status);
  if (!s.empty()) return s;
  // No doorbell: a kernel pushes, and the test's host loop polls.
  FifoDeviceHandle fifo{dev->triggers, &dev->head, &dev->tail,
                        &dev->error,   kSlots,     static_cast<uint64_t>(seconds * 1e9),
                        nullptr,       nullptr};
  SemaphoreDeviceHandle sem{&dev->inbound, expected, &dev->remoteInbound, nullptr};
  fifoKernel<<<1, 1, 0, l.stream>>>(fifo, sem, count, static_cast<uint64_t>(seconds * 1e9), status);
  TK_CUDA(cudaGetLastError());
  // This thread is the proxy: take slots in order, check them, free them.
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string bad;
  for (uint64_t tail = 0; tail < count && bad.empty();) {
    ProxyTrigger* slot = &host->triggers[tail % kSlots];
    uint64_t control = device::loadAcquire(&slot->control);
    if (control == 0) {
      if (std::chrono::steady_clock::now() > until)
        bad = strprintf("fifo: trigger %llu never arrived", static_cast<unsigned long long>(tail));
      continue;
    }
    auto i = static_cast<uint64_t>(static_cast<uint32_t>(control));
    if (control >> 32 != device::kTriggerPut || i != tail || slot->dstOffset != i * 3 ||
        slot->srcOffset != i * 5 || slot->bytes != i * 7 + 1)
      bad =
          strprintf("fifo: slot %llu holds control %llx dst %llu src %llu bytes %llu",
                    static_cast<unsigned long long>(tail), static_cast<unsigned long long>(control),
                    static_cast<unsigned long long>(slot->dstOffset),
                    static_cast<unsigned long long>(slot->srcOffset),
                    static_cast<unsigned long long>(slot->bytes));
    device::storeRelaxed(&slot->control, 0);
    device::storeRelease(&host->tail, ++tail);
  }
  if (bad.empty()) {
    device::fetchAddRelease(&host->inbound, 1);  // the kernel waits for this ...
    if (!device::waitAtLeast(&host->remoteInbound, 1, static_cast<uint64_t>(seconds * 1e9)))
      bad = "semaphore: the kernel's signal never arrived";  // ... and answers with this
  }
  std::string f = l.finish(status, 1, seconds + 10, "fifo kernel");
  if (bad.empty() && device::loadAcquire(&host->error) != 0) bad = "fifo: error word set";
  if (l.finished) cudaFreeHost(host);
  return bad + f;
}

#else  // !__CUDACC__

namespace {
const char* const kNoCuda = "CUDA was not built in";
}
std::string gpuCopy(int, void*, const void*, size_t, double) { return kNoCuda; }
std::string runMemoryChannelKernel(int, const std::vector<device::MemoryChannelDeviceHandle>&,
                                   uint64_t, uint64_t, int, double) {
  return kNoCuda;
}
std::string runPortChannelKernel(int, const std::vector<device::PortChannelDeviceHandle>&, uint64_t,
                                 double) {
  return kNoCuda;
}
std::string runFifoAndSemaphoreKernel(int, uint32_t, double) { return kNoCuda; }

#endif

}  // namespace tessera::test
