// The rules of the executors' hand-written protocols, in one place: their code follows them, and
// protocol_plans.hpp writes each as a plan that the verifier checks (docs/ALGORITHMS.md and
// DESIGN.md, "Plans": the verifier executes a plan symbolically and reports races and deadlocks).
//
// - Send/recv (p2p.cpp and the device executor's device/p2p.hpp): each ordered
//   pair of ranks has a ring of `slots` slots in the receiver's inbox; piece k of the pair goes
//   into slot ringSlot(k) once the sender holds a credit (ringHasCredit: fewer than `slots`
//   pieces unacknowledged); the receiver copies it out and returns the credit.
// - Exchange rounds (the host LL protocol, host_ll.cpp; the zero-copy handshake, zero_copy.cpp;
//   the device LL protocol, device/ll.hpp): in every round every rank writes to every peer and
//   then reads every peer; round h lands in parity exchangeParity(h) of the writer's slot in the
//   reader's inbox. Two parities suffice because a rank writes round h + 2 only after it read
//   every peer's round h + 1, which each peer wrote after it had read round h.
#pragma once

#include <stdint.h>

#include "tessera/device/host_device.hpp"

namespace tessera::proto {

TSR_INLINE constexpr uint64_t ringSlot(uint64_t piece, uint32_t slots) {
  return piece % static_cast<uint64_t>(slots);
}
TSR_INLINE constexpr bool ringHasCredit(uint64_t sent, uint64_t acked, uint32_t slots) {
  return sent - acked < static_cast<uint64_t>(slots);
}

inline constexpr uint32_t kExchangeParities = 2;
TSR_INLINE constexpr uint64_t exchangeParity(uint64_t round) {
  return round % static_cast<uint64_t>(kExchangeParities);
}

}  // namespace tessera::proto
