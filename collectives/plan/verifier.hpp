// The plan verifier (DESIGN.md, "Plans"): executes a plan symbolically on all ranks at once.
// Each chunk holds the set of (rank, input chunk) contributions combined into it; a put, copy or
// get moves a set, a reduce joins disjoint sets. Happens-before comes from program order within
// a worker, signal -> the wait that consumes it, barriers among a rank's workers, and the end of
// each rank's plan. It proves:
//   (a) kPostcondition: after the plan, each rank's output holds what the collective defines
//       (e.g. allreduce: every output chunk c holds {(q, c) : every rank q}); also a reduce of
//       overlapping sets (a contribution counted twice) fails here;
//   (b) kDeadlock: every wait is eventually satisfied and every barrier reached, whatever the
//       interleaving; signals and waits balance over an iteration (no signal left unconsumed);
//   (c) kRace: no two accesses to one chunk (at least one a write) are unordered by
//       happens-before, so nothing is overwritten while a peer may still read it; peers'
//       accesses to a rank's input and output happen before that rank's plan ends (the caller
//       may reuse the buffers when the call returns);
//   (d) kBounds: every chunk reference lies inside its buffer, every peer is in range
//       (checkPlanShape);
//   plus kShape (malformed structure, e.g. a put with two sources) and kOrder (canonicalOrder
//   is claimed but a reduction combines ranks out of order), kRawInput (in place, the raw input
//   read through an output ref, see plan.hpp).
// The plan is run for two iterations back to back (scratch and semaphores shared, user buffers
// fresh per iteration), out of place and in place.
#pragma once

#include <string>

#include "collectives/plan/plan.hpp"
#include "core/status.hpp"

namespace tessera {

enum class VerifyProperty : uint8_t {
  kOk,
  kShape,
  kBounds,
  kPostcondition,
  kDeadlock,
  kRace,
  kOrder,
  kRawInput,
};
// "ok", "shape", "bounds", "postcondition", "deadlock", "race", "order", "raw-input".
const char* verifyPropertyName(VerifyProperty p);

struct VerifyReport {
  VerifyProperty property = VerifyProperty::kOk;
  // Where it failed; -1 where it does not apply (e.g. a postcondition names rank and chunk only).
  int rank = -1;
  int worker = -1;
  int op = -1;
  bool inPlace = false;
  // One sentence: property, place, and what was expected and found, e.g.
  // "race: rank 1 worker 0 op 4 (put input[1] -> rank 2 scratch[0]) writes rank 2 scratch[0]
  // while rank 2 worker 0 op 6 may still read it (no happens-before between them)".
  std::string message;
  bool ok() const { return property == VerifyProperty::kOk; }
};

struct VerifyOptions {
  int iterations = 2;  // run the plan this many times back to back (>= 1)
  bool outOfPlace = true;
  bool inPlace = true;  // ignored for alltoall
};

// Fills `report`. Returns tsrSuccess when the plan is proved correct, tsrInvalidArgument with the
// report's message as the error sentence otherwise. Never crashes on any Plan value (it runs
// checkPlanShape first) and its time and memory are bounded by the plan's size.
Result verifyPlan(const Plan& plan, VerifyReport* report, const VerifyOptions& options = {});

}  // namespace tessera
