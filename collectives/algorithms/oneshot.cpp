// The oneshot family (algorithms.hpp): all pairs in one step, for small messages where latency,
// not bandwidth, decides.
//
// allreduce: every rank puts its whole input into a scratch segment of every peer (one segment
// per sender), signals, waits for every peer's data, then reduces all inputs in rank order
// 0..n-1 (its own through `input`), so the result does not depend on the algorithm
// (canonical order). The credit returns after the reduce has read the segments.
// reduce: the same with the root as the only receiver. allgather / broadcast: the inputs are
// copied instead of reduced.
//
// Zero-copy: after a ready handshake (a peer's input is read or its output written only once it
// has entered the call) allreduce and reduce read the peers' inputs straight from their memory;
// a done handshake then tells each rank that nobody reads its input any more. allreduce reduces
// into a local scratch segment first: in place its output is its input, which peers may still
// be reading. allgather and broadcast put straight into the peers' outputs; the receiver's data
// waits cover those puts.
//
// workers > 1: the chunks are split into contiguous ranges, one per worker, each with its own
// channels; cps = pipeline (default: one chunk per worker).
#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

struct Channels {
  int data;    // sender -> receiver: its data is in place
  int credit;  // receiver -> sender: the scratch segment is free again
  int ready;   // zero-copy: this rank has entered the call
  int done;    // zero-copy: this rank no longer reads the receiver's buffers
};
Channels channelsOf(int worker) {
  return {4 * worker, 4 * worker + 1, 4 * worker + 2, 4 * worker + 3};
}
constexpr int kMaxOneShotWorkers = kMaxChannels / 4;

// Scratch segment of `receiver` that holds the data of `sender` (one per peer).
int senderSegment(int sender, int receiver) { return sender < receiver ? sender : sender - 1; }

// Peers of `rank` starting at rank + 1, so that at each moment ranks target different peers.
std::vector<int> peersOf(int rank, int n) {
  std::vector<int> peers;
  for (int i = 1; i < n; ++i) peers.push_back((rank + i) % n);
  return peers;
}

struct Ctx {
  PlanBuilder& b;
  int n;
  int root;
  bool zeroCopy;
};

// allreduce (every rank receives) or reduce (only the root does); canonical order.
void reduceAll(const Ctx& x, bool toAll) {
  const int cps = x.b.cps();
  for (int rank = 0; rank < x.n; ++rank) {
    const bool receives = toAll || rank == x.root;
    const std::vector<int> peers = peersOf(rank, x.n);
    std::vector<int> targets;  // ranks that need this rank's input
    for (int q : peers) {
      if (toAll || q == x.root) targets.push_back(q);
    }
    std::vector<int> sources;  // ranks whose input this rank needs
    if (receives) sources = peers;
    if (receives && (!x.zeroCopy || toAll)) x.b.useScratch(rank, x.zeroCopy ? 1 : x.n - 1);
    for (int w = 0; w < x.b.workers(); ++w) {
      const Range range = splitRange(cps, x.b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = x.b.ops(rank, w);
      const ChunkRef in = inRef(range.first, range.size());
      const ChunkRef out = outRef(range.first, range.size());
      // Where `sender`'s data lands in `receiver`'s scratch (zero-copy: this rank's result).
      auto scratchOf = [&](int sender, int receiver) {
        const int segment = x.zeroCopy ? 0 : senderSegment(sender, receiver);
        return scratchRef(segment * cps + range.first, range.size());
      };
      std::vector<ChunkRef> srcs;  // rank order 0..n-1
      for (int k = 0; k < x.n; ++k) {
        if (k == rank) {
          srcs.push_back(in);
        } else {
          srcs.push_back(x.zeroCopy ? onRank(k, in) : scratchOf(k, rank));
        }
      }
      if (x.zeroCopy) {
        for (int q : targets) o.signal(q, ch.ready);
        for (int q : sources) o.wait(q, ch.ready);
        if (receives) o.reduce(toAll ? scratchOf(rank, rank) : out, srcs);
        for (int q : sources) o.signal(q, ch.done);
        for (int q : targets) o.wait(q, ch.done);
        if (receives && toAll) o.copy(out, scratchOf(rank, rank));
        continue;
      }
      for (int q : targets) {
        o.wait(q, ch.credit).put(onRank(q, scratchOf(rank, q)), in).signal(q, ch.data);
        x.b.credit(rank, q, ch.credit, 1);
      }
      if (!receives) continue;
      for (int q : sources) o.wait(q, ch.data);
      o.reduce(out, srcs);
      for (int q : sources) o.signal(q, ch.credit);
    }
  }
}

// allgather (every rank's input to every output) or broadcast (the root's input to all).
void gatherAll(const Ctx& x, bool fromAll) {
  const int cps = x.b.cps();
  const bool gather = fromAll;
  for (int rank = 0; rank < x.n; ++rank) {
    const bool sends = fromAll || rank == x.root;
    const std::vector<int> peers = peersOf(rank, x.n);
    std::vector<int> targets;
    if (sends) targets = peers;
    std::vector<int> sources;
    for (int q : peers) {
      if (fromAll || q == x.root) sources.push_back(q);
    }
    if (!x.zeroCopy && !sources.empty()) x.b.useScratch(rank, gather ? x.n - 1 : 1);
    for (int w = 0; w < x.b.workers(); ++w) {
      const Range range = splitRange(cps, x.b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = x.b.ops(rank, w);
      const ChunkRef in = inRef(range.first, range.size());
      // Where the data of `sender` lands at `receiver`.
      auto outOf = [&](int sender) {
        return outRef((gather ? sender * cps : 0) + range.first, range.size());
      };
      auto scratchOf = [&](int sender, int receiver) {
        const int segment = gather ? senderSegment(sender, receiver) : 0;
        return scratchRef(segment * cps + range.first, range.size());
      };
      if (x.zeroCopy) {
        for (int q : sources) o.signal(q, ch.ready);
      }
      for (int q : targets) {
        if (x.zeroCopy) {
          o.wait(q, ch.ready).put(onRank(q, outOf(rank)), in);
        } else {
          o.wait(q, ch.credit).put(onRank(q, scratchOf(rank, q)), in);
          x.b.credit(rank, q, ch.credit, 1);
        }
        o.signal(q, ch.data);
      }
      // Own data after the puts that read the input (in place the output aliases it).
      if (sends) o.copy(outOf(rank), in);
      for (int q : sources) {
        o.wait(q, ch.data);
        if (!x.zeroCopy) o.copy(outOf(q), scratchOf(q, rank)).signal(q, ch.credit);
      }
    }
  }
}

}  // namespace

Result generateOneShot(const GenParams& params, Plan* out) {
  const int pipeline = params.pipeline > 0 ? params.pipeline : params.workers;
  if (params.nranks == 1) {
    singleRankPlan(params, pipeline, out);
    out->canonicalOrder = collectiveReduces(params.collective);
    return tsrSuccess;
  }
  const int workers = std::min({params.workers, pipeline, kMaxOneShotWorkers});
  PlanBuilder b(params, pipeline, workers);
  const Ctx x{b, params.nranks, params.root, params.zeroCopy};
  switch (params.collective) {
    case Collective::kAllReduce: reduceAll(x, true); break;
    case Collective::kReduce: reduceAll(x, false); break;
    case Collective::kAllGather: gatherAll(x, true); break;
    case Collective::kBroadcast: gatherAll(x, false); break;
    default:
      return TSR_FAIL(tsrInvalidArgument, "oneshot does not generate %s",
                      collectiveName(params.collective));
  }
  b.plan().canonicalOrder = collectiveReduces(params.collective);
  b.finish(out);
  return tsrSuccess;
}

}  // namespace tessera
