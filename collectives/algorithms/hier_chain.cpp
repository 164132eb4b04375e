// The hier family's rooted collectives (broadcast, reduce; the algorithm: hier.cpp): a chain of
// leaders from the root's host, each leader feeding (broadcast) or gathering (reduce) its host,
// chunk by chunk.
#include <vector>

#include "collectives/algorithms/hier.hpp"

namespace tessera::hier {

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

}  // namespace tessera::hier
