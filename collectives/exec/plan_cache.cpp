// Compiling a verified plan for one rank (plan_cache.hpp).
#include "collectives/exec/plan_cache.hpp"

#include <algorithm>

#include "core/hash.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

void addPair(PlanPairs* pairs, int a, int b, int channel) {
  auto& list = pairs->channels[{std::min(a, b), std::max(a, b)}];
  if (channel >= 0 && std::find(list.begin(), list.end(), channel) == list.end())
    list.insert(std::upper_bound(list.begin(), list.end(), channel), channel);
}

void addRefPair(PlanPairs* pairs, int rank, const ChunkRef& r) {
  if (r.remote()) addPair(pairs, rank, r.rank, -1);
}

bool isDataOp(OpCode c) {
  return c == OpCode::kPut || c == OpCode::kGet || c == OpCode::kCopy || c == OpCode::kReduce ||
         c == OpCode::kReduceSend;
}

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

constexpr size_t kMaxSlots = INT16_MAX;

}  // namespace

PlanPairs planPairs(const Plan& plan) {
  PlanPairs pairs;
  for (int r = 0; r < static_cast<int>(plan.ranks.size()); ++r) {
    for (const Worker& w : plan.ranks[static_cast<size_t>(r)].workers) {
      for (const Op& op : w.ops) {
        switch (op.code) {
          case OpCode::kSignal:
          case OpCode::kWait: addPair(&pairs, r, op.peer, op.channel); break;
          case OpCode::kFlush: addPair(&pairs, r, op.peer, -1); break;
          case OpCode::kBarrier: break;
          default:
            addRefPair(&pairs, r, op.dst);
            if (op.hasDst2) addRefPair(&pairs, r, op.dst2);
            for (const ChunkRef& s : op.srcs) addRefPair(&pairs, r, s);
        }
      }
    }
  }
  return pairs;
}

Result compilePlan(std::shared_ptr<const Plan> planPtr, int rank, BoundPlan* out) {
  PlanPairs pairs = planPairs(*planPtr);
  return compilePlan(std::move(planPtr), rank, pairs, out);
}

Result compilePlan(std::shared_ptr<const Plan> planPtr, int rank, const PlanPairs& pairs,
                   BoundPlan* out) {
  const Plan& plan = *planPtr;
  BoundPlan& bp = *out;
  bp.plan = planPtr;
  bp.rank = rank;
  bp.cps = plan.chunksPerSegment;
  bp.label = strprintf("%s %s n=%d", collectiveName(plan.collective),
                       plan.algorithm.empty() ? "custom" : plan.algorithm.c_str(), plan.nranks);
  bp.scratchChunks = scratchChunksUsed(plan);

  // Peers and semaphores, from every rank's program so that both sides of a pair agree.
  bp.slotOf.assign(static_cast<size_t>(plan.nranks), -1);
  std::map<std::pair<int, int>, int16_t> semOf;  // (slot, channel) -> sem
  // The map is ordered by (min, max): pairs (a, rank) with a < rank come first, then (rank, b),
  // so slots come out sorted by peer; semaphores follow (peer, channel).
  for (const auto& entry : pairs.channels) {
    const std::pair<int, int>& pair = entry.first;
    if (pair.first != rank && pair.second != rank) continue;
    PeerLink link;
    link.peer = pair.first == rank ? pair.second : pair.first;
    bp.slotOf[static_cast<size_t>(link.peer)] = static_cast<int16_t>(bp.peers.size());
    bp.peers.push_back(link);
  }
  // ExecOp::peer / ExecOp::sem / ExecRef::peer are 16-bit (the device reads the ops as they are);
  // plans may have up to kMaxPlanRanks peers with kMaxChannels channels each.
  size_t semCount = 0;
  for (const PeerLink& link : bp.peers)
    semCount += pairs.channels.at({std::min(rank, link.peer), std::max(rank, link.peer)}).size();
  if (bp.peers.size() > kMaxSlots || semCount > kMaxSlots)
    return TSR_FAIL(tsrInvalidArgument,
                    "plan %s: rank %d has %zu peers and %zu semaphores (peer, channel); the "
                    "executors hold at most %zu of each",
                    plan.name.c_str(), rank, bp.peers.size(), semCount, kMaxSlots);
  for (size_t s = 0; s < bp.peers.size(); ++s) {
    int peer = bp.peers[s].peer;
    for (int ch : pairs.channels.at({std::min(rank, peer), std::max(rank, peer)})) {
      SemLink sl;
      sl.peerSlot = static_cast<int>(s);
      sl.channel = ch;
      semOf[{static_cast<int>(s), ch}] = static_cast<int16_t>(bp.sems.size());
      bp.sems.push_back(sl);
    }
  }
  const RankPlan& mine = plan.ranks[static_cast<size_t>(rank)];
  for (const Credit& c : mine.credits) {
    int slot = bp.slotOf[static_cast<size_t>(c.peer)];
    auto it = semOf.find({slot, c.channel});
    if (it != semOf.end()) bp.sems[static_cast<size_t>(it->second)].credits += c.initial;
  }

  // The program.
  bp.workerBegin.assign(1, 0);
  uint64_t fp = fnv1a64(plan.name.data(), plan.name.size());
  fp = mix(fp, fnv1a64(plan.algorithm.data(), plan.algorithm.size()));
  fp = mix(fp, static_cast<uint64_t>(plan.collective));
  fp = mix(fp, static_cast<uint64_t>(plan.nranks));
  fp = mix(fp, static_cast<uint64_t>(plan.root));
  fp = mix(fp, static_cast<uint64_t>(plan.chunksPerSegment));
  fp = mix(fp, plan.zeroCopy ? 1 : 0);
  for (const RankPlan& rp : plan.ranks) {
    fp = mix(fp, static_cast<uint64_t>(rp.scratchSegments));
    for (const Worker& w : rp.workers) fp = mix(fp, w.ops.size());
  }
  for (size_t w = 0; w < mine.workers.size(); ++w) {
    const std::vector<Op>& ops = mine.workers[w].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      exec::ExecOp e{};
      e.code = static_cast<uint8_t>(op.code);
      e.peer = -1;
      e.sem = -1;
      if (op.code == OpCode::kSignal || op.code == OpCode::kWait) {
        e.peer = bp.slotOf[static_cast<size_t>(op.peer)];
        e.sem = semOf.at({e.peer, op.channel});
      } else if (op.code == OpCode::kFlush) {
        e.peer = bp.slotOf[static_cast<size_t>(op.peer)];
      } else if (isDataOp(op.code)) {
        e.ref = static_cast<uint32_t>(bp.refs.size());
        e.hasDst2 = op.hasDst2 ? 1 : 0;
        e.nsrcs = static_cast<uint16_t>(op.srcs.size());
        bp.maxSrcs = std::max(bp.maxSrcs, static_cast<int>(op.srcs.size()));
        std::vector<const ChunkRef*> all{&op.dst};
        if (op.hasDst2) all.push_back(&op.dst2);
        for (const ChunkRef& s : op.srcs) all.push_back(&s);
        e.aligned = 1;
        e.scratchOnly = 1;
        e.userOnly = 1;
        for (const ChunkRef* r : all) {
          if (r->count != op.dst.count)
            return TSR_FAIL(
                tsrInvalidArgument,
                "plan %s: rank %d worker %zu op %zu (%s) names %d chunks in one ref and "
                "%d in another",
                plan.name.c_str(), rank, w, i, describeOp(op).c_str(), r->count, op.dst.count);
          if (r->index % bp.cps != op.dst.index % bp.cps) e.aligned = 0;
          if (r->buffer != BufferKind::kScratch) e.scratchOnly = 0;
          if (r->buffer == BufferKind::kScratch) e.userOnly = 0;
          exec::ExecRef x{};
          x.index = r->index;
          x.count = r->count;
          x.segment = r->index / bp.cps;
          x.pos = r->index % bp.cps;
          x.buffer = static_cast<uint8_t>(r->buffer);
          x.peer = r->remote() ? bp.slotOf[static_cast<size_t>(r->rank)] : int16_t{-1};
          if (r->remote() && r->buffer != BufferKind::kScratch) {
            bp.zeroCopy = true;
            PeerLink& link = bp.peers[static_cast<size_t>(x.peer)];
            (r->buffer == BufferKind::kInput ? link.userInput : link.userOutput) = true;
          }
          bp.refs.push_back(x);
        }
      }
      bp.ops.push_back(e);
      bp.planOpIndex.push_back(static_cast<int32_t>(i));
    }
    bp.workerBegin.push_back(static_cast<uint32_t>(bp.ops.size()));
  }
  bp.zeroCopy = bp.zeroCopy || plan.zeroCopy;
  if (bp.zeroCopy) bp.label += " zero-copy";
  bp.fingerprint = fp;
  size_t workers = mine.workers.size();
  bp.pc.assign(workers, 0);
  bp.barriers.assign(workers, 0);
  bp.atBarrier.assign(workers, 0);
  bp.srcTable.assign(static_cast<size_t>(bp.maxSrcs), nullptr);
  bp.preOpTable.assign(static_cast<size_t>(bp.maxSrcs), 0);
  return tsrSuccess;
}

}  // namespace tessera
