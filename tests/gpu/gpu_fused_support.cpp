#include "gpu_fused_support.hpp"

#include <chrono>
#include <thread>

#include "core/build_config.hpp"

#if TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if TESSERA_HAVE_CUDA && defined(TESSERA_TEST_HAVE_CUBLAS)
#include <cublas_v2.h>
#endif

namespace tessera::gputest {

#if TESSERA_HAVE_CUDA

namespace {
std::string why(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}
cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

std::string deviceAlloc(size_t bytes, void** out) {
  cudaError_t e = cudaMalloc(out, bytes);
  return e == cudaSuccess ? "" : why("cudaMalloc", e);
}

void deviceFree(void* p) {
  if (p != nullptr) (void)cudaFree(p);
}

std::string streamCreate(void** out) {
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *out = s;
  return e == cudaSuccess ? "" : why("cudaStreamCreateWithFlags", e);
}

void streamDestroy(void* s) {
  if (s != nullptr) (void)cudaStreamDestroy(asStream(s));
}

std::string streamWait(void* stream, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    cudaError_t e = cudaStreamQuery(asStream(stream));
    if (e == cudaSuccess) return "";
    if (e != cudaErrorNotReady) return why("cudaStreamQuery", e);
    if (std::chrono::steady_clock::now() > end)
      return "the stream is still busy after " + std::to_string(seconds) + " s";
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::string upload(void* dst, const void* src, size_t bytes, void* stream, double seconds) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, asStream(stream));
  return e == cudaSuccess ? streamWait(stream, seconds) : why("cudaMemcpyAsync H2D", e);
}

std::string download(void* dst, const void* src, size_t bytes, void* stream, double seconds) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, asStream(stream));
  return e == cudaSuccess ? streamWait(stream, seconds) : why("cudaMemcpyAsync D2H", e);
}

std::string fill(void* dst, int byte, size_t bytes, void* stream) {
  cudaError_t e = cudaMemsetAsync(dst, byte, bytes, asStream(stream));
  return e == cudaSuccess ? "" : why("cudaMemsetAsync", e);
}

#if defined(TESSERA_TEST_HAVE_CUBLAS)

std::string fusedCublasMissing() { return ""; }

std::string cublasProduct(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                          uint64_t m, uint64_t n, uint64_t k, bool bf16, std::vector<float>* c) {
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) return why("cudaSetDevice(0)", e);
  // One handle and stream for the process (made on first use, never destroyed: a handle
  // destroyed after CUDA's own teardown at exit could crash).
  static cublasHandle_t handle = nullptr;
  static void* stream = nullptr;
  if (handle == nullptr) {
    std::string s = streamCreate(&stream);
    if (!s.empty()) return s;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return "cublasCreate failed";
    if (cublasSetStream(handle, asStream(stream)) != CUBLAS_STATUS_SUCCESS)
      return "cublasSetStream failed";
  }
  void *da = nullptr, *db = nullptr, *dc = nullptr;
  std::string s = deviceAlloc(a.size() * 2, &da);
  if (s.empty()) s = deviceAlloc(b.size() * 2, &db);
  if (s.empty()) s = deviceAlloc(m * n * sizeof(float), &dc);
  if (s.empty()) s = upload(da, a.data(), a.size() * 2, stream, 30);
  if (s.empty()) s = upload(db, b.data(), b.size() * 2, stream, 30);
  if (s.empty()) {
    // Row-major C = A B is column-major C^T = B^T A^T: B as the first operand (n x k, ld n),
    // A as the second (k x m, ld k), C^T (n x m, ld n).
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    cublasStatus_t st = cublasGemmEx(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), &one, db, t, static_cast<int>(n), da, t, static_cast<int>(k), &zero,
        dc, CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) s = "cublasGemmEx failed: status " + std::to_string(st);
  }
  if (s.empty()) {
    c->assign(m * n, 0.0f);
    s = download(c->data(), dc, m * n * sizeof(float), stream, 30);
  }
  if (!s.empty()) (void)streamWait(stream, 30);
  deviceFree(da);
  deviceFree(db);
  deviceFree(dc);
  return s;
}

#else  // CUDA without cuBLAS

std::string fusedCublasMissing() { return "tessera's tests were built without cuBLAS"; }
std::string cublasProduct(const std::vector<uint16_t>&, const std::vector<uint16_t>&, uint64_t,
                          uint64_t, uint64_t, bool, std::vector<float>*) {
  return fusedCublasMissing();
}

#endif

#else  // no CUDA

namespace {
const char* const kNoCuda = "no CUDA in this build";
}

std::string fusedCublasMissing() { return kNoCuda; }
std::string cublasProduct(const std::vector<uint16_t>&, const std::vector<uint16_t>&, uint64_t,
                          uint64_t, uint64_t, bool, std::vector<float>*) {
  return kNoCuda;
}
std::string deviceAlloc(size_t, void**) { return kNoCuda; }
void deviceFree(void*) {}
std::string streamCreate(void**) { return kNoCuda; }
void streamDestroy(void*) {}
std::string upload(void*, const void*, size_t, void*, double) { return kNoCuda; }
std::string download(void*, const void*, size_t, void*, double) { return kNoCuda; }
std::string fill(void*, int, size_t, void*) { return kNoCuda; }
std::string streamWait(void*, double) { return kNoCuda; }

#endif

}  // namespace tessera::gputest
