// PlanBuilder (builder.hpp).
#include "collectives/algorithms/builder.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/status.hpp"

namespace tessera {

OpWriter& OpWriter::append(Op op) {
  plan_->ranks[static_cast<size_t>(rank_)].workers[static_cast<size_t>(worker_)].ops.push_back(
      std::move(op));
  return *this;
}

OpWriter& OpWriter::put(const ChunkRef& dst, const ChunkRef& src) {
  Op op;
  op.code = OpCode::kPut;
  op.dst = dst;
  op.srcs = {src};
  return append(std::move(op));
}

OpWriter& OpWriter::put(const ChunkRef& dst, const ChunkRef& dst2, const ChunkRef& src) {
  Op op;
  op.code = OpCode::kPut;
  op.dst = dst;
  op.hasDst2 = true;
  op.dst2 = dst2;
  op.srcs = {src};
  return append(std::move(op));
}

OpWriter& OpWriter::get(const ChunkRef& dst, const ChunkRef& src) {
  Op op;
  op.code = OpCode::kGet;
  op.dst = dst;
  op.srcs = {src};
  return append(std::move(op));
}

OpWriter& OpWriter::copy(const ChunkRef& dst, const ChunkRef& src) {
  Op op;
  op.code = OpCode::kCopy;
  op.dst = dst;
  op.srcs = {src};
  return append(std::move(op));
}

OpWriter& OpWriter::reduce(const ChunkRef& dst, std::vector<ChunkRef> srcs) {
  Op op;
  op.code = OpCode::kReduce;
  op.dst = dst;
  op.srcs = std::move(srcs);
  return append(std::move(op));
}

OpWriter& OpWriter::send(const ChunkRef& dst, const std::vector<ChunkRef>& srcs) {
  return srcs.size() == 1 ? put(dst, srcs[0]) : reduceSend(dst, srcs);
}

OpWriter& OpWriter::store(const ChunkRef& dst, const std::vector<ChunkRef>& srcs) {
  return srcs.size() == 1 ? copy(dst, srcs[0]) : reduce(dst, srcs);
}

OpWriter& OpWriter::reduceSend(const ChunkRef& dst, std::vector<ChunkRef> srcs) {
  Op op;
  op.code = OpCode::kReduceSend;
  op.dst = dst;
  op.srcs = std::move(srcs);
  return append(std::move(op));
}

OpWriter& OpWriter::reduceSend(const ChunkRef& dst, const ChunkRef& dst2,
                               std::vector<ChunkRef> srcs) {
  Op op;
  op.code = OpCode::kReduceSend;
  op.dst = dst;
  op.hasDst2 = true;
  op.dst2 = dst2;
  op.srcs = std::move(srcs);
  return append(std::move(op));
}

OpWriter& OpWriter::signal(int peer, int channel) {
  Op op;
  op.code = OpCode::kSignal;
  op.peer = peer;
  op.channel = channel;
  return append(std::move(op));
}

OpWriter& OpWriter::wait(int peer, int channel) {
  Op op;
  op.code = OpCode::kWait;
  op.peer = peer;
  op.channel = channel;
  return append(std::move(op));
}

OpWriter& OpWriter::flush(int peer) {
  Op op;
  op.code = OpCode::kFlush;
  op.peer = peer;
  return append(std::move(op));
}

OpWriter& OpWriter::barrier() {
  Op op;
  op.code = OpCode::kBarrier;
  return append(std::move(op));
}

PlanBuilder::PlanBuilder(const GenParams& params, int chunksPerSegment, int workers)
    : workers_(workers) {
  plan_.collective = params.collective;
  plan_.algorithm = params.algorithm;
  plan_.nranks = params.nranks;
  plan_.root = params.root;
  plan_.chunksPerSegment = chunksPerSegment;
  plan_.zeroCopy = params.zeroCopy;
  plan_.ranks.resize(static_cast<size_t>(params.nranks));
  for (RankPlan& rank : plan_.ranks) rank.workers.resize(static_cast<size_t>(workers));
}

void PlanBuilder::useScratch(int rank, int segments) {
  RankPlan& rp = plan_.ranks[static_cast<size_t>(rank)];
  rp.scratchSegments = std::max(rp.scratchSegments, segments);
}

void PlanBuilder::credit(int rank, int peer, int channel, int initial) {
  std::vector<Credit>& credits = plan_.ranks[static_cast<size_t>(rank)].credits;
  for (Credit& c : credits) {
    if (c.peer == peer && c.channel == channel) {
      c.initial += initial;
      return;
    }
  }
  credits.push_back(Credit{peer, channel, initial});
}

void PlanBuilder::finish(Plan* out) {
  for (RankPlan& rank : plan_.ranks) {
    std::erase_if(rank.workers, [](const Worker& w) { return w.ops.empty(); });
  }
  plan_.name = strprintf("%s.%s.n%d%s", collectiveName(plan_.collective), plan_.algorithm.c_str(),
                         plan_.nranks, plan_.zeroCopy ? ".zc" : "");
  *out = std::move(plan_);
  plan_ = Plan{};
}

void singleRankPlan(const GenParams& params, int chunksPerSegment, Plan* out) {
  GenParams p = params;
  p.zeroCopy = false;  // nothing remote
  PlanBuilder b(p, chunksPerSegment, 1);
  b.ops(0).copy(outRef(0, chunksPerSegment), inRef(0, chunksPerSegment));
  b.finish(out);
}

int creditsForSlots(const std::vector<int>& slots) {
  const int m = static_cast<int>(slots.size());
  int best = m;
  // Walk the sequence twice; in the second pass every message has a previous use (at worst its
  // own slot one iteration earlier, at distance m).
  std::unordered_map<int, int> lastUse;
  for (int i = 0; i < 2 * m; ++i) {
    const int slot = slots[static_cast<size_t>(i % m)];
    auto it = lastUse.find(slot);
    if (i >= m && it != lastUse.end()) best = std::min(best, i - it->second);
    lastUse[slot] = i;
  }
  return best;
}

Range splitRange(int total, int parts, int i) {
  const int base = total / parts;
  const int extra = total % parts;
  Range r;
  r.first = i * base + std::min(i, extra);
  r.end = r.first + base + (i < extra ? 1 : 0);
  return r;
}

}  // namespace tessera
