// Names, parsing and layout helpers of the plan IR (plan.hpp); checkPlanShape is in
// plan_shape.cpp.
#include "collectives/plan/plan.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string refText(const ChunkRef& r) {
  std::string s;
  if (r.remote()) s = strprintf("rank %d ", r.rank);
  s += bufferName(r.buffer);
  if (r.count == 1) {
    s += strprintf("[%d]", r.index);
  } else {
    s += strprintf("[%d..%lld]", r.index,
                   static_cast<long long>(static_cast<int64_t>(r.index) + r.count - 1));
  }
  return s;
}

}  // namespace

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kAllGather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllToAll: return "alltoall";
  }
  return "unknown";
}

Result collectiveParse(const std::string& name, Collective* out) {
  static const std::pair<const char*, Collective> kNames[] = {
      {"allreduce", Collective::kAllReduce},         {"all_reduce", Collective::kAllReduce},
      {"reducescatter", Collective::kReduceScatter}, {"reduce_scatter", Collective::kReduceScatter},
      {"allgather", Collective::kAllGather},         {"all_gather", Collective::kAllGather},
      {"broadcast", Collective::kBroadcast},         {"reduce", Collective::kReduce},
      {"alltoall", Collective::kAllToAll},           {"all_to_all", Collective::kAllToAll},
  };
  std::string l = lower(name);
  for (const auto& [n, c] : kNames) {
    if (l == n) {
      *out = c;
      return tsrSuccess;
    }
  }
  return TSR_FAIL(tsrInvalidArgument,
                  "unknown collective \"%s\" (valid: allreduce, reducescatter, allgather, "
                  "broadcast, reduce, alltoall)",
                  name.c_str());
}

bool collectiveReduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

bool collectiveHasRoot(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce;
}

const char* bufferName(BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return "input";
    case BufferKind::kOutput: return "output";
    case BufferKind::kScratch: return "scratch";
  }
  return "unknown";
}

const char* opName(OpCode op) {
  switch (op) {
    case OpCode::kPut: return "put";
    case OpCode::kGet: return "get";
    case OpCode::kCopy: return "copy";
    case OpCode::kReduce: return "reduce";
    case OpCode::kReduceSend: return "reduceSend";
    case OpCode::kSignal: return "signal";
    case OpCode::kWait: return "wait";
    case OpCode::kFlush: return "flush";
    case OpCode::kBarrier: return "barrier";
  }
  return "unknown";
}

Result opParse(const std::string& name, OpCode* out) {
  for (int i = 0; i < kOpCodes; ++i) {
    OpCode c = static_cast<OpCode>(i);
    if (name == opName(c)) {
      *out = c;
      return tsrSuccess;
    }
  }
  return TSR_FAIL(tsrInvalidArgument,
                  "unknown op \"%s\" (valid: put, get, copy, reduce, reduceSend, signal, wait, "
                  "flush, barrier)",
                  name.c_str());
}

int32_t inputSegments(Collective c, int nranks) {
  return (c == Collective::kReduceScatter || c == Collective::kAllToAll) ? nranks : 1;
}

int32_t outputSegments(Collective c, int nranks) {
  return (c == Collective::kAllGather || c == Collective::kAllToAll) ? nranks : 1;
}

int32_t bufferSegments(const Plan& p, int rank, BufferKind b) {
  switch (b) {
    case BufferKind::kInput: return inputSegments(p.collective, p.nranks);
    case BufferKind::kOutput: return outputSegments(p.collective, p.nranks);
    case BufferKind::kScratch:
      if (rank < 0 || static_cast<size_t>(rank) >= p.ranks.size()) return 0;
      return p.ranks[static_cast<size_t>(rank)].scratchSegments;
  }
  return 0;
}

int64_t bufferChunks(const Plan& p, int rank, BufferKind b) {
  return static_cast<int64_t>(bufferSegments(p, rank, b)) *
         static_cast<int64_t>(p.chunksPerSegment);
}

ChunkSpan chunkSpan(int64_t chunk, int32_t cps, uint64_t unit) {
  ChunkSpan s;
  if (cps < 1 || chunk < 0) return s;
  s.segment = chunk / cps;
  uint64_t j = static_cast<uint64_t>(chunk % cps);
  uint64_t n = static_cast<uint64_t>(cps);
  uint64_t per = unit / n + (unit % n != 0 ? 1 : 0);  // ceil, without overflow near 2^64
  // j * per <= cps * per < unit + cps: only the product itself could overflow.
  auto bound = [&](uint64_t k) {
    return per != 0 && k > unit / per ? unit : std::min(unit, k * per);
  };
  uint64_t begin = bound(j);
  uint64_t end = bound(j + 1);
  s.offset = begin;
  s.length = end - begin;
  return s;
}

std::string describeOp(const Op& op) {
  std::string s = opName(op.code);
  switch (op.code) {
    case OpCode::kSignal:
    case OpCode::kWait: return s + strprintf(" rank %d channel %d", op.peer, op.channel);
    case OpCode::kFlush: return s + strprintf(" rank %d", op.peer);
    case OpCode::kBarrier: return s;
    default: break;
  }
  s += ' ';
  for (size_t i = 0; i < op.srcs.size(); ++i) {
    if (i > 0) s += " + ";
    s += refText(op.srcs[i]);
  }
  s += " -> " + refText(op.dst);
  if (op.hasDst2) s += " and " + refText(op.dst2);
  return s;
}

int32_t scratchChunksUsed(const Plan& plan) {
  int32_t chunks = 0;
  auto use = [&](const ChunkRef& r) {
    if (r.buffer == BufferKind::kScratch) chunks = std::max(chunks, r.index + r.count);
  };
  for (const RankPlan& rp : plan.ranks)
    for (const Worker& w : rp.workers)
      for (const Op& op : w.ops) {
        if (op.code > OpCode::kReduceSend) continue;  // signals, waits, flushes, barriers
        use(op.dst);
        if (op.hasDst2) use(op.dst2);
        for (const ChunkRef& r : op.srcs) use(r);
      }
  return chunks;
}

}  // namespace tessera
