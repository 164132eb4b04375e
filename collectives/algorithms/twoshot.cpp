// The twoshot family (algorithms.hpp): all-pairs reduce-scatter, then all-pairs all-gather; each
// rank moves about 2 * bytes instead of oneshot's n * bytes, in two steps instead of one.
//
// allreduce: cps = nranks * pipeline; rank r owns block r (chunks [r * pipeline, (r + 1) *
// pipeline)). Phase 1: every rank puts its block q into a scratch segment of rank q (one segment
// per sender); rank r reduces block r of all inputs in rank order 0..n-1 (canonical order) into
// its output. Phase 2: rank r puts its finished block into one more scratch segment of every
// peer, which copies it out. Each phase has its own credit channel: a slot is free when the
// receiver has read it. reducescatter is phase 1 alone (cps = pipeline, a block is a segment of
// the input).
//
// Zero-copy: after a ready handshake, phase 1 reads block r of the peers' inputs straight from
// their memory and phase 2 puts the finished block straight into their outputs. In place, a
// rank's block r is read only by the rank itself, and block q of a peer's output only written by
// q after q's own reads, so no data is overwritten early. allreduce needs no closing handshake:
// each peer's reads of a rank's input happen before that peer's phase-2 put the rank waits for.
// reducescatter closes with a done handshake.
//
// workers > 1: the pieces of every block are split into contiguous ranges, one per worker.
#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

struct Channels {
  int data1;    // phase 1: block in place
  int credit1;  // phase 1 slot free
  int data2;    // phase 2: finished block in place
  int credit2;  // phase 2 slot free
  int ready;    // zero-copy: this rank has entered the call
  int done;     // zero-copy reducescatter: this rank no longer reads the receiver's input
};
constexpr int kChannelsPerWorker = 6;
Channels channelsOf(int worker) {
  const int base = kChannelsPerWorker * worker;
  return {base, base + 1, base + 2, base + 3, base + 4, base + 5};
}
constexpr int kMaxTwoShotWorkers = kMaxChannels / kChannelsPerWorker;

// Scratch segment of `receiver` that holds phase-1 data of `sender` (one per peer).
int senderSegment(int sender, int receiver) { return sender < receiver ? sender : sender - 1; }

void twoShot(PlanBuilder& b, int pipeline, bool allGather, bool zeroCopy) {
  const int n = b.nranks();
  const int cps = b.cps();
  // allreduce: block q is chunks [q * pipeline, ...) of the one input segment; reducescatter:
  // block q is input segment q. Either way `blockChunk(q)` is its first chunk.
  auto blockChunk = [&](int q) { return allGather ? q * pipeline : q * cps; };
  const int gatherSegment = n - 1;  // phase 2 slots, after the n - 1 phase-1 segments
  for (int rank = 0; rank < n; ++rank) {
    std::vector<int> peers;  // starting at rank + 1: at each moment ranks target different peers
    for (int i = 1; i < n; ++i) peers.push_back((rank + i) % n);
    if (!zeroCopy) b.useScratch(rank, allGather ? n : n - 1);
    for (int w = 0; w < b.workers(); ++w) {
      const Range range = splitRange(pipeline, b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      // This worker's pieces of block q of the input, and of this rank's result.
      auto inBlock = [&](int q) { return inRef(blockChunk(q) + range.first, range.size()); };
      const ChunkRef mine = allGather ? outRef(rank * pipeline + range.first, range.size())
                                      : outRef(range.first, range.size());
      auto slot1 = [&](int sender, int receiver) {
        const int chunk = allGather ? receiver * pipeline : 0;
        return scratchRef(senderSegment(sender, receiver) * cps + chunk + range.first,
                          range.size());
      };
      auto slot2 = [&](int owner) {
        return scratchRef(gatherSegment * cps + owner * pipeline + range.first, range.size());
      };
      if (zeroCopy) {
        for (int q : peers) o.signal(q, ch.ready);
        for (int q : peers) o.wait(q, ch.ready);
      } else {
        for (int q : peers) {
          o.wait(q, ch.credit1).put(onRank(q, slot1(rank, q)), inBlock(q)).signal(q, ch.data1);
          b.credit(rank, q, ch.credit1, 1);
        }
        for (int q : peers) o.wait(q, ch.data1);
      }
      std::vector<ChunkRef> srcs;  // rank order 0..n-1
      for (int k = 0; k < n; ++k) {
        if (k == rank) {
          srcs.push_back(inBlock(rank));
        } else {
          srcs.push_back(zeroCopy ? onRank(k, inBlock(rank)) : slot1(k, rank));
        }
      }
      o.reduce(mine, srcs);
      if (!allGather) {
        for (int q : peers) o.signal(q, zeroCopy ? ch.done : ch.credit1);
        if (zeroCopy) {
          for (int q : peers) o.wait(q, ch.done);
        }
        continue;
      }
      if (!zeroCopy) {
        for (int q : peers) o.signal(q, ch.credit1);
      }
      for (int q : peers) {
        if (zeroCopy) {
          o.put(onRank(q, mine), mine);
        } else {
          o.wait(q, ch.credit2).put(onRank(q, slot2(rank)), mine);
          b.credit(rank, q, ch.credit2, 1);
        }
        o.signal(q, ch.data2);
      }
      for (int q : peers) {
        o.wait(q, ch.data2);
        if (!zeroCopy) {
          o.copy(outRef(q * pipeline + range.first, range.size()), slot2(q));
          o.signal(q, ch.credit2);
        }
      }
    }
  }
}

}  // namespace

Result generateTwoShot(const GenParams& params, Plan* out) {
  const Collective c = params.collective;
  if (c != Collective::kAllReduce && c != Collective::kReduceScatter) {
    return TSR_FAIL(tsrInvalidArgument, "twoshot does not generate %s", collectiveName(c));
  }
  const bool allReduce = c == Collective::kAllReduce;
  const int pipeline = params.pipeline > 0 ? params.pipeline : params.workers;
  const int cps = allReduce ? params.nranks * pipeline : pipeline;
  if (cps > kMaxChunksPerSegment) {
    return TSR_FAIL(tsrInvalidArgument,
                    "twoshot %s: %d chunks per segment (nranks %d, pipeline %d) exceed %d",
                    collectiveName(c), cps, params.nranks, pipeline, kMaxChunksPerSegment);
  }
  if (params.nranks == 1) {
    singleRankPlan(params, cps, out);
    out->canonicalOrder = true;
    return tsrSuccess;
  }
  const int workers = std::min({params.workers, pipeline, kMaxTwoShotWorkers});
  PlanBuilder b(params, cps, workers);
  twoShot(b, pipeline, allReduce, params.zeroCopy);
  b.plan().canonicalOrder = true;
  b.finish(out);
  return tsrSuccess;
}

}  // namespace tessera
