// checkPlanShape (plan.hpp): the structural checks that need no simulation.
//
// checkPlanShape decisions beyond plan.hpp's list (documented here so generators know them):
//  - A rank may have no workers at all (a rank with nothing to do); otherwise 1..kMaxWorkers.
//  - No op writes an input buffer: the user's send buffer is read-only (in place, the plan
//    writes the aliasing output chunk instead).
//  - broadcast reads only the root's input; reduce writes only the root's output (the other
//    ranks' buffers may not exist, as in NCCL).
//  - Ops carry no fields their code ignores (a data op has peer -1 and channel 0; signal, wait,
//    flush and barrier have no refs; dst2 is default unless hasDst2), so a plan round-trips
//    through JSON exactly and a generator bug that sets the wrong field is caught.
//  - A plan that reaches a peer's input or output must say zeroCopy (the executor then requires
//    registered user buffers).
//  - A rank lists at most one credit per (peer, channel).
//  - The input and output refs of a data op share one chunk position (index % chunksPerSegment);
//    counts already agree, so every step of the op stays at one position.
#include "collectives/plan/plan_shape.hpp"

#include <set>
#include <string>
#include <utility>

#include "collectives/plan/plan.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

bool isDataOp(OpCode c) {
  return c == OpCode::kPut || c == OpCode::kGet || c == OpCode::kCopy || c == OpCode::kReduce ||
         c == OpCode::kReduceSend;
}

// A field's path in error sentences ("plan: ranks[1].workers[0].ops[4].srcs[1]"), formatted only
// when a check fails: checking a plan of a million ops must not format a million strings.
class Path {
 public:
  Path(const char* source, int rank, size_t worker, size_t op)
      : source_(source), rank_(rank), worker_(worker), op_(op) {}
  Path(const char* source, int rank, const char* field, size_t index)
      : source_(source), rank_(rank), field_(field), op_(index) {}
  Path(const Path* parent, const char* field, size_t index = kNoIndex)
      : parent_(parent), field_(field), op_(index) {}
  std::string str() const {
    if (parent_ != nullptr) {
      std::string s = parent_->str() + field_;
      return op_ == kNoIndex ? s : s + strprintf("[%zu]", op_);
    }
    if (field_ != nullptr) return strprintf("%s: ranks[%d]%s[%zu]", source_, rank_, field_, op_);
    return strprintf("%s: ranks[%d].workers[%zu].ops[%zu]", source_, rank_, worker_, op_);
  }

 private:
  static constexpr size_t kNoIndex = ~size_t{0};
  const Path* parent_ = nullptr;
  const char* source_ = nullptr;
  int rank_ = 0;
  const char* field_ = nullptr;
  size_t worker_ = 0;
  size_t op_ = kNoIndex;
};

// The checks of one ChunkRef of an op of rank `rank`. `path` names the ref.
class ShapeChecker {
 public:
  explicit ShapeChecker(const Plan& p) : p_(p) {}

  Result ref(const ChunkRef& r, int rank, const Path& path) const {
    if (r.rank < -1 || r.rank >= p_.nranks) {
      return TSR_FAIL(tsrInvalidArgument, "%s.rank: rank %d out of range (%d ranks)",
                      path.str().c_str(), r.rank, p_.nranks);
    }
    if (r.rank == rank) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s.rank: %d is the rank itself (use -1 or omit it for a local ref)",
                      path.str().c_str(), r.rank);
    }
    if (static_cast<int>(r.buffer) >= kBufferKinds) {
      return TSR_FAIL(tsrInvalidArgument, "%s.buffer: unknown buffer %d", path.str().c_str(),
                      static_cast<int>(r.buffer));
    }
    if (r.count < 1) {
      return TSR_FAIL(tsrInvalidArgument, "%s.count: %d chunks (must be at least 1)",
                      path.str().c_str(), r.count);
    }
    int owner = r.remote() ? r.rank : rank;
    int64_t chunks = bufferChunks(p_, owner, r.buffer);
    if (r.index < 0 || r.index >= chunks) {
      return TSR_FAIL(tsrInvalidArgument, "%s.index: chunk %d out of range (%s has %lld chunks)",
                      path.str().c_str(), r.index, bufferName(r.buffer),
                      static_cast<long long>(chunks));
    }
    int64_t end = static_cast<int64_t>(r.index) + static_cast<int64_t>(r.count);
    if (end > chunks) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s.count: chunks %d..%lld out of range (%s has %lld chunks)",
                      path.str().c_str(), r.index, static_cast<long long>(end - 1),
                      bufferName(r.buffer), static_cast<long long>(chunks));
    }
    if (r.remote() && r.buffer != BufferKind::kScratch && !p_.zeroCopy) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s: reaches rank %d's %s but the plan is not marked zeroCopy",
                      path.str().c_str(), r.rank, bufferName(r.buffer));
    }
    return tsrSuccess;
  }

  // A ref the op writes.
  Result written(const ChunkRef& r, int rank, const Path& path) const {
    if (r.buffer == BufferKind::kInput) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s.buffer: writes an input buffer (the user's send buffer is "
                      "read-only; in place, write the aliasing output chunk)",
                      path.str().c_str());
    }
    int owner = r.remote() ? r.rank : rank;
    if (p_.collective == Collective::kReduce && r.buffer == BufferKind::kOutput &&
        owner != p_.root) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s: writes rank %d's output, but a reduce has an output only at the "
                      "root (rank %d)",
                      path.str().c_str(), owner, p_.root);
    }
    return tsrSuccess;
  }

  // A ref the op reads.
  Result read(const ChunkRef& r, int rank, const Path& path) const {
    int owner = r.remote() ? r.rank : rank;
    if (p_.collective == Collective::kBroadcast && r.buffer == BufferKind::kInput &&
        owner != p_.root) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s: reads rank %d's input, but a broadcast has an input only at the "
                      "root (rank %d)",
                      path.str().c_str(), owner, p_.root);
    }
    return tsrSuccess;
  }

  Result peer(int32_t peer, int rank, const Path& path) const {
    if (peer < 0 || peer >= p_.nranks || peer == rank) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s.peer: peer %d invalid for rank %d (must be another rank of %d)",
                      path.str().c_str(), peer, rank, p_.nranks);
    }
    return tsrSuccess;
  }

  Result op(const Op& op, int rank, const Path& path) const {
    int code = static_cast<int>(op.code);
    if (code >= kOpCodes) {
      return TSR_FAIL(tsrInvalidArgument, "%s.op: unknown op code %d", path.str().c_str(), code);
    }
    if (!isDataOp(op.code)) return controlOp(op, rank, path);
    if (op.peer != -1) {
      return TSR_FAIL(tsrInvalidArgument,
                      "%s.peer: a %s takes no peer (its refs name the ranks), found %d",
                      path.str().c_str(), opName(op.code), op.peer);
    }
    if (op.channel != 0) {
      return TSR_FAIL(tsrInvalidArgument, "%s.channel: a %s takes no channel, found %d",
                      path.str().c_str(), opName(op.code), op.channel);
    }
    bool reduces = op.code == OpCode::kReduce || op.code == OpCode::kReduceSend;
    size_t minSrcs = reduces ? 2 : 1;
    size_t maxSrcs = reduces ? static_cast<size_t>(kMaxSrcs) : 1;
    if (op.srcs.size() < minSrcs || op.srcs.size() > maxSrcs) {
      return TSR_FAIL(tsrInvalidArgument,
                      reduces ? "%s.srcs: a %s takes 2..%zu sources, found %zu"
                              : "%s.srcs: a %s takes exactly %zu source, found %zu",
                      path.str().c_str(), opName(op.code), maxSrcs, op.srcs.size());
    }
    if (op.hasDst2 && op.code != OpCode::kReduceSend && op.code != OpCode::kPut) {
      return TSR_FAIL(tsrInvalidArgument, "%s.dst2: only put and reduceSend take dst2",
                      path.str().c_str());
    }
    if (!op.hasDst2 && !(op.dst2 == ChunkRef{})) {
      return TSR_FAIL(tsrInvalidArgument, "%s.dst2: set but hasDst2 is false", path.str().c_str());
    }
    TSR_CHECK(ref(op.dst, rank, Path(&path, ".dst")));
    TSR_CHECK(written(op.dst, rank, Path(&path, ".dst")));
    if (op.hasDst2) {
      TSR_CHECK(ref(op.dst2, rank, Path(&path, ".dst2")));
      TSR_CHECK(written(op.dst2, rank, Path(&path, ".dst2")));
      if (op.dst2.remote()) {
        return TSR_FAIL(tsrInvalidArgument, "%s.dst2.rank: dst2 must be local, found rank %d",
                        path.str().c_str(), op.dst2.rank);
      }
      if (op.dst2.count != op.dst.count) {
        return TSR_FAIL(tsrInvalidArgument, "%s.dst2.count: %d chunks but dst has %d",
                        path.str().c_str(), op.dst2.count, op.dst.count);
      }
    }
    for (size_t i = 0; i < op.srcs.size(); ++i) {
      // Named as in JSON: put/get/copy take "src", reduce/reduceSend "srcs".
      Path sp = reduces ? Path(&path, ".srcs", i) : Path(&path, ".src");
      TSR_CHECK(ref(op.srcs[i], rank, sp));
      TSR_CHECK(read(op.srcs[i], rank, sp));
      if (op.srcs[i].count != op.dst.count) {
        return TSR_FAIL(tsrInvalidArgument, "%s.count: %d chunks but dst has %d", sp.str().c_str(),
                        op.srcs[i].count, op.dst.count);
      }
    }
    TSR_CHECK(positions(op, path));
    return remoteRules(op, path);
  }

 private:
  // Executors size a step on a user buffer by the chunk's position in its segment (index % cps;
  // the last chunks of a segment may be short), so an op that moves data between user chunks of
  // different positions would move the wrong length with uneven counts. Scratch slots may hold a
  // chunk of any position; the verifier checks what reaches a user chunk through them.
  Result positions(const Op& op, const Path& path) const {
    const int32_t cps = p_.chunksPerSegment;
    const ChunkRef* first = nullptr;
    auto check = [&](const ChunkRef& r, const char* name) -> Result {
      if (r.buffer == BufferKind::kScratch) return tsrSuccess;
      if (first == nullptr) {
        first = &r;
        return tsrSuccess;
      }
      if (r.index % cps == first->index % cps) return tsrSuccess;
      return TSR_FAIL(tsrInvalidArgument,
                      "%s.%s: %s[%d] is at chunk position %d but %s[%d] at position %d (the "
                      "input and output refs of an op share one position, index %% "
                      "chunksPerSegment, here %% %d)",
                      path.str().c_str(), name, bufferName(r.buffer), r.index, r.index % cps,
                      bufferName(first->buffer), first->index, first->index % cps, cps);
    };
    TSR_CHECK(check(op.dst, "dst"));
    if (op.hasDst2) TSR_CHECK(check(op.dst2, "dst2"));
    for (const ChunkRef& r : op.srcs) TSR_CHECK(check(r, op.srcs.size() > 1 ? "srcs" : "src"));
    return tsrSuccess;
  }

  Result controlOp(const Op& op, int rank, const Path& path) const {
    if (!op.srcs.empty() || op.hasDst2 || !(op.dst == ChunkRef{}) || !(op.dst2 == ChunkRef{})) {
      return TSR_FAIL(tsrInvalidArgument, "%s: a %s takes no chunk refs", path.str().c_str(),
                      opName(op.code));
    }
    if (op.code == OpCode::kBarrier) {
      if (op.peer != -1 || op.channel != 0) {
        return TSR_FAIL(tsrInvalidArgument, "%s: a barrier takes no peer or channel",
                        path.str().c_str());
      }
      return tsrSuccess;
    }
    TSR_CHECK(peer(op.peer, rank, path));
    if (op.code == OpCode::kFlush) {
      if (op.channel != 0) {
        return TSR_FAIL(tsrInvalidArgument,
                        "%s.channel: a flush takes no channel (it covers every put to the "
                        "peer), found %d",
                        path.str().c_str(), op.channel);
      }
      return tsrSuccess;
    }
    if (op.channel < 0 || op.channel >= kMaxChannels) {
      return TSR_FAIL(tsrInvalidArgument, "%s.channel: channel %d out of range (0..%d)",
                      path.str().c_str(), op.channel, kMaxChannels - 1);
    }
    return tsrSuccess;
  }

  static Result remoteRules(const Op& op, const Path& path) {
    const ChunkRef& src = op.srcs[0];
    switch (op.code) {
      case OpCode::kPut:
        if (src.remote()) {
          return TSR_FAIL(tsrInvalidArgument, "%s.src.rank: a put reads a local source",
                          path.str().c_str());
        }
        if (!op.dst.remote()) {
          return TSR_FAIL(tsrInvalidArgument,
                          "%s.dst.rank: a put writes a peer's buffer (dst needs a rank)",
                          path.str().c_str());
        }
        break;
      case OpCode::kGet:
        if (!src.remote()) {
          return TSR_FAIL(tsrInvalidArgument,
                          "%s.src.rank: a get reads a peer's buffer (src needs a rank)",
                          path.str().c_str());
        }
        [[fallthrough]];
      case OpCode::kCopy:
      case OpCode::kReduce:
        if (op.dst.remote()) {
          return TSR_FAIL(tsrInvalidArgument,
                          "%s.dst.rank: a %s writes a local buffer, found rank %d",
                          path.str().c_str(), opName(op.code), op.dst.rank);
        }
        break;
      case OpCode::kReduceSend:
        if (!op.dst.remote()) {
          return TSR_FAIL(tsrInvalidArgument,
                          "%s.dst.rank: a reduceSend writes a peer's buffer (dst needs a "
                          "rank)",
                          path.str().c_str());
        }
        break;
      default: break;
    }
    return tsrSuccess;
  }

  const Plan& p_;
};

}  // namespace

Result checkPlanShapeNamed(const Plan& p, const std::string& source) {
  const char* src = source.c_str();
  if (p.nranks < 1 || p.nranks > kMaxPlanRanks) {
    return TSR_FAIL(tsrInvalidArgument, "%s: nranks: %d out of range (1..%d)", src, p.nranks,
                    kMaxPlanRanks);
  }
  if (p.ranks.size() != static_cast<size_t>(p.nranks)) {
    return TSR_FAIL(tsrInvalidArgument, "%s: ranks: %zu rank plans for nranks %d", src,
                    p.ranks.size(), p.nranks);
  }
  if (static_cast<int>(p.collective) >= kCollectiveCount) {
    return TSR_FAIL(tsrInvalidArgument, "%s: collective: unknown collective %d", src,
                    static_cast<int>(p.collective));
  }
  if (p.root < 0 || p.root >= p.nranks) {
    return TSR_FAIL(tsrInvalidArgument, "%s: root: rank %d out of range (%d ranks)", src, p.root,
                    p.nranks);
  }
  if (p.chunksPerSegment < 1 || p.chunksPerSegment > kMaxChunksPerSegment) {
    return TSR_FAIL(tsrInvalidArgument, "%s: chunksPerSegment: %d out of range (1..%d)", src,
                    p.chunksPerSegment, kMaxChunksPerSegment);
  }
  for (int r = 0; r < p.nranks; ++r) {
    const RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    if (rp.scratchSegments < 0 || rp.scratchSegments > kMaxScratchSegments) {
      return TSR_FAIL(tsrInvalidArgument, "%s: ranks[%d].scratchSegments: %d out of range (0..%d)",
                      src, r, rp.scratchSegments, kMaxScratchSegments);
    }
  }
  ShapeChecker check(p);
  for (int r = 0; r < p.nranks; ++r) {
    const RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    std::set<std::pair<int32_t, int32_t>> credited;
    for (size_t i = 0; i < rp.credits.size(); ++i) {
      const Credit& c = rp.credits[i];
      Path path(src, r, ".credits", i);
      TSR_CHECK(check.peer(c.peer, r, path));
      if (c.channel < 0 || c.channel >= kMaxChannels) {
        return TSR_FAIL(tsrInvalidArgument, "%s.channel: channel %d out of range (0..%d)",
                        path.str().c_str(), c.channel, kMaxChannels - 1);
      }
      if (c.initial < 0 || c.initial > (1 << 20)) {
        return TSR_FAIL(tsrInvalidArgument, "%s.initial: %d out of range (0..%d)",
                        path.str().c_str(), c.initial, 1 << 20);
      }
      if (!credited.insert({c.peer, c.channel}).second) {
        return TSR_FAIL(tsrInvalidArgument, "%s: a second credit for (peer %d, channel %d)",
                        path.str().c_str(), c.peer, c.channel);
      }
    }
    if (rp.workers.size() > static_cast<size_t>(kMaxWorkers)) {
      return TSR_FAIL(tsrInvalidArgument, "%s: ranks[%d].workers: %zu workers (at most %d)", src, r,
                      rp.workers.size(), kMaxWorkers);
    }
    int64_t total = 0;
    for (const Worker& w : rp.workers) total += static_cast<int64_t>(w.ops.size());
    if (total > kMaxOpsPerRank) {
      return TSR_FAIL(tsrInvalidArgument, "%s: ranks[%d].workers: %lld ops (at most %lld)", src, r,
                      static_cast<long long>(total), static_cast<long long>(kMaxOpsPerRank));
    }
    for (size_t w = 0; w < rp.workers.size(); ++w) {
      const std::vector<Op>& ops = rp.workers[w].ops;
      for (size_t i = 0; i < ops.size(); ++i) {
        TSR_CHECK(check.op(ops[i], r, Path(src, r, w, i)));
      }
    }
  }
  return tsrSuccess;
}

Result checkPlanShape(const Plan& p) { return checkPlanShapeNamed(p, "plan"); }

}  // namespace tessera
