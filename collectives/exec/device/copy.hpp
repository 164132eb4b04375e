// Copies of the device executor's CTAs (__host__ __device__): a group's threads move `bytes` bytes
// together, in 16-byte words where every pointer allows it on the GPU, in one memcpy per thread's
// block on the host. Shared by the plan interpreter (device_backend.hpp) and sends and receives
// (p2p.hpp).
#pragma once

#include <stdint.h>
#include <string.h>

#include "collectives/exec/ops.hpp"
#include "tessera/device/host_device.hpp"

namespace tessera::exec::devdetail {

// This thread's contiguous block of [0, n) on the host (threads of a host group split a piece).
template <class Group>
TSR_INLINE void hostBlock(const Group& g, uint64_t n, uint64_t* begin, uint64_t* end) {
  uint64_t per = (n + g.size() - 1) / g.size();
  *begin = minU64(n, per * g.rank());
  *end = minU64(n, *begin + per);
}

#if defined(__CUDA_ARCH__)
TSR_INLINE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <class U>
__device__ void copyUnits(char* dst, char* dst2, const char* src, uint64_t from, uint64_t to,
                          uint32_t tid, uint32_t nthreads) {
  for (uint64_t i = from / sizeof(U) + tid; i < to / sizeof(U); i += nthreads) {
    const U v = reinterpret_cast<const U*>(src)[i];
    reinterpret_cast<U*>(dst)[i] = v;
    if (dst2 != nullptr) reinterpret_cast<U*>(dst2)[i] = v;
  }
}
#endif

// dst (and dst2) <- src, `bytes` bytes: the one-source combine without a pre-op.
template <class Group>
TSR_INLINE void copyPiece(const Group& g, void* dst, void* dst2, const void* src, uint64_t bytes) {
  char* d = static_cast<char*>(dst);
  char* d2 = static_cast<char*>(dst2);
  const char* s = static_cast<const char*>(src);
#if defined(__CUDA_ARCH__)
  const uint64_t a = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(d2) |
                     reinterpret_cast<uintptr_t>(s);
  uint64_t done = 0;
  if ((a & 15) == 0) {
    done = bytes / 16 * 16;
    for (uint64_t w = g.rank(); w < bytes / 16; w += g.size()) {
      const uint4 u = __ldcg(reinterpret_cast<const uint4*>(s) + w);
      reinterpret_cast<uint4*>(d)[w] = u;
      if (d2 != nullptr) reinterpret_cast<uint4*>(d2)[w] = u;
    }
  }
  const uint64_t m = a | bytes;
  if ((m & 7) == 0)
    copyUnits<uint64_t>(d, d2, s, done, bytes, g.rank(), g.size());
  else if ((m & 3) == 0)
    copyUnits<uint32_t>(d, d2, s, done, bytes, g.rank(), g.size());
  else if ((m & 1) == 0)
    copyUnits<uint16_t>(d, d2, s, done, bytes, g.rank(), g.size());
  else
    copyUnits<uint8_t>(d, d2, s, done, bytes, g.rank(), g.size());
#else
  uint64_t begin, end;
  hostBlock(g, bytes, &begin, &end);
  if (end > begin) {
    if (d != s) memcpy(d + begin, s + begin, end - begin);
    if (d2 != nullptr && d2 != s) memcpy(d2 + begin, s + begin, end - begin);
  }
#endif
}

}  // namespace tessera::exec::devdetail
