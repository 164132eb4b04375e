// Device handle of a semaphore between this rank and one peer (DESIGN.md, "Transport").
//
// Each side owns an inbound counter in its own memory; the peer adds to it. Counters only grow,
// so a waiter compares with how many signals it has consumed (`expected`, kept in memory so that
// it survives from one kernel launch or host call to the next) and an old signal is never
// mistaken for a new one. One thread at a time waits on a handle.
//
// A counter's block (64 bytes, one cache line; transport/semaphore.hpp allocates it):
//   0  inbound   uint64  the peer adds to it
//   8  expected  uint64  signals this side consumed
//   16 parked    uint32  nonzero while a host thread of this side sleeps on inbound's low 32 bits
//                        (a futex; src/core/park.hpp): a host signaller then wakes it
// A host signal is a sequentially consistent add followed by a read of the peer's parked flag,
// the waiter's mirror image (raise the flag, then read the counter), so a sleeper is never missed;
// the wake is a system call made only when the flag is up. GPU signallers never wake anyone:
// host threads park only on semaphores that host threads signal (inproc, shm).
#pragma once

#include <stdint.h>

#include "tessera/device/atomics.hpp"

#if !defined(__CUDA_ARCH__) && defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera::device {

inline constexpr uint32_t kSemaphoreParkedOffset = 16;

// The futex word of a counter: its low 32 bits, which change with every signal.
TSR_INLINE uint32_t* counterFutexWord(uint64_t* counter) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return reinterpret_cast<uint32_t*>(counter) + 1;
#else
  return reinterpret_cast<uint32_t*>(counter);
#endif
}

TSR_INLINE uint32_t* counterParkedFlag(uint64_t* counter) {
  return reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(counter) + kSemaphoreParkedOffset);
}

#if !defined(__CUDA_ARCH__)
// Host side of a signal, after the add to `counter` (which must be sequentially consistent):
// wakes the peer's thread if it parked on the counter (raised `parked`, the flag of the counter's
// block). Lowering the flag makes concurrent signallers wake it once.
inline void hostWakeParked(uint64_t* counter, uint32_t* parked) {
  if (__atomic_load_n(parked, __ATOMIC_SEQ_CST) == 0) return;
  if (__atomic_exchange_n(parked, 0u, __ATOMIC_ACQ_REL) == 0) return;
#if defined(__linux__)
  syscall(SYS_futex, counterFutexWord(counter), FUTEX_WAKE, 0x7fffffff, nullptr, nullptr, 0);
#endif
}
#endif

// Memory semaphore: the peer's counter is mapped here (inproc, shm, cuda_ipc, p2p), so signal is
// one release atomic on it, from a kernel or a host thread.
struct SemaphoreDeviceHandle {
  uint64_t* inbound;        // this rank's counter; the peer adds to it
  uint64_t* expected;       // signals this side has consumed (this rank's memory)
  uint64_t* remoteInbound;  // the peer's counter, mapped; nullptr: wait-only (port semaphore)
  // The peer's parked flag (its counter's block) when a host thread of the peer may sleep on the
  // counter (host memory over inproc or shm); nullptr: signals wake no one.
  uint32_t* remoteParked;

  // Adds one to the peer's counter after everything this thread wrote before (release); from a
  // host thread, also wakes the peer's thread if it parked on the counter.
  TSR_INLINE void signal() const {
#if defined(__CUDA_ARCH__)
    fetchAddRelease(remoteInbound, 1);
#else
    __atomic_fetch_add(remoteInbound, 1, __ATOMIC_SEQ_CST);
    if (remoteParked != nullptr) hostWakeParked(remoteInbound, remoteParked);
#endif
  }

  // Consumes one signal if one has arrived; never blocks.
  TSR_INLINE bool poll() const {
    uint64_t want = loadRelaxed(expected) + 1;
    if (loadAcquire(inbound) < want) return false;
    storeRelaxed(expected, want);
    return true;
  }

  // Waits for the next signal for at most timeoutNs; false (and nothing consumed) on timeout.
  TSR_INLINE bool wait(uint64_t timeoutNs) const {
    uint64_t want = loadRelaxed(expected) + 1;
    if (!waitAtLeast(inbound, want, timeoutNs)) return false;
    storeRelaxed(expected, want);
    return true;
  }
};

}  // namespace tessera::device
