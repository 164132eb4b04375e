#include "fused_perf_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/build_config.hpp"
#include "core/float_convert.hpp"
#include "fused/fused.hpp"
#include "fused/host/host_gemm.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime.h>
#if TESSERA_PERF_HAVE_CUBLAS
#include <cublas_v2.h>
#endif
#endif

namespace tessera::perf {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void fillHost(void* p, tsrDataType_t type, uint64_t count, uint64_t seed) {
  for (uint64_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(static_cast<int>(mix(seed * 1000003 + i) % 128) - 64) / 64;
    if (type == tsrFloat32) {
      static_cast<float*>(p)[i] = v;
    } else {
      uint16_t h = type == tsrFloat16 ? encodeFloat16(v) : encodeBFloat16(v);
      std::memcpy(static_cast<uint8_t*>(p) + 2 * i, &h, 2);
    }
  }
}

void readHost(const void* p, tsrDataType_t type, uint64_t count, std::vector<double>* out) {
  out->resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (type == tsrFloat32) {
      (*out)[i] = static_cast<const float*>(p)[i];
    } else {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(p) + 2 * i, 2);
      (*out)[i] = type == tsrFloat16 ? decodeFloat16(h) : decodeBFloat16(h);
    }
  }
}

// The host executor's arithmetic, tile by tile as it computes (hostTileConfig's tiles).
class HostBackend final : public RankBackend {
 public:
  HostBackend(tsrDataType_t in, tsrDataType_t out) : in_(in), out_(out) {}
  std::string alloc(void** p, uint64_t bytes) override {
    *p = std::calloc(bytes, 1);
    return *p != nullptr ? "" : "out of host memory";
  }
  void release(void* p) override { std::free(p); }
  std::string fillRandom(void* p, tsrDataType_t type, uint64_t count, uint64_t seed) override {
    if (p != nullptr) fillHost(p, type, count, seed);
    return "";
  }
  std::string read(const void* p, tsrDataType_t type, uint64_t count,
                   std::vector<double>* out) override {
    if (p != nullptr) readHost(p, type, count, out);
    return "";
  }
  std::string gemm(const void* a, const void* b, void* c, uint64_t m, uint64_t n,
                   uint64_t k) override {
    const float* fa = fused::floatView(in_, a, m * k, &a32_);
    const float* fb = fused::floatView(in_, b, k * n, &b32_);
    const fused::TileConfig cfg = fused::hostTileConfig();
    tile_.resize(static_cast<size_t>(cfg.tileM) * cfg.tileN);
    const size_t outBytes = dtypeBytes(out_);
    for (uint64_t i0 = 0; i0 < m; i0 += cfg.tileM)
      for (uint64_t j0 = 0; j0 < n; j0 += cfg.tileN) {
        const auto rows = static_cast<uint32_t>(std::min<uint64_t>(cfg.tileM, m - i0));
        const auto cols = static_cast<uint32_t>(std::min<uint64_t>(cfg.tileN, n - j0));
        fused::gemmTile(fa + i0 * k, k, fb + j0, n, tile_.data(), cols, rows, cols, k);
        for (uint32_t r = 0; r < rows; ++r)
          fused::storeFromFloat(out_, tile_.data() + static_cast<size_t>(r) * cols, nullptr,
                                static_cast<uint8_t*>(c) + ((i0 + r) * n + j0) * outBytes, cols);
      }
    return "";
  }
  std::string sync() override { return ""; }
  void* stream() override { return nullptr; }

 private:
  tsrDataType_t in_, out_;
  std::vector<float> a32_, b32_, tile_;
};

#if TESSERA_HAVE_CUDA && TESSERA_PERF_HAVE_CUBLAS

std::string cudaWhy(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

cudaDataType_t cudaType(tsrDataType_t t) {
  return t == tsrBfloat16 ? CUDA_R_16BF : t == tsrFloat16 ? CUDA_R_16F : CUDA_R_32F;
}

// GPU 0, a non-blocking stream and a cuBLAS handle of the rank's own, cuBLAS's workspace
// allocated stream-ordered (so cuBLAS never allocates, nor frees, behind a resident kernel).
class DeviceBackend final : public RankBackend {
 public:
  DeviceBackend(tsrDataType_t in, tsrDataType_t out) : in_(in), out_(out) {}
  ~DeviceBackend() override {
    if (handle_ != nullptr) cublasDestroy(handle_);
    release(workspace_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::string init() {
    cudaError_t e = cudaSetDevice(0);
    if (e != cudaSuccess) return cudaWhy("cudaSetDevice(0)", e);
    e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cudaWhy("cudaStreamCreateWithFlags", e);
    if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) return "cublasCreate failed";
    if (cublasSetStream(handle_, stream_) != CUBLAS_STATUS_SUCCESS) return "cublasSetStream failed";
    constexpr size_t kWorkspace = size_t{32} << 20;
    std::string why = alloc(&workspace_, kWorkspace);
    if (!why.empty()) return why;
    if (cublasSetWorkspace(handle_, workspace_, kWorkspace) != CUBLAS_STATUS_SUCCESS)
      return "cublasSetWorkspace failed";
    return "";
  }
  std::string alloc(void** p, uint64_t bytes) override {
    cudaError_t e = cudaMallocAsync(p, bytes, stream_);
    if (e != cudaSuccess) return cudaWhy("cudaMallocAsync", e);
    e = cudaMemsetAsync(*p, 0, bytes, stream_);
    if (e != cudaSuccess) return cudaWhy("cudaMemsetAsync", e);
    return sync();
  }
  void release(void* p) override {
    if (p == nullptr) return;
    cudaFreeAsync(p, stream_);
    cudaStreamSynchronize(stream_);
  }
  std::string fillRandom(void* p, tsrDataType_t type, uint64_t count, uint64_t seed) override {
    if (p == nullptr) return "";
    std::vector<uint8_t> host(count * dtypeBytes(type));
    fillHost(host.data(), type, count, seed);
    cudaError_t e = cudaMemcpyAsync(p, host.data(), host.size(), cudaMemcpyHostToDevice, stream_);
    if (e != cudaSuccess) return cudaWhy("cudaMemcpyAsync", e);
    return sync();
  }
  std::string read(const void* p, tsrDataType_t type, uint64_t count,
                   std::vector<double>* out) override {
    if (p == nullptr) return "";
    std::vector<uint8_t> host(count * dtypeBytes(type));
    cudaError_t e = cudaMemcpyAsync(host.data(), p, host.size(), cudaMemcpyDeviceToHost, stream_);
    if (e != cudaSuccess) return cudaWhy("cudaMemcpyAsync", e);
    std::string why = sync();
    if (why.empty()) readHost(host.data(), type, count, out);
    return why;
  }
  std::string gemm(const void* a, const void* b, void* c, uint64_t m, uint64_t n,
                   uint64_t k) override {
    // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS sees B (n x k, ld n) times
    // A (k x m, ld k) into C (n x m, ld n).
    const float alpha = 1, beta = 0;
    cublasStatus_t s =
        cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                     static_cast<int>(k), &alpha, b, cudaType(in_), static_cast<int>(n), a,
                     cudaType(in_), static_cast<int>(k), &beta, c, cudaType(out_),
                     static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS
               ? ""
               : "cublasGemmEx failed (status " + std::to_string(static_cast<int>(s)) + ")";
  }
  std::string sync() override {
    cudaError_t e = cudaStreamSynchronize(stream_);
    return e == cudaSuccess ? "" : cudaWhy("cudaStreamSynchronize", e);
  }
  void* stream() override { return stream_; }

 private:
  tsrDataType_t in_, out_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

#endif

}  // namespace

std::string makeBackend(bool device, tsrDataType_t in, tsrDataType_t out,
                        std::unique_ptr<RankBackend>* backend) {
  if (!device) {
    *backend = std::make_unique<HostBackend>(in, out);
    return "";
  }
#if TESSERA_HAVE_CUDA && TESSERA_PERF_HAVE_CUBLAS
  auto be = std::make_unique<DeviceBackend>(in, out);
  std::string why = be->init();
  *backend = std::move(be);
  return why;
#else
  return "this build has no CUDA with cuBLAS";
#endif
}

bool deviceUsable(std::string* whyNot) {
#if TESSERA_HAVE_CUDA && TESSERA_PERF_HAVE_CUBLAS
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    *whyNot = e != cudaSuccess ? cudaWhy("no usable GPU: cudaGetDeviceCount", e) : "no CUDA device";
    return false;
  }
  std::string why;
  if (!fused::DeviceFusedExecutor::available(&why)) {
    *whyNot = "no fused GPU kernels in this build: " + why;
    return false;
  }
  return true;
#else
  *whyNot = TESSERA_HAVE_CUDA ? "this build has CUDA but no cuBLAS (the baseline GEMM)"
                              : "this build has no CUDA (configured without the CUDA toolkit)";
  return false;
#endif
}

ScopedDevice::ScopedDevice(bool device) {
#if TESSERA_HAVE_CUDA
  if (device) cudaSetDevice(0);
#else
  (void)device;
#endif
}

}  // namespace tessera::perf
