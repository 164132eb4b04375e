// Device handle of a memory channel: a peer's registered memory mapped into this rank's address
// space, this rank's own registered memory, and a semaphore with that peer. Loads and stores go
// straight to the peer (NVLink/PCIe for cuda_ipc and p2p, the shared mapping for shm and inproc).
//
// Every operation checks its range against both regions and, when it does not fit, returns
// false and touches nothing. Cooperative copies take the calling thread's index and the thread
// count; after all threads of a block copied, one thread signals (after __syncthreads() on the
// GPU: the release of that signal is cumulative over the block's stores).
#pragma once

#include <stdint.h>

#include "tessera/device/atomics.hpp"
#include "tessera/device/semaphore_device.hpp"

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

namespace tessera::device {

// Copies [0, bytes) from src to dst, thread `tid` of `nthreads` taking its share; 16-byte words
// where both pointers allow it.
TSR_INLINE void copyBytes(char* dst, const char* src, uint64_t bytes, uint32_t tid,
                          uint32_t nthreads) {
#if defined(__CUDA_ARCH__)
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    uint64_t words = bytes / 16;
    auto* d = reinterpret_cast<uint4*>(dst);
    auto* s = reinterpret_cast<const uint4*>(src);
    for (uint64_t i = tid; i < words; i += nthreads) d[i] = s[i];
    for (uint64_t i = words * 16 + tid; i < bytes; i += nthreads) dst[i] = src[i];
  } else {
    for (uint64_t i = tid; i < bytes; i += nthreads) dst[i] = src[i];
  }
#else
  // Host threads split the range into contiguous parts and copy each with memcpy.
  uint64_t part = (bytes + nthreads - 1) / nthreads;
  uint64_t begin = part * tid;
  if (begin >= bytes) return;
  uint64_t n = bytes - begin < part ? bytes - begin : part;
  memcpy(dst + begin, src + begin, n);
#endif
}

TSR_INLINE bool rangeFits(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

struct MemoryChannelDeviceHandle {
  char* remote;  // the peer's registered memory, mapped
  uint64_t remoteBytes;
  char* local;  // this rank's registered memory
  uint64_t localBytes;
  SemaphoreDeviceHandle semaphore;

  // local[srcOffset, +bytes) -> remote[dstOffset, +bytes).
  TSR_INLINE bool put(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t tid = 0,
                      uint32_t nthreads = 1) const {
    if (!rangeFits(dstOffset, bytes, remoteBytes) || !rangeFits(srcOffset, bytes, localBytes))
      return false;
    copyBytes(remote + dstOffset, local + srcOffset, bytes, tid, nthreads);
    return true;
  }

  // remote[srcOffset, +bytes) -> local[dstOffset, +bytes).
  TSR_INLINE bool get(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t tid = 0,
                      uint32_t nthreads = 1) const {
    if (!rangeFits(dstOffset, bytes, localBytes) || !rangeFits(srcOffset, bytes, remoteBytes))
      return false;
    copyBytes(local + dstOffset, remote + srcOffset, bytes, tid, nthreads);
    return true;
  }

  TSR_INLINE void signal() const { semaphore.signal(); }
  TSR_INLINE bool wait(uint64_t timeoutNs) const { return semaphore.wait(timeoutNs); }
  TSR_INLINE bool poll() const { return semaphore.poll(); }

  // Single-thread put, then signal: the peer that sees the signal sees the data.
  TSR_INLINE bool putWithSignal(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes) const {
    if (!put(dstOffset, srcOffset, bytes)) return false;
    signal();
    return true;
  }
};

}  // namespace tessera::device
