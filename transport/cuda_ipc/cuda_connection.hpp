// The connection operations that cuda_ipc and p2p share: both map the peer's memory into this
// process (a cuMem mapping, an opened IPC handle, or the peer's own address in this process), so
// put, get and atomicAdd are copies and an atomic on the mapped pointer, issued on one
// non-blocking stream of this rank's GPU that belongs to the connection.
//
// Ordering (DESIGN.md, "Memory ordering"):
//  - host calls: put and get queue a cudaMemcpyAsync and wait for the stream, so a put's bytes
//    have landed in the peer's memory when it returns. atomicAdd queues a one-thread kernel doing
//    a system-scope release add (atom.add.release.sys) on the same stream, so it starts only
//    after every copy before it has completed; a reader that acquires the counter (a host poll
//    through cudaReadWord, or ld.acquire.sys in a kernel) then sees the data.
//  - kernels: MemoryChannelDeviceHandle stores straight into the mapping and signals with
//    st/atom .release.sys, waits with ld.acquire.sys (include/tessera/device/atomics.hpp).
// Every wait on the stream has the context's deadline. The stream is never the legacy default
// stream, so a copy never waits for kernels of other streams (another rank's kernel on this GPU
// may be waiting for exactly this copy).
//
// The stream is made at the first host put, get or atomicAdd, not when the connection is: kernels
// reach peers through the mapping and most connections never need one, while 8 ranks sharing a
// GPU with 7 peers each would otherwise hold 56 streams, more than the GPU's 32 hardware queues,
// and a stream that shares a queue with a resident kernel's or one stuck in a stream wait stalls
// behind it (DESIGN.md, "Known hazards").
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "transport/connection.hpp"
#include "transport/context_state.hpp"

namespace tessera {

class CudaConnection : public Connection {
 public:
  ~CudaConnection() override;
  bool mapsMemory() const override { return true; }

 protected:
  CudaConnection(std::shared_ptr<ContextState> context, int peer, TransportKind kind);
  // Checks that this rank has a GPU and that it can be made current; call once after
  // construction. Makes no stream (see the file comment).
  Result init();

  Result doPut(const RemoteMemory& dst, size_t dstOffset, const Memory& src, size_t srcOffset,
               size_t bytes) override;
  Result doGet(const Memory& dst, size_t dstOffset, const RemoteMemory& src, size_t srcOffset,
               size_t bytes) override;
  Result doAtomicAdd(const RemoteMemory& dst, size_t offset, uint64_t value) override;
  Result doFlush(const Deadline& deadline) override;

  int device() const { return context()->cudaDevice; }

 private:
  Result copy(void* dst, const void* src, size_t bytes, const char* op);
  // The connection's stream, made on first use; mutex_ held and this rank's device current.
  Result stream(cudaStream_t* out);

  std::mutex mutex_;  // an executor and the proxy may call at once; each call waits for its work
  cudaStream_t stream_ = nullptr;  // null until the first operation that needs it (mutex_)
};

}  // namespace tessera
