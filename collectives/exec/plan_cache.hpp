// The plan cache of one engine: a plan, generated (or given) and verified once, compiled for
// this rank into the flat arrays of ops.hpp and bound to transport resources (bind.hpp): the
// plan's scratch, the peers' scratch, one semaphore per (peer, channel) and the credits. Entries
// live as long as the engine; counters (semaphores, credits) keep counting across calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/exec/ops.hpp"
#include "collectives/plan/plan.hpp"
#include "core/status.hpp"
#include "tessera/device/semaphore_device.hpp"
#include "transport/connection.hpp"
#include "transport/memory.hpp"
#include "transport/semaphore.hpp"

namespace tessera {

// A peer this rank interacts with in a plan (in either direction).
struct PeerLink {
  int peer = -1;
  std::shared_ptr<Connection> connection;
  bool mapped = false;                    // direct loads and stores reach the peer
  std::shared_ptr<RemoteMemory> scratch;  // the peer's scratch for this plan; null: none
  char* scratchMapped = nullptr;          // mapped: where it is here
  bool userInput = false;                 // this rank's ops reach the peer's input (zero-copy)
  bool userOutput = false;                // ... or its output
};

// One semaphore (peer, channel) of a plan, and what is left of this rank's initial credits on it.
struct SemLink {
  int peerSlot = -1;
  int channel = 0;
  std::shared_ptr<Semaphore> semaphore;
  device::SemaphoreDeviceHandle handle{};  // mapped: the hot path signals and polls through it
  int64_t credits = 0;
};

// Pairs of ranks that interact in a plan, each with the channels of its semaphores: computed
// from every rank's program, so both ranks of a pair derive the same list.
struct PlanPairs {
  // (min rank, max rank) -> sorted channels.
  std::map<std::pair<int, int>, std::vector<int>> channels;
};
PlanPairs planPairs(const Plan& plan);

struct BoundPlan {
  std::shared_ptr<const Plan> plan;
  std::string label;  // "allreduce ring n=4"
  int rank = 0;
  int cps = 1;
  int32_t scratchChunks = 0;  // scratchChunksUsed: sets the slice (every rank iterates alike)
  bool zeroCopy = false;      // refs reach peers' input or output
  uint64_t fingerprint = 0;   // peers check that they bound the same plan

  // Compiled program of this rank.
  std::vector<exec::ExecOp> ops;
  std::vector<exec::ExecRef> refs;
  std::vector<int32_t> planOpIndex;   // per compiled op: its index in the plan's worker
  std::vector<uint32_t> workerBegin;  // ops of worker w: [workerBegin[w], workerBegin[w + 1])
  int maxSrcs = 1;

  // Resources.
  std::shared_ptr<Memory> scratch;  // this rank's; null when it uses none
  char* scratchBase = nullptr;
  std::vector<PeerLink> peers;  // sorted by peer
  std::vector<int16_t> slotOf;  // rank -> index in peers, -1
  std::vector<SemLink> sems;
  bool anyUnmapped = false;
  bool bound = false;

  // Run state of the one operation that runs the plan at a time (an engine runs its operations
  // one after the other).
  std::vector<uint32_t> pc;
  std::vector<uint32_t> barriers;  // barriers each worker reached in this iteration
  std::vector<uint8_t> atBarrier;
  std::vector<const void*> srcTable;
  std::vector<uint8_t> preOpTable;

  int workers() const { return static_cast<int>(workerBegin.size()) - 1; }
};

// Compiles `plan` for `rank`: peer and semaphore slots, credits, flat ops. tsrInvalidArgument
// when an op's refs disagree in chunk count or position within the segment (the executors need
// equal chunk lengths chunk by chunk), or when the rank has more peers or semaphores than the
// 16-bit slots of ExecOp and ExecRef hold. Resources are left for bindPlan.
Result compilePlan(std::shared_ptr<const Plan> plan, int rank, BoundPlan* out);
// The same with the plan's pairs computed once (planPairs reads every rank's program, so a caller
// compiling every rank, as the simulator does, passes them in).
Result compilePlan(std::shared_ptr<const Plan> plan, int rank, const PlanPairs& pairs,
                   BoundPlan* out);

// What the tuner (or an override) asked for; one cache entry per key.
struct PlanKey {
  Collective collective = Collective::kAllReduce;
  std::string algorithm;
  int root = 0;
  int pipeline = 0;
  int workers = 1;
  bool zeroCopy = false;
  bool operator<(const PlanKey& o) const {
    return std::tie(collective, algorithm, root, pipeline, workers, zeroCopy) <
           std::tie(o.collective, o.algorithm, o.root, o.pipeline, o.workers, o.zeroCopy);
  }
};

}  // namespace tessera
