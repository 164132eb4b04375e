// Hand-written plans for the plan and verifier tests, built from the op list of plan.hpp (not by
// the generators under test), plus small op builders.
#pragma once

#include <vector>

#include "collectives/plan/plan.hpp"

namespace tessera::testplans {

inline constexpr BufferKind kIn = BufferKind::kInput;
inline constexpr BufferKind kOut = BufferKind::kOutput;
inline constexpr BufferKind kScr = BufferKind::kScratch;

inline ChunkRef local(BufferKind b, int index, int count = 1) {
  return ChunkRef{-1, b, index, count};
}
inline ChunkRef remote(int rank, BufferKind b, int index, int count = 1) {
  return ChunkRef{rank, b, index, count};
}
inline Op dataOp(OpCode code, std::vector<ChunkRef> srcs, ChunkRef dst) {
  Op op;
  op.code = code;
  op.srcs = std::move(srcs);
  op.dst = dst;
  return op;
}
inline Op put(ChunkRef src, ChunkRef dst) { return dataOp(OpCode::kPut, {src}, dst); }
inline Op get(ChunkRef src, ChunkRef dst) { return dataOp(OpCode::kGet, {src}, dst); }
inline Op copy(ChunkRef src, ChunkRef dst) { return dataOp(OpCode::kCopy, {src}, dst); }
inline Op reduce(std::vector<ChunkRef> srcs, ChunkRef dst) {
  return dataOp(OpCode::kReduce, std::move(srcs), dst);
}
inline Op sync(OpCode code, int peer, int channel = 0) {
  Op op;
  op.code = code;
  op.peer = peer;
  op.channel = code == OpCode::kFlush ? 0 : channel;
  return op;
}
inline Op signal(int peer, int channel = 0) { return sync(OpCode::kSignal, peer, channel); }
inline Op wait(int peer, int channel = 0) { return sync(OpCode::kWait, peer, channel); }
inline Op flush(int peer) { return sync(OpCode::kFlush, peer); }
inline Op barrier() { return Op{}; }

inline Plan emptyPlan(Collective c, int n, int cps, const char* algorithm = "custom") {
  Plan p;
  p.name = std::string(collectiveName(c)) + "." + algorithm + ".n" + std::to_string(n);
  p.collective = c;
  p.algorithm = algorithm;
  p.nranks = n;
  p.chunksPerSegment = cps;
  p.ranks.resize(static_cast<size_t>(n));
  for (RankPlan& r : p.ranks) r.workers.resize(1);
  return p;
}

// Ring allreduce through the scratch, one chunk per rank (cps = n), one worker per rank.
// Reduce-scatter step s: rank r sends chunk (r - s) to r + 1 (its input at s = 0, else the
// partial it reduced into output), receives chunk (r - 1 - s) and adds its input to it. All-gather
// step s: sends the finished chunk (r + 1 - s), receives chunk (r - s). Every step uses its own
// scratch slot (2n - 2 of them in two segments); the receiver returns a credit (channel 1) once it
// has consumed a slot, and the sender waits for one before each put, starting with 2n - 2.
inline Plan ringAllReduce(int n) {
  Plan p = emptyPlan(Collective::kAllReduce, n, n, "ring");
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  for (int r = 0; r < n; ++r) {
    int next = mod(r + 1), prev = mod(r - 1);
    RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    rp.scratchSegments = 2;
    rp.credits.push_back(Credit{next, 1, 2 * n - 2});
    std::vector<Op>& ops = rp.workers[0].ops;
    for (int s = 0; s < n - 1; ++s) {
      int cs = mod(r - s), cr = mod(r - 1 - s);
      ops.push_back(wait(next, 1));
      ops.push_back(put(local(s == 0 ? kIn : kOut, cs), remote(next, kScr, s)));
      ops.push_back(signal(next, 0));
      ops.push_back(wait(prev, 0));
      ops.push_back(reduce({local(kIn, cr), local(kScr, s)}, local(kOut, cr)));
      ops.push_back(signal(prev, 1));
    }
    for (int s = 0; s < n - 1; ++s) {
      int slot = n - 1 + s;
      ops.push_back(wait(next, 1));
      ops.push_back(put(local(kOut, mod(r + 1 - s)), remote(next, kScr, slot)));
      ops.push_back(signal(next, 0));
      ops.push_back(wait(prev, 0));
      ops.push_back(copy(local(kScr, slot), local(kOut, mod(r - s))));
      ops.push_back(signal(prev, 1));
    }
  }
  return p;
}

// Broadcast from `root` straight into every peer's scratch slot 0, then each peer copies it out
// and returns the credit (channel 1) that the root waits for before reusing the slot.
inline Plan starBroadcast(int n, int root, int cps) {
  Plan p = emptyPlan(Collective::kBroadcast, n, cps, "star");
  p.root = root;
  for (int r = 0; r < n; ++r) {
    RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    std::vector<Op>& ops = rp.workers[0].ops;
    if (r == root) {
      for (int q = 0; q < n; ++q) {
        if (q == root) continue;
        rp.credits.push_back(Credit{q, 1, 1});
        ops.push_back(wait(q, 1));
        ops.push_back(put(local(kIn, 0, cps), remote(q, kScr, 0, cps)));
        ops.push_back(signal(q, 0));
      }
      ops.push_back(copy(local(kIn, 0, cps), local(kOut, 0, cps)));
    } else {
      rp.scratchSegments = 1;
      ops.push_back(wait(root, 0));
      ops.push_back(copy(local(kScr, 0, cps), local(kOut, 0, cps)));
      ops.push_back(signal(root, 1));
    }
  }
  return p;
}

// Zero-copy allgather by gets: every rank copies its input into its own output slot, tells each
// peer it is ready (channel 0), gets the peers' slots from their outputs, and tells each peer it
// is done reading (channel 1); it returns only once every peer is done with its output. Without
// `done`, ranks return while peers may still read their outputs.
inline Plan getAllGather(int n, int cps, bool done = true) {
  Plan p = emptyPlan(Collective::kAllGather, n, cps, "get");
  p.zeroCopy = true;
  for (int r = 0; r < n; ++r) {
    std::vector<Op>& ops = p.ranks[static_cast<size_t>(r)].workers[0].ops;
    ops.push_back(copy(local(kIn, 0, cps), local(kOut, r * cps, cps)));
    for (int q = 0; q < n; ++q) {
      if (q != r) ops.push_back(signal(q, 0));
    }
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      ops.push_back(wait(q, 0));
      ops.push_back(get(remote(q, kOut, q * cps, cps), local(kOut, q * cps, cps)));
      if (done) ops.push_back(signal(q, 1));
    }
    for (int q = 0; q < n && done; ++q) {
      if (q != r) ops.push_back(wait(q, 1));
    }
  }
  return p;
}

}  // namespace tessera::testplans
