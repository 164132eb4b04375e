// Planner (planner.hpp): checks, call numbers, the tuner's choices and the verified plans of one
// engine, for host and device calls alike.
#include "collectives/exec/planner.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/datatype.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;
}  // namespace

bool callInPlace(const CollCall& c, int rank) {
  const char* s = static_cast<const char*>(c.sendbuf);
  const char* r = static_cast<const char*>(c.recvbuf);
  size_t off = c.count * dtypeSize(c.dtype) * static_cast<size_t>(rank);
  switch (c.collective) {
    case Collective::kAllGather: return s == r + off;
    case Collective::kReduceScatter: return r == s + off;
    default: return s == r;
  }
}

Result pairCallsToSelf(int rank, int nranks, const std::vector<P2PCall>& calls,
                       std::vector<const P2PCall*>* sends, std::vector<const P2PCall*>* recvs) {
  std::vector<const P2PCall*> toSelf, fromSelf;
  for (const P2PCall& c : calls) {
    if (c.peer < 0 || c.peer >= nranks)
      return TSR_FAIL(tsrInvalidArgument, "rank %d: %s peer %d is not a rank of %d", rank,
                      c.isSend ? "send to" : "receive from", c.peer, nranks);
    if (c.peer == rank) (c.isSend ? toSelf : fromSelf).push_back(&c);
  }
  if (toSelf.size() != fromSelf.size())
    return TSR_FAIL(tsrInvalidUsage,
                    "rank %d: a group has %zu sends to self and %zu receives from self; each send "
                    "to self needs its receive in the same group",
                    rank, toSelf.size(), fromSelf.size());
  for (size_t i = 0; i < toSelf.size(); ++i) {
    const size_t sb = toSelf[i]->count * dtypeSize(toSelf[i]->dtype);
    const size_t rb = fromSelf[i]->count * dtypeSize(fromSelf[i]->dtype);
    if (sb != rb)
      return TSR_FAIL(tsrInvalidUsage,
                      "rank %d: send to self #%zu has %zu bytes but its receive has %zu", rank, i,
                      sb, rb);
  }
  if (sends != nullptr) *sends = std::move(toSelf);
  if (recvs != nullptr) *recvs = std::move(fromSelf);
  return tsrSuccess;
}

Result Planner::init(int rank, int nranks, std::vector<int> hostOf) {
  rank_ = rank;
  nranks_ = nranks;
  hostOf_ = std::move(hostOf);
  if (hostOf_.empty()) hostOf_.assign(static_cast<size_t>(nranks_), 0);
  TSR_CHECK(Tuner::fromEnv(&tuner_));
  snapshot_ = tuner_.params();
  return tsrSuccess;
}

Result Planner::admit(const CollCall& call, uint64_t callNo) const {
  if (call.collective == Collective::kAllToAll && call.count > 0 && callInPlace(call, rank_))
    return TSR_FAIL(tsrInvalidArgument, "rank %d: alltoall cannot run in place (call %llu)", rank_,
                    static_cast<unsigned long long>(callNo));
  return tsrSuccess;
}

Result Planner::admitP2P(const std::vector<P2PCall>& calls) const {
  return pairCallsToSelf(rank_, nranks_, calls, nullptr, nullptr);
}

Result Planner::givenPlan(const CollCall& call) {
  const Plan& p = *call.plan;
  int root = collectiveHasRoot(call.collective) ? call.root : 0;
  if (p.collective != call.collective || p.nranks != nranks_ ||
      (collectiveHasRoot(call.collective) && p.root != root))
    return TSR_FAIL(
        tsrInvalidArgument,
        "rank %d: plan %s is a %s plan for %d ranks (root %d), but the call is %s on %d "
        "ranks (root %d)",
        rank_, p.name.c_str(), collectiveName(p.collective), p.nranks, p.root,
        collectiveName(call.collective), nranks_, root);
  if (given_.count(&p) != 0) return tsrSuccess;
  VerifyReport report;
  Result r = verifyPlan(p, &report);
  if (r != tsrSuccess) return addContext(r, "rank %d refuses plan %s", rank_, p.name.c_str());
  given_.emplace(&p, call.plan);
  return tsrSuccess;
}

Result Planner::namedPlan(const CollCall& call, bool zeroCopy, std::shared_ptr<const Plan>* out) {
  out->reset();
  int root = collectiveHasRoot(call.collective) ? call.root : 0;
  for (const Named& n : named_) {
    if (n.collective == call.collective && n.root == root && n.zeroCopy == zeroCopy &&
        n.algorithm == call.algorithm) {
      *out = n.plan;
      return tsrSuccess;
    }
  }
  const AlgorithmInfo* info = findAlgorithm(call.algorithm);
  if (info == nullptr)
    return TSR_FAIL(tsrInvalidArgument, "rank %d: unknown algorithm \"%s\"", rank_,
                    call.algorithm.c_str());
  TSR_CHECK(generated(PlanKey{call.collective, info->name, root, 0, 1, zeroCopy}, out));
  named_.push_back({call.algorithm, call.collective, root, zeroCopy, *out});
  return tsrSuccess;
}

Result Planner::generated(const PlanKey& key, std::shared_ptr<const Plan>* out) {
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    *out = it->second;
    return tsrSuccess;
  }
  GenParams g;
  g.collective = key.collective;
  g.algorithm = key.algorithm;
  g.nranks = nranks_;
  g.root = key.root;
  g.pipeline = key.pipeline;
  g.workers = key.workers < 1 ? 1 : key.workers;
  g.zeroCopy = key.zeroCopy;
  g.hostOf = hostOf_;
  auto plan = std::make_shared<Plan>();
  TSR_CHECK(generatePlan(g, plan.get()));
  VerifyReport report;
  Result r = verifyPlan(*plan, &report);
  if (r != tsrSuccess) return addContext(r, "rank %d refuses plan %s", rank_, plan->name.c_str());
  plans_.emplace(key, plan);
  *out = std::move(plan);
  return tsrSuccess;
}

TuneInput Planner::tuneInput(Collective c, size_t bytes, int root, TransportClasses classes,
                             ExecKind kind) const {
  TuneInput in;
  in.collective = c;
  in.bytes = bytes;
  in.nranks = nranks_;
  in.root = root;
  in.hostOf = hostOf_;
  in.intraHost = classes.intra;
  in.interHost = classes.inter;
  in.deterministic = tuner_.deterministicDefault();
  in.deviceExecutor = kind == ExecKind::kDevice;
  if (in.deviceExecutor) {  // the device model's scratch, NICs and links (setDevice)
    in.scratchBytes = deviceScratch_;
    in.nicsPerHost = nicsPerHost_;
    in.devicePcie = devicePcie_;
  }
  return in;
}

PlanChoice* Planner::remember(const ChoiceKey& key, PlanChoice choice) {
  if (choices_.size() >= kMaxChoices) {
    choices_.clear();
    last_ = nullptr;
  }
  PlanChoice* c = &choices_.insert_or_assign(key, std::move(choice)).first->second;
  lastKey_ = key;
  last_ = c;
  return c;
}

PlanKey planKeyOf(ExecKind kind, Collective c, int root, Staging staging, const TuneChoice& choice,
                  int minWorkers) {
  // One CTA runs one worker at a time: a plan with fewer workers than CTAs leaves CTAs idle, so
  // families with independent streams of work (the two trees) get as many workers as there are
  // CTAs, up to two, and the device ring one ring per CTA (ringOrders: on several hosts each
  // leaves a host over another NIC), each with a piece of every block (pipeline >= workers).
  int workers = std::max(choice.workers, std::min(2, minWorkers));
  int pipeline = choice.pipeline;
  if (kind == ExecKind::kDevice && choice.algorithm == "ring") {
    workers = std::max(workers, minWorkers);
    pipeline = std::max(pipeline, workers);
  }
  PlanKey key;
  key.collective = c;
  key.algorithm = choice.algorithm;
  key.root = root;
  key.pipeline = pipeline;
  key.workers = workers;
  key.zeroCopy = choice.zeroCopy && staging != Staging::kScratch;
  return key;
}

Result Planner::choose(ExecKind kind, Collective c, size_t bytes, int root, Staging staging,
                       TransportClasses classes, int minWorkers, PlanChoice** out) {
  if (std::memcmp(&tuner_.params(), &snapshot_, sizeof snapshot_) != 0) {
    choices_.clear();  // someone retuned: earlier choices may no longer be the cheapest
    last_ = nullptr;
    snapshot_ = tuner_.params();
  }
  ChoiceKey key{static_cast<uint8_t>(kind), static_cast<uint8_t>(c), static_cast<uint8_t>(staging),
                root, bytes};
  if (last_ != nullptr && key == lastKey_) {
    *out = last_;
    return tsrSuccess;
  }
  auto it = choices_.find(key);
  if (it != choices_.end()) {
    *out = last_ = &it->second;
    lastKey_ = key;
    return tsrSuccess;
  }
  TuneInput in = tuneInput(c, bytes, root, classes, kind);
  in.zeroCopyPossible = staging != Staging::kScratch;
  in.crossMemory = staging == Staging::kCross;
  if (kind == ExecKind::kDevice) in.workers = std::max(1, minWorkers);  // the device grid
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
      *out = remember(key, PlanChoice{});
      return tsrSuccess;
    }
  }
  const PlanKey pk = planKeyOf(kind, c, root, staging, choice, minWorkers);
  PlanChoice pc;
  TSR_CHECK(generated(pk, &pc.plan));
  pc.ll = kind == ExecKind::kDevice && choice.protocol == Protocol::kLL;
  *out = remember(key, std::move(pc));
  return tsrSuccess;
}

}  // namespace tessera
