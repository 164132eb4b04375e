// The host executor (DESIGN.md, "Executors"): the operation that runs one collective call. The
// calling thread runs the rank's workers round-robin; a worker that would block on a wait or a
// barrier yields to the next, and progress() returns after a pass in which nothing moved. Large
// calls first run the zero-copy handshake (zero_copy.cpp) to pick between the plain and the
// zero-copy plan; then the plan runs once per slice of the message (plan.hpp, "Slices").
#include <algorithm>
#include <cstring>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_backend.hpp"
#include "collectives/exec/recycled.hpp"
#include "collectives/exec/reduce_kernels.hpp"
#include "core/datatype.hpp"
#include "core/park.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

class CollOperation final : public ExecOperation, public Recycled<CollOperation> {
 public:
  using Recycled<CollOperation>::operator new;
  using Recycled<CollOperation>::operator delete;

  CollOperation(EngineImpl* e, const CollCall& call, uint64_t callNo, BoundPlan* plain,
                BoundPlan* zeroCopy, BoundPlan* cross, bool handshake)
      : e_(e),
        coll_(call.collective),
        input_(static_cast<const char*>(call.sendbuf)),
        output_(static_cast<char*>(call.recvbuf)),
        count_(call.count),
        root_(call.root),
        callNo_(callNo),
        plain_(plain),
        zeroCopy_(zeroCopy),
        cross_(cross),
        phase_(handshake ? kHandshake : kRun) {
    run_.engine = e;
    run_.input = input_;
    run_.output = output_;
    run_.count = count_;
    run_.elemSize = dtypeSize(call.dtype);
    run_.dtype = call.dtype;
    run_.op = call.op;
    run_.preOp = collectiveReduces(coll_) && call.op.kind == RedKind::kPreMulSum;
    seq_ = e->takeTurn();
    if (!handshake) choosePlan(plain_);
  }

  ~CollOperation() override {
    if (phase_ != kDone && phase_ != kFailed) e_->abandoned(describe());
  }

  Result progress(bool* done) override {
    *done = phase_ == kDone;
    moved_ = false;
    if (phase_ == kDone) return tsrSuccess;
    if (phase_ == kFailed) return failed_;
    if (!e_->myTurn(seq_)) {
      // The operation ahead has its own deadline; this one's starts with its turn.
      EngineImpl::busy(&idle_);
      return tsrSuccess;
    }
    Result r = step(done);
    if (r != tsrSuccess) {
      phase_ = kFailed;
      failed_ = r;
      if (e_->myTurn(seq_)) e_->endTurn();
      return e_->poison(r);
    }
    if (moved_) {
      EngineImpl::busy(&idle_);
      return tsrSuccess;
    }
    r = e_->idle(&idle_, *this);
    if (r != tsrSuccess) {
      phase_ = kFailed;
      failed_ = r;
      return e_->poison(r);
    }
    return tsrSuccess;
  }

  std::string describe() const override {
    std::string what = strprintf("%s count=%zu %s", label().c_str(), count_, dtypeName(run_.dtype));
    if (collectiveReduces(coll_)) what += strprintf(" %s", redKindName(run_.op.kind));
    if (collectiveHasRoot(coll_)) what += strprintf(" root=%d", root_);
    if (run_.plan != nullptr && run_.plan->zeroCopy)
      what += reach_ == Reach::kCross     ? " by cross-memory attach"
              : reach_ == Reach::kAddress ? " on the peers' own addresses"
                                          : " on registered buffers";
    return what + strprintf(" (call %llu)", static_cast<unsigned long long>(callNo_));
  }

  // The peers whose signal a worker (or the handshake) waits for.
  Result checkPeers() const override {
    if (phase_ == kHandshake) {
      const auto& links = e_->control().links;
      for (size_t p = 0; p < links.size(); ++p)
        if (links[p].connection && (have_.empty() || !have_[p]))
          TSR_CHECK(links[p].connection->peerStatus());
      return tsrSuccess;
    }
    if (run_.plan == nullptr) return tsrSuccess;
    const BoundPlan& bp = *run_.plan;
    for (int w = 0; w < bp.workers(); ++w) {
      uint32_t pc = bp.pc[static_cast<size_t>(w)];
      if (pc >= bp.workerBegin[static_cast<size_t>(w) + 1] || bp.ops[pc].code != exec::kExecWait)
        continue;
      const SemLink& s = bp.sems[static_cast<size_t>(bp.ops[pc].sem)];
      TSR_CHECK(bp.peers[static_cast<size_t>(s.peerSlot)].connection->peerStatus());
    }
    return tsrSuccess;
  }

  bool parkWords(ParkSet* set) const override {
    if (phase_ == kDone || phase_ == kFailed || !e_->myTurn(seq_)) return true;
    if (phase_ == kHandshake) {
      const auto& links = e_->control().links;
      for (size_t p = 0; p < links.size(); ++p)
        if (links[p].semaphore && (have_.empty() || !have_[p]) &&
            !links[p].semaphore->addParkWord(set))
          return false;
      return true;
    }
    if (run_.plan == nullptr) return false;
    const BoundPlan& bp = *run_.plan;
    for (int w = 0; w < bp.workers(); ++w) {
      uint32_t pc = bp.pc[static_cast<size_t>(w)];
      if (pc >= bp.workerBegin[static_cast<size_t>(w) + 1]) continue;
      const exec::ExecOp& op = bp.ops[pc];
      if (op.code == exec::kExecBarrier) continue;  // its siblings' waits move it
      if (op.code != exec::kExecWait) return false;
      const SemLink& s = bp.sems[static_cast<size_t>(op.sem)];
      if (s.credits > 0 || !s.semaphore->addParkWord(set)) return false;
    }
    return true;
  }

  const std::vector<int>* dumpPeers() const override { return e_->peerPids(); }
  std::string blocked() const override {
    std::string head = strprintf("%s (call %llu): rank %d ", label().c_str(),
                                 static_cast<unsigned long long>(callNo_), e_->rank());
    if (!e_->myTurn(seq_))
      return head + strprintf("waits for its earlier operation %llu to finish",
                              static_cast<unsigned long long>(e_->running()));
    if (phase_ == kHandshake) {
      std::string who;
      for (int p = 0; p < e_->nranks(); ++p)
        if (p != e_->rank() && (have_.empty() || !have_[static_cast<size_t>(p)]))
          who += strprintf("%s%d", who.empty() ? "" : ", ", p);
      return head + "waits for the zero-copy handshake of rank(s) " + who;
    }
    const BoundPlan& bp = *run_.plan;
    for (int w = 0; w < bp.workers(); ++w) {
      uint32_t pc = bp.pc[static_cast<size_t>(w)];
      if (pc >= bp.workerBegin[static_cast<size_t>(w) + 1]) continue;
      const exec::ExecOp& op = bp.ops[pc];
      std::string where = head + strprintf("worker %d op %d ", w, bp.planOpIndex[pc]);
      if (op.code == exec::kExecWait) {
        const SemLink& s = bp.sems[static_cast<size_t>(op.sem)];
        return where + strprintf("waits for signal %llu of rank %d channel %d (received %llu)",
                                 static_cast<unsigned long long>(s.semaphore->consumed() + 1),
                                 bp.peers[static_cast<size_t>(s.peerSlot)].peer, s.channel,
                                 static_cast<unsigned long long>(s.semaphore->received()));
      }
      if (op.code == exec::kExecBarrier)
        return where + strprintf("waits at its barrier %u for the other workers",
                                 bp.barriers[static_cast<size_t>(w)]);
      return where + "is pending";
    }
    return head + "has no pending worker";
  }

 private:
  enum Phase { kHandshake, kRun, kDone, kFailed };

  std::string label() const {
    const BoundPlan* bp = run_.plan != nullptr ? run_.plan : plain_;
    return bp != nullptr ? bp->label : collectiveName(coll_);
  }

  void choosePlan(BoundPlan* bp) {
    run_.plan = bp;
    BoundPlan& p = *bp;
    run_.slice =
        exec::sliceElements(e_->scratchBytes(), p.scratchChunks, p.cps, run_.elemSize, count_);
    iters_ = exec::sliceIterations(count_, run_.slice);
  }

  Result step(bool* done) {
    if (phase_ == kHandshake) {
      bool ready = false;
      TSR_CHECK(handshake(&ready));
      if (!ready) return tsrSuccess;
      markMoved();
      phase_ = kRun;
    }
    if (!begun_) {
      if (run_.slice == 0)
        return TSR_FAIL(tsrInvalidUsage,
                        "%s: a scratch of %zu bytes cannot hold one slice of the plan (%d "
                        "scratch chunks of at least 64 bytes); raise TESSERA_SCRATCH_BYTES",
                        describe().c_str(), e_->scratchBytes(), run_.plan->scratchChunks);
      begun_ = true;
      beginIteration();
    }
    BoundPlan& bp = *run_.plan;
    HostBackend b(run_);
    const bool profiling = e_->profiling();
    if (profiling && startNs_ == 0) startNs_ = device::clockNs();
    for (;;) {
      bool any = false, all = true;
      for (int w = 0; w < bp.workers(); ++w) {
        uint32_t pc = bp.pc[static_cast<size_t>(w)];
        uint32_t end = bp.workerBegin[static_cast<size_t>(w) + 1];
        while (pc < end) {
          uint64_t t0 = profiling ? device::clockNs() : 0;
          exec::StepResult r = exec::runOp(b, w, bp.ops[pc], bp.refs.data(), run_.layout);
          if (profiling) {
            ExecProfile& pr = e_->profile();
            pr.opNs[bp.ops[pc].code] += device::clockNs() - t0;
            if (r != exec::StepResult::kBlocked) ++pr.opCount[bp.ops[pc].code];
          }
          if (r == exec::StepResult::kBlocked) break;
          if (r == exec::StepResult::kError)
            return run_.error != tsrSuccess
                       ? run_.error
                       : TSR_FAIL(tsrInternalError, "%s: op failed", describe().c_str());
          ++pc;
          any = true;
        }
        bp.pc[static_cast<size_t>(w)] = pc;
        all = all && pc == end;
      }
      if (all) {
        TSR_CHECK(finishIteration());
        any = true;
        if (++iter_ == iters_) {
          if (!e_->bounce().dirty.empty()) TSR_CHECK(e_->flushDirty());
          if (profiling) {
            ExecProfile& pr = e_->profile();
            ++pr.calls;
            pr.callNs += device::clockNs() - startNs_;
            pr.dataBytes += run_.written;
          }
          markMoved();
          phase_ = kDone;
          e_->endTurn();
          *done = true;
          return tsrSuccess;
        }
        beginIteration();
      }
      if (!any) return tsrSuccess;
      markMoved();
    }
  }

  void beginIteration() {
    BoundPlan& bp = *run_.plan;
    run_.iterOffset = iter_ * run_.slice;
    run_.layout = exec::iterationLayout(count_, run_.slice, iter_, bp.cps);
    for (int w = 0; w < bp.workers(); ++w) {
      bp.pc[static_cast<size_t>(w)] = bp.workerBegin[static_cast<size_t>(w)];
      bp.barriers[static_cast<size_t>(w)] = 0;
      bp.atBarrier[static_cast<size_t>(w)] = 0;
    }
  }

  Result finishIteration() {
    if (!collectiveReduces(coll_) || run_.op.kind != RedKind::kAvg) return tsrSuccess;
    if (coll_ == Collective::kReduce && e_->rank() != root_) return tsrSuccess;
    return hostPostOp(run_.op, run_.dtype, output_ + run_.iterOffset * run_.elemSize,
                      run_.layout.unit, e_->nranks());
  }

  // How a zero-copy plan reaches the peers' buffers: mapped registrations, the peers' own
  // addresses (threads of one process), or cross-memory attach through the connection.
  enum class Reach { kMapped, kAddress, kCross };

  // Publishes this rank's record, collects everyone's, checks that the calls match and picks
  // the plan (see the rule below).
  Result handshake(bool* ready) {
    int n = e_->nranks();
    if (have_.empty()) {
      records_.assign(static_cast<size_t>(n), HandshakeRecord{});
      have_.assign(static_cast<size_t>(n), 0);
      CollCall call;
      call.collective = coll_;
      call.sendbuf = input_;
      call.recvbuf = output_;
      call.count = count_;
      call.dtype = run_.dtype;
      call.op = run_.op;
      call.root = root_;
      HandshakeRecord& mine = records_[static_cast<size_t>(e_->rank())];
      TSR_CHECK(e_->makeRecord(call, callNo_, &mine));
      have_[static_cast<size_t>(e_->rank())] = 1;
      TSR_CHECK(e_->publishRecord(mine));
      markMoved();
    }
    TSR_CHECK(e_->pollRecords(&records_, &have_, ready));
    if (!*ready) return tsrSuccess;
    const HandshakeRecord& mine = records_[static_cast<size_t>(e_->rank())];
    bool registered = true, sameSpace = true, cross = true;
    for (int p = 0; p < n; ++p) {
      const HandshakeRecord& r = records_[static_cast<size_t>(p)];
      TSR_CHECK(e_->compareRecords(mine, p, r));
      registered = registered && (r.flags & kHandshakeInOk) && (r.flags & kHandshakeOutOk) &&
                   (r.flags & kHandshakeMapsAll);
      sameSpace = sameSpace && (r.flags & kHandshakeSameSpaceAll);
      cross = cross && (r.flags & kHandshakeCrossAll);
    }
    // Every rank decides alike from the same records (and the same tuner): registered buffers
    // over mapping transports, or threads of one process, reach each other's buffers directly;
    // else cross-memory attach, where the tuner found it cheaper than staging for this call;
    // else the scratch.
    BoundPlan* pick = plain_;
    Reach reach = Reach::kMapped;
    if (zeroCopy_ != nullptr && registered) {
      pick = zeroCopy_;
    } else if (zeroCopy_ != nullptr && sameSpace) {
      pick = zeroCopy_;
      reach = Reach::kAddress;
    } else if (cross_ != nullptr && cross) {
      pick = cross_;
      reach = Reach::kCross;
    }
    if (pick == plain_ && pick->zeroCopy) {  // a zero-copy plan given by the caller
      if (registered)
        reach = Reach::kMapped;
      else if (sameSpace)
        reach = Reach::kAddress;
      else if (cross)
        reach = Reach::kCross;
      else
        return TSR_FAIL(tsrInvalidUsage,
                        "%s: the plan %s reaches peers' buffers, but not every rank's buffers are "
                        "registered (tsrCommRegister) and mapped by every peer, nor can every "
                        "rank attach to its peers' memory (cross-memory attach)",
                        describe().c_str(), pick->plan->name.c_str());
    }
    choosePlan(pick);
    reach_ = reach;
    if (pick->zeroCopy) {
      // Only now, and only what the plan reaches: every other peer buffer may already be gone.
      peerUser_.assign(pick->peers.size(), PeerUser{});
      for (size_t s = 0; s < pick->peers.size(); ++s) {
        const PeerLink& link = pick->peers[s];
        const HandshakeRecord& r = records_[static_cast<size_t>(link.peer)];
        PeerUser& u = peerUser_[s];
        if (reach == Reach::kAddress) {
          if (link.userInput) u.input = reinterpret_cast<char*>(static_cast<uintptr_t>(r.inAddr));
          if (link.userOutput)
            u.output = reinterpret_cast<char*>(static_cast<uintptr_t>(r.outAddr));
          continue;
        }
        if (reach == Reach::kCross) {
          u.inputAddr = link.userInput ? r.inAddr : 0;
          u.outputAddr = link.userOutput ? r.outAddr : 0;
          u.cross = link.connection.get();
          continue;
        }
        std::shared_ptr<RemoteMemory> in, out;
        if (link.userInput && r.inId != 0) TSR_CHECK(e_->importUser(link.peer, r.inId, &in));
        if (link.userOutput && r.outId != 0) TSR_CHECK(e_->importUser(link.peer, r.outId, &out));
        if (in) u.input = static_cast<char*>(in->mapped()) + r.inOffset;
        if (out) u.output = static_cast<char*>(out->mapped()) + r.outOffset;
      }
      run_.peerUser = peerUser_.data();
      run_.cross = reach == Reach::kCross;
      if (run_.cross) TSR_CHECK(e_->ensureBounce());
    }
    return tsrSuccess;
  }

  EngineImpl* e_;
  Collective coll_;
  const char* input_;
  char* output_;
  size_t count_;
  int root_;
  uint64_t callNo_;
  uint64_t seq_ = 0;
  BoundPlan* plain_;
  BoundPlan* zeroCopy_;
  BoundPlan* cross_;
  Phase phase_;
  Reach reach_ = Reach::kMapped;
  bool begun_ = false;
  uint64_t iter_ = 0;
  uint64_t iters_ = 0;
  uint64_t startNs_ = 0;  // profiling: the first step of the call
  HostRun run_;
  IdleState idle_;
  Result failed_ = tsrSuccess;
  std::vector<HandshakeRecord> records_;
  std::vector<uint8_t> have_;
  std::vector<PeerUser> peerUser_;
};

}  // namespace

void HostBackend::tinyReduce(const void** srcs, int nsrcs, const uint8_t* pre, void* dst,
                             void* dst2, uint64_t n) const {
  dtypeVisit(r_.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* typed[kTinySrcs];
    for (int s = 0; s < nsrcs; ++s) typed[s] = static_cast<const T*>(srcs[s]);
    ElemReduceArgs<T> a;
    a.srcs = typed;
    a.nsrcs = nsrcs;
    a.preOp = pre;
    a.scalar = pre != nullptr ? preMulScalar<T>(r_.op) : RedCompute<T>{};
    a.dst = static_cast<T*>(dst);
    a.dst2 = static_cast<T*>(dst2);
    redStepVisit(r_.op.kind, [&](auto step) { reduceRange<decltype(step)>(a, 0, n, 1); });
  });
}

Result HostBackend::nullBuffer() const {
  return TSR_FAIL(tsrInvalidArgument,
                  "rank %d: %s reads or writes a buffer that was passed as NULL", r_.engine->rank(),
                  bp_.label.c_str());
}

Result HostBackend::unreachable(const exec::ExecRef& ref) const {
  return TSR_FAIL(tsrInvalidUsage,
                  "rank %d: %s reaches the %s of rank %d, which is not mapped here; only scratch "
                  "is reachable through a transport that does not map memory",
                  r_.engine->rank(), bp_.label.c_str(),
                  bufferName(static_cast<BufferKind>(ref.buffer)),
                  bp_.peers[static_cast<size_t>(ref.peer)].peer);
}

Result makeCollOperation(EngineImpl* engine, const CollCall& call, uint64_t callNo,
                         BoundPlan* plain, BoundPlan* zeroCopy, BoundPlan* cross, bool handshake,
                         std::unique_ptr<Operation>* out) {
  *out = std::make_unique<CollOperation>(engine, call, callNo, plain, zeroCopy, cross, handshake);
  return tsrSuccess;
}

}  // namespace tessera
