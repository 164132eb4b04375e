// PLACEHOLDER (being written): the LL protocol (see DeviceLL in device_plan.hpp).
#pragma once

#include "collectives/exec/device/device_plan.hpp"
#include "collectives/exec/device/group.hpp"
#include "collectives/exec/device/work_queue.hpp"

namespace tessera::exec {

// Runs this CTA's share of a kItemLL item; false (recorded) on failure.
template <class Group>
TSR_INLINE bool runLLItem(const WorkQueueHandle& q, const WorkItem& item, const Group& g,
                          uint32_t cta, uint32_t nctas) {
  if (g.leader())
    recordError(q, 5 /* tsrInvalidUsage */, kWhyUnsupported, item.seq, item.callNo,
                static_cast<int32_t>(cta), -1, -1, -1);
  return false;
}

}  // namespace tessera::exec
