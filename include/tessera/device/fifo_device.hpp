// Device handle of a proxy FIFO: kernels (or host threads) push triggers, a proxy thread on the
// host pops them and carries them out on a Connection (DESIGN.md, "port channel").
//
// The ring lives in memory both sides reach (pinned host memory for a GPU producer). A producer
// claims a slot by incrementing `head`, waits until the slot is free (tail + size > slot), fills
// the slot and publishes it by storing its nonzero `control` word last, with release. The proxy
// takes slots strictly in order: it acquires `control`, copies the trigger, clears `control`,
// carries it out, then advances `tail` with release. A producer that needs completion (flush)
// waits for tail > its slot. An error of the proxy is written to `error` (a tsrResult_t) and
// every later push or sync reports it.
//
// Host FIFOs also carry a doorbell: the proxy thread, idle for its spin budget, raises `parked`,
// reads `doorbell`, looks at its next slot once more and sleeps on the doorbell (a futex) when
// the slot is still empty. A host producer, after publishing a slot, reads `parked` and rings
// the doorbell (adds one to it, then a futex wake) only when the proxy said it parked. Both sides
// write their own word, fence (sequentially consistent), then read the other's, so either the
// proxy sees the slot or the producer sees the flag; and the futex compares the doorbell before it
// sleeps, so a ring between the proxy's look and its sleep ends the sleep at once. A device FIFO
// has no doorbell (a kernel cannot wake a host thread): its proxy polls.
#pragma once

#include <stdint.h>

#include "tessera/device/atomics.hpp"
#include "tessera/device/semaphore_device.hpp"  // hostWakeParked

namespace tessera::device {

enum TriggerOp : uint32_t {
  kTriggerPut = 1u << 0,     // local[srcOffset, +bytes) -> remote[dstOffset, +bytes)
  kTriggerSignal = 1u << 1,  // add one to the peer's semaphore, ordered after earlier puts
  kTriggerFlush = 1u << 2,   // complete everything before it (remote visibility) before tail moves
  kTriggerClose = 1u << 3,   // host only: the channel is gone once the triggers before it ran
};

struct alignas(32) ProxyTrigger {
  uint64_t dstOffset;
  uint64_t srcOffset;
  uint64_t bytes;
  uint64_t control;  // kTriggerValid | (op << 32) | channel id; 0 while the slot is empty
};

// Set in every published control word, so that no op/channel value reads as an empty slot.
inline constexpr uint64_t kTriggerValid = 1ull << 63;
TSR_INLINE uint32_t triggerOp(uint64_t control) {
  return static_cast<uint32_t>(control >> 32) & 0x7fffffffu;
}
TSR_INLINE uint32_t triggerChannel(uint64_t control) { return static_cast<uint32_t>(control); }

inline constexpr uint64_t kFifoFailed = ~0ull;

struct FifoDeviceHandle {
  ProxyTrigger* triggers;
  uint64_t* head;   // slots claimed by producers
  uint64_t* tail;   // slots the proxy has finished
  uint64_t* error;  // 0, or the tsrResult_t of the proxy's first failure
  uint32_t size;    // slots in the ring
  uint64_t timeoutNs;
  // Host FIFOs: a counter whose low 32 bits an idle proxy sleeps on (a futex), and the flag it
  // raises while it sleeps; nullptr in a device FIFO (no doorbell).
  uint64_t* doorbell;
  uint32_t* parked;

#if !defined(__CUDA_ARCH__)
  // Wakes the proxy if it parked (a producer calls it after publishing a slot; stop() with
  // `always`, so that a proxy about to sleep finds the doorbell changed). The wake is the
  // semaphores' (hostWakeParked): a system call only when the flag is up.
  inline void ring(bool always = false) const {
    if (doorbell == nullptr) return;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!always && __atomic_load_n(parked, __ATOMIC_SEQ_CST) == 0) return;
    __atomic_fetch_add(doorbell, 1, __ATOMIC_SEQ_CST);
    hostWakeParked(doorbell, parked);
  }
#endif

  // Returns the slot, or kFifoFailed when the proxy has failed or the ring stayed full for
  // timeoutNs (the ring is then unusable: the claimed slot is never filled).
  TSR_INLINE uint64_t push(uint32_t op, uint32_t channel, uint64_t dstOffset, uint64_t srcOffset,
                           uint64_t bytes) const {
    if (loadAcquire(error) != 0) return kFifoFailed;
    uint64_t slot = fetchAddRelaxed(head, 1);
    if (slot >= size && !waitAtLeast(tail, slot - size + 1, timeoutNs)) {
      storeRelease(error, 8 /* tsrTimeout */);
      return kFifoFailed;
    }
    ProxyTrigger* t = &triggers[slot % size];
    t->dstOffset = dstOffset;
    t->srcOffset = srcOffset;
    t->bytes = bytes;
    storeRelease(&t->control,
                 kTriggerValid | (static_cast<uint64_t>(op & 0x7fffffffu) << 32) | channel);
#if !defined(__CUDA_ARCH__)
    ring();
#endif
    return slot;
  }

  // Waits until the proxy has carried out `slot` and everything before it.
  TSR_INLINE bool sync(uint64_t slot) const {
    if (slot == kFifoFailed) return false;
    if (!waitAtLeast(tail, slot + 1, timeoutNs)) return false;
    return loadAcquire(error) == 0;
  }
};

}  // namespace tessera::device
