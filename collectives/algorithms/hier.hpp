// The hier family's generator (the algorithm: hier.cpp): the hosts and their leaders, the row of
// items and each host's block of it, every rank's scratch layout and the channels, which the
// phases share: the ring collectives' (hier_ring.cpp) and the rooted collectives' chain
// (hier_chain.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera::hier {

// Segments of the window through which a non-leader streams its reducescatter input up.
inline constexpr int kUpWindowSegments = 4;

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
  Hier(GenParams params, int pipeline);

  Result generate(Plan* out);

 private:
  Result checkLimits() const;

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

  Layout layoutOf(int rank) const;

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

}  // namespace tessera::hier
