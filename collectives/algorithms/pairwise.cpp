// The pairwise family (algorithms.hpp): alltoall in n - 1 steps; at step s rank r sends its
// block for rank r + s and receives the block of rank r - s, so every step is a permutation and
// no rank receives from two peers at once. The own block is a local copy.
//
// Scratch variant: the block lands in the receiver's scratch, in segment s % slots (slots =
// min(n - 1, kPairwiseSlots)), then the receiver copies it to its output. A slot is reused by a
// different sender every `slots` steps, so its credit goes to that next writer: after reading
// the slot at step s the receiver signals the sender of step s + slots (or, for the last use of
// the slot, the first writer of the slot in the next call, whose initial credit is 1).
// Zero-copy: after a ready handshake (each rank tells the peers that write into it that it has
// entered the call) the block goes straight into the peer's output; the receiver's data waits
// cover every write into its output.
//
// workers > 1: the chunks of every block are split into contiguous ranges, one per worker, each
// with its own channels; cps = pipeline (default: one chunk per worker).
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Scratch segments a receiver cycles through: how far a fast sender may run ahead.
constexpr int kPairwiseSlots = 4;

struct Channels {
  int data;    // sender -> receiver: the block is in place
  int credit;  // receiver -> next writer of a slot: the slot is free
  int ready;   // zero-copy: this rank has entered the call
};
Channels channelsOf(int worker) { return {3 * worker, 3 * worker + 1, 3 * worker + 2}; }
constexpr int kMaxPairwiseWorkers = kMaxChannels / 3;

void pairwise(PlanBuilder& b, bool zeroCopy) {
  const int n = b.nranks();
  const int cps = b.cps();
  const int slots = std::min(n - 1, kPairwiseSlots);
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  for (int rank = 0; rank < n; ++rank) {
    if (!zeroCopy) b.useScratch(rank, slots);
    for (int w = 0; w < b.workers(); ++w) {
      const Range range = splitRange(cps, b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      auto block = [&](BufferKind kind, int q) {
        return ChunkRef{-1, kind, q * cps + range.first, range.size()};
      };
      auto slot = [&](int step) {
        return scratchRef((step % slots) * cps + range.first, range.size());
      };
      if (zeroCopy) {
        for (int s = 1; s < n; ++s) o.signal(mod(rank - s), ch.ready);
      }
      for (int s = 1; s < n; ++s) {
        const int dst = mod(rank + s);
        const int src = mod(rank - s);
        if (zeroCopy) {
          o.wait(dst, ch.ready)
              .put(onRank(dst, block(BufferKind::kOutput, rank)), block(BufferKind::kInput, dst));
        } else {
          o.wait(dst, ch.credit).put(onRank(dst, slot(s)), block(BufferKind::kInput, dst));
          // The first writer of each slot in a call gets its credit from the previous call.
          if (s <= slots) b.credit(rank, dst, ch.credit, 1);
        }
        o.signal(dst, ch.data).wait(src, ch.data);
        if (zeroCopy) continue;
        o.copy(block(BufferKind::kOutput, src), slot(s));
        // The next writer of this slot: step s + slots, or the first writer in the next call.
        const int nextStep = s + slots <= n - 1 ? s + slots : (s - 1) % slots + 1;
        o.signal(mod(rank - nextStep), ch.credit);
      }
      o.copy(block(BufferKind::kOutput, rank), block(BufferKind::kInput, rank));
    }
  }
}

}  // namespace

Result generatePairwise(const GenParams& params, Plan* out) {
  if (params.collective != Collective::kAllToAll) {
    return TSR_FAIL(tsrInvalidArgument, "pairwise does not generate %s",
                    collectiveName(params.collective));
  }
  const int pipeline = params.pipeline > 0 ? params.pipeline : params.workers;
  if (params.nranks == 1) {
    singleRankPlan(params, pipeline, out);
    return tsrSuccess;
  }
  const int workers = std::min({params.workers, pipeline, kMaxPairwiseWorkers});
  PlanBuilder b(params, pipeline, workers);
  pairwise(b, params.zeroCopy);
  b.finish(out);
  return tsrSuccess;
}

}  // namespace tessera
