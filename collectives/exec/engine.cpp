// CollectiveEngine (engine.hpp): configuration, the tuner's choices and the plan cache, and the
// calls that need no plan (count 0, one rank).
#include <cstdio>
#include <cstring>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_ops.hpp"
#include "collectives/exec/pending_dump.hpp"
#include "core/datatype.hpp"
#include "core/env.hpp"
#include "core/park.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Nothing to do (count 0): done at once, touching nothing, on every rank alike.
class DoneOperation final : public ExecOperation {
 public:
  explicit DoneOperation(std::string what) : what_(std::move(what)) {}
  Result progress(bool* done) override {
    *done = true;
    return tsrSuccess;
  }
  std::string describe() const override { return what_; }
  std::string blocked() const override { return what_ + " is done"; }
  Result checkPeers() const override { return tsrSuccess; }

 private:
  std::string what_;
};

// One rank: the result is the input (after the pre-op), so a copy, in its turn.
class LocalOperation final : public ExecOperation {
 public:
  LocalOperation(EngineImpl* e, const CollCall& call, uint64_t callNo)
      : e_(e), call_(call), callNo_(callNo), seq_(e->takeTurn()) {}
  ~LocalOperation() override {
    if (!done_) e_->abandoned(describe());
  }
  Result progress(bool* done) override {
    moved_ = false;
    *done = done_;
    if (done_ || !e_->myTurn(seq_)) return tsrSuccess;
    size_t bytes = call_.count * dtypeSize(call_.dtype);
    if (collectiveReduces(call_.collective) && call_.op.kind == RedKind::kPreMulSum) {
      const void* src = call_.sendbuf;
      uint8_t pre = 1;
      HostReduceArgs a{call_.op, call_.dtype, &src, 1, &pre, call_.recvbuf, nullptr, call_.count};
      Result r = hostReduce(a);
      if (r != tsrSuccess) return e_->poison(r);
    } else {
      hostCopyBytes(call_.recvbuf, nullptr, call_.sendbuf, bytes);
    }
    done_ = true;
    markMoved();
    e_->endTurn();
    *done = true;
    return tsrSuccess;
  }
  std::string describe() const override {
    return strprintf("%s count=%zu %s on one rank (call %llu)", collectiveName(call_.collective),
                     call_.count, dtypeName(call_.dtype), static_cast<unsigned long long>(callNo_));
  }
  std::string blocked() const override { return describe() + " waits for its turn"; }
  Result checkPeers() const override { return tsrSuccess; }

 private:
  EngineImpl* e_;
  CollCall call_;
  uint64_t callNo_;
  uint64_t seq_;
  bool done_ = false;
};

}  // namespace

size_t callBytes(const CollCall& call, int nranks) {
  size_t bytes = call.count * dtypeSize(call.dtype);
  switch (call.collective) {
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return bytes * static_cast<size_t>(nranks);
    default: return bytes;
  }
}

Result CollectiveEngine::create(const EngineOptions& options,
                                std::unique_ptr<CollectiveEngine>* out) {
  auto e = std::make_unique<EngineImpl>(options);
  TSR_CHECK(e->init());
  *out = std::move(e);
  return tsrSuccess;
}

EngineImpl::EngineImpl(const EngineOptions& options) : options_(options) {}
EngineImpl::~EngineImpl() {
  // Best effort: puts and signals still in flight to peers complete before memory goes away.
  if (poisoned_ == tsrSuccess) (void)flushDirty();
  if (profiling_ && profile_.calls > 0)
    std::fprintf(stderr, "%s\n", profile_.summary(rank_).c_str());
}

Result EngineImpl::init() {
  ctx_ = options_.transports;
  if (ctx_ == nullptr) return TSR_FAIL(tsrInvalidArgument, "CollectiveEngine needs transports");
  rank_ = options_.rank;
  nranks_ = options_.nranks;
  if (nranks_ != ctx_->nranks() || rank_ != ctx_->rank())
    return TSR_FAIL(tsrInvalidArgument,
                    "CollectiveEngine: rank %d of %d does not match its transports (rank %d of %d)",
                    rank_, nranks_, ctx_->rank(), ctx_->nranks());
  if (!options_.hostOf.empty() && options_.hostOf.size() != static_cast<size_t>(nranks_))
    return TSR_FAIL(tsrInvalidArgument, "CollectiveEngine: hostOf has %zu entries for %d ranks",
                    options_.hostOf.size(), nranks_);
  timeoutSeconds_ = options_.timeoutSeconds > 0 ? options_.timeoutSeconds : 300;
  int64_t v = 0;
  if (options_.scratchBytes > 0) {
    scratchBytes_ = deviceScratchBytes_ = options_.scratchBytes;
  } else {
    TSR_CHECK(envInt("TESSERA_SCRATCH_BYTES", &v));
    scratchBytes_ = static_cast<size_t>(v);
    // A GPU's staged plans want large slices (a step's signal costs microseconds): its default
    // is its own (kDeviceScratchBytes); a value the user set applies to both executors.
    const bool gpu = !options_.deviceEmulation && options_.cudaDevice >= 0;
    deviceScratchBytes_ =
        gpu && envRaw("TESSERA_SCRATCH_BYTES") == nullptr ? kDeviceScratchBytes : scratchBytes_;
  }
  TSR_CHECK(envInt("TESSERA_ZERO_COPY_MIN_BYTES", &v));
  zeroCopyMinBytes_ = static_cast<uint64_t>(v);
  TSR_CHECK(planner_.init(rank_, nranks_, options_.hostOf));
  profiling_ = execProfiling();
  profile_.parksAtStart = threadWaitStats().parks;
  profile_.parkedNsAtStart = threadWaitStats().parkedNs;
  connections_.resize(static_cast<size_t>(nranks_));
  p2p_.resize(static_cast<size_t>(nranks_));
  if (dumpOnTimeout()) installDumpSignal();
  // The tuner's transports (intraHost_, interHost_) are agreed on at the first tuned call: the
  // engine is made on a rank's first call, which may be a send/recv that other ranks never make.
  return tsrSuccess;
}

Result EngineImpl::poison(Result code) {
  if (poisoned_ == tsrSuccess && code != tsrSuccess) {
    poisoned_ = code;
    poisonWhy_ = lastErrorMessage();
  }
  return code;
}

void EngineImpl::abandoned(const std::string& what) {
  std::string why = what + " was destroyed before it completed";
  TSR_WARN("rank %d: %s", rank_, why.c_str());
  if (poisoned_ == tsrSuccess) {
    poisoned_ = tsrInvalidUsage;
    poisonWhy_ = std::move(why);
  }
}

Result EngineImpl::alive() const {
  if (poisoned_ != tsrSuccess)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: the collective engine failed earlier and runs no more calls (%s)",
                    rank_, poisonWhy_.c_str());
  return tsrSuccess;
}

Result EngineImpl::admit(const CollCall& call, uint64_t* callNo) {
  TSR_CHECK(alive());
  *callNo = planner_.next();
  return planner_.admit(call, *callNo);
}

Result EngineImpl::start(const CollCall& call, std::unique_ptr<Operation>* out) {
  uint64_t callNo = 0;
  TSR_CHECK(admit(call, &callNo));
  if (call.count == 0) {
    planner_.take(callNo);
    *out = std::make_unique<DoneOperation>(strprintf("%s count=0 (call %llu)",
                                                     collectiveName(call.collective),
                                                     static_cast<unsigned long long>(callNo)));
    return tsrSuccess;
  }
  if (nranks_ == 1) {
    planner_.take(callNo);
    *out = std::make_unique<LocalOperation>(this, call, callNo);
    return tsrSuccess;
  }
  if (!call.plan && call.algorithm.empty()) {
    if (!classesAgreed_) {
      Result r = agreeTransportClasses();
      if (r != tsrSuccess) return poison(r);  // peers may be past the allGather: out of step
    }
    if (hostLLFits(call)) {
      Result r = ensureHostLL();
      if (r != tsrSuccess) return poison(r);
      planner_.take(callNo);
      return makeHostLLOperation(this, call, callNo, out);
    }
  }
  int root = collectiveHasRoot(call.collective) ? call.root : 0;
  size_t bytes = callBytes(call, nranks_);
  bool large = bytes >= zeroCopyMinBytes_;
  BoundPlan* plain = nullptr;
  BoundPlan* zc = nullptr;
  BoundPlan* cross = nullptr;
  if (call.plan) {
    TSR_CHECK(planner_.givenPlan(call));
    TSR_CHECK(bound(call.plan, &plain));
  } else if (!call.algorithm.empty()) {
    std::shared_ptr<const Plan> p;
    TSR_CHECK(planner_.namedPlan(call, false, &p));
    TSR_CHECK(bound(p, &plain));
    if (large) {
      TSR_CHECK(planner_.namedPlan(call, true, &p));
      if (p) TSR_CHECK(bound(p, &zc));
    }
  } else {
    TSR_CHECK(hostChoice(call.collective, bytes, root, Staging::kScratch, &plain));
    if (large) {
      TSR_CHECK(hostChoice(call.collective, bytes, root, Staging::kZeroCopy, &zc));
      TSR_CHECK(hostChoice(call.collective, bytes, root, Staging::kCross, &cross));
    }
  }
  if (zc == plain || (zc != nullptr && !zc->zeroCopy)) zc = nullptr;
  if (cross != nullptr && !cross->zeroCopy) cross = nullptr;
  bool handshake = large || plain->zeroCopy;
  if (handshake) {
    Result r = ensureControl();
    if (r != tsrSuccess) return poison(r);
  }
  planner_.take(callNo);
  return makeCollOperation(this, call, callNo, plain, zc, cross, handshake, out);
}

Result EngineImpl::hostChoice(Collective c, size_t bytes, int root, Staging staging,
                              BoundPlan** out) {
  if (!classesAgreed_) {
    Result r = agreeTransportClasses();
    if (r != tsrSuccess) return poison(r);  // peers may be past the allGather: out of step
  }
  PlanChoice* choice = nullptr;
  TSR_CHECK(planner_.choose(ExecKind::kHost, c, bytes, root, staging, {intraHost_, interHost_}, 0,
                            &choice));
  if (choice->bound == nullptr && choice->plan) TSR_CHECK(bound(choice->plan, &choice->bound));
  *out = choice->bound;
  return tsrSuccess;
}

Result EngineImpl::bound(const std::shared_ptr<const Plan>& plan, BoundPlan** out) {
  auto it = bound_.find(plan.get());
  if (it != bound_.end()) {
    *out = it->second.get();
    return tsrSuccess;
  }
  auto bp = std::make_unique<BoundPlan>();
  TSR_CHECK(compilePlan(plan, rank_, bp.get()));
  // Binding talks to peers: a failure half-way leaves them out of step for good.
  Result r = bindPlan(bp.get());
  if (r != tsrSuccess) return poison(r);
  *out = bp.get();
  bound_.emplace(plan.get(), std::move(bp));
  return tsrSuccess;
}

Result EngineImpl::predictUs(const CollCall& call, bool onDevice, double* us) {
  *us = planner_.tuner().params().callOverheadUs;
  if (call.count == 0 || nranks_ == 1) return tsrSuccess;
  // The tuner's defaults stand in for the transports until the first collective agreed.
  TuneInput in = planner_.tuneInput(
      call.collective, callBytes(call, nranks_), collectiveHasRoot(call.collective) ? call.root : 0,
      {intraHost_, interHost_}, onDevice ? ExecKind::kDevice : ExecKind::kHost);
  TuneChoice choice;
  TSR_CHECK(planner_.tuner().choose(in, &choice));
  *us = choice.predictedUs;
  return tsrSuccess;
}

Result EngineImpl::predictP2PUs(const P2PCall& call, double* us) {
  const TunerParams& p = planner_.tuner().params();
  *us = p.callOverheadUs;
  if (call.count == 0) return tsrSuccess;
  if (call.peer < 0 || call.peer >= nranks_)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: peer %d is outside [0, %d)", rank_, call.peer,
                    nranks_);
  TransportKind kind = TransportKind::kInproc;
  if (call.peer != rank_) {
    const std::vector<int>& hostOf = options_.hostOf;
    bool sameHost = hostOf.empty() ||
                    hostOf[static_cast<size_t>(call.peer)] == hostOf[static_cast<size_t>(rank_)];
    kind = sameHost ? intraHost_ : interHost_;
  }
  const LinkModel& link = p.links[static_cast<size_t>(kind)];
  double bytes = static_cast<double>(call.count * dtypeSize(call.dtype));
  *us += link.alphaUs + bytes / (link.betaGBs * 1e3);  // GB/s is 1e3 bytes per microsecond
  return tsrSuccess;
}

Result EngineImpl::idle(IdleState* st, const ExecOperation& op) {
  for (const auto& c : unmapped_) c->progress();
  if ((++st->polls & 15) != 0) return tsrSuccess;
  auto now = Clock::now();
  if (!st->idle) {
    st->idle = true;
    st->since = now;
    st->lastPeerCheck = now;
    return tsrSuccess;
  }
  const ContextState& cs = *ctx_->state();
  if (cs.aborted.load(std::memory_order_acquire))
    return TSR_FAIL(tsrRemoteError, "%s: the communicator was aborted", op.blocked().c_str());
  if (now - st->lastPeerCheck >= std::chrono::milliseconds(1)) {
    st->lastPeerCheck = now;
    Result r = op.checkPeers();
    if (r != tsrSuccess) return addContext(r, "%s", op.blocked().c_str());
  }
  if (now - st->since > std::chrono::duration<double>(timeoutSeconds_))
    return TSR_FAIL(tsrTimeout, "%s; gave up after %.3g s", op.blocked().c_str(), timeoutSeconds_);
  return tsrSuccess;
}

}  // namespace tessera
