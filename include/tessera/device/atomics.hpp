// The few memory-ordering primitives the device handles are built on, with one meaning on the
// host and on the GPU (DESIGN.md, "Memory ordering"): system scope, because the other side may be
// a peer GPU, another process, or a host thread reading pinned memory.
//
//   host:   GCC __atomic builtins (x86-64 and aarch64 both give release/acquire on plain words).
//   device: cuda::atomic_ref at thread_scope_system (ld.acquire.sys / st.release.sys /
//           atom.add.release.sys on sm_70 and later).
#pragma once

#include <stdint.h>

#include "tessera/device/host_device.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda/atomic>
#else
#include <sched.h>
#include <time.h>
#endif

namespace tessera::device {

TSR_INLINE uint64_t loadAcquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<const uint64_t, cuda::thread_scope_system>(*p).load(
      cuda::memory_order_acquire);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

TSR_INLINE uint64_t loadRelaxed(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<const uint64_t, cuda::thread_scope_system>(*p).load(
      cuda::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

TSR_INLINE void storeRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

TSR_INLINE void storeRelaxed(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_relaxed);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

// Returns the old value. Release: everything this thread wrote before is visible to a reader
// that acquires the new value (and, through cumulativity, what other threads of the CTA wrote
// before a __syncthreads() that precedes this call).
TSR_INLINE uint64_t fetchAddRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).fetch_add(
      v, cuda::memory_order_release);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

TSR_INLINE uint64_t fetchAddRelaxed(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).fetch_add(
      v, cuda::memory_order_relaxed);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

// A monotonic clock in nanoseconds, for deadlines (device: %globaltimer).
TSR_INLINE uint64_t clockNs() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

// One step of a polling loop that has polled `iter` times: spin first, then give the core away
// (host: yield, then sleep up to 100 us; device: __nanosleep, so other warps of the SM run).
// The host yields for a long while (tens of milliseconds) before it sleeps: a sleep costs a
// timer's wake-up latency (50 us and more), which a rank waiting on its peer's next slice pays
// on every step, and a yield still hands the core to a rank that shares it.
TSR_INLINE void backoff(uint32_t iter) {
#if defined(__CUDA_ARCH__)
  if (iter > 64) __nanosleep(iter > 4096 ? 4096 : iter);
#else
  if (iter < 256) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();  // tells the core this is a spin loop
#endif
    return;
  }
  if (iter < 65536) {
    sched_yield();
    return;
  }
  timespec ts{0, iter < 69632 ? 10000 : 100000};
  nanosleep(&ts, nullptr);
#endif
}

// Polls until *p >= expected or `timeoutNs` passed; returns whether it got there. Acquire: a
// caller that returns true sees what the signaller wrote before it signalled.
TSR_INLINE bool waitAtLeast(const uint64_t* p, uint64_t expected, uint64_t timeoutNs) {
  if (loadAcquire(p) >= expected) return true;
  uint64_t start = clockNs();
  for (uint32_t iter = 0;; ++iter) {
    if (loadAcquire(p) >= expected) return true;
    if ((iter & 63) == 0 && clockNs() - start > timeoutNs) return loadAcquire(p) >= expected;
    backoff(iter);
  }
}

}  // namespace tessera::device
