// Device handle of a port channel: puts and signals are triggers for the host proxy, which
// carries them out on the connection (UCX RDMA, or any other transport); waiting is local,
// because the peer's proxy adds to this rank's inbound counter. Ranges are checked here, before
// a trigger is pushed: an operation that does not fit returns false and pushes nothing.
#pragma once

#include <stdint.h>

#include "tessera/device/fifo_device.hpp"
#include "tessera/device/memory_channel_device.hpp"
#include "tessera/device/semaphore_device.hpp"

namespace tessera::device {

struct PortChannelDeviceHandle {
  FifoDeviceHandle fifo;
  uint32_t channel;  // the proxy's index of (connection, remote memory, local memory, semaphore)
  uint64_t remoteBytes;
  uint64_t localBytes;
  SemaphoreDeviceHandle semaphore;  // remoteInbound is nullptr: signals go through the proxy

  TSR_INLINE bool put(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes) const {
    if (!rangeFits(dstOffset, bytes, remoteBytes) || !rangeFits(srcOffset, bytes, localBytes))
      return false;
    return fifo.push(kTriggerPut, channel, dstOffset, srcOffset, bytes) != kFifoFailed;
  }
  TSR_INLINE bool signal() const {
    return fifo.push(kTriggerSignal, channel, 0, 0, 0) != kFifoFailed;
  }
  TSR_INLINE bool putWithSignal(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes) const {
    if (!rangeFits(dstOffset, bytes, remoteBytes) || !rangeFits(srcOffset, bytes, localBytes))
      return false;
    return fifo.push(kTriggerPut | kTriggerSignal, channel, dstOffset, srcOffset, bytes) !=
           kFifoFailed;
  }
  // Returns once every earlier put and signal of this producer is complete at the peer.
  TSR_INLINE bool flush() const { return fifo.sync(fifo.push(kTriggerFlush, channel, 0, 0, 0)); }
  TSR_INLINE bool wait(uint64_t timeoutNs) const { return semaphore.wait(timeoutNs); }
  TSR_INLINE bool poll() const { return semaphore.poll(); }
};

}  // namespace tessera::device
