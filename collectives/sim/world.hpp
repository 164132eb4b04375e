// The state of one simulation (simulator.hpp says how a plan runs): per rank its compiled plan,
// hosts and semaphore queues; the semaphores, the routes between hosts and the busy time per
// resource. simulator.cpp builds it and runs the engine, netzones.cpp builds its SimGrid
// platform, worker.cpp runs its workers as actors.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collectives/exec/plan_cache.hpp"
#include "collectives/sim/simulator.hpp"

namespace tessera::sim {

namespace sg4 = simgrid::s4u;

// Execution amounts are nanoseconds of one core (hosts run at 1e9 "flops" per second), so rates
// of different kinds (memory, copy, reduce) share one host.
inline constexpr double kHostSpeed = 1e9;

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

// Makes the machine's netzones, hosts, links and routes, and gives every rank its host (and NIC).
void buildPlatform(World& w);
// The actor of worker `worker` of rank `rankIndex`: every size, every iteration, every op.
void runWorker(World& w, int rankIndex, int worker);

}  // namespace tessera::sim
