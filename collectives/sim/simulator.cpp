// The simulated executor (simulator.hpp) on SimGrid's S4U interface: makes and checks the plan,
// builds the World (world.hpp), and runs the engine with a clock actor that starts every size
// and reads its time and busiest resource.
#include "collectives/sim/simulator.hpp"

#include <xbt/log.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/ops.hpp"
#include "collectives/exec/plan_cache.hpp"
#include "collectives/plan/verifier.hpp"
#include "collectives/sim/world.hpp"
#include "core/log.hpp"

namespace tessera::sim {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// nccl-tests counts a call's bytes by its larger buffer, in segments of `count` elements: every
// rank's segment for reducescatter, allgather and alltoall, one for the others.
uint64_t countedSegments(Collective c, int n) {
  return static_cast<uint64_t>(std::max(inputSegments(c, n), outputSegments(c, n)));
}

uint64_t countFor(Collective c, uint64_t bytes, int elemSize, int n) {
  return bytes / static_cast<uint64_t>(elemSize) / countedSegments(c, n);
}

uint64_t bytesFor(Collective c, uint64_t count, int elemSize, int n) {
  return count * static_cast<uint64_t>(elemSize) * countedSegments(c, n);
}

Result makePlan(const SimSpec& spec, std::shared_ptr<const Plan>* out) {
  const Machine& m = spec.machine;
  if (spec.plan) {
    if (spec.plan->nranks != m.nranks())
      return TSR_FAIL(tsrInvalidArgument,
                      "plan %s is for %d ranks, but platform %s has %d (%d nodes of %d)",
                      spec.plan->name.c_str(), spec.plan->nranks, m.name.c_str(), m.nranks(),
                      m.nodes, m.ranksPerNode);
    *out = spec.plan;
    return tsrSuccess;
  }
  GenParams g;
  g.collective = spec.collective;
  g.algorithm = spec.algorithm;
  g.nranks = m.nranks();
  g.root = spec.root;
  g.pipeline = spec.pipeline;
  g.workers = spec.workers;
  g.zeroCopy = spec.zeroCopy;
  if (m.nodes > 1 || spec.algorithm == "hier") {
    g.hostOf.resize(static_cast<size_t>(m.nranks()));
    for (int r = 0; r < m.nranks(); ++r) g.hostOf[static_cast<size_t>(r)] = m.nodeOf(r);
  }
  auto plan = std::make_shared<Plan>();
  TSR_CHECK(generatePlan(g, plan.get()));
  *out = std::move(plan);
  return tsrSuccess;
}

std::string deadlockText(const World& w) {
  std::string text;
  int shown = 0;
  for (size_t r = 0; r < w.ranks.size() && shown < 4; ++r) {
    const Rank& rank = w.ranks[r];
    for (size_t k = 0; k < rank.pc.size() && shown < 4; ++k) {
      uint32_t pc = rank.pc[k];
      if (pc >= rank.bp.workerBegin[k + 1]) continue;
      const Op& op =
          rank.bp.plan->ranks[r].workers[k].ops[static_cast<size_t>(rank.bp.planOpIndex[pc])];
      text += strprintf("%srank %zu worker %zu op %d (%s)", text.empty() ? "" : "; ", r, k,
                        rank.bp.planOpIndex[pc], describeOp(op).c_str());
      ++shown;
    }
  }
  return text;
}

}  // namespace

double busFactor(Collective c, int n) {
  if (n <= 1) return 1.0;
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

Result simulate(const SimSpec& spec, SimReport* out) {
  static bool once = false;
  if (once)
    return TSR_FAIL(tsrInvalidUsage,
                    "simulate: SimGrid runs one simulation per process (use simulateForked)");
  once = true;
  const double t0 = nowSeconds();
  TSR_CHECK(checkMachine(spec.machine, spec.machine.name));
  if (spec.elemSize != 1 && spec.elemSize != 2 && spec.elemSize != 4 && spec.elemSize != 8)
    return TSR_FAIL(tsrInvalidArgument, "simulate: element size %d is not 1, 2, 4 or 8",
                    spec.elemSize);
  std::shared_ptr<const Plan> plan;
  TSR_CHECK(makePlan(spec, &plan));
  const int n = plan->nranks;
  if (spec.verify && n <= spec.verifyMaxRanks) {
    VerifyReport report;
    TSR_CHECK(verifyPlan(*plan, &report));
  } else {
    TSR_CHECK(checkPlanShape(*plan));
  }

  World w;
  w.spec = &spec;
  w.m = &spec.machine;
  w.plan = plan;
  w.ranks.resize(static_cast<size_t>(n));
  PlanPairs pairs = planPairs(*plan);
  for (int r = 0; r < n; ++r) {
    Rank& rank = w.ranks[static_cast<size_t>(r)];
    TSR_CHECK(compilePlan(plan, r, pairs, &rank.bp));
    for (const PeerLink& p : rank.bp.peers) rank.peerRank.push_back(p.peer);
    rank.pc.assign(static_cast<size_t>(rank.bp.workers()), 0);
  }
  // Semaphore queues, shared by the two ends of each (from, to, channel).
  for (int r = 0; r < n; ++r) {
    Rank& rank = w.ranks[static_cast<size_t>(r)];
    for (const SemLink& s : rank.bp.sems) {
      int peer = rank.peerRank[static_cast<size_t>(s.peerSlot)];
      auto queue = [&](int from, int to) {
        auto& slot = w.sems[{from, to, s.channel}];
        if (!slot) slot = std::make_unique<SemQueue>();
        return slot.get();
      };
      rank.in.push_back(queue(peer, r));
      rank.out.push_back(queue(r, peer));
      rank.credits.push_back(s.credits);
    }
  }

  // SimGrid: quiet logs, a model without empirical factors (a transfer takes the route's latency
  // plus bytes over its bottleneck share, flows share links max-min fairly), no TCP window limit
  // and no reverse-path acknowledgement traffic.
  xbt_log_control_set("root.thresh:critical");
  int argc = 1;
  char name[] = "tessera_sim";
  char* argv[] = {name, nullptr};
  sg4::Engine engine(&argc, argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("contexts/stack-size:256");
  buildPlatform(w);

  int actors = 0;
  for (const Rank& r : w.ranks) actors += r.bp.workers();
  w.start = sg4::Barrier::create(static_cast<unsigned>(actors + 1));
  w.end = sg4::Barrier::create(static_cast<unsigned>(actors + 1));
  for (int r = 0; r < n; ++r) {
    Rank& rank = w.ranks[static_cast<size_t>(r)];
    int workers = rank.bp.workers();
    rank.opBarrier = sg4::Barrier::create(static_cast<unsigned>(std::max(workers, 1)));
    rank.iterBarrier = sg4::Barrier::create(static_cast<unsigned>(std::max(workers, 1)));
    for (int k = 0; k < workers; ++k)
      sg4::Actor::create(strprintf("r%d.w%d", r, k), rank.host, [&w, r, k] { runWorker(w, r, k); });
  }
  std::vector<SimRow> rows(spec.sizes.size());
  sg4::Host* clockHost = w.ranks[0].host;
  sg4::Actor::create("clock", clockHost, [&] {
    for (size_t s = 0; s < spec.sizes.size(); ++s) {
      w.sizeIndex = s;
      SimRow& row = rows[s];
      row.count = countFor(plan->collective, spec.sizes[s], spec.elemSize, n);
      row.bytes = bytesFor(plan->collective, row.count, spec.elemSize, n);
      for (Rank& r : w.ranks) {
        r.count = row.count;
        r.slice = exec::sliceElements(spec.scratchBytes, r.bp.scratchChunks, r.bp.cps,
                                      static_cast<uint64_t>(spec.elemSize), row.count);
        r.iterations = r.slice == 0 ? 0 : exec::sliceIterations(row.count, r.slice);
      }
      row.iterations = w.ranks[0].iterations;
      // cpu: the cache's rates when the node's buffers of this call fit in it.
      const Machine& mm = spec.machine;
      w.copyGBs = mm.copyGBs;
      w.reduceGBs = mm.reduceGBs;
      if (mm.kind == MachineKind::kCpu && mm.cacheBytes > 0) {
        const double es = spec.elemSize, cnt = static_cast<double>(row.count);
        const double segsIn = inputSegments(plan->collective, n);
        const double segsOut = outputSegments(plan->collective, n);
        const double scratch = static_cast<double>(w.ranks[0].bp.scratchChunks) *
                               static_cast<double>(w.ranks[0].slice / w.ranks[0].bp.cps) * es;
        const double node = mm.ranksPerNode * ((segsIn + segsOut) * cnt * es + scratch);
        if (node <= mm.cacheBytes) {
          w.copyGBs = mm.cacheCopyGBs;
          w.reduceGBs = mm.cacheReduceGBs;
        }
      }
      if (row.count > 0 && w.ranks[0].slice == 0) {
        w.failure = strprintf(
            "a scratch of %llu bytes cannot hold one slice of the plan (%d scratch chunks of at "
            "least 64 bytes); raise --scratch-bytes",
            static_cast<unsigned long long>(spec.scratchBytes), w.ranks[0].bp.scratchChunks);
        sg4::Actor::kill_all();
        return;
      }
      w.busy = Busy{};
      w.start->wait();
      const double begin = sg4::Engine::get_clock();
      w.end->wait();
      row.us = (sg4::Engine::get_clock() - begin) * 1e6;
      if (row.us > 0) {
        row.algbw = static_cast<double>(row.bytes) / (row.us * 1e3);
        row.busbw = row.algbw * busFactor(plan->collective, n);
      }
      double most = -1;
      for (const auto& [what, secs] : w.busy.seconds)
        if (secs > most || (secs == most && w.busy.names[what] < row.bottleneck)) {
          most = secs;
          row.bottleneck = w.busy.names[what];
        }
      row.bottleneckBusy = row.us > 0 && most > 0 ? most * 1e6 / row.us : 0;
    }
  });

  const double run0 = nowSeconds();
  try {
    engine.run();
  } catch (const std::exception& e) {
    if (w.failure.empty()) w.failure = e.what();
  }
  const double run1 = nowSeconds();
  bool finished = true;
  for (const Rank& r : w.ranks)
    for (size_t k = 0; k < r.pc.size(); ++k)
      finished = finished && (r.iterations == 0 || r.pc[k] >= r.bp.workerBegin[k + 1]);
  if (!w.failure.empty())
    return TSR_FAIL(tsrInternalError, "simulation of %s: %s", plan->name.c_str(),
                    w.failure.c_str());
  if (!finished || sg4::Engine::get_instance()->get_actor_count() > 0)
    return TSR_FAIL(
        tsrInvalidUsage,
        "simulation of %s: the plan deadlocks at %llu bytes: every actor waits (%s)",
        plan->name.c_str(),
        static_cast<unsigned long long>(spec.sizes.empty() ? 0 : spec.sizes[w.sizeIndex]),
        deadlockText(w).c_str());
  SimReport rep;
  rep.plan = plan->name;
  rep.rows = std::move(rows);
  rep.events = w.events;
  rep.simSeconds = run1 - run0;
  rep.wallSeconds = nowSeconds() - t0;
  *out = std::move(rep);
  return tsrSuccess;
}

}  // namespace tessera::sim
