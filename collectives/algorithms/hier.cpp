// The hier family: hierarchical collectives for several hosts (GenParams::hostOf). Within a host
// every rank talks only to its host's leader (its lowest rank; for broadcast and reduce the root
// leads its own host); only leaders talk across hosts, so each host pair exchanges one stream.
//
// Items. The data is a row of items (chunks): the one segment for allreduce, broadcast and
// reduce, the input's n segments for reducescatter, the output's n segments for allgather. Host
// h owns a block of the row: for allreduce the h-th of H equal parts (cps = H * pipeline), for
// reducescatter and allgather the segments of h's ranks.
//
// allreduce, reducescatter, allgather: a ring over the H leaders (host index order).
//   1. Up: every non-leader puts its input to a slot of its leader's scratch, in the order in
//      which the leader consumes the items, so the leader starts before everything arrived.
//   2. Ring reduce-scatter (H - 1 steps): at step s a leader sends block (h - 1 - s) mod H to the
//      next leader and receives block (h - 2 - s) mod H, until it holds its own block h. As in
//      rhd, partial sums are never stored: an item's sum is the list of local chunks (input,
//      local slots, the ring slot) given to reduceSend or reduce.
//   3. Ring all-gather (H - 1 steps, allreduce and allgather): block (h - s) goes on, block
//      (h - s - 1) comes in.
//   4. Down: the leader hands each non-leader its result (allreduce: every item as it becomes
//      final; reducescatter: the rank's segment, reduced straight into its scratch; allgather:
//      every segment but its own).
// broadcast: a chain of leaders from the root's host, then each leader to its host, per chunk.
// reduce: the mirror image: hosts reduce to their leaders, leaders reduce along the chain to the
// root.
// With one host only the intra-host phases remain; with one rank per host only the ring/chain.
//
// Reuse of scratch by the next slice: where a later message of the same slice already orders the
// reader's last read before the writer's next write (allreduce: the ring all-gather closes every
// loop), no credit is needed; elsewhere the writer waits for a credit the reader returns after
// its last read. Zero-copy: results go straight into the receivers' output, and the receiver's
// wait for them is the handshake that keeps the writes inside its call; a receiver from which
// nothing came before the first such write (allgather, broadcast) first signals that it is in
// the call (kReady), since its buffers are not ready before that.
//
// Here: the entry point and the generator's setup (hosts, items, scratch layout, limits);
// hier.hpp: the state the phases share; hier_ring.cpp and hier_chain.cpp: the phases.
#include "collectives/algorithms/hier.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr int kDefaultPipeline = 2;
}  // namespace

namespace hier {

Hier::Hier(GenParams params, int pipeline) : params_(std::move(params)), pipeline_(pipeline) {
  const Collective c = params_.collective;
  rooted_ = collectiveHasRoot(c);
  // Host indices in order of host id; ranks ascending within a host.
  std::map<int, std::vector<int>> byHost;
  for (int r = 0; r < params_.nranks; ++r)
    byHost[params_.hostOf[static_cast<size_t>(r)]].push_back(r);
  hostIndex_.resize(static_cast<size_t>(params_.nranks));
  for (auto& [id, ranks] : byHost) {
    for (int r : ranks) hostIndex_[static_cast<size_t>(r)] = static_cast<int>(hosts_.size());
    if (rooted_) {
      // The root leads its host: a broadcast starts and a reduce ends there.
      auto it = std::find(ranks.begin(), ranks.end(), params_.root);
      if (it != ranks.end()) std::rotate(ranks.begin(), it, it + 1);
    }
    hosts_.push_back(ranks);
  }
  hostCount_ = static_cast<int>(hosts_.size());
  const bool blocks = c == Collective::kAllReduce;
  cps_ = blocks ? hostCount_ * pipeline : pipeline;
  items_ = (c == Collective::kReduceScatter || c == Collective::kAllGather) ? params_.nranks * cps_
                                                                            : cps_;
  zeroCopy_ = params_.zeroCopy && c != Collective::kReduce;
  params_.zeroCopy = zeroCopy_;
}

Result Hier::generate(Plan* out) {
  for (int r = 0; r < params_.nranks; ++r) layouts_.push_back(layoutOf(r));
  TSR_CHECK(checkLimits());
  if (coll() == Collective::kReduceScatter) {
    std::vector<int> slots;
    for (int m = 0; m < items_; ++m) slots.push_back(upSlot(m, 0));
    upCredits_ = creditsForSlots(slots);
  }
  PlanBuilder builder(params_, cps_, 1);
  builder_ = &builder;
  for (int r = 0; r < params_.nranks; ++r) {
    const Layout& l = layouts_[static_cast<size_t>(r)];
    if (l.total > 0) builder.useScratch(r, (l.total + cps_ - 1) / cps_);
    const bool leader = leaderOf(r) == r;
    if (params_.collective == Collective::kBroadcast) {
      broadcast(r, leader);
    } else if (params_.collective == Collective::kReduce) {
      reduceToRoot(r, leader);
    } else if (leader) {
      ringLeader(r);
    } else {
      ringMember(r);
    }
  }
  builder.finish(out);
  builder_ = nullptr;
  return tsrSuccess;
}

// A leader handles every item of every rank of its host, so a big host can exceed the plan
// limits (plan.hpp); say so instead of emitting a plan the shape check rejects.
Result Hier::checkLimits() const {
  for (int h = 0; h < hostCount_; ++h) {
    const int64_t locals = static_cast<int64_t>(members(h).size()) - 1;
    const int64_t segments = (layout(members(h)[0]).total + cps_ - 1) / cps_;
    // Up waits, down puts and signals per local and item, plus the ring's few ops per item.
    const int64_t ops = (4 * locals + 8) * items_ + 4 * locals * cps_;
    if (segments > kMaxScratchSegments || ops > kMaxOpsPerRank) {
      return TSR_FAIL(tsrInvalidArgument,
                      "algorithm hier: %s with %lld ranks on host %d needs %lld scratch "
                      "segments and about %lld ops at its leader (limits %d and %lld); use "
                      "fewer ranks per host or another algorithm",
                      collectiveName(coll()), static_cast<long long>(locals + 1),
                      params_.hostOf[static_cast<size_t>(members(h)[0])],
                      static_cast<long long>(segments), static_cast<long long>(ops),
                      kMaxScratchSegments, static_cast<long long>(kMaxOpsPerRank));
    }
  }
  return tsrSuccess;
}

Layout Hier::layoutOf(int rank) const {
  Layout l;
  const int h = host(rank);
  if (leaderOf(rank) == rank) {
    const int upItems = upWindow();
    const bool upSlots =
        !(coll() == Collective::kAllGather && zeroCopy_) && coll() != Collective::kBroadcast;
    for (size_t i = 1; i < members(h).size(); ++i) {
      l.up.push_back(upSlots ? l.alloc(upItems) : -1);
    }
    const bool chainIn = coll() == Collective::kBroadcast ? chainPos(rank) > 0 && !zeroCopy_
                                                          : chainPos(rank) < hostCount_ - 1;
    if (hostCount_ > 1 && (rooted_ ? chainIn : reduces())) l.ring = l.alloc(items_);
    if (hostCount_ > 1 && !rooted_ && gathers() && !zeroCopy_) l.gather = l.alloc(items_);
  } else if (!zeroCopy_ && coll() != Collective::kReduce) {
    l.down = l.alloc(items_);
  }
  return l;
}

}  // namespace hier

Result generateHier(const GenParams& params, Plan* out) {
  if (params.collective == Collective::kAllToAll) {
    return TSR_FAIL(tsrInvalidArgument,
                    "algorithm hier generates allreduce, reducescatter, allgather, broadcast and "
                    "reduce, not %s",
                    collectiveName(params.collective));
  }
  if (params.nranks < 1 || params.nranks > kMaxPlanRanks) {
    return TSR_FAIL(tsrInvalidArgument, "algorithm hier: nranks %d is outside 1..%d", params.nranks,
                    kMaxPlanRanks);
  }
  if (params.root < 0 || params.root >= params.nranks) {
    return TSR_FAIL(tsrInvalidArgument, "algorithm hier: root %d is outside 0..%d", params.root,
                    params.nranks - 1);
  }
  if (params.workers < 1 || params.pipeline < 0) {
    return TSR_FAIL(tsrInvalidArgument,
                    "algorithm hier: workers %d must be >= 1 and pipeline %d >= 0 (0: default)",
                    params.workers, params.pipeline);
  }
  GenParams named = params;
  named.algorithm = "hier";
  // No host map means one host.
  if (named.hostOf.empty()) named.hostOf.assign(static_cast<size_t>(params.nranks), 0);
  if (static_cast<int>(named.hostOf.size()) != params.nranks) {
    return TSR_FAIL(tsrInvalidArgument, "algorithm hier: hostOf has %zu entries for %d ranks",
                    named.hostOf.size(), params.nranks);
  }
  int hosts = 0;
  {
    std::vector<int> ids = named.hostOf;
    std::sort(ids.begin(), ids.end());
    hosts = static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
  }
  const int rowChunks = params.collective == Collective::kAllReduce ? hosts : 1;
  const int pipeline =
      std::max(1, std::min(params.pipeline > 0 ? params.pipeline : kDefaultPipeline,
                           kMaxChunksPerSegment / rowChunks));
  if (params.nranks == 1) {
    singleRankPlan(named, pipeline, out);
    return tsrSuccess;
  }
  return hier::Hier(std::move(named), pipeline).generate(out);
}

}  // namespace tessera
