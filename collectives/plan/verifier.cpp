// The plan verifier (verifier.hpp): structural checks, the checks that need no simulation, then
// the symbolic simulation (verifier_sim.hpp) out of place and in place.
#include "collectives/plan/verifier.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/plan/verifier_sim.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

using verifier::kMaxClockWords;
using verifier::kMaxLocations;
using verifier::kMaxWork;
constexpr int kMaxIterations = 64;

Result fail(VerifyReport* report, VerifyProperty property, int rank, int worker, int op,
            bool inPlace, const std::string& body) {
  report->property = property;
  report->rank = rank;
  report->worker = worker;
  report->op = op;
  report->inPlace = inPlace;
  report->message =
      std::string(verifyPropertyName(property)) + (inPlace ? " (in place)" : "") + ": " + body;
  return TSR_FAIL(tsrInvalidArgument, "%s", report->message.c_str());
}

// Each semaphore has one signalling and one waiting worker (plan.hpp), which makes the k-th wait
// consume the k-th signal in every interleaving.
Result checkSemaphoreOwners(const Plan& p, VerifyReport* report) {
  // (from, to, channel) -> (worker that signals, worker that waits)
  std::map<std::tuple<int, int, int>, std::pair<int, int>> owners;
  for (int r = 0; r < p.nranks; ++r) {
    const RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    for (size_t w = 0; w < rp.workers.size(); ++w) {
      const std::vector<Op>& ops = rp.workers[w].ops;
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        if (op.code != OpCode::kSignal && op.code != OpCode::kWait) continue;
        bool sig = op.code == OpCode::kSignal;
        auto key =
            sig ? std::make_tuple(r, op.peer, op.channel) : std::make_tuple(op.peer, r, op.channel);
        auto [it, fresh] = owners.try_emplace(key, -1, -1);
        int& owner = sig ? it->second.first : it->second.second;
        (void)fresh;
        if (owner == -1) owner = static_cast<int>(w);
        if (owner == static_cast<int>(w)) continue;
        return fail(report, VerifyProperty::kShape, r, static_cast<int>(w), static_cast<int>(i),
                    false,
                    strprintf("rank %d worker %zu op %zu %ss (rank %d -> rank %d, channel %d), "
                              "which worker %d already %ss (one worker per side of a "
                              "semaphore)",
                              r, w, i, sig ? "signal" : "wait", std::get<0>(key), std::get<1>(key),
                              op.channel, owner, sig ? "signal" : "wait"));
      }
    }
  }
  return tsrSuccess;
}

// Estimates the simulation's size before allocating anything: threads as assignThreads counts
// them (workers, plus one put stream per (worker, peer) it puts to), the clock vectors made up
// front (one per worker and per (rank, iteration) end, `threads` entries each), and the work.
Result checkSize(const Plan& p, int iterations, VerifyReport* report) {
  uint64_t n = static_cast<uint64_t>(p.nranks);
  uint64_t it = static_cast<uint64_t>(iterations);
  uint64_t user = static_cast<uint64_t>(bufferChunks(p, 0, BufferKind::kInput) +
                                        bufferChunks(p, 0, BufferKind::kOutput));
  uint64_t locations = n * it * user;
  // Sums in double: a hostile plan's counts may overflow 64-bit products, and a bound needs no
  // exactness.
  double threads = 0, joins = 0, chunkWork = 0, ops = 0;
  uint64_t workers = 0;
  // The worker (numbered over all ranks) that last put to each peer: counts each worker's put
  // streams (one per peer it puts to) in one pass.
  std::vector<uint64_t> lastPutter(static_cast<size_t>(p.nranks), ~uint64_t{0});
  for (int r = 0; r < p.nranks; ++r) {
    const RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    locations += static_cast<uint64_t>(bufferChunks(p, r, BufferKind::kScratch));
    for (const Worker& w : rp.workers) {
      ++workers;
      for (const Op& op : w.ops) {
        bool putLike = op.code == OpCode::kPut || op.code == OpCode::kReduceSend;
        if (putLike && lastPutter[static_cast<size_t>(op.dst.rank)] != workers) {
          lastPutter[static_cast<size_t>(op.dst.rank)] = workers;
          ++threads;
        }
        // Ops that copy or join a whole clock: a signal (copied to the semaphore), a wait (joined),
        // a barrier (joined twice). Puts and flushes touch single entries.
        joins += op.code == OpCode::kSignal || op.code == OpCode::kWait ? 1
                 : op.code == OpCode::kBarrier                          ? 2
                                                                        : 0;
        chunkWork += static_cast<double>(op.dst.count) * static_cast<double>(op.srcs.size() + 2);
      }
      ops += static_cast<double>(w.ops.size());
    }
  }
  double w = static_cast<double>(workers);
  threads += w;
  // Clock entries made up front: a clock per worker and per (rank, iteration) end.
  double clockWords = threads * (w + static_cast<double>(n * it));
  // Clock joins and copies, chunk accesses, the scheduler's rounds (each round visits every
  // worker and runs at least one op or starts or ends an iteration), and the joins at each
  // worker's iteration ends.
  double work =
      static_cast<double>(it) * (chunkWork + joins * threads + (ops + 2 * w) * w + w * threads);
  if (locations > kMaxLocations || work > static_cast<double>(kMaxWork) ||
      clockWords > static_cast<double>(kMaxClockWords)) {
    return fail(report, VerifyProperty::kShape, -1, -1, -1, false,
                strprintf("plan too large to verify (%llu chunks to track, %.3g steps, %.3g "
                          "clock entries; limits %llu, %llu and %llu)",
                          static_cast<unsigned long long>(locations), work, clockWords,
                          static_cast<unsigned long long>(kMaxLocations),
                          static_cast<unsigned long long>(kMaxWork),
                          static_cast<unsigned long long>(kMaxClockWords)));
  }
  return tsrSuccess;
}

}  // namespace

const char* verifyPropertyName(VerifyProperty p) {
  switch (p) {
    case VerifyProperty::kOk: return "ok";
    case VerifyProperty::kShape: return "shape";
    case VerifyProperty::kBounds: return "bounds";
    case VerifyProperty::kPostcondition: return "postcondition";
    case VerifyProperty::kDeadlock: return "deadlock";
    case VerifyProperty::kRace: return "race";
    case VerifyProperty::kOrder: return "order";
    case VerifyProperty::kRawInput: return "raw-input";
  }
  return "unknown";
}

Result verifyPlan(const Plan& plan, VerifyReport* report, const VerifyOptions& options) {
  VerifyReport scratch;
  if (report == nullptr) report = &scratch;
  *report = VerifyReport{};
  if (options.iterations < 1 || options.iterations > kMaxIterations) {
    return TSR_FAIL(tsrInvalidArgument, "verifyPlan: iterations %d out of range (1..%d)",
                    options.iterations, kMaxIterations);
  }
  if (checkPlanShape(plan) != tsrSuccess) {
    // The shape check's sentence names the field; ranges (chunks, ranks, peers) are kBounds.
    std::string why = lastErrorMessage();
    bool bounds = why.find("out of range") != std::string::npos ||
                  why.find("invalid for rank") != std::string::npos ||
                  why.find("is the rank itself") != std::string::npos;
    if (why.rfind("plan: ", 0) == 0) why = why.substr(6);
    // The place, from the path ("ranks[1].workers[0].ops[4]...").
    int rank = -1, worker = -1, op = -1;
    if (std::sscanf(why.c_str(), "ranks[%d].workers[%d].ops[%d]", &rank, &worker, &op) < 3) {
      worker = op = -1;
    }
    return fail(report, bounds ? VerifyProperty::kBounds : VerifyProperty::kShape, rank, worker, op,
                false, why);
  }
  TSR_CHECK(checkSemaphoreOwners(plan, report));
  TSR_CHECK(checkSize(plan, options.iterations, report));
  for (int pass = 0; pass < 2; ++pass) {
    bool inPlace = pass == 1;
    if (inPlace ? (!options.inPlace || plan.collective == Collective::kAllToAll)
                : !options.outOfPlace) {
      continue;
    }
    verifier::Simulation sim(plan, options.iterations, inPlace);
    verifier::SimResult r = sim.run();
    if (r.property != VerifyProperty::kOk) {
      return fail(report, r.property, r.rank, r.worker, r.op, inPlace, r.message);
    }
  }
  return tsrSuccess;
}

}  // namespace tessera
