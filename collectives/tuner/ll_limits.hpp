// What the LL protocol can carry: the collectives, payloads and rank counts the device executor
// runs with LL (collectives/exec/device/ll.hpp). The tuner prices LL only where it runs, and the
// executor lives above the tuner, so the limits live here, below both, as one definition.
#pragma once

#include <stdint.h>

#include "core/host_device.hpp"

namespace tessera::exec {

inline constexpr uint64_t kLLMaxBytes = 64 * 1024;  // payload per (sender, receiver) pair
// A line is 8 bytes, 4 of data and 4 of flag, so a pair's slot holds twice its payload.
inline constexpr uint64_t kLLSlotBytes = 2 * kLLMaxBytes;
inline constexpr int kLLMaxRanks = 32;  // inbox: 2 * 32 * 128 KiB = 8 MiB

// WorkItem::collective values (the Collective enum of collectives/plan/plan.hpp).
enum : uint8_t {
  kLLAllReduce = 0,
  kLLReduceScatter = 1,
  kLLAllGather = 2,
  kLLBroadcast = 3,
  kLLReduce = 4,
  kLLAllToAll = 5
};

// Whether LL runs `collective` with `payloadBytes` per (sender, receiver) pair (count * element
// size: the whole buffer for allreduce, broadcast and reduce, one block for the others).
TSR_INLINE bool llSupports(uint8_t collective, uint64_t payloadBytes, int nranks) {
  return collective <= kLLAllToAll && payloadBytes > 0 && payloadBytes <= kLLMaxBytes &&
         nranks >= 2 && nranks <= kLLMaxRanks;
}

}  // namespace tessera::exec
