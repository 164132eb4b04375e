// Launch mode's body (kernels.hpp, "item"): a fresh grid runs one item as the resident grid would
// (the same dead-queue check, runner, closing barrier and error record), and the kernel's end is
// the completion. Shared by the item and send/recv item kernels (kernels_item.cu,
// kernels_sendrecv_item.cu), which differ only in where the item's send/recv group lives.
#pragma once

#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/item_runner.hpp"
#include "collectives/exec/device/work_queue.hpp"

namespace tessera::exec::devkernels {

__device__ __forceinline__ void runOneItem(const WorkQueueHandle& q, const WorkItem& item) {
  BlockGroup g;
  DeviceItemRunner<BlockGroup> r{q};
  const uint32_t cta = blockIdx.x;
  bool ok = !g.broadcast(g.leader() && queueFailed(q));
  if (ok) ok = r.runItem(item, g, cta, gridDim.x);
  if (ok) ok = gridBarrier(q, g, gridDim.x, item.seq, item.callNo, static_cast<int32_t>(cta));
  if (!ok && g.leader() && device::loadAcquire(&q.error->code) == 0)
    recordError(q, 6 /* tsrRemoteError */, loadAcquire32(q.abortFlag) ? kWhyAbort : kWhyEarlier,
                item.seq, item.callNo, static_cast<int32_t>(cta), -1, -1, -1);
}

}  // namespace tessera::exec::devkernels
