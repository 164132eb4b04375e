// CollectiveEngine (engine.hpp): configuration, the tuner's choices and the plan cache, and the
// calls that need no plan (count 0, one rank).
#include <cstdio>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/host_ops.hpp"
#include "collectives/exec/pending_dump.hpp"
#include "collectives/plan/verifier.hpp"
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

bool inPlace(const CollCall& c, int rank) {
  const char* s = static_cast<const char*>(c.sendbuf);
  const char* r = static_cast<const char*>(c.recvbuf);
  size_t off = c.count * dtypeSize(c.dtype) * static_cast<size_t>(rank);
  switch (c.collective) {
    case Collective::kAllGather: return s == r + off;
    case Collective::kReduceScatter: return r == s + off;
    default: return s == r;
  }
}

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
    scratchBytes_ = options_.scratchBytes;
  } else {
    TSR_CHECK(envInt("TESSERA_SCRATCH_BYTES", &v));
    scratchBytes_ = static_cast<size_t>(v);
  }
  TSR_CHECK(envInt("TESSERA_ZERO_COPY_MIN_BYTES", &v));
  zeroCopyMinBytes_ = static_cast<uint64_t>(v);
  TSR_CHECK(Tuner::fromEnv(&tuner_));
  tunerSnapshot_ = tuner_.params();
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

Result EngineImpl::start(const CollCall& call, std::unique_ptr<Operation>* out) {
  if (poisoned_ != tsrSuccess)
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: the collective engine failed earlier and runs no more calls (%s)",
                    rank_, poisonWhy_.c_str());
  // The call number is taken only once the call is sure to run: a refused call must not move this
  // rank's count ahead of its peers' (handshakes compare the numbers).
  uint64_t callNo = calls_ + 1;
  if (call.collective == Collective::kAllToAll && call.count > 0 && inPlace(call, rank_))
    return TSR_FAIL(tsrInvalidArgument, "rank %d: alltoall cannot run in place (call %llu)", rank_,
                    static_cast<unsigned long long>(callNo));
  if (call.count == 0) {
    calls_ = callNo;
    *out = std::make_unique<DoneOperation>(strprintf("%s count=0 (call %llu)",
                                                     collectiveName(call.collective),
                                                     static_cast<unsigned long long>(callNo)));
    return tsrSuccess;
  }
  if (nranks_ == 1) {
    calls_ = callNo;
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
      calls_ = callNo;
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
    const Plan& p = *call.plan;
    if (p.collective != call.collective || p.nranks != nranks_ ||
        (collectiveHasRoot(call.collective) && p.root != root))
      return TSR_FAIL(tsrInvalidArgument,
                      "rank %d: plan %s is a %s plan for %d ranks (root %d), but the call is %s "
                      "on %d ranks (root %d)",
                      rank_, p.name.c_str(), collectiveName(p.collective), p.nranks, p.root,
                      collectiveName(call.collective), nranks_, root);
    TSR_CHECK(userPlan(call.plan, &plain));
  } else if (!call.algorithm.empty()) {
    TSR_CHECK(overridePlan(call, false, &plain));
    if (large) TSR_CHECK(overridePlan(call, true, &zc));
  } else {
    TSR_CHECK(choose(call.collective, bytes, root, Staging::kScratch, &plain));
    if (large) {
      TSR_CHECK(choose(call.collective, bytes, root, Staging::kZeroCopy, &zc));
      TSR_CHECK(choose(call.collective, bytes, root, Staging::kCross, &cross));
    }
  }
  if (zc == plain || (zc != nullptr && !zc->zeroCopy)) zc = nullptr;
  if (cross != nullptr && !cross->zeroCopy) cross = nullptr;
  bool handshake = large || plain->zeroCopy;
  if (handshake) {
    Result r = ensureControl();
    if (r != tsrSuccess) return poison(r);
  }
  calls_ = callNo;
  return makeCollOperation(this, call, callNo, plain, zc, cross, handshake, out);
}

void EngineImpl::remember(const ChoiceKey& key, BoundPlan* plan) {
  // One entry per distinct byte count: a program whose sizes never repeat (a soak of random
  // sizes) would grow the map without end, so it starts over at kMaxChoices. The plans stay in
  // the plan cache; only the tuner is asked again.
  if (choices_.size() >= kMaxChoices) choices_.clear();
  choices_.emplace(key, plan);
}

Result EngineImpl::choose(Collective c, size_t bytes, int root, Staging staging, BoundPlan** out) {
  if (!classesAgreed_) {
    Result r = agreeTransportClasses();
    if (r != tsrSuccess) return poison(r);  // peers may be past the allGather: out of step
  }
  if (std::memcmp(&tuner_.params(), &tunerSnapshot_, sizeof tunerSnapshot_) != 0) {
    choices_.clear();  // someone retuned: earlier choices may no longer be the cheapest
    lastChoice_ = nullptr;
    tunerSnapshot_ = tuner_.params();
  }
  ChoiceKey key{static_cast<uint8_t>(c), static_cast<uint8_t>(staging), root, bytes};
  if (lastChoice_ != nullptr && key == lastChoiceKey_) {
    *out = lastChoice_;  // a loop of equal calls skips the hash
    return tsrSuccess;
  }
  auto it = choices_.find(key);
  if (it != choices_.end()) {
    *out = lastChoice_ = it->second;
    lastChoiceKey_ = key;
    return tsrSuccess;
  }
  TuneInput in;
  in.collective = c;
  in.bytes = bytes;
  in.nranks = nranks_;
  in.root = root;
  in.hostOf = options_.hostOf;
  if (in.hostOf.empty()) in.hostOf.assign(static_cast<size_t>(nranks_), 0);
  in.intraHost = intraHost_;
  in.interHost = interHost_;
  in.zeroCopyPossible = staging != Staging::kScratch;
  in.crossMemory = staging == Staging::kCross;
  in.deterministic = tuner_.deterministicDefault();
  TuneChoice choice;
  TSR_CHECK(tuner_.choose(in, &choice));
  if (staging == Staging::kCross) {
    // A cross-memory candidate only where its zero-copy form beats staging through the scratch:
    // measured against measured (the tuner decided, choice.measured) or modelled against
    // modelled.
    TuneInput staged = in;
    staged.zeroCopyPossible = staged.crossMemory = false;
    staged.modelOnly = true;
    TuneChoice plain;
    if (!choice.measured) TSR_CHECK(tuner_.choose(staged, &plain));
    if (!choice.zeroCopy || (!choice.measured && choice.predictedUs >= plain.predictedUs)) {
      remember(key, nullptr);
      *out = nullptr;
      return tsrSuccess;
    }
  }
  PlanKey pk{c,
             choice.algorithm,
             root,
             choice.pipeline,
             choice.workers,
             choice.zeroCopy && staging != Staging::kScratch};
  BoundPlan* bp = nullptr;
  TSR_CHECK(planFor(pk, &bp));
  remember(key, bp);
  *out = bp;
  return tsrSuccess;
}

Result EngineImpl::predictUs(const CollCall& call, bool onDevice, double* us) {
  *us = tuner_.params().callOverheadUs;
  if (call.count == 0 || nranks_ == 1) return tsrSuccess;
  TuneInput in;
  in.collective = call.collective;
  in.bytes = callBytes(call, nranks_);
  in.nranks = nranks_;
  in.root = collectiveHasRoot(call.collective) ? call.root : 0;
  in.hostOf = options_.hostOf;
  if (in.hostOf.empty()) in.hostOf.assign(static_cast<size_t>(nranks_), 0);
  in.intraHost = intraHost_;  // the tuner's defaults until the first collective agreed
  in.interHost = interHost_;
  in.deterministic = tuner_.deterministicDefault();
  in.deviceExecutor = onDevice;
  TuneChoice choice;
  TSR_CHECK(tuner_.choose(in, &choice));
  *us = choice.predictedUs;
  return tsrSuccess;
}

Result EngineImpl::predictP2PUs(const P2PCall& call, double* us) {
  const TunerParams& p = tuner_.params();
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

Result EngineImpl::overridePlan(const CollCall& call, bool zeroCopy, BoundPlan** out) {
  *out = nullptr;
  int root = collectiveHasRoot(call.collective) ? call.root : 0;
  for (const OverrideHit& h : overrides_) {
    if (h.collective == call.collective && h.root == root && h.zeroCopy == zeroCopy &&
        h.algorithm == call.algorithm) {
      *out = h.plan;
      return tsrSuccess;
    }
  }
  TSR_CHECK(overrideLookup(call, zeroCopy, out));
  overrides_.push_back({call.algorithm, call.collective, root, zeroCopy, *out});
  return tsrSuccess;
}

Result EngineImpl::overrideLookup(const CollCall& call, bool zeroCopy, BoundPlan** out) {
  const AlgorithmInfo* info = findAlgorithm(call.algorithm);
  if (info == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: unknown algorithm \"%s\"", rank_,
                    call.algorithm.c_str());
  if (zeroCopy && !info->supportsZeroCopy) return tsrSuccess;
  PlanKey pk{call.collective, info->name, collectiveHasRoot(call.collective) ? call.root : 0, 0, 1,
             zeroCopy};
  return planFor(pk, out);
}

Result EngineImpl::planFor(const PlanKey& key, BoundPlan** out) {
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    *out = it->second.get();
    return tsrSuccess;
  }
  auto plan = std::make_shared<Plan>();
  TSR_CHECK(generatePlan(genParams(key), plan.get()));
  return finishPlan(std::move(plan), out, &plans_[key]);
}

GenParams EngineImpl::genParams(const PlanKey& key) const {
  GenParams g;
  g.collective = key.collective;
  g.algorithm = key.algorithm;
  g.nranks = nranks_;
  g.root = key.root;
  g.pipeline = key.pipeline;
  g.workers = key.workers < 1 ? 1 : key.workers;
  g.zeroCopy = key.zeroCopy;
  g.hostOf = options_.hostOf;
  return g;
}

Result EngineImpl::userPlan(const std::shared_ptr<const Plan>& plan, BoundPlan** out) {
  auto it = userPlans_.find(plan.get());
  if (it != userPlans_.end()) {
    *out = it->second.get();
    return tsrSuccess;
  }
  return finishPlan(plan, out, &userPlans_[plan.get()]);
}

Result EngineImpl::finishPlan(std::shared_ptr<const Plan> plan, BoundPlan** out,
                              std::unique_ptr<BoundPlan>* slot) {
  VerifyReport report;
  Result r = verifyPlan(*plan, &report);
  if (r == tsrSuccess) {
    auto bp = std::make_unique<BoundPlan>();
    r = compilePlan(plan, rank_, bp.get());
    // Binding talks to peers: a failure half-way leaves them out of step for good.
    if (r == tsrSuccess && (r = bindPlan(bp.get())) != tsrSuccess) poison(r);
    if (r == tsrSuccess) {
      *slot = std::move(bp);
      *out = slot->get();
      return tsrSuccess;
    }
  } else {
    r = addContext(r, "rank %d refuses plan %s", rank_, plan->name.c_str());
  }
  // Leave no empty entry behind (the map slot was made by operator[]).
  for (auto it = plans_.begin(); it != plans_.end(); ++it)
    if (&it->second == slot) {
      plans_.erase(it);
      break;
    }
  for (auto it = userPlans_.begin(); it != userPlans_.end(); ++it)
    if (&it->second == slot) {
      userPlans_.erase(it);
      break;
    }
  return r;
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
