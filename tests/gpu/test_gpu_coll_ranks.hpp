// Thread ranks sharing GPU 0 for the device executor's gpu tests (test_gpu_coll*.cpp): their
// communicators, one non-blocking stream each, device buffers, and bounded stream waits.
//
// Rules these tests follow (README, "Device executor"):
// - Never cudaDeviceSynchronize(), and never cudaFree() / cudaMalloc() while a communicator lives:
//   the resident kernel never ends, so a device-wide sync would never return. Buffers are made
//   before the first call and freed after every communicator is destroyed.
// - Streams are waited for by polling cudaStreamQuery with a deadline, so a hang is a failure with
//   a sentence, not a stuck test.
// - Every CUDA call of a rank thread is made after cudaSetDevice(0) on that thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::gputest {

// Bytes of one element.
size_t eltBytes(tsrDataType_t t);
const char* typeText(tsrDataType_t t);
const char* opText(tsrRedOp_t op);

// Writes `count` small integers of type `t` (rank, index and seed pick them) so that every
// reduction order gives the same bits: 0..3 for the 32- and 64-bit types, 0 or 1 for the 16- and
// 8-bit floats (their partial sums over at most 8 ranks, products, and averages over 1, 2, 4 or
// 8 ranks are all exact).
void fillPattern(void* dst, size_t count, tsrDataType_t t, int rank, uint32_t seed);

// cudaSetDevice(0) on the calling thread (every rank thread, before its first CUDA call).
std::string useGpu0();
// Waits for `stream` (a cudaStream_t) with cudaStreamQuery until `seconds` pass; "" when done,
// else why (the CUDA error, or "still running after N s").
std::string waitStream(void* stream, double seconds);
// Stream-ordered copies on `stream`, then waitStream; "" or why.
std::string toDevice(void* dst, const void* src, size_t bytes, void* stream);
std::string toHost(void* dst, const void* src, size_t bytes, void* stream);
std::string setDevice(void* dst, int byte, size_t bytes, void* stream);

class GpuRanks {
 public:
  GpuRanks() = default;
  ~GpuRanks();
  GpuRanks(const GpuRanks&) = delete;
  GpuRanks& operator=(const GpuRanks&) = delete;

  // n ranks on GPU 0 (tsrCommInitAll), a stream per rank and `buffers` device buffers of `bytes`
  // per rank, made before any call. "" or why.
  std::string init(int n, size_t bytes, int buffers = 2);
  // Waits for every stream (bounded), destroys the communicators, then frees the buffers and
  // streams. Called by the destructor; later calls do nothing.
  void destroy();

  int size() const { return n_; }
  tsrComm_t comm(int r) const { return comms_[static_cast<size_t>(r)]; }
  void* stream(int r) const { return streams_[static_cast<size_t>(r)]; }
  void* buffer(int r, int which) const {
    return buffers_[static_cast<size_t>(r * buffers_per_rank_ + which)];
  }
  // Hands communicator r to the caller (who destroys or aborts it): destroy() skips it.
  tsrComm_t release(int r);

 private:
  int n_ = 0;
  int buffers_per_rank_ = 0;
  std::vector<tsrComm_t> comms_;
  std::vector<void*> streams_;
  std::vector<void*> buffers_;
};

}  // namespace tessera::gputest
