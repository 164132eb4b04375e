// The 32- and 64-bit words through which device work reports its first failure to the host and
// the host stops it, shared by the collectives' work queue (its ErrorRecord's claimed code and
// valid word, the abort and stop flags, done words) and the fused kernels (FusedErrorRecord's code,
// which doubles as their abort word). System scope, as tessera/device/atomics.hpp's 64-bit words:
// the reader may be a host thread polling mapped pinned memory. __host__ __device__: a kernel
// uses cuda::atomic_ref, host code (the emulation, the host side reading a record) GCC builtins.
#pragma once

#include <stdint.h>

#include "core/host_device.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda/atomic>
#endif

namespace tessera::device {

TSR_INLINE uint32_t loadAcquire32(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<const uint32_t, cuda::thread_scope_system>(*p).load(
      cuda::memory_order_acquire);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

TSR_INLINE uint32_t loadRelaxed32(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<const uint32_t, cuda::thread_scope_system>(*p).load(
      cuda::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

TSR_INLINE void storeRelease32(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// Sets *p to `desired` if it holds `expected`; returns whether it did. The first failure claims a
// record's code this way, and a host abort claims a code nobody has claimed yet.
TSR_INLINE bool casU64(uint64_t* p, uint64_t expected, uint64_t desired) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).compare_exchange_strong(
      expected, desired, cuda::memory_order_acq_rel);
#else
  return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
#endif
}

TSR_INLINE bool casU32(uint32_t* p, uint32_t expected, uint32_t desired) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).compare_exchange_strong(
      expected, desired, cuda::memory_order_acq_rel);
#else
  return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
#endif
}

}  // namespace tessera::device
