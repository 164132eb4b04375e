// The verifier's symbolic simulation: setup, scheduling and ops (model in verifier_sim.hpp).
#include "collectives/plan/verifier_sim.hpp"

#include <algorithm>

namespace tessera::verifier {
namespace {

void join(Clock& into, const Clock& from) {
  for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
}

// Bounds the memory of the symbolic values (8 bytes per contribution).
constexpr uint64_t kMaxValueEntries = uint64_t{1} << 25;

bool isPutLike(OpCode c) { return c == OpCode::kPut || c == OpCode::kReduceSend; }

}  // namespace

Simulation::Simulation(const Plan& plan, int iterations, bool inPlace)
    : plan_(plan), iterations_(iterations), inPlace_(inPlace) {
  nIn_ = bufferChunks(plan, 0, BufferKind::kInput);
  nOut_ = bufferChunks(plan, 0, BufferKind::kOutput);
  userBlock_ = static_cast<size_t>(nIn_ + nOut_);
  assignThreads();
  initMemory();
}

void Simulation::assignThreads() {
  int n = plan_.nranks;
  rankWorkers_.assign(static_cast<size_t>(n), {});
  for (int r = 0; r < n; ++r) {
    const RankPlan& rp = plan_.ranks[static_cast<size_t>(r)];
    for (size_t w = 0; w < rp.workers.size(); ++w) {
      WorkerState ws;
      ws.rank = r;
      ws.index = static_cast<int>(w);
      ws.thread = static_cast<uint32_t>(workers_.size());
      rankWorkers_[static_cast<size_t>(r)].push_back(workers_.size());
      workers_.push_back(ws);
    }
  }
  // One stream per (worker, peer) the worker puts to; thread ids follow the workers'.
  for (WorkerState& ws : workers_) {
    const Worker& w =
        plan_.ranks[static_cast<size_t>(ws.rank)].workers[static_cast<size_t>(ws.index)];
    for (const Op& op : w.ops) {
      if (!isPutLike(op.code)) continue;
      int peer = op.dst.rank;
      auto it = std::find_if(ws.streams.begin(), ws.streams.end(),
                             [peer](const auto& s) { return s.first == peer; });
      if (it != ws.streams.end()) continue;
      uint32_t id = static_cast<uint32_t>(workers_.size() + streams_.size());
      ws.streams.push_back({peer, id});
      streams_.push_back(Stream{ws.rank, ws.index, ws.thread, 0, {}});
    }
  }
  size_t threads = workers_.size() + streams_.size();
  threads_ = threads;
  clocks_.assign(workers_.size(), Clock(threads, 0));
  snaps_.assign(workers_.size(), nullptr);
  barriers_.assign(static_cast<size_t>(n), {});
  ends_.assign(static_cast<size_t>(n),
               std::vector<Clock>(static_cast<size_t>(iterations_), Clock(threads, 0)));
  starts_.assign(static_cast<size_t>(n), {});
  for (int r = 0; r < n; ++r) {
    starts_[static_cast<size_t>(r)].assign(
        static_cast<size_t>(iterations_),
        std::vector<uint32_t>(rankWorkers_[static_cast<size_t>(r)].size(), 0));
    for (const Credit& c : plan_.ranks[static_cast<size_t>(r)].credits) {
      sems_[semKey(c.peer, r, c.channel)].credits = c.initial;
    }
  }
}

void Simulation::initMemory() {
  int n = plan_.nranks;
  values_.init(n, nIn_, plan_.chunksPerSegment);
  size_t user = static_cast<size_t>(n) * static_cast<size_t>(iterations_) * userBlock_;
  scratchBase_.assign(static_cast<size_t>(n), 0);
  size_t total = user;
  for (int r = 0; r < n; ++r) {
    scratchBase_[static_cast<size_t>(r)] = total;
    total += static_cast<size_t>(bufferChunks(plan_, r, BufferKind::kScratch));
  }
  memory_.assign(total, Location{});
  for (int r = 0; r < n; ++r) {
    // broadcast: only the root has an input (the others' may not even exist).
    if (plan_.collective == Collective::kBroadcast && r != plan_.root) continue;
    for (int it = 0; it < iterations_; ++it) {
      for (int64_t c = 0; c < nIn_; ++c) {
        memory_[locate(r, BufferKind::kInput, c, it)].value = values_.rawLeaf(r, c);
      }
    }
  }
}

size_t Simulation::locate(int owner, BufferKind b, int64_t chunk, int iter) const {
  size_t base =
      (static_cast<size_t>(owner) * static_cast<size_t>(iterations_) + static_cast<size_t>(iter)) *
      userBlock_;
  if (b == BufferKind::kScratch) {
    return scratchBase_[static_cast<size_t>(owner)] + static_cast<size_t>(chunk);
  }
  if (b == BufferKind::kInput) return base + static_cast<size_t>(chunk);
  if (inPlace_) {  // the output chunks that alias input chunks (plan.hpp, "In place")
    int64_t cps = plan_.chunksPerSegment;
    switch (plan_.collective) {
      case Collective::kAllReduce:
      case Collective::kBroadcast:
      case Collective::kReduce: return base + static_cast<size_t>(chunk);
      case Collective::kAllGather:
        if (chunk / cps == owner) return base + static_cast<size_t>(chunk % cps);
        break;
      case Collective::kReduceScatter: return base + static_cast<size_t>(owner * cps + chunk);
      case Collective::kAllToAll: break;
    }
  }
  return base + static_cast<size_t>(nIn_ + chunk);
}

SimResult Simulation::run() {
  bool progress = true;
  while (progress && !stop_) {
    progress = false;
    // Round robin, one step per worker per round, so no worker runs far ahead of the others
    // (any interleaving gives the same verdict; a fair one gives the clearest race reports).
    for (WorkerState& w : workers_) {
      if (step(w)) progress = true;
      if (stop_) break;
    }
  }
  if (stop_) return fatal_;
  for (const WorkerState& w : workers_) {
    if (!w.done) return deadlock();
  }
  SimResult r = endRule();
  if (r.property != VerifyProperty::kOk) return r;
  for (const SimResult& e : errors_) {
    if (e.property != VerifyProperty::kOk) return e;
  }
  r = balance();
  if (r.property != VerifyProperty::kOk) return r;
  return postcondition();
}

bool Simulation::startIteration(WorkerState& w) {
  Clock& c = clocks_[w.thread];
  c[w.thread]++;
  starts_[static_cast<size_t>(w.rank)][static_cast<size_t>(w.iter)][static_cast<size_t>(w.index)] =
      c[w.thread];
  return true;
}

bool Simulation::step(WorkerState& w) {
  if (w.done) return false;
  const std::vector<Op>& ops =
      plan_.ranks[static_cast<size_t>(w.rank)].workers[static_cast<size_t>(w.index)].ops;
  if (w.pc == 0 && starts_[static_cast<size_t>(w.rank)][static_cast<size_t>(w.iter)]
                          [static_cast<size_t>(w.index)] == 0) {
    return startIteration(w);
  }
  if (w.pc == ops.size()) {  // the iteration ends
    join(ends_[static_cast<size_t>(w.rank)][static_cast<size_t>(w.iter)], clocks_[w.thread]);
    w.pc = 0;
    if (++w.iter == iterations_) w.done = true;
    return true;
  }
  uint64_t opId = packOp(w.rank, w.index, w.pc, w.iter);
  if (!execute(w, ops[w.pc], opId)) return false;
  ++w.pc;
  return true;
}

bool Simulation::execute(WorkerState& w, const Op& op, uint64_t opId) {
  Clock& clock = clocks_[w.thread];
  switch (op.code) {
    case OpCode::kWait: {
      Semaphore& s = sems_[semKey(op.peer, w.rank, op.channel)];
      if (s.waited < s.credits) {
        ++s.waited;
      } else if (!s.pending.empty()) {
        const SignalClock& sc = s.pending.front();
        join(clock, *sc.base);
        for (const auto& [t, v] : sc.diff) clock[t] = std::max(clock[t], v);
        clockWords_ -= 2 * sc.diff.size();
        s.pending.pop_front();
        ++s.waited;
      } else {
        return false;
      }
      clock[w.thread]++;
      return true;
    }
    case OpCode::kBarrier: {
      std::vector<Barrier>& bs = barriers_[static_cast<size_t>(w.rank)];
      size_t k = static_cast<size_t>(w.barriers);
      if (bs.size() <= k) {
        if (!allocClock(w, threads_)) return false;
        bs.resize(k + 1, Barrier{0, Clock(threads_, 0)});
      }
      if (!w.arrived) {
        w.arrived = true;
        bs[k].arrived++;
        join(bs[k].clock, clock);
      }
      if (static_cast<size_t>(bs[k].arrived) < rankWorkers_[static_cast<size_t>(w.rank)].size()) {
        return false;
      }
      join(clock, bs[k].clock);
      w.arrived = false;
      ++w.barriers;
      clock[w.thread]++;
      return true;
    }
    case OpCode::kSignal: {
      clock[w.thread]++;
      completePuts(w, op.peer);
      // The entries that moved since the worker's snapshot; a new snapshot when they are many.
      std::shared_ptr<const Clock>& snap = snaps_[w.thread];
      SignalClock sc;
      if (snap != nullptr) {
        const Clock& base = *snap;
        for (size_t t = 0; t < threads_ && sc.diff.size() <= threads_ / 8; ++t) {
          if (clock[t] != base[t]) sc.diff.push_back({static_cast<uint32_t>(t), clock[t]});
        }
        if (sc.diff.size() > threads_ / 8) snap.reset();
      }
      if (snap == nullptr) {
        if (!allocClock(w, threads_)) return false;
        sc.diff.clear();
        snap = std::shared_ptr<const Clock>(new Clock(clock), [this](const Clock* c) {
          clockWords_ -= threads_;
          delete c;
        });
      }
      sc.base = snap;
      if (!allocClock(w, 2 * sc.diff.size())) return false;
      Semaphore& s = sems_[semKey(w.rank, op.peer, op.channel)];
      s.pending.push_back(std::move(sc));
      ++s.sent;
      return true;
    }
    case OpCode::kFlush:
      clock[w.thread]++;
      completePuts(w, op.peer);
      return true;
    default:
      clock[w.thread]++;
      dataOp(w, op, opId);
      return true;
  }
}

bool Simulation::allocClock(const WorkerState& w, uint64_t words) {
  clockWords_ += words;
  if (clockWords_ <= kMaxClockWords) return true;
  fatal_ = SimResult{VerifyProperty::kShape, w.rank, w.index, static_cast<int>(w.pc),
                     strprintf("plan too large to verify: its pending signals and barriers hold "
                               "more than %llu clock entries (%zu threads each)",
                               static_cast<unsigned long long>(kMaxClockWords), threads_)};
  stop_ = true;
  return false;
}

uint32_t Simulation::streamFor(WorkerState& w, int peer) {
  for (const auto& [p, id] : w.streams) {
    if (p == peer) return id;
  }
  return w.thread;  // not reached: assignThreads made one for every put's peer
}

// A signal or flush to `peer` by worker w completes the puts to that peer that happen before
// it: its own, and those of the rank's other workers that it knows were issued.
void Simulation::completePuts(WorkerState& w, int peer) {
  Clock& clock = clocks_[w.thread];
  for (size_t idx : rankWorkers_[static_cast<size_t>(w.rank)]) {
    const WorkerState& other = workers_[idx];
    for (const auto& [p, id] : other.streams) {
      if (p != peer) continue;
      const auto& h = streams_[id - workers_.size()].history;
      uint32_t known = clock[other.thread];
      // The last put whose issue w knows of (issue clocks grow along the history).
      auto it = std::upper_bound(h.begin(), h.end(), known,
                                 [](uint32_t k, const auto& e) { return k < e.first; });
      if (it != h.begin()) clock[id] = std::max(clock[id], std::prev(it)->second);
    }
  }
}

void Simulation::dataOp(WorkerState& w, const Op& op, uint64_t opId) {
  uint32_t self = w.thread;
  uint32_t stream = self;
  if (isPutLike(op.code)) {
    stream = streamFor(w, op.dst.rank);
    Stream& st = streams_[stream - workers_.size()];
    st.history.push_back({clocks_[self][self], ++st.puts});
  }
  // A put's source is read by the transport after the op (e.g. a NIC), so by the stream.
  uint32_t reader = op.code == OpCode::kPut ? stream : self;
  uint32_t writer = isPutLike(op.code) ? stream : self;
  std::vector<int32_t> srcValues(op.srcs.size());
  for (int64_t i = 0; i < op.dst.count && !stop_; ++i) {
    bool poisoned = false;
    for (size_t s = 0; s < op.srcs.size(); ++s) {
      srcValues[s] = readChunk(reader, w.rank, op.srcs[s], i, w.iter, opId);
      poisoned = poisoned || srcValues[s] < 0;
    }
    if (stop_) return;
    int32_t result = srcValues[0];
    if (srcValues.size() > 1 && !poisoned) {
      bool doubled = false, canonical = true;
      result = values_.combine(srcValues, &doubled, &canonical);
      if (values_.entries() > kMaxValueEntries) {
        fatal_ = SimResult{VerifyProperty::kShape, w.rank, w.index, static_cast<int>(w.pc),
                           strprintf("plan too large to verify: its chunk values hold more than "
                                     "%llu contributions",
                                     static_cast<unsigned long long>(kMaxValueEntries))};
        stop_ = true;
        return;
      }
      if (doubled) {
        recordError(kErrDouble, opId,
                    strprintf("%s combines %s, a contribution counted twice", opText(opId).c_str(),
                              ValueTable::describe(values_.get(result).contrib).c_str()));
      }
      if (!canonical && plan_.canonicalOrder) {
        recordError(kErrOrder, opId,
                    strprintf("%s computes %s out of the canonical order (ranks 0, 1, ... "
                              "appended one at a time), but the plan claims canonicalOrder",
                              opText(opId).c_str(),
                              ValueTable::describe(values_.get(result).contrib).c_str()));
      }
    } else if (poisoned) {
      result = kPoison;
    }
    writeChunk(writer, w.rank, op.dst, i, w.iter, opId, result);
    if (op.hasDst2 && !stop_) writeChunk(self, w.rank, op.dst2, i, w.iter, opId, result);
  }
}

}  // namespace tessera::verifier
