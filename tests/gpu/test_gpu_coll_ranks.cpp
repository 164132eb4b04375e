#include "test_gpu_coll_ranks.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::gputest {
namespace {

// Runs before main(), so before any CUDA call of the test binary (CUDA reads both variables when
// it creates the context; setting them later has no effect). Why (device_executor.hpp, README):
// - CUDA_DEVICE_MAX_CONNECTIONS: with the default 8 hardware queues, 8 ranks' streams plus their
//   resident kernels' streams alias, and a stream that shares a queue with a kernel that never
//   ends stalls behind it.
// - CUDA_MODULE_LOADING=EAGER: a kernel of a module loaded lazily (cudart's own, the tests') may
//   wait for the device to go idle to load, which it never does while a resident grid runs.
// And short deadlines: a rank that stops early makes its peers fail in seconds, not 300.
[[maybe_unused]] const bool kEnvironmentSet = [] {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  setenv("TESSERA_TRANSPORT_TIMEOUT", "20", 0);
  setenv("TESSERA_BOOTSTRAP_TIMEOUT", "20", 0);
  return true;
}();

using Clock = std::chrono::steady_clock;

// IEEE / OCP encodings of 1.0 (0 is all zero bits in every type).
void storeOne(unsigned char* p, tsrDataType_t t) {
  switch (t) {
    case tsrFloat16: p[0] = 0x00, p[1] = 0x3c; break;
    case tsrBfloat16: p[0] = 0x80, p[1] = 0x3f; break;
    case tsrFloat8e4m3: p[0] = 0x38; break;
    case tsrFloat8e5m2: p[0] = 0x3c; break;
    default: break;
  }
}

}  // namespace

size_t eltBytes(tsrDataType_t t) {
  switch (t) {
    case tsrInt8:
    case tsrUint8:
    case tsrFloat8e4m3:
    case tsrFloat8e5m2: return 1;
    case tsrFloat16:
    case tsrBfloat16: return 2;
    case tsrInt32:
    case tsrUint32:
    case tsrFloat32: return 4;
    default: return 8;
  }
}

const char* typeText(tsrDataType_t t) {
  static const char* const kNames[] = {"int8",    "uint8",    "int32",   "uint32",
                                       "int64",   "uint64",   "float16", "float32",
                                       "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return t >= 0 && t < tsrNumTypes ? kNames[t] : "?";
}

const char* opText(tsrRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < tsrNumOps ? kNames[op] : "?";
}

void fillPattern(void* dst, size_t count, tsrDataType_t t, int rank, uint32_t seed) {
  auto* p = static_cast<unsigned char*>(dst);
  const size_t e = eltBytes(t);
  std::memset(p, 0, count * e);
  const bool narrowFloat =
      t == tsrFloat16 || t == tsrBfloat16 || t == tsrFloat8e4m3 || t == tsrFloat8e5m2;
  for (size_t i = 0; i < count; ++i) {
    const auto mix = static_cast<uint32_t>(i * 3 + static_cast<size_t>(rank) * 5 + seed);
    unsigned char* q = p + i * e;
    if (narrowFloat) {
      if (mix % 3 != 0) storeOne(q, t);
      continue;
    }
    const uint32_t v = mix % 4;
    if (t == tsrFloat32) {
      float f = static_cast<float>(v);
      std::memcpy(q, &f, 4);
    } else if (t == tsrFloat64) {
      double d = v;
      std::memcpy(q, &d, 8);
    } else {
      std::memcpy(q, &v, 1);  // little-endian integers: the low byte holds 0..3
    }
  }
}

#if TESSERA_HAVE_CUDA

namespace {
std::string cudaWhy(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}
cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

std::string useGpu0() {
  cudaError_t e = cudaSetDevice(0);
  return e == cudaSuccess ? "" : cudaWhy("cudaSetDevice(0)", e);
}

std::string waitStream(void* stream, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    cudaError_t e = cudaStreamQuery(asStream(stream));
    if (e == cudaSuccess) return "";
    if (e != cudaErrorNotReady) return cudaWhy("cudaStreamQuery", e);
    if (Clock::now() > end)
      return "the stream is still running after " + std::to_string(seconds) + " s";
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::string toDevice(void* dst, const void* src, size_t bytes, void* stream) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, asStream(stream));
  return e != cudaSuccess ? cudaWhy("cudaMemcpyAsync H2D", e) : waitStream(stream, 30);
}

std::string toHost(void* dst, const void* src, size_t bytes, void* stream) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, asStream(stream));
  return e != cudaSuccess ? cudaWhy("cudaMemcpyAsync D2H", e) : waitStream(stream, 30);
}

std::string setDevice(void* dst, int byte, size_t bytes, void* stream) {
  cudaError_t e = cudaMemsetAsync(dst, byte, bytes, asStream(stream));
  return e != cudaSuccess ? cudaWhy("cudaMemsetAsync", e) : waitStream(stream, 30);
}

std::string GpuRanks::init(int n, size_t bytes, int buffers) {
  n_ = n;
  buffers_per_rank_ = buffers;
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) return cudaWhy("cudaSetDevice", e);
  comms_.assign(static_cast<size_t>(n), nullptr);
  std::vector<int> devs(static_cast<size_t>(n), 0);
  if (tsrCommInitAll(comms_.data(), n, devs.data()) != tsrSuccess) {
    comms_.clear();
    return std::string("tsrCommInitAll: ") + tsrGetLastError(nullptr);
  }
  for (int r = 0; r < n; ++r) {
    cudaStream_t s = nullptr;
    // Non-blocking: the legacy default stream (used by nothing here) never orders against them.
    if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess)
      return cudaWhy("cudaStreamCreateWithFlags", e);
    streams_.push_back(s);
    for (int b = 0; b < buffers; ++b) {
      void* p = nullptr;
      if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return cudaWhy("cudaMalloc", e);
      buffers_.push_back(p);
    }
  }
  return "";
}

tsrComm_t GpuRanks::release(int r) {
  tsrComm_t c = comms_[static_cast<size_t>(r)];
  comms_[static_cast<size_t>(r)] = nullptr;
  return c;
}

void GpuRanks::destroy() {
  for (void* s : streams_) {
    std::string why = waitStream(s, 30);
    if (!why.empty()) ADD_FAILURE() << "before destroying the communicators: " << why;
  }
  // All at once, one thread per rank: freeing device memory (cudaFree) may wait for the whole
  // device to go idle, which it does only once every rank's resident grid has stopped; one thread
  // destroying the ranks in turn would wait in rank 0's frees for grids it has not stopped yet.
  std::vector<std::thread> destroyers;
  std::vector<tsrResult_t> results(comms_.size(), tsrSuccess);
  std::vector<std::string> whys(comms_.size());
  for (size_t r = 0; r < comms_.size(); ++r) {
    if (comms_[r] == nullptr) continue;
    destroyers.emplace_back([this, r, &results, &whys] {
      results[r] = tsrCommDestroy(comms_[r]);
      if (results[r] != tsrSuccess) whys[r] = tsrGetLastError(nullptr);
    });
  }
  for (std::thread& t : destroyers) t.join();
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r], tsrSuccess) << "rank " << r << ": " << whys[r];
  comms_.clear();
  // Only now: no executor of these ranks runs any more.
  for (void* p : buffers_) cudaFree(p);
  buffers_.clear();
  for (void* s : streams_) cudaStreamDestroy(asStream(s));
  streams_.clear();
}

#else  // no CUDA in this build: the tests skip before calling any of these

std::string useGpu0() { return "no CUDA in this build"; }
std::string waitStream(void*, double) { return "no CUDA in this build"; }
std::string toDevice(void*, const void*, size_t, void*) { return "no CUDA in this build"; }
std::string toHost(void*, const void*, size_t, void*) { return "no CUDA in this build"; }
std::string setDevice(void*, int, size_t, void*) { return "no CUDA in this build"; }
std::string GpuRanks::init(int, size_t, int) { return "no CUDA in this build"; }
tsrComm_t GpuRanks::release(int) { return nullptr; }
void GpuRanks::destroy() {}

#endif

GpuRanks::~GpuRanks() { destroy(); }

}  // namespace tessera::gputest
