// The executors' hand-written protocols (protocols.hpp) written as plans, so the verifier checks
// the rules their code follows: a slot is never overwritten while its reader may still read it,
// and nothing deadlocks. A model, not the code: the executors do not run these plans; they share
// the rules (ringSlot, ringHasCredit, exchangeParity) and the constants (kP2PSlots,
// kExchangeParities) with them, and tests/unit/collectives/test_protocols.cpp verifies the
// plans for the executors' values, and shows that breaking a rule is caught.
#pragma once

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"

namespace tessera {

// Send/recv: rank 0 sends `pieces` pieces (chunks) to rank 1 through a ring of `slots` slots of
// rank 1's scratch, piece k into slot ringSlot(k), waiting for a credit before each (`credits`
// initial: the executors' rule is `slots`); rank 1 copies each piece out and returns its credit.
// A two-rank broadcast from rank 0 (rank 0 also copies its input to its output, as a broadcast's
// root must). `pieces` must be a multiple of `slots`, so that the verifier's second iteration
// goes on around the ring where the first stopped.
Result sendRecvRingPlan(int slots, int pieces, int credits, Plan* out);

// Exchange rounds: `rounds` rounds (chunks) among `nranks` ranks; in round h every rank writes
// its chunk h into parity (h % parities) of its slot in every peer's scratch and signals, then
// waits for every peer's signal and copies the peer's chunk out. An allgather. `rounds` must be
// a multiple of `parities` (the second iteration goes on alternating); the executors use
// kExchangeParities.
Result exchangeRoundsPlan(int nranks, int rounds, int parities, Plan* out);

}  // namespace tessera
