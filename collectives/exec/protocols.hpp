// The rules of the executors' hand-written protocols, in one place: their code follows them, and
// protocol_plans.hpp writes each as a plan that the verifier checks (docs/ALGORITHMS.md and
// DESIGN.md, "Plans": the verifier executes a plan symbolically and reports races and deadlocks).
//
// - Send/recv (p2p.cpp; the device executor's device/p2p.hpp follows the same ring): each ordered
//   pair of ranks has a ring of `slots` slots in the receiver's inbox; piece k of the pair goes
//   into slot ringSlot(k) once the sender holds a credit (ringHasCredit: fewer than `slots`
//   pieces unacknowledged); the receiver copies it out and returns the credit.
// - Exchange rounds (the host LL protocol, host_ll.cpp; the zero-copy handshake, zero_copy.cpp;
//   the device LL protocol, device/ll.hpp): in every round every rank writes to every peer and
//   then reads every peer; round h lands in parity exchangeParity(h) of the writer's slot in the
//   reader's inbox. Two parities suffice because a rank writes round h + 2 only after it read
//   every peer's round h + 1, which each peer wrote after it had read round h.
#pragma once

#include <cstdint>

namespace tessera::proto {

inline constexpr uint64_t ringSlot(uint64_t piece, int slots) {
  return piece % static_cast<uint64_t>(slots);
}
inline constexpr bool ringHasCredit(uint64_t sent, uint64_t acked, int slots) {
  return sent - acked < static_cast<uint64_t>(slots);
}

inline constexpr int kExchangeParities = 2;
inline constexpr uint64_t exchangeParity(uint64_t round) {
  return round % static_cast<uint64_t>(kExchangeParities);
}

}  // namespace tessera::proto
