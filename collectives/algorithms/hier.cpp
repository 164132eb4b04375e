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
#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

constexpr int kDefaultPipeline = 2;
// Segments of the window through which a non-leader streams its reducescatter input up.
constexpr int kUpWindowSegments = 4;

enum Channel : int {
  kUp,          // non-leader -> leader: an item landed in the leader's slot
  kUpCredit,    // leader -> non-leader: the slot may be written again
  kDown,        // leader -> non-leader: a result item landed
  kDownCredit,  // non-leader -> leader: the down slot may be written again
  kRingRs,      // leader -> next leader (reduce-scatter) or chain neighbour (broadcast, reduce)
  kRingAg,      // leader -> next leader (all-gather)
  kRingCredit,  // back along the ring or chain: the slot may be written again
  kReady,       // zero-copy: this rank is in the call, its output may be written
};

struct Layout {
  std::vector<int> up;  // leader: one slot per non-leader of its host (by local index - 1)
  int ring = -1;        // leader: ring reduce-scatter or chain slot, indexed by item
  int gather = -1;      // leader: ring all-gather slot, indexed by item
  int down = -1;        // non-leader: the results, indexed by item
  int total = 0;
  int alloc(int chunks) {
    const int base = total;
    total += chunks;
    return base;
  }
};

class Hier {
 public:
  Hier(GenParams params, int pipeline) : params_(std::move(params)), pipeline_(pipeline) {
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
    items_ = (c == Collective::kReduceScatter || c == Collective::kAllGather)
                 ? params_.nranks * cps_
                 : cps_;
    zeroCopy_ = params_.zeroCopy && c != Collective::kReduce;
    params_.zeroCopy = zeroCopy_;
  }

  Result generate(Plan* out) {
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

 private:
  // A leader handles every item of every rank of its host, so a big host can exceed the plan
  // limits (plan.hpp); say so instead of emitting a plan the shape check rejects.
  Result checkLimits() const {
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

  const Collective& coll() const { return params_.collective; }
  bool reduces() const { return collectiveReduces(coll()); }
  bool gathers() const {
    return coll() == Collective::kAllReduce || coll() == Collective::kAllGather;
  }
  int host(int rank) const { return hostIndex_[static_cast<size_t>(rank)]; }
  const std::vector<int>& members(int h) const { return hosts_[static_cast<size_t>(h)]; }
  int leaderOf(int rank) const { return members(host(rank))[0]; }
  int mod(int h) const { return ((h % hostCount_) + hostCount_) % hostCount_; }
  int next(int rank) const { return members(mod(host(rank) + 1))[0]; }
  int prev(int rank) const { return members(mod(host(rank) - 1))[0]; }
  // Position of a rooted collective's leader along the chain that starts at the root's host.
  int chainPos(int rank) const { return mod(host(rank) - host(params_.root)); }
  int localIndex(int rank) const {
    const std::vector<int>& m = members(host(rank));
    return static_cast<int>(std::find(m.begin(), m.end(), rank) - m.begin());
  }
  const Layout& layout(int rank) const { return layouts_[static_cast<size_t>(rank)]; }

  // The items of host h's block.
  std::vector<int> block(int h) const {
    std::vector<int> items;
    if (coll() == Collective::kAllReduce) {
      for (int k = 0; k < pipeline_; ++k) items.push_back(h * pipeline_ + k);
    } else if (coll() == Collective::kReduceScatter || coll() == Collective::kAllGather) {
      for (int r : members(h)) {
        for (int j = 0; j < cps_; ++j) items.push_back(r * cps_ + j);
      }
    } else {
      for (int k = 0; k < cps_; ++k) items.push_back(k);
    }
    return items;
  }
  // The order in which leader h consumes (reduce-scatter) or learns (all-gather) the blocks.
  std::vector<int> reduceOrder(int h) const {
    std::vector<int> order;
    for (int s = 0; s < hostCount_; ++s) order.push_back(mod(h - 1 - s));
    return order;
  }
  std::vector<int> gatherOrder(int h) const {
    std::vector<int> order;
    for (int s = 0; s < hostCount_; ++s) order.push_back(mod(h - s));
    return order;
  }
  // The items a non-leader receives from its leader, in order.
  std::vector<int> downItems(int rank) const {
    std::vector<int> items;
    if (coll() == Collective::kReduceScatter) {
      for (int j = 0; j < cps_; ++j) items.push_back(rank * cps_ + j);
      return items;
    }
    for (int b : gatherOrder(host(rank))) {
      for (int x : block(b)) {
        if (coll() == Collective::kAllGather && x / cps_ == rank) continue;
        items.push_back(x);
      }
    }
    return items;
  }
  // Chunks of a leader's up slot per non-leader: reducescatter sends the whole input up, so its
  // slot is a window reused round-robin (with credits); the others hold every item they get.
  int upWindow() const {
    if (coll() == Collective::kReduceScatter) return std::min(items_, kUpWindowSegments * cps_);
    return coll() == Collective::kAllGather ? cps_ : items_;
  }
  // Where in its up slot a non-leader puts item x, the m-th item it sends.
  int upSlot(int m, int x) const {
    return coll() == Collective::kReduceScatter ? m % upWindow() : x;
  }
  // Which chunk of a down slot or output holds item x at `rank`.
  int outIndex(int rank, int x) const {
    return coll() == Collective::kReduceScatter ? x - rank * cps_ : x;
  }

  Layout layoutOf(int rank) const {
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

  // A wait whose first `initial` uses per slice are free.
  void creditWait(OpWriter& ops, int peer, int channel, int initial) {
    builder_->credit(ops.rank(), peer, channel, initial);
    ops.wait(peer, channel);
  }
  // Where a result item goes at non-leader `rank`: its down slot or (zero-copy) its output.
  ChunkRef downRef(int rank, int x) const {
    const int at = outIndex(rank, x);
    return onRank(rank, zeroCopy_ ? outRef(at) : scratchRef(layout(rank).down + at));
  }

  void ringLeader(int rank);
  void ringMember(int rank);
  void broadcast(int rank, bool leader);
  void reduceToRoot(int rank, bool leader);

  GenParams params_;
  int pipeline_;
  bool rooted_ = false;
  std::vector<std::vector<int>> hosts_;
  std::vector<int> hostIndex_;
  int hostCount_ = 1;
  int cps_ = 1;
  int items_ = 1;
  bool zeroCopy_ = false;
  int upCredits_ = 0;  // initial credit of reducescatter's up window
  PlanBuilder* builder_ = nullptr;
  std::vector<Layout> layouts_;
};

void Hier::ringLeader(int rank) {
  OpWriter ops = builder_->ops(rank);
  const int h = host(rank);
  const Layout& mine = layout(rank);
  const std::vector<int>& locals = members(h);
  const int nx = next(rank);
  const int pv = prev(rank);
  // Per item, the local chunks whose sum is this host's partial sum.
  std::vector<std::vector<ChunkRef>> partial(static_cast<size_t>(items_));
  int consumed = 0;  // items taken from the up slots so far
  auto take = [&](int x) -> std::vector<ChunkRef>& {
    std::vector<ChunkRef>& srcs = partial[static_cast<size_t>(x)];
    srcs = {inRef(x)};
    for (size_t i = 1; i < locals.size(); ++i) {
      ops.wait(locals[i], kUp);
      srcs.push_back(scratchRef(mine.up[i - 1] + upSlot(consumed, x)));
    }
    ++consumed;
    return srcs;
  };
  // After the op that read an item's up slots: reducescatter's slots are a window the
  // non-leaders write round-robin.
  auto release = [&] {
    if (coll() != Collective::kReduceScatter) return;
    for (size_t i = 1; i < locals.size(); ++i) ops.signal(locals[i], kUpCredit);
  };
  // Sends result item x to the non-leaders that want it.
  auto down = [&](int x) {
    for (size_t i = 1; i < locals.size(); ++i) {
      if (coll() == Collective::kAllGather && x / cps_ == locals[i]) continue;
      ops.put(downRef(locals[i], x), outRef(x));
      ops.signal(locals[i], kDown);
    }
  };
  const bool ringCredit = coll() != Collective::kAllReduce;
  // Zero-copy allgather writes outputs that nothing has come from yet: say this rank is in.
  const bool ready = zeroCopy_ && coll() == Collective::kAllGather;
  if (ready) {
    for (size_t i = 1; i < locals.size(); ++i) ops.signal(locals[i], kReady);
    if (hostCount_ > 1) ops.signal(pv, kReady);
  }

  if (reduces()) {
    const std::vector<int> order = reduceOrder(h);
    if (hostCount_ > 1 && ringCredit) creditWait(ops, nx, kRingCredit, 1);
    for (int s = 0; s + 1 < hostCount_; ++s) {
      const std::vector<int> out = block(order[static_cast<size_t>(s)]);
      const std::vector<int> in = block(order[static_cast<size_t>(s) + 1]);
      for (size_t k = 0; k < std::max(out.size(), in.size()); ++k) {
        if (k < out.size()) {
          std::vector<ChunkRef>& srcs = take(out[k]);
          if (s > 0) srcs.push_back(scratchRef(mine.ring + out[k]));
          ops.send(onRank(nx, scratchRef(layout(nx).ring + out[k])), srcs);
          release();
          ops.signal(nx, kRingRs);
        }
        if (k < in.size()) ops.wait(pv, kRingRs);
      }
    }
    for (int x : block(h)) {
      std::vector<ChunkRef>& srcs = take(x);
      if (hostCount_ > 1) srcs.push_back(scratchRef(mine.ring + x));
      const int owner = coll() == Collective::kReduceScatter ? x / cps_ : rank;
      if (owner == rank) {
        ops.store(outRef(outIndex(rank, x)), srcs);
        release();
        if (coll() == Collective::kAllReduce) down(x);
      } else {
        ops.send(downRef(owner, x), srcs);
        release();
        ops.signal(owner, kDown);
      }
    }
    if (coll() == Collective::kReduceScatter && hostCount_ > 1) ops.signal(pv, kRingCredit);
  } else {
    // Allgather: the host's own segments first.
    ops.copy(outRef(rank * cps_, cps_), inRef(0, cps_));
    for (size_t i = 1; i < locals.size(); ++i) {
      for (int j = 0; j < cps_; ++j) {
        ops.wait(locals[i], kUp);
        if (!zeroCopy_) ops.copy(outRef(locals[i] * cps_ + j), scratchRef(mine.up[i - 1] + j));
      }
    }
    for (int x : block(h)) down(x);
  }
  if (!gathers()) return;

  const std::vector<int> order = gatherOrder(h);
  if (hostCount_ > 1 && ringCredit && !zeroCopy_) creditWait(ops, nx, kRingCredit, 1);
  if (hostCount_ > 1 && ready) ops.wait(nx, kReady);
  for (int s = 0; s + 1 < hostCount_; ++s) {
    const std::vector<int> out = block(order[static_cast<size_t>(s)]);
    const std::vector<int> in = block(order[static_cast<size_t>(s) + 1]);
    for (size_t k = 0; k < std::max(out.size(), in.size()); ++k) {
      if (k < out.size()) {
        const int x = out[k];
        ops.put(onRank(nx, zeroCopy_ ? outRef(x) : scratchRef(layout(nx).gather + x)), outRef(x));
        ops.signal(nx, kRingAg);
      }
      if (k < in.size()) {
        const int y = in[k];
        ops.wait(pv, kRingAg);
        if (!zeroCopy_) ops.copy(outRef(y), scratchRef(mine.gather + y));
        down(y);
      }
    }
  }
  if (hostCount_ > 1 && ringCredit && !zeroCopy_) ops.signal(pv, kRingCredit);
}

void Hier::ringMember(int rank) {
  OpWriter ops = builder_->ops(rank);
  const int leader = leaderOf(rank);
  const Layout& theirs = layout(leader);
  const int slot = localIndex(rank) - 1;
  if (coll() == Collective::kAllGather) {
    // Sent from the output: in place, the copy has replaced the input it aliases.
    ops.copy(outRef(rank * cps_, cps_), inRef(0, cps_));
    if (zeroCopy_) ops.wait(leader, kReady);
    for (int j = 0; j < cps_; ++j) {
      const int x = rank * cps_ + j;
      ops.put(onRank(leader, zeroCopy_ ? outRef(x) : scratchRef(theirs.up[slot] + j)), outRef(x));
      ops.signal(leader, kUp);
    }
  } else {
    // In the order the leader consumes the items.
    int m = 0;
    for (int b : reduceOrder(host(rank))) {
      for (int x : block(b)) {
        if (coll() == Collective::kReduceScatter) {
          creditWait(ops, leader, kUpCredit, m == 0 ? upCredits_ : 0);
        }
        ops.put(onRank(leader, scratchRef(theirs.up[slot] + upSlot(m++, x))), inRef(x));
        ops.signal(leader, kUp);
      }
    }
  }
  for (int x : downItems(rank)) {
    ops.wait(leader, kDown);
    if (!zeroCopy_)
      ops.copy(outRef(outIndex(rank, x)), scratchRef(layout(rank).down + outIndex(rank, x)));
  }
}

void Hier::broadcast(int rank, bool leader) {
  OpWriter ops = builder_->ops(rank);
  const int from = leader ? prev(rank) : leaderOf(rank);
  const bool receives = rank != params_.root;
  const int pos = chainPos(rank);
  std::vector<int> targets;  // who this rank feeds: the next leader of the chain, then its host
  if (leader) {
    if (pos + 1 < hostCount_) targets.push_back(next(rank));
    const std::vector<int>& m = members(host(rank));
    for (size_t i = 1; i < m.size(); ++i) targets.push_back(m[i]);
  }
  if (zeroCopy_ && receives) ops.signal(from, kReady);
  for (int c = 0; c < cps_; ++c) {
    if (receives) {
      ops.wait(from, leader ? kRingRs : kDown);
      if (!zeroCopy_) {
        ops.copy(outRef(c), scratchRef((leader ? layout(rank).ring : layout(rank).down) + c));
        ops.signal(from, leader ? kRingCredit : kDownCredit);
      }
    } else {
      ops.copy(outRef(c), inRef(c));
    }
    for (int t : targets) {
      const bool toLeader = leaderOf(t) == t;
      // From the output: in place, the root's copy has replaced the input it aliases.
      const ChunkRef src = outRef(c);
      if (zeroCopy_) {
        if (c == 0) ops.wait(t, kReady);
        ops.put(onRank(t, outRef(c)), src);
      } else {
        creditWait(ops, t, toLeader ? kRingCredit : kDownCredit, c == 0 ? cps_ : 0);
        ops.put(onRank(t, scratchRef((toLeader ? layout(t).ring : layout(t).down) + c)), src);
      }
      ops.signal(t, toLeader ? kRingRs : kDown);
    }
  }
}

void Hier::reduceToRoot(int rank, bool leader) {
  OpWriter ops = builder_->ops(rank);
  const std::vector<int>& locals = members(host(rank));
  const Layout& mine = layout(rank);
  if (!leader) {
    const int to = leaderOf(rank);
    const int slot = localIndex(rank) - 1;
    for (int c = 0; c < cps_; ++c) {
      creditWait(ops, to, kUpCredit, c == 0 ? cps_ : 0);
      ops.put(onRank(to, scratchRef(layout(to).up[static_cast<size_t>(slot)] + c)), inRef(c));
      ops.signal(to, kUp);
    }
    return;
  }
  const int pos = chainPos(rank);
  const bool fromChain = pos + 1 < hostCount_;
  for (int c = 0; c < cps_; ++c) {
    std::vector<ChunkRef> srcs = {inRef(c)};
    for (size_t i = 1; i < locals.size(); ++i) {
      ops.wait(locals[i], kUp);
      srcs.push_back(scratchRef(mine.up[i - 1] + c));
    }
    if (fromChain) {
      ops.wait(next(rank), kRingRs);
      srcs.push_back(scratchRef(mine.ring + c));
    }
    if (pos == 0) {
      ops.store(outRef(c), srcs);
    } else {
      const int to = prev(rank);
      creditWait(ops, to, kRingCredit, c == 0 ? cps_ : 0);
      ops.send(onRank(to, scratchRef(layout(to).ring + c)), srcs);
      ops.signal(to, kRingRs);
    }
    for (size_t i = 1; i < locals.size(); ++i) ops.signal(locals[i], kUpCredit);
    if (fromChain) ops.signal(next(rank), kRingCredit);
  }
}

}  // namespace

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
  return Hier(std::move(named), pipeline).generate(out);
}

}  // namespace tessera
