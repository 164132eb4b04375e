// The simulation's workers (world.hpp): each is an actor that runs its ops through the executors'
// own exec::runOp with a backend that counts bytes instead of moving them, then charges each data
// op's transfers and memory work in simulated time; signals and waits go through the semaphore
// queues.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "collectives/exec/ops.hpp"
#include "collectives/sim/world.hpp"
#include "core/log.hpp"

namespace tessera::sim {
namespace {

const std::string& linkName(const void* l) { return static_cast<const sg4::Link*>(l)->get_name(); }
const std::string& hostName(const void* h) { return static_cast<const sg4::Host*>(h)->get_name(); }

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

}  // namespace

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

}  // namespace tessera::sim
