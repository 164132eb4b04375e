// The hier family's ring collectives (allreduce, reducescatter, allgather; the algorithm:
// hier.cpp): a leader gathers its host's items, runs the reduce-scatter and all-gather rings over
// the leaders and hands the results down; a non-leader sends up and receives.
#include <algorithm>
#include <vector>

#include "collectives/algorithms/hier.hpp"

namespace tessera::hier {

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

}  // namespace tessera::hier
