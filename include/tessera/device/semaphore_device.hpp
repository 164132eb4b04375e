// Device handle of a semaphore between this rank and one peer (DESIGN.md, "Transport").
//
// Each side owns an inbound counter in its own memory; the peer adds to it. Counters only grow,
// so a waiter compares with how many signals it has consumed (`expected`, kept in memory so that
// it survives from one kernel launch or host call to the next) and an old signal is never
// mistaken for a new one. One thread at a time waits on a handle.
#pragma once

#include <stdint.h>

#include "tessera/device/atomics.hpp"

namespace tessera::device {

// Memory semaphore: the peer's counter is mapped here (inproc, shm, cuda_ipc, p2p), so signal is
// one release atomic on it, from a kernel or a host thread.
struct SemaphoreDeviceHandle {
  uint64_t* inbound;        // this rank's counter; the peer adds to it
  uint64_t* expected;       // signals this side has consumed (this rank's memory)
  uint64_t* remoteInbound;  // the peer's counter, mapped; nullptr: wait-only (port semaphore)

  // Adds one to the peer's counter after everything this thread wrote before (release).
  TSR_INLINE void signal() const { fetchAddRelease(remoteInbound, 1); }

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
