// The simulated executor (simulator.hpp) on SimGrid's S4U interface.
#include "collectives/sim/simulator.hpp"

#include <xbt/log.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <simgrid/s4u.hpp>
#include <unordered_map>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/ops.hpp"
#include "collectives/exec/plan_cache.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/log.hpp"

namespace sg4 = simgrid::s4u;

namespace tessera::sim {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

// Execution amounts are nanoseconds of one core (hosts run at 1e9 "flops" per second), so rates
// of different kinds (memory, copy, reduce) share one host.
constexpr double kHostSpeed = 1e9;

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One semaphore (from -> to, channel): when each signal in flight lands, in order, and how many
// were issued. A signal is a few bytes: it lands after the route's latency plus its bytes over
// the route's narrowest link, whatever else crosses the route (a flow of a few bytes takes a
// fair share of every link; it is not simulated as a flow of its own, which would cost an
// activity that only its receiver waits for).
struct SemQueue {
  std::deque<double> landsAt;
  sg4::SemaphorePtr posted = sg4::Semaphore::create(0);
};

struct RouteInfo {
  std::vector<sg4::Link*> links;
  double latency = 0;    // seconds
  double bandwidth = 0;  // bytes per second of the narrowest link (0: no link)
};

struct Rank {
  BoundPlan bp;
  sg4::Host* host = nullptr;  // the GPU, or the node's CPU
  sg4::Host* nic = nullptr;   // its NIC (nodes > 1)
  int node = 0;
  std::vector<int> peerRank;       // per peer slot
  std::vector<SemQueue*> in, out;  // per semaphore slot: (peer -> me), (me -> peer)
  std::vector<int64_t> credits;    // per semaphore slot
  sg4::BarrierPtr opBarrier;       // the plan's barrier op
  sg4::BarrierPtr iterBarrier;     // the end of an iteration
  uint64_t slice = 0, iterations = 0, count = 0;
  std::vector<uint32_t> pc;  // per worker: the op it is at (deadlock reports)
};

// Busy time per resource (a link or a host's cores) during one size.
struct Busy {
  std::unordered_map<const void*, double> seconds;
  std::unordered_map<const void*, std::string> names;
  void add(const void* what, double s, const std::string& (*name)(const void*)) {
    auto [it, fresh] = seconds.emplace(what, 0.0);
    it->second += s;
    if (fresh) names.emplace(what, name(what));
  }
};

const std::string& linkName(const void* l) { return static_cast<const sg4::Link*>(l)->get_name(); }
const std::string& hostName(const void* h) { return static_cast<const sg4::Host*>(h)->get_name(); }

struct World {
  const SimSpec* spec = nullptr;
  const Machine* m = nullptr;
  std::shared_ptr<const Plan> plan;
  std::vector<Rank> ranks;
  std::map<std::tuple<int, int, int>, std::unique_ptr<SemQueue>> sems;
  sg4::BarrierPtr start, end;
  uint64_t events = 0;
  Busy busy;
  std::map<std::pair<const sg4::Host*, const sg4::Host*>, RouteInfo> routes;
  std::string failure;
  size_t sizeIndex = 0;
  double copyGBs = 0, reduceGBs = 0;  // cpu: this size's rates (memory or cache)

  const RouteInfo& route(const sg4::Host* a, const sg4::Host* b) {
    auto key = std::make_pair(a, b);
    auto it = routes.find(key);
    if (it != routes.end()) return it->second;
    RouteInfo info;
    a->route_to(b, info.links, &info.latency);
    for (const sg4::Link* l : info.links)
      if (info.bandwidth == 0 || l->get_bandwidth() < info.bandwidth)
        info.bandwidth = l->get_bandwidth();
    return routes.emplace(key, std::move(info)).first->second;
  }
};

// What one data op touched, in bytes.
struct OpCost {
  double localBytes = 0;   // through this rank's own memory (loads and stores)
  double copyBytes = 0;    // cpu: bytes copied (one source)
  double reduceBytes = 0;  // cpu: bytes of output times (sources - 1)
  std::vector<std::pair<int, double>> toPeer, fromPeer;  // remote stores and loads per peer slot
  void clear() {
    localBytes = copyBytes = reduceBytes = 0;
    toPeer.clear();
    fromPeer.clear();
  }
  static void add(std::vector<std::pair<int, double>>* v, int slot, double bytes) {
    for (auto& e : *v)
      if (e.first == slot) {
        e.second += bytes;
        return;
      }
    v->emplace_back(slot, bytes);
  }
};

// The backend of exec::runOp (ops.hpp): resolves nothing, counts bytes; signals, waits and
// barriers block the actor in simulated time.
class SimBackend {
 public:
  SimBackend(World& w, Rank& r, int elemSize) : w_(w), r_(r), es_(elemSize) {
    table_.assign(static_cast<size_t>(std::max(r.bp.maxSrcs, 1)), nullptr);
  }
  OpCost& cost() { return cost_; }

  uint64_t pieceElems(const exec::ExecOp&, const exec::ExecRef*) const { return UINT64_MAX; }
  const void** srcTable() { return table_.data(); }
  const void* load(const exec::ExecRef& ref, int64_t, uint64_t, uint64_t elems, int) {
    touch(ref, elems, /*store=*/false);
    return kDummy;
  }
  void* storeTarget(const exec::ExecRef& ref, int64_t, uint64_t, uint64_t elems) {
    touch(ref, elems, /*store=*/true);
    return const_cast<char*>(kDummy);
  }
  bool combine(const exec::ExecOp& op, const exec::ExecRef*, void*, void* dst2, const void**,
               uint64_t elems) {
    double bytes = static_cast<double>(elems) * es_;
    if (op.nsrcs >= 2)
      cost_.reduceBytes += bytes * (op.nsrcs - 1);
    else
      cost_.copyBytes += bytes;
    if (dst2 != nullptr) cost_.copyBytes += bytes;
    return true;
  }
  bool commit(const exec::ExecRef&, int64_t, uint64_t, void*, uint64_t) { return true; }
  int direct(const exec::ExecOp&, const exec::ExecRef& src, int64_t, uint64_t,
             const exec::ExecRef& dst, int64_t, uint64_t, uint64_t elems) {
    touch(src, elems, false);
    touch(dst, elems, true);
    cost_.copyBytes += static_cast<double>(elems) * es_;
    return 1;
  }

  bool signal(const exec::ExecOp& op);
  exec::StepResult tryWait(const exec::ExecOp& op);
  bool flush(const exec::ExecOp&) { return true; }  // puts complete within their op
  exec::StepResult tryBarrier(int) {
    r_.opBarrier->wait();
    return exec::StepResult::kDone;
  }

 private:
  static constexpr const char* kDummy = "";
  void touch(const exec::ExecRef& ref, uint64_t elems, bool store) {
    double bytes = static_cast<double>(elems) * es_;
    if (ref.peer < 0) {
      cost_.localBytes += bytes;
    } else {
      OpCost::add(store ? &cost_.toPeer : &cost_.fromPeer, ref.peer, bytes);
    }
  }

  World& w_;
  Rank& r_;
  int es_;
  OpCost cost_;
  std::vector<const void*> table_;
};

// The hosts a transfer between two ranks crosses: the GPUs (or CPUs) inside a node, the NICs
// between nodes.
std::pair<sg4::Host*, sg4::Host*> endpoints(const Rank& a, const Rank& b) {
  if (a.node == b.node) return {a.host, b.host};
  return {a.nic, b.nic};
}

sg4::CommPtr startTransfer(World& w, const Rank& from, const Rank& to, double bytes) {
  auto [src, dst] = endpoints(from, to);
  const Machine& m = *w.m;
  for (sg4::Link* l : w.route(src, dst).links) w.busy.add(l, bytes / l->get_bandwidth(), linkName);
  ++w.events;
  sg4::CommPtr c = sg4::Comm::sendto_init(src, dst);
  c->set_payload_size(static_cast<uint64_t>(bytes));
  if (m.workerGBs > 0) c->set_rate(m.workerGBs * 1e9);
  c->start();
  return c;
}

bool SimBackend::signal(const exec::ExecOp& op) {
  const SemLink& s = r_.bp.sems[static_cast<size_t>(op.sem)];
  const Rank& peer = w_.ranks[static_cast<size_t>(r_.peerRank[static_cast<size_t>(s.peerSlot)])];
  SemQueue* q = r_.out[static_cast<size_t>(op.sem)];
  auto [src, dst] = endpoints(r_, peer);
  const RouteInfo& route = w_.route(src, dst);
  const double bytes = w_.m->signalBytes;
  double lands = sg4::Engine::get_clock() + route.latency;
  if (bytes > 0 && route.bandwidth > 0) lands += bytes / route.bandwidth;
  for (sg4::Link* l : route.links) w_.busy.add(l, bytes / l->get_bandwidth(), linkName);
  q->landsAt.push_back(lands);
  q->posted->release();
  ++w_.events;
  return true;
}

exec::StepResult SimBackend::tryWait(const exec::ExecOp& op) {
  auto slot = static_cast<size_t>(op.sem);
  if (r_.credits[slot] > 0) {
    --r_.credits[slot];
    return exec::StepResult::kDone;
  }
  SemQueue* q = r_.in[slot];
  q->posted->acquire();
  const double lands = q->landsAt.front();
  q->landsAt.pop_front();
  if (lands > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(lands);
  return exec::StepResult::kDone;
}

// Charges one data op: its transfers and its own memory work, all at once.
void chargeOp(World& w, Rank& r, const OpCost& c) {
  const Machine& m = *w.m;
  std::vector<sg4::ActivityPtr> acts;
  double ns = 0;
  if (m.kind == MachineKind::kGpu) {
    ns = c.localBytes / (m.memGBs * 1e9) * 1e9;
  } else {
    ns = c.copyBytes / w.copyGBs + c.reduceBytes / w.reduceGBs;  // bytes / (GB/s) = ns
  }
  if (ns > 0) {
    ++w.events;
    w.busy.add(r.host, ns / kHostSpeed / r.host->get_core_count(), hostName);
    acts.push_back(sg4::this_actor::exec_async(ns));
  }
  for (const auto& [slot, bytes] : c.toPeer) {
    const Rank& peer = w.ranks[static_cast<size_t>(r.peerRank[static_cast<size_t>(slot)])];
    // A cpu node's ranks share memory: a store into a peer there is the memcpy charged above.
    if (m.kind == MachineKind::kCpu && peer.node == r.node) continue;
    acts.push_back(startTransfer(w, r, peer, bytes));
  }
  for (const auto& [slot, bytes] : c.fromPeer) {
    const Rank& peer = w.ranks[static_cast<size_t>(r.peerRank[static_cast<size_t>(slot)])];
    if (m.kind == MachineKind::kCpu && peer.node == r.node) continue;
    acts.push_back(startTransfer(w, peer, r, bytes));
  }
  for (auto& a : acts) a->wait();
}

void runWorker(World& w, int rankIndex, int worker) {
  Rank& r = w.ranks[static_cast<size_t>(rankIndex)];
  const BoundPlan& bp = r.bp;
  SimBackend b(w, r, w.spec->elemSize);
  const uint32_t begin = bp.workerBegin[static_cast<size_t>(worker)];
  const uint32_t end = bp.workerBegin[static_cast<size_t>(worker) + 1];
  for (size_t s = 0; s < w.spec->sizes.size(); ++s) {
    w.start->wait();
    for (uint64_t it = 0; it < r.iterations; ++it) {
      const exec::SliceLayout L = exec::iterationLayout(r.count, r.slice, it, bp.cps);
      for (uint32_t pc = begin; pc < end; ++pc) {
        r.pc[static_cast<size_t>(worker)] = pc;
        const exec::ExecOp& op = bp.ops[pc];
        b.cost().clear();
        exec::StepResult res = exec::runOp(b, worker, op, bp.refs.data(), L);
        if (res != exec::StepResult::kDone) {
          w.failure =
              strprintf("rank %d worker %d op %d failed", rankIndex, worker, bp.planOpIndex[pc]);
          sg4::Actor::kill_all();
          return;
        }
        if (op.code <= exec::kExecReduceSend) chargeOp(w, r, b.cost());
      }
      r.pc[static_cast<size_t>(worker)] = end;
      r.iterBarrier->wait();
    }
    w.end->wait();
  }
}

uint64_t countFor(Collective c, uint64_t bytes, int elemSize, int n) {
  uint64_t elems = bytes / static_cast<uint64_t>(elemSize);
  switch (c) {
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return elems / static_cast<uint64_t>(n);
    default: return elems;
  }
}

uint64_t bytesFor(Collective c, uint64_t count, int elemSize, int n) {
  uint64_t b = count * static_cast<uint64_t>(elemSize);
  switch (c) {
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return b * static_cast<uint64_t>(n);
    default: return b;
  }
}

void buildPlatform(World& w) {
  const Machine& m = *w.m;
  sg4::NetZone* root = sg4::create_full_zone("machine");
  sg4::NetZone* fabric = nullptr;
  if (m.nodes > 1) {
    fabric = sg4::create_star_zone("fabric");
    fabric->set_parent(root);
  }
  const int per = m.ranksPerNode;
  std::vector<sg4::Host*> nics(static_cast<size_t>(m.nodes * m.nicsPerNode), nullptr);
  for (int k = 0; k < m.nodes; ++k) {
    sg4::NetZone* node = sg4::create_star_zone(strprintf("node%d", k));
    node->set_parent(root);
    if (m.kind == MachineKind::kGpu) {
      for (int i = 0; i < per; ++i) {
        Rank& r = w.ranks[static_cast<size_t>(k * per + i)];
        r.host = node->create_host(strprintf("n%d.gpu%d", k, i), kHostSpeed);
        if (per > 1) {
          sg4::Link* l = node->create_split_duplex_link(strprintf("n%d.gpu%d.nvlink", k, i),
                                                        m.intraGBs * m.intraEfficiency * 1e9)
                             ->set_latency(m.intraLatencyUs * 1e-6);
          node->add_route(r.host->get_netpoint(), nullptr, nullptr, nullptr,
                          {{l, sg4::LinkInRoute::Direction::UP}}, true);
        }
      }
    } else {
      sg4::Host* cpu = node->create_host(strprintf("n%d.cpu", k), kHostSpeed);
      cpu->set_core_count(m.cores);
      // Signals between the node's ranks: a word in shared memory, seen signalUs later.
      sg4::Link* loop = node->create_link(strprintf("n%d.shm", k), 1e15)
                            ->set_latency(m.signalUs * 1e-6)
                            ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE);
      node->add_route(cpu->get_netpoint(), cpu->get_netpoint(), nullptr, nullptr,
                      {{loop, sg4::LinkInRoute::Direction::NONE}}, false);
      for (int i = 0; i < per; ++i) w.ranks[static_cast<size_t>(k * per + i)].host = cpu;
    }
    node->seal();
    if (fabric != nullptr) {
      for (int j = 0; j < m.nicsPerNode; ++j) {
        sg4::Host* nic = fabric->create_host(strprintf("n%d.nic%d", k, j), kHostSpeed);
        sg4::Link* l =
            fabric->create_split_duplex_link(strprintf("n%d.nic%d.port", k, j), m.nicGBs * 1e9)
                ->set_latency((m.nicLatencyUs + m.fabricLatencyUs / 2) * 1e-6);
        fabric->add_route(nic->get_netpoint(), nullptr, nullptr, nullptr,
                          {{l, sg4::LinkInRoute::Direction::UP}}, true);
        nics[static_cast<size_t>(k * m.nicsPerNode + j)] = nic;
      }
    }
    for (int i = 0; i < per; ++i) {
      Rank& r = w.ranks[static_cast<size_t>(k * per + i)];
      r.node = k;
      if (fabric != nullptr)
        r.nic = nics[static_cast<size_t>(k * m.nicsPerNode + m.nicOf(k * per + i))];
    }
  }
  if (fabric != nullptr) fabric->seal();
  root->seal();
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
        r.slice = exec::sliceElements(spec.scratchBytes, r.bp.maxScratchSegments, r.bp.cps,
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
        const double scratch = static_cast<double>(w.ranks[0].bp.maxScratchSegments) *
                               static_cast<double>(w.ranks[0].slice) * es;
        const double node = mm.ranksPerNode * ((segsIn + segsOut) * cnt * es + scratch);
        if (node <= mm.cacheBytes) {
          w.copyGBs = mm.cacheCopyGBs;
          w.reduceGBs = mm.cacheReduceGBs;
        }
      }
      if (row.count > 0 && w.ranks[0].slice == 0) {
        w.failure = strprintf(
            "a scratch of %llu bytes cannot hold one slice of the plan (%d segments of %d chunks "
            "of 64 bytes); raise --scratch-bytes",
            static_cast<unsigned long long>(spec.scratchBytes), w.ranks[0].bp.maxScratchSegments,
            w.ranks[0].bp.cps);
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
