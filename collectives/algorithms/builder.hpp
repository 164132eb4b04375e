// PlanBuilder: a terse way for the algorithm families to write plans (plan.hpp) without spelling
// out Op structs. A generator makes one builder, appends ops per (rank, worker) through OpWriter,
// declares scratch and credits, then calls finish(). The builder checks nothing: the verifier
// is the judge of a plan.
#pragma once

#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/plan/plan.hpp"

namespace tessera {

// Chunk references: chunks [index, index + count) of this rank's buffer...
inline ChunkRef inRef(int index, int count = 1) {
  return ChunkRef{-1, BufferKind::kInput, index, count};
}
inline ChunkRef outRef(int index, int count = 1) {
  return ChunkRef{-1, BufferKind::kOutput, index, count};
}
inline ChunkRef scratchRef(int index, int count = 1) {
  return ChunkRef{-1, BufferKind::kScratch, index, count};
}
// ...and the same chunks of `peer`'s buffer (a remote reference).
inline ChunkRef onRank(int peer, ChunkRef ref) {
  ref.rank = peer;
  return ref;
}

// Appends ops to one worker of one rank. Holds indices, not pointers, so writers stay valid
// while the plan grows.
class OpWriter {
 public:
  OpWriter(Plan* plan, int rank, int worker) : plan_(plan), rank_(rank), worker_(worker) {}

  OpWriter& put(const ChunkRef& dst, const ChunkRef& src);
  // put that also stores what it sends locally to dst2 (one read of src for both).
  OpWriter& put(const ChunkRef& dst, const ChunkRef& dst2, const ChunkRef& src);
  OpWriter& get(const ChunkRef& dst, const ChunkRef& src);
  OpWriter& copy(const ChunkRef& dst, const ChunkRef& src);
  OpWriter& reduce(const ChunkRef& dst, std::vector<ChunkRef> srcs);
  OpWriter& reduceSend(const ChunkRef& dst, std::vector<ChunkRef> srcs);
  // reduceSend that also stores the result locally to dst2.
  OpWriter& reduceSend(const ChunkRef& dst, const ChunkRef& dst2, std::vector<ChunkRef> srcs);
  // The combination of `srcs` (one or more) into dst: a put (resp. copy) for one source, a
  // reduceSend (resp. reduce) otherwise.
  OpWriter& send(const ChunkRef& dst, const std::vector<ChunkRef>& srcs);
  OpWriter& store(const ChunkRef& dst, const std::vector<ChunkRef>& srcs);
  OpWriter& signal(int peer, int channel);
  OpWriter& wait(int peer, int channel);
  OpWriter& flush(int peer);
  OpWriter& barrier();

  int rank() const { return rank_; }
  int worker() const { return worker_; }

 private:
  OpWriter& append(Op op);

  Plan* plan_;
  int rank_;
  int worker_;
};

class PlanBuilder {
 public:
  // A plan for params' collective, algorithm, nranks and root, with `chunksPerSegment` chunks
  // per segment and `workers` (empty) workers on every rank.
  PlanBuilder(const GenParams& params, int chunksPerSegment, int workers);

  int nranks() const { return plan_.nranks; }
  int cps() const { return plan_.chunksPerSegment; }
  int workers() const { return workers_; }
  Plan& plan() { return plan_; }

  // The ops of worker `worker` (0 <= worker < workers()) of `rank`.
  OpWriter ops(int rank, int worker = 0) { return OpWriter(&plan_, rank, worker); }
  // Raises the scratch of `rank` to at least `segments` segments.
  void useScratch(int rank, int segments);
  // Adds `initial` to the credit of the waits of `rank` on (peer, channel).
  void credit(int rank, int peer, int channel, int initial);

  // Drops workers that got no ops, names the plan "<collective>.<algorithm>.n<N>" (plus ".zc"
  // when zero-copy) and moves it to *out. The builder is empty afterwards.
  void finish(Plan* out);

 private:
  Plan plan_;
  int workers_;
};

// The plan of a single rank: one copy of every input chunk to the same output chunk (in place,
// a copy onto itself). Every family's answer for nranks == 1.
void singleRankPlan(const GenParams& params, int chunksPerSegment, Plan* out);

// The initial credit a sender needs when it writes its messages to one receiver's scratch in
// the order `slots` (one scratch slot id per message, the same sequence every iteration) and
// waits for one credit before each message, the receiver returning one credit after reading
// each: the shortest distance, counted in messages and across the wrap into the next iteration,
// between two uses of one slot. 0 for an empty sequence.
int creditsForSlots(const std::vector<int>& slots);

// Splits `total` items over `parts` parts as evenly as possible: part i gets [first, end).
struct Range {
  int first = 0;
  int end = 0;
  int size() const { return end - first; }
};
Range splitRange(int total, int parts, int i);

}  // namespace tessera
