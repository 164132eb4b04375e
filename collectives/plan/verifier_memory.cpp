// The verifier's simulation: memory accesses, races, and the checks after the run (model in
// verifier_sim.hpp).
#include <algorithm>

#include "collectives/plan/verifier_sim.hpp"

namespace tessera::verifier {
namespace {

struct OpWhere {
  int rank, worker, iter;
  size_t op;
};

OpWhere unpack(uint64_t id) {
  return {static_cast<int>(id >> 40), static_cast<int>((id >> 32) & 0xff),
          static_cast<int>((id >> 24) & 0xff), static_cast<size_t>(id & 0xffffff)};
}

}  // namespace

std::string Simulation::opText(uint64_t opId) const {
  OpWhere w = unpack(opId);
  const Op& op =
      plan_.ranks[static_cast<size_t>(w.rank)].workers[static_cast<size_t>(w.worker)].ops[w.op];
  std::string s =
      strprintf("rank %d worker %d op %zu (%s)", w.rank, w.worker, w.op, describeOp(op).c_str());
  if (iterations_ > 1) s += strprintf(" in iteration %d", w.iter);
  return s;
}

std::string Simulation::locText(int owner, BufferKind b, int64_t chunk) const {
  return strprintf("rank %d %s[%lld]", owner, bufferName(b), static_cast<long long>(chunk));
}

void Simulation::recordError(ErrorKind kind, uint64_t opId, const std::string& message) {
  SimResult& e = errors_[kind];
  if (e.property != VerifyProperty::kOk) return;
  static constexpr VerifyProperty kProps[kErrKinds] = {
      VerifyProperty::kRawInput, VerifyProperty::kPostcondition, VerifyProperty::kPostcondition,
      VerifyProperty::kOrder, VerifyProperty::kPostcondition};
  OpWhere w = unpack(opId);
  e = SimResult{kProps[kind], w.rank, w.worker, static_cast<int>(w.op), message};
}

void Simulation::race(const Access& now, const Access& before, const std::string& what,
                      bool nowWrites, bool beforeWrote) {
  const char* verb = nowWrites ? "writes" : "reads";
  const char* other = beforeWrote ? (nowWrites ? "write" : "be writing") : "read";
  OpWhere w = unpack(now.op);
  fatal_ = SimResult{
      VerifyProperty::kRace, w.rank, w.worker, static_cast<int>(w.op),
      strprintf("%s %s %s while %s may still %s it (no happens-before between "
                "them)",
                opText(now.op).c_str(), verb, what.c_str(), opText(before.op).c_str(), other)};
  stop_ = true;
}

// Peer access to a user buffer: after the owner started the iteration, and remembered so that
// endRule can check it happens before the owner ends it.
void Simulation::checkPeerAccess(uint32_t thread, int owner, BufferKind b, int64_t chunk, int iter,
                                 const Access& a, bool isWrite) {
  const auto& starts = starts_[static_cast<size_t>(owner)][static_cast<size_t>(iter)];
  const auto& ws = rankWorkers_[static_cast<size_t>(owner)];
  bool started = false;
  for (size_t k = 0; k < ws.size() && !started; ++k) {
    started = starts[k] != 0 && view(thread)[workers_[ws[k]].thread] >= starts[k];
  }
  if (!started) {
    OpWhere w = unpack(a.op);
    fatal_ = SimResult{
        VerifyProperty::kRace, w.rank, w.worker, static_cast<int>(w.op),
        strprintf("%s %s %s before rank %d may have started iteration %d (no happens-before from "
                  "its start: its buffers may not be ready; rank %d must signal first)",
                  opText(a.op).c_str(), isWrite ? "writes" : "reads",
                  locText(owner, b, chunk).c_str(), owner, iter, owner)};
    stop_ = true;
    return;
  }
  foreign_.push_back(Foreign{owner, iter, b, chunk, a, isWrite});
}

int32_t Simulation::readChunk(uint32_t thread, int rank, const ChunkRef& ref, int64_t i, int iter,
                              uint64_t opId) {
  int owner = ref.remote() ? ref.rank : rank;
  int64_t chunk = ref.index + i;
  Location& loc = memory_[locate(owner, ref.buffer, chunk, iter)];
  Access a{thread, own(thread), opId};
  if (loc.written && !ordered(thread, loc.write)) {
    race(a, loc.write, locText(owner, ref.buffer, chunk), false, true);
    return kPoison;
  }
  auto same = std::find_if(loc.reads.begin(), loc.reads.end(),
                           [thread](const Access& r) { return r.thread == thread; });
  if (same != loc.reads.end()) {
    *same = a;  // a later read of the same thread covers the earlier one
  } else {
    loc.reads.push_back(a);
  }
  bool ownWorker = thread < workers_.size() && workers_[thread].rank == owner;
  if (ref.buffer != BufferKind::kScratch && !ownWorker) {
    checkPeerAccess(thread, owner, ref.buffer, chunk, iter, a, false);
  }
  int32_t v = loc.value;
  if (v == kUninit) {
    recordError(kErrUninit, opId,
                strprintf("%s reads %s, which nothing wrote before (uninitialised)",
                          opText(opId).c_str(), locText(owner, ref.buffer, chunk).c_str()));
    return kPoison;
  }
  if (v == kPoison) return kPoison;
  bool raw = values_.get(v).raw;
  if (ref.buffer == BufferKind::kInput) {
    if (raw) return ValueTable::processed(v);
    recordError(kErrRaw, opId,
                strprintf("%s reads %s after the plan overwrote it in place (an output chunk "
                          "aliases it), so it no longer holds the rank's input",
                          opText(opId).c_str(), locText(owner, ref.buffer, chunk).c_str()));
    return v;
  }
  if (raw) {
    recordError(kErrRaw, opId,
                strprintf("%s reads %s, which still holds the raw input (in place it aliases an "
                          "input chunk; read it through an input ref so the pre-op applies)",
                          opText(opId).c_str(), locText(owner, ref.buffer, chunk).c_str()));
    return ValueTable::processed(v);
  }
  return v;
}

void Simulation::writeChunk(uint32_t thread, int rank, const ChunkRef& ref, int64_t i, int iter,
                            uint64_t opId, int32_t value) {
  int owner = ref.remote() ? ref.rank : rank;
  int64_t chunk = ref.index + i;
  Location& loc = memory_[locate(owner, ref.buffer, chunk, iter)];
  Access a{thread, own(thread), opId};
  if (loc.written && !ordered(thread, loc.write)) {
    race(a, loc.write, locText(owner, ref.buffer, chunk), true, true);
    return;
  }
  for (const Access& r : loc.reads) {
    if (r.thread != thread && !ordered(thread, r)) {
      race(a, r, locText(owner, ref.buffer, chunk), true, false);
      return;
    }
  }
  if (ref.buffer != BufferKind::kScratch && value >= 0) {
    int32_t position = values_.get(value).position;
    int64_t want = chunk % plan_.chunksPerSegment;
    if (position != want) {
      recordError(
          kErrPosition, opId,
          strprintf("%s stores %s in %s at chunk position %lld, but that data %s (user "
                    "chunks are sized by their position; only scratch slots may hold "
                    "another position's data)",
                    opText(opId).c_str(), ValueTable::describe(values_.get(value).contrib).c_str(),
                    locText(owner, ref.buffer, chunk).c_str(), static_cast<long long>(want),
                    position == kMixedPosition
                        ? "mixes chunk positions"
                        : strprintf("is of chunk position %d", position).c_str()));
    }
  }
  loc.reads.clear();
  loc.write = a;
  loc.written = true;
  loc.value = value;
  bool ownWorker = thread < workers_.size() && workers_[thread].rank == owner;
  if (ref.buffer != BufferKind::kScratch && !ownWorker) {
    checkPeerAccess(thread, owner, ref.buffer, chunk, iter, a, true);
  }
}

SimResult Simulation::deadlock() const {
  constexpr int kShown = 4;
  SimResult r;
  r.property = VerifyProperty::kDeadlock;
  std::string list;
  int blocked = 0;
  for (const WorkerState& w : workers_) {
    if (w.done) continue;
    if (blocked++ >= kShown) continue;
    const Op& op =
        plan_.ranks[static_cast<size_t>(w.rank)].workers[static_cast<size_t>(w.index)].ops[w.pc];
    std::string where = opText(packOp(w.rank, w.index, w.pc, w.iter));
    if (op.code == OpCode::kWait) {
      auto it = sems_.find(semKey(op.peer, w.rank, op.channel));
      int64_t waited = it == sems_.end() ? 0 : it->second.waited;
      int64_t credits = it == sems_.end() ? 0 : it->second.credits;
      int64_t sent = it == sems_.end() ? 0 : it->second.sent;
      where += strprintf(
          " waits for signal %lld of (rank %d -> rank %d, channel %d); rank %d sent "
          "%lld",
          static_cast<long long>(waited + 1 - credits), op.peer, w.rank, op.channel, op.peer,
          static_cast<long long>(sent));
    } else {
      const auto& bs = barriers_[static_cast<size_t>(w.rank)];
      size_t k = static_cast<size_t>(w.barriers);
      where += strprintf(" waits at barrier %lld (%d of %zu workers arrived)",
                         static_cast<long long>(w.barriers), k < bs.size() ? bs[k].arrived : 0,
                         rankWorkers_[static_cast<size_t>(w.rank)].size());
    }
    if (r.rank < 0) {
      r.rank = w.rank;
      r.worker = w.index;
      r.op = static_cast<int>(w.pc);
    }
    list += (list.empty() ? "" : "; ") + where;
  }
  if (blocked > kShown) list += strprintf("; and %d more workers blocked", blocked - kShown);
  r.message = "no worker can proceed: " + list;
  return r;
}

SimResult Simulation::endRule() const {
  for (const Foreign& f : foreign_) {
    const Clock& end = ends_[static_cast<size_t>(f.owner)][static_cast<size_t>(f.iter)];
    if (end[f.access.thread] >= f.access.clock) continue;
    OpWhere w = unpack(f.access.op);
    return SimResult{
        VerifyProperty::kRace, w.rank, w.worker, static_cast<int>(w.op),
        strprintf("%s %s %s, but rank %d's plan may end iteration %d before that (no "
                  "happens-before to its end): peer may still access rank %d's %s after rank "
                  "%d's call returned",
                  opText(f.access.op).c_str(), f.isWrite ? "writes" : "reads",
                  locText(f.owner, f.buffer, f.chunk).c_str(), f.owner, f.iter, f.owner,
                  bufferName(f.buffer), f.owner)};
  }
  return {};
}

SimResult Simulation::balance() const {
  std::vector<uint64_t> keys;
  for (const auto& [k, s] : sems_) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (uint64_t k : keys) {
    const Semaphore& s = sems_.at(k);
    if (s.sent == s.waited) continue;
    int channel = static_cast<int>(k % kMaxChannels);
    uint64_t pair = k / kMaxChannels;
    int from = static_cast<int>(pair / static_cast<uint64_t>(plan_.nranks));
    int to = static_cast<int>(pair % static_cast<uint64_t>(plan_.nranks));
    SimResult r;
    r.property = VerifyProperty::kDeadlock;
    r.rank = to;
    r.message = strprintf(
        "(rank %d -> rank %d, channel %d) got %lld signals but %lld waits over %d iterations: %s",
        from, to, channel, static_cast<long long>(s.sent), static_cast<long long>(s.waited),
        iterations_,
        s.sent > s.waited ? "a signal left unconsumed (repeated calls would drift)"
                          : "waits live on credits (repeated calls would run out of them)");
    return r;
  }
  return {};
}

SimResult Simulation::postcondition() const {
  const int n = plan_.nranks;
  const int64_t cps = plan_.chunksPerSegment;
  const bool reduces = collectiveReduces(plan_.collective);
  std::vector<uint64_t> want;
  for (int r = 0; r < n; ++r) {
    if (plan_.collective == Collective::kReduce && r != plan_.root) continue;
    for (int it = 0; it < iterations_; ++it) {
      for (int64_t c = 0; c < nOut_; ++c) {
        want.clear();
        int64_t q = c / cps, j = c % cps;
        switch (plan_.collective) {
          case Collective::kAllReduce:
          case Collective::kReduce:
            for (int s = 0; s < n; ++s) want.push_back(ValueTable::key(s, c));
            break;
          case Collective::kReduceScatter:
            for (int s = 0; s < n; ++s) want.push_back(ValueTable::key(s, r * cps + c));
            break;
          case Collective::kAllGather:
            want.push_back(ValueTable::key(static_cast<int>(q), j));
            break;
          case Collective::kBroadcast: want.push_back(ValueTable::key(plan_.root, c)); break;
          case Collective::kAllToAll:
            want.push_back(ValueTable::key(static_cast<int>(q), r * cps + j));
            break;
        }
        int32_t v = memory_[locate(r, BufferKind::kOutput, c, it)].value;
        std::string where = strprintf("rank %d output[%lld]", r, static_cast<long long>(c));
        if (iterations_ > 1) where += strprintf(" (iteration %d)", it);
        std::string found;
        if (v < 0) {
          found = "nothing (never written)";
        } else if (values_.get(v).contrib != want) {
          found = ValueTable::describe(values_.get(v).contrib);
        } else if (reduces && values_.get(v).raw) {
          return SimResult{VerifyProperty::kRawInput, r, -1, -1,
                           where +
                               " still holds the raw input at the end (the pre-op never "
                               "applied; copy it through an input ref)"};
        } else {
          continue;
        }
        return SimResult{
            VerifyProperty::kPostcondition, r, -1, -1,
            strprintf("%s holds %s after the plan, but %s needs %s", where.c_str(), found.c_str(),
                      collectiveName(plan_.collective), ValueTable::describe(want).c_str())};
      }
    }
  }
  return {};
}

}  // namespace tessera::verifier
