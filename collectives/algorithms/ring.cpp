// The ring family (algorithms.hpp): every rank sends to rank + 1 and receives from rank - 1.
//
// allreduce: cps = nranks * pipeline; block b is chunks [b * pipeline, (b + 1) * pipeline).
// Reduce-scatter: at step s rank r adds its input to the partial of block r - s received from
// r - 1 and sends it on (reduceSend, no separate reduce pass); after n - 1 steps rank r holds
// block r + 1 complete. All-gather: the complete blocks travel once more around the ring.
// reducescatter / allgather are those halves (cps = pipeline; a block is a segment); broadcast is
// a chain root, root + 1, ..., root - 1 and reduce a chain root + 1, ..., root, both pipelined
// over cps = pipeline chunks.
//
// Scratch variant: a message goes into the receiver's scratch, then a data signal; the receiver
// returns a credit after its last read of the slot. Messages cycle through a few slots (a
// reduce-scatter or all-gather: a segment each; an all-reduce: `pipeline` chunks each, see
// allReduceScratch), and the initial credit is the reuse distance of the slot sequence
// (creditsForSlots), so a sender runs that far ahead (see ringSlotCount for why a ring needs at
// least two).
// Zero-copy variant (allreduce, allgather, broadcast): the reduce-scatter reads the partial
// straight from rank r - 1's output (its own block's start from r - 1's input), the all-gather
// and the chains put straight into rank r + 1's output. A ready handshake first makes sure a
// neighbour has entered the call before its buffers are touched; the data signals that follow
// cover every access to a rank's buffers before that rank finishes. reducescatter and reduce
// have no zero-copy variant (partials need room that only the scratch has).
//
// workers > 1: the pieces of every block are split among the workers, each an independent ring
// with its own channels. An all-reduce on several hosts (GenParams::hostOf) rotates each worker's
// ring within every host, so the workers' rings cross between hosts from different local ranks
// (different NIC rails); its blocks follow the ring positions.
#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/builder.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Default pipeline of the chains (broadcast, reduce): enough pieces for the chain to overlap.
constexpr int kChainPipeline = 4;
// Scratch segments a reduce-scatter or all-gather ring cycles through, at least.
constexpr int kRingSlots = 2;

// Scratch segments for a ring of `messages` messages per call, message k in segment k % slots.
// A reduce-scatter rank returns a slot's credit only after forwarding its content, which needs
// the next rank's credit: with one credit of run-ahead every rank would wait for the next one
// around the ring. So the reuse distance, across the wrap into the next call too, must be at
// least two messages; the smallest slot count that gives it.
int ringSlotCount(int messages) {
  int slots = std::min(kRingSlots, messages);
  for (; slots < messages; ++slots) {
    std::vector<int> sequence;
    for (int k = 0; k < messages; ++k) sequence.push_back(k % slots);
    if (creditsForSlots(sequence) >= 2) break;
  }
  return slots;
}

struct Channels {
  int data;    // sender -> receiver: a message is in place
  int credit;  // receiver -> sender: a scratch slot is free again
  int ready;   // zero-copy: this rank has entered the call
};
Channels channelsOf(int worker) { return {3 * worker, 3 * worker + 1, 3 * worker + 2}; }
constexpr int kMaxRingWorkers = kMaxChannels / 3;

struct Ring {
  int n;
  int r;
  int next() const { return (r + 1) % n; }
  int prev() const { return (r + n - 1) % n; }
  int mod(int x) const { return ((x % n) + n) % n; }
};

// The all-reduce ring of one worker: `order` lists the ranks around the ring, and a rank's blocks
// follow its position in it (any order makes an all-reduce ring; the blocks are only labels).
struct RingOf {
  int n;
  int pos;
  const std::vector<int>& order;
  int next() const { return order[static_cast<size_t>((pos + 1) % n)]; }
  int prev() const { return order[static_cast<size_t>((pos + n - 1) % n)]; }
  int mod(int x) const { return ((x % n) + n) % n; }
};

// Ring orders per worker. On several hosts with several workers, worker w visits each host's
// ranks rotated by w, so each worker's ring leaves a host from a different local rank: with one
// NIC per local rank (rail), the workers' rings cross between hosts over different NICs, as
// NCCL's rings do. Otherwise every worker runs the rank order.
struct RingOrders {
  std::vector<std::vector<int>> order;  // per worker
  std::vector<std::vector<int>> pos;    // per worker: rank -> position
  RingOf of(int worker, int rank) const {
    const auto w = static_cast<size_t>(worker);
    return RingOf{static_cast<int>(order[w].size()), pos[w][static_cast<size_t>(rank)], order[w]};
  }
};

RingOrders ringOrders(const GenParams& params, int workers) {
  const int n = params.nranks;
  std::vector<std::vector<int>> hosts;  // ranks per host, hosts in order of their lowest rank
  if (!params.hostOf.empty() && workers > 1) {
    std::vector<int> index;  // host id -> index in hosts
    for (int r = 0; r < n; ++r) {
      const int h = params.hostOf[static_cast<size_t>(r)];
      if (h >= static_cast<int>(index.size())) index.resize(static_cast<size_t>(h) + 1, -1);
      int& i = index[static_cast<size_t>(h)];
      if (i < 0) {
        i = static_cast<int>(hosts.size());
        hosts.emplace_back();
      }
      hosts[static_cast<size_t>(i)].push_back(r);
    }
  }
  RingOrders o;
  for (int w = 0; w < workers; ++w) {
    std::vector<int> order;
    if (hosts.size() < 2) {
      for (int r = 0; r < n; ++r) order.push_back(r);
    } else {
      for (const std::vector<int>& local : hosts)
        for (size_t k = 0; k < local.size(); ++k)
          order.push_back(local[(k + static_cast<size_t>(w)) % local.size()]);
    }
    std::vector<int> pos(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pos[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
    o.order.push_back(std::move(order));
    o.pos.push_back(std::move(pos));
  }
  return o;
}

// The scratch all-reduce sends 2(n - 1) messages per worker and iteration to the next rank:
// message s < n is reduce-scatter step s (s = n - 1 carries the complete block), message n + s
// forwards all-gather step s. Message m of piece p lands in slot (m % slots) * pipeline + p of
// the receiver's scratch, so a rank's scratch holds slots * pipeline chunks whatever n is, and
// the slice rule (ops.hpp, sliceElements) gives each chunk an n-th of what a slot per chunk and
// phase would leave it. The receiver returns a slot's credit after its last read; the reuse
// distance (creditsForSlots, at least two messages: see ringSlotCount) lets a sender run that
// many messages ahead of the receiver.
void allReduceScratch(PlanBuilder& b, int pipeline, const RingOrders& orders) {
  const int n = b.nranks();
  const int slotCount = ringSlotCount(2 * (n - 1));
  auto slot = [&](int message, int p) { return (message % slotCount) * pipeline + p; };
  for (int rank = 0; rank < n; ++rank) {
    b.useScratch(rank, (slotCount * pipeline + b.cps() - 1) / b.cps());
    for (int w = 0; w < b.workers(); ++w) {
      const RingOf ring = orders.of(w, rank);
      const int next = ring.next();
      const int prev = ring.prev();
      const Range pieces = splitRange(pipeline, b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      std::vector<int> slots;
      for (int s = 0; s < n; ++s) {  // reduce-scatter: message s; receive prev's message s - 1
        for (int p = pieces.first; p < pieces.end; ++p) {
          const int c = ring.mod(ring.pos - s) * pipeline + p;
          const ChunkRef to = onRank(next, scratchRef(slot(s, p)));
          if (s == 0) {
            o.wait(next, ch.credit).put(to, inRef(c));
          } else {
            o.wait(prev, ch.data).wait(next, ch.credit);
            const std::vector<ChunkRef> srcs{scratchRef(slot(s - 1, p)), inRef(c)};
            if (s < n - 1) {
              o.reduceSend(to, srcs);
            } else {  // block r + 1 is complete: keep it and start its all-gather
              o.reduceSend(to, outRef(c), srcs);
            }
          }
          slots.push_back(slot(s, p));
          o.signal(next, ch.data);
          if (s > 0) o.signal(prev, ch.credit);
        }
      }
      for (int s = 0; s < n - 1; ++s) {  // all-gather: receive prev's message n - 1 + s
        for (int p = pieces.first; p < pieces.end; ++p) {
          const int c = ring.mod(ring.pos - s) * pipeline + p;
          const ChunkRef held = scratchRef(slot(n - 1 + s, p));
          o.wait(prev, ch.data);
          if (s < n - 2) {  // forward it as message n + s, keeping it in the output on the way
            o.wait(next, ch.credit).put(onRank(next, scratchRef(slot(n + s, p))), outRef(c), held);
            o.signal(next, ch.data);
            slots.push_back(slot(n + s, p));
          } else {
            o.copy(outRef(c), held);
          }
          o.signal(prev, ch.credit);
        }
      }
      b.credit(rank, next, ch.credit, creditsForSlots(slots));
    }
  }
}

// Ready handshake with the ranks whose buffers this worker touches or who touch its buffers.
template <class R>
void signalReady(OpWriter& o, const R& ring, int channel, bool toNext, bool toPrev) {
  if (toNext) o.signal(ring.next(), channel);
  if (toPrev && !(toNext && ring.prev() == ring.next())) o.signal(ring.prev(), channel);
}

void allReduceZeroCopy(PlanBuilder& b, int pipeline, const RingOrders& orders) {
  const int n = b.nranks();
  for (int rank = 0; rank < n; ++rank) {
    for (int w = 0; w < b.workers(); ++w) {
      const RingOf ring = orders.of(w, rank);
      const int next = ring.next();
      const int prev = ring.prev();
      const Range pieces = splitRange(pipeline, b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      signalReady(o, ring, ch.ready, true, true);
      o.wait(prev, ch.ready);
      for (int s = 1; s < n; ++s) {  // reduce-scatter: partial of block r - s from r - 1
        for (int p = pieces.first; p < pieces.end; ++p) {
          const int c = ring.mod(ring.pos - s) * pipeline + p;
          if (s == 1) {
            o.reduce(outRef(c), {onRank(prev, inRef(c)), inRef(c)});
          } else {
            o.wait(prev, ch.data).reduce(outRef(c), {onRank(prev, outRef(c)), inRef(c)});
          }
          if (s < n - 1) o.signal(next, ch.data);
        }
      }
      if (next != prev) o.wait(next, ch.ready);
      for (int s = 0; s < n - 1; ++s) {  // all-gather: send block r + 1 - s
        for (int p = pieces.first; p < pieces.end; ++p) {
          const int c = ring.mod(ring.pos + 1 - s) * pipeline + p;
          if (s > 0) o.wait(prev, ch.data);
          o.put(onRank(next, outRef(c)), outRef(c)).signal(next, ch.data);
        }
      }
      for (int p = pieces.first; p < pieces.end; ++p) o.wait(prev, ch.data);
    }
  }
}

// reducescatter (reduce = true) or allgather: n - 1 steps around each worker's ring (ringOrders:
// on several hosts the workers' rings leave a host over different NICs), cps = pipeline. Blocks
// are ranks' blocks, named here by their owner's position in the worker's ring.
void halfRing(PlanBuilder& b, bool reduce, bool zeroCopy, const RingOrders& orders) {
  const int n = b.nranks();
  const int cps = b.cps();
  const int slotCount = ringSlotCount(n - 1);
  for (int rank = 0; rank < n; ++rank) {
    if (!zeroCopy) b.useScratch(rank, slotCount);
    for (int w = 0; w < b.workers(); ++w) {
      const RingOf ring = orders.of(w, rank);
      const int next = ring.next();
      const int prev = ring.prev();
      const Range pieces = splitRange(cps, b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      std::vector<int> slots;
      // Message k carries the block of position pos - 1 - k (reducescatter: its partial;
      // allgather: the block of position pos - k); owner(x): the rank at position x.
      auto owner = [&](int x) { return ring.order[static_cast<size_t>(ring.mod(x))]; };
      auto blockPos = [&](int k) { return reduce ? ring.pos - 1 - k : ring.pos - k; };
      auto slot = [&](int k, int p) { return (k % slotCount) * cps + p; };
      if (zeroCopy) {
        signalReady(o, ring, ch.ready, false, true);
        o.wait(next, ch.ready);
      }
      for (int p = pieces.first; p < pieces.end; ++p) {
        const ChunkRef src = inRef(reduce ? owner(blockPos(0)) * cps + p : p);
        if (zeroCopy) {
          o.put(onRank(next, outRef(rank * cps + p)), src);
        } else {
          o.wait(next, ch.credit).put(onRank(next, scratchRef(slot(0, p))), src);
          slots.push_back(slot(0, p));
        }
        o.signal(next, ch.data);
      }
      if (!reduce) {  // own block, after the puts that read the (possibly aliased) input
        o.copy(outRef(rank * cps + pieces.first, pieces.size()),
               inRef(pieces.first, pieces.size()));
      }
      for (int k = 0; k < n - 1; ++k) {  // receive message k, forward it as message k + 1
        const bool last = k == n - 2;
        const int recvBlock = owner(blockPos(k) - 1);  // what prev sent as its message k
        for (int p = pieces.first; p < pieces.end; ++p) {
          o.wait(prev, ch.data);
          if (reduce) {
            const ChunkRef mine = inRef(recvBlock * cps + p);
            if (last) {
              o.reduce(outRef(p), {scratchRef(slot(k, p)), mine});
            } else {
              o.wait(next, ch.credit);
              o.reduceSend(onRank(next, scratchRef(slot(k + 1, p))),
                           {scratchRef(slot(k, p)), mine});
              o.signal(next, ch.data);
              slots.push_back(slot(k + 1, p));
            }
            o.signal(prev, ch.credit);
            continue;
          }
          const ChunkRef out = outRef(recvBlock * cps + p);
          if (zeroCopy) {
            if (last) continue;
            o.put(onRank(next, out), out).signal(next, ch.data);
            continue;
          }
          const ChunkRef held = scratchRef(slot(k, p));
          if (last) {
            o.copy(out, held).signal(prev, ch.credit);
            continue;
          }
          // Forward it, keeping it in the output on the way (one read of the slot for both).
          o.wait(next, ch.credit).put(onRank(next, scratchRef(slot(k + 1, p))), out, held);
          o.signal(next, ch.data).signal(prev, ch.credit);
          slots.push_back(slot(k + 1, p));
        }
      }
      if (!zeroCopy) b.credit(rank, next, ch.credit, creditsForSlots(slots));
    }
  }
}

// Position of `rank` in the chain of a broadcast (root first) or a reduce (root last).
int chainPos(const Ring& ring, int root, bool reduce) {
  return ring.mod(reduce ? ring.r - root - 1 : ring.r - root);
}

// broadcast: a chain root, root + 1, ..., root - 1; cps = pipeline.
void broadcastChain(PlanBuilder& b, bool zeroCopy) {
  const int n = b.nranks();
  for (int rank = 0; rank < n; ++rank) {
    const Ring ring{n, rank};
    const int next = ring.next();
    const int prev = ring.prev();
    const int pos = chainPos(ring, b.plan().root, false);
    const bool first = pos == 0;
    const bool last = pos == n - 1;
    if (!zeroCopy && !first) b.useScratch(rank, 1);
    for (int w = 0; w < b.workers(); ++w) {
      const Range pieces = splitRange(b.cps(), b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      if (zeroCopy && !first) o.signal(prev, ch.ready);
      if (zeroCopy && !last) o.wait(next, ch.ready);
      for (int p = pieces.first; p < pieces.end; ++p) {
        if (!first) {
          o.wait(prev, ch.data);
          if (!zeroCopy) o.copy(outRef(p), scratchRef(p)).signal(prev, ch.credit);
        }
        if (last) continue;
        const ChunkRef src = first ? inRef(p) : outRef(p);
        if (zeroCopy) {
          o.put(onRank(next, outRef(p)), src);
        } else {
          o.wait(next, ch.credit).put(onRank(next, scratchRef(p)), src);
        }
        o.signal(next, ch.data);
      }
      // The root's own output last: in place it aliases the input the puts read.
      if (first) o.copy(outRef(pieces.first, pieces.size()), inRef(pieces.first, pieces.size()));
      // Each slot (chunk position) is written once per call: the credit covers the whole call.
      if (!zeroCopy && !last) b.credit(rank, next, ch.credit, pieces.size());
    }
  }
}

// reduce: a chain root + 1, ..., root - 1, root through the scratch; cps = pipeline.
void reduceChain(PlanBuilder& b) {
  const int n = b.nranks();
  for (int rank = 0; rank < n; ++rank) {
    const Ring ring{n, rank};
    const int next = ring.next();
    const int prev = ring.prev();
    const int pos = chainPos(ring, b.plan().root, true);
    const bool first = pos == 0;
    const bool last = pos == n - 1;
    if (!first) b.useScratch(rank, 1);
    for (int w = 0; w < b.workers(); ++w) {
      const Range pieces = splitRange(b.cps(), b.workers(), w);
      const Channels ch = channelsOf(w);
      OpWriter o = b.ops(rank, w);
      for (int p = pieces.first; p < pieces.end; ++p) {
        if (first) {
          o.wait(next, ch.credit).put(onRank(next, scratchRef(p)), inRef(p));
          o.signal(next, ch.data);
        } else if (last) {
          o.wait(prev, ch.data).reduce(outRef(p), {scratchRef(p), inRef(p)});
          o.signal(prev, ch.credit);
        } else {
          o.wait(prev, ch.data).wait(next, ch.credit);
          o.reduceSend(onRank(next, scratchRef(p)), {scratchRef(p), inRef(p)});
          o.signal(next, ch.data).signal(prev, ch.credit);
        }
      }
      if (!last) b.credit(rank, next, ch.credit, pieces.size());
    }
  }
}

}  // namespace

Result generateRing(const GenParams& params, Plan* out) {
  const Collective c = params.collective;
  const bool chainColl = c == Collective::kBroadcast || c == Collective::kReduce;
  int pipeline = params.pipeline > 0 ? params.pipeline
                                     : std::max(chainColl ? kChainPipeline : 1, params.workers);
  const int n = params.nranks;
  const int cps = c == Collective::kAllReduce ? n * pipeline : pipeline;
  if (cps > kMaxChunksPerSegment) {
    return TSR_FAIL(tsrInvalidArgument,
                    "ring %s: %d chunks per segment (nranks %d, pipeline %d) exceed %d",
                    collectiveName(c), cps, n, pipeline, kMaxChunksPerSegment);
  }
  if (n == 1) {
    singleRankPlan(params, cps, out);
    return tsrSuccess;
  }
  const int workers = std::min({params.workers, pipeline, kMaxRingWorkers});
  // reducescatter and reduce keep partials in the scratch: no zero-copy variant.
  const bool zeroCopy =
      params.zeroCopy && c != Collective::kReduceScatter && c != Collective::kReduce;
  GenParams p = params;
  p.zeroCopy = zeroCopy;
  PlanBuilder b(p, cps, workers);
  switch (c) {
    case Collective::kAllReduce:
      if (zeroCopy) {
        allReduceZeroCopy(b, pipeline, ringOrders(params, workers));
      } else {
        allReduceScratch(b, pipeline, ringOrders(params, workers));
      }
      break;
    case Collective::kReduceScatter: halfRing(b, true, false, ringOrders(params, workers)); break;
    case Collective::kAllGather: halfRing(b, false, zeroCopy, ringOrders(params, workers)); break;
    case Collective::kBroadcast: broadcastChain(b, zeroCopy); break;
    case Collective::kReduce: reduceChain(b); break;
    case Collective::kAllToAll:
      return TSR_FAIL(tsrInvalidArgument, "ring does not generate alltoall");
  }
  b.finish(out);
  return tsrSuccess;
}

}  // namespace tessera
