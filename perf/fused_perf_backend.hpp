// fused_perf's buffers, GEMM and stream of one rank: host memory and the host executor's tiled
// GEMM, or (-d device) device memory of GPU 0, a stream of the rank's own and cuBLAS. CUDA calls
// are made only in fused_perf_backend.cpp, so a build without CUDA compiles the rest unchanged.
// Nothing here waits for the whole device (no cudaDeviceSynchronize, no plain cudaFree): a
// communicator's resident kernel never leaves it idle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/datatype.hpp"
#include "tessera/tessera.h"

namespace tessera::perf {

// Every function returns "" or why it failed.
class RankBackend {
 public:
  virtual ~RankBackend() = default;
  virtual std::string alloc(void** p, uint64_t bytes) = 0;  // zero-filled
  virtual void release(void* p) = 0;                        // null: nothing
  // `count` elements of `type`, multiples of 1/64 in [-1, 1) (exact in every input type).
  virtual std::string fillRandom(void* p, tsrDataType_t type, uint64_t count, uint64_t seed) = 0;
  virtual std::string read(const void* p, tsrDataType_t type, uint64_t count,
                           std::vector<double>* out) = 0;
  // C (m x n, the output type) = A (m x k) B (k x n), the input type, row-major; stream-ordered.
  virtual std::string gemm(const void* a, const void* b, void* c, uint64_t m, uint64_t n,
                           uint64_t k) = 0;
  virtual std::string sync() = 0;  // waits for the rank's stream (nothing on the host)
  virtual void* stream() = 0;      // the rank's cudaStream_t, or null
};

std::string makeBackend(bool device, tsrDataType_t in, tsrDataType_t out,
                        std::unique_ptr<RankBackend>* backend);

// Whether -d device can run here: a CUDA build with cuBLAS, a GPU, the fused GPU kernels.
bool deviceUsable(std::string* whyNot);

// Makes GPU 0 current on the calling thread (device mode only).
class ScopedDevice {
 public:
  explicit ScopedDevice(bool device);
};

}  // namespace tessera::perf
